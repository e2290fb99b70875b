"""BM25 scores of passages added after an index was built, on the built index's scale.

A bm25s index is a fixed matrix of per-token scores; a passage added while the service runs is
scored here instead, beside it (:class:`~ragfolio.core.retrieval.indexes.live_indexes.LiveTextIndex`).
Each added passage is scored with the base index's own formula (its ``method``, ``k1``, ``b``),
its average passage length, and each term's document frequency counted over the base and the
added passages together, so that a term only the new passages hold (a new name) still scores.
The base passages keep the scores they were indexed with: adding a passage does not move them,
which is what keeps every other query's list unchanged until the next run rebuilds the index.

bm25s keeps its term-frequency and IDF formulas in ``bm25s.scoring`` (``_select_tfc_scorer``,
``_select_idf_scorer``); this module calls them rather than restating them, so an added passage
is scored by the same code as an indexed one. The variants that add a score to passages lacking a
term (``bm25l``, ``bm25+``) give added passages no such share: they rank added passages a little
lower than a rebuilt index would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.indexes.bm25_index import tokenize


def average_length(tokens: Sequence[Sequence[str]]) -> float:
    """The mean token count of tokenised passages (bm25s's ``l_avg``)."""
    return float(np.mean([len(doc) for doc in tokens])) if tokens else 1.0


class DeltaBM25:
    """Scores of a few added passages for query batches, against a base bm25s index.

    Args:
        base: The base index's fitted bm25s model
            (:meth:`~ragfolio.core.retrieval.indexes.bm25_index.BM25Retriever.statistics`).
        n_base: Passages in the base index.
        avg_len: The base passages' mean token count (:func:`average_length` of their tokens).
        texts: The added passages as retrievers see them (``"<title>. <text>"``).
        stopwords: The base index's stopwords setting.
    """

    def __init__(self, base: Any, n_base: int, avg_len: float, texts: Sequence[str], stopwords: str) -> None:
        from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

        self.stopwords = stopwords
        self.n = len(texts)
        docs = tokenize(texts, stopwords) if texts else []
        lengths = np.array([len(doc) for doc in docs], dtype=np.float32)
        indptr = np.asarray(base.scores["indptr"])
        vocab = base.vocab_dict
        n_total = n_base + self.n
        found: dict[str, tuple[list[int], list[int]]] = {}  # term -> (added rows holding it, its count in each)
        for i, doc in enumerate(docs):
            for term, tf in Counter(doc).items():
                rows, tfs = found.setdefault(term, ([], []))
                rows.append(i)
                tfs.append(tf)
        idf_of, tfc_of = _select_idf_scorer(base.method), _select_tfc_scorer(base.method)
        # term -> (rows of the added passages that hold it, their scores for that term)
        self._postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
        for term, (rows, tfs) in found.items():
            base_df = int(indptr[vocab[term] + 1] - indptr[vocab[term]]) if term in vocab else 0
            idf = idf_of(base_df + len(rows), N=n_total)
            at = np.array(rows, dtype=np.int64)
            tfc = tfc_of(np.array(tfs, dtype=np.float32), lengths[at], avg_len, base.k1, base.b, base.delta)
            self._postings[term] = (at, (idf * tfc).astype(np.float32))

    def scores(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(n_queries, n_added)`` BM25 scores; 0 where a passage shares no term with the query."""
        out = np.zeros((len(queries), self.n), dtype=np.float32)
        for q, terms in enumerate(tokenize(queries, self.stopwords)):
            for term in terms:  # a repeated query term counts again, as bm25s counts it
                if (posting := self._postings.get(term)) is not None:
                    out[q, posting[0]] += posting[1]
        return out
