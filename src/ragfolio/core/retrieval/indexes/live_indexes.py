"""A built index with the passages added since and a row mask: what a live corpus is searched with.

A served bundle's indexes are built once, over the corpus the portfolio was chosen on (the base).
:class:`LiveTextIndex` and :class:`LiveVectorIndex` wrap one of them with two things a living
corpus needs, and keep its contract (``retrieve`` / ``retrieve_embedded``), so every family that
ranks from the index ranks the living corpus unchanged:

* the *delta*: passages added while serving, rows ``n_base..`` of the live corpus, searched beside
  the base (BM25 scores from :class:`~ragfolio.core.retrieval.indexes.delta_bm25.DeltaBM25`,
  inner products of the added passages' vectors), the two lists merged by score;
* ``allowed``: a bool mask over base and delta rows (deleted or replaced passages, and those a
  query's metadata filter leaves out, are False), applied inside the search (bm25s's
  ``weight_mask``, FAISS's ``IDSelectorBitmap``), so a filtered query still gets ``k`` passages when
  ``k`` allowed passages match.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
from ragfolio.core.retrieval.indexes.delta_bm25 import DeltaBM25
from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever
from ragfolio.core.retrieval.results import RetrievalResult

Mask = npt.NDArray[np.bool_]


def merge_by_score(
    base: RetrievalResult, added: npt.NDArray[np.float32], n_base: int, k: int, *, matched: bool
) -> RetrievalResult:
    """The top ``k`` of a base ranking and the added passages' ``(n_queries, n_added)`` scores.

    Added passages are rows ``n_base + j``; ``-inf`` scores are left out, and with ``matched`` so
    are scores <= 0 (a BM25 passage sharing no term with the query). Ties keep base rows first.
    """
    n_queries = base.doc_ids.shape[0]
    ids = np.full((n_queries, k), -1, dtype=np.int64)
    scores = np.full((n_queries, k), -np.inf, dtype=np.float32)
    for q in range(n_queries):
        keep = base.doc_ids[q] >= 0
        row_ids = [base.doc_ids[q][keep], n_base + np.arange(added.shape[1], dtype=np.int64)]
        row_scores = [base.scores[q][keep], added[q]]
        cand_ids, cand_scores = np.concatenate(row_ids), np.concatenate(row_scores)
        ok = cand_scores > 0 if matched else np.isfinite(cand_scores)
        cand_ids, cand_scores = cand_ids[ok], cand_scores[ok]
        order = np.argsort(-cand_scores, kind="stable")[:k]
        ids[q, :order.size], scores[q, :order.size] = cand_ids[order], cand_scores[order]
    return RetrievalResult(ids, scores)


class LiveTextIndex:
    """BM25 over base and added passages, with an optional row mask (see the module docstring).

    Args:
        base: The base index (``n_base`` passages).
        delta: Scores of the added passages (None: none added).
        allowed: ``(n_base + n_added,)`` rows that may be returned (None: all).
    """

    def __init__(self, base: BM25Retriever, delta: DeltaBM25 | None, allowed: Mask | None) -> None:
        self.base, self.delta, self.allowed = base, delta, allowed
        self.n_base = base.n_docs

    def retrieve(self, queries: Sequence[str], k: int) -> RetrievalResult:
        base_allowed = None if self.allowed is None else self.allowed[: self.n_base]
        if base_allowed is not None and base_allowed.all():
            base_allowed = None  # the plain search: same lists, no mask's cost
        ranked = self.base.retrieve(queries, k, allowed=base_allowed)
        if self.delta is None or self.delta.n == 0:
            return ranked
        added = self.delta.scores(queries)
        if self.allowed is not None:
            added[:, ~self.allowed[self.n_base:]] = 0.0
        return merge_by_score(ranked, added, self.n_base, k, matched=True)


class LiveVectorIndex:
    """Inner-product search over base and added passage vectors, with an optional row mask.

    Args:
        base: The base FAISS index (``n_base`` passages).
        added: ``(n_added, dim)`` vectors of the added passages, L2-normalised like the base's
            (None: none added).
        allowed: ``(n_base + n_added,)`` rows that may be returned (None: all).
    """

    def __init__(self, base: DenseRetriever, added: npt.NDArray[np.float32] | None, allowed: Mask | None) -> None:
        self.base, self.added, self.allowed = base, added, allowed
        self.n_base = base.n_passages

    def retrieve_embedded(self, query_emb: npt.NDArray[np.float32], k: int) -> RetrievalResult:
        base_allowed = None if self.allowed is None else self.allowed[: self.n_base]
        if base_allowed is not None and base_allowed.all():
            base_allowed = None  # the plain search: same lists, no selector's cost
        ranked = self.base.retrieve_embedded(query_emb, k, allowed=base_allowed)
        if self.added is None or len(self.added) == 0:
            return ranked
        added = np.asarray(query_emb, dtype=np.float32) @ self.added.T
        if self.allowed is not None:
            added[:, ~self.allowed[self.n_base:]] = -np.inf
        return merge_by_score(ranked, added.astype(np.float32), self.n_base, k, matched=False)
