"""Sparse retrieval: BM25 in process with bm25s.

Knobs of the family: ``k1`` and ``b`` (the BM25 saturation and length normalisation), ``method``
(bm25s's variant, ``lucene`` by default) and ``stopwords`` (``english`` or ``none``).

An index is saved to a folder with bm25s's own ``save`` (its score matrix as ``.npy`` arrays, the
vocabulary and parameters as JSON; no pickle) plus ``retriever.json`` with the knobs bm25s does not
keep, and loaded memory-mapped (:meth:`BM25Retriever.load`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.retrieval.results import RetrievalResult

logger = logging.getLogger(__name__)


def tokenize(texts: Sequence[str], stopwords: str = "english") -> list[list[str]]:
    """Lower-cased word tokens (2+ word characters), with English stopwords removed unless ``none``."""
    import bm25s

    if stopwords not in ("english", "none"):
        raise ValueError(f"stopwords={stopwords!r} must be 'english' or 'none'")
    tokens = bm25s.tokenize(
        list(texts), stopwords=None if stopwords == "none" else stopwords, return_ids=False, show_progress=False
    )
    return [list(t) for t in tokens]


# The BM25 defaults, defined once: the in-process and Elasticsearch retrievers, the ``bm25`` family's
# grid defaults and the pool's shared BM25 base all read them.
BM25_DEFAULTS: dict[str, Any] = {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "english"}
RETRIEVER_FILE = "retriever.json"  # beside bm25s's own files in a saved index


@dataclass
class BM25Retriever:
    """BM25 over a fixed corpus: ``index`` once, then ``retrieve`` batches of queries.

    Args:
        k1: Term-frequency saturation (>= 0).
        b: Length normalisation in [0, 1].
        method: bm25s scoring variant (``lucene``, ``robertson``, ``atire``, ``bm25l``, ``bm25+``).
        stopwords: ``english`` or ``none``.
    """

    k1: float = BM25_DEFAULTS["k1"]
    b: float = BM25_DEFAULTS["b"]
    method: str = BM25_DEFAULTS["method"]
    stopwords: str = BM25_DEFAULTS["stopwords"]

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ValueError(f"k1={self.k1} must be >= 0")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"b={self.b} must be in [0, 1]")
        self._index: Any = None
        self._n_docs = 0

    def index(self, texts: Sequence[str], tokens: list[list[str]] | None = None) -> BM25Retriever:
        """Index the corpus (``tokens`` may be given to share one tokenisation between variants)."""
        import bm25s

        if not texts:
            raise ValueError("cannot index an empty corpus")
        tokens = tokenize(texts, self.stopwords) if tokens is None else tokens
        # Token ids in order of first appearance: given strings, bm25s numbers its vocabulary in a
        # set's order, which changes with the process's hash seed, and so would a saved index's bytes.
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(token, len(vocab)) for token in doc] for doc in tokens]
        self._index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        self._index.index((ids, vocab), show_progress=False)
        self._n_docs = len(texts)
        return self

    def save(self, folder: str | Path) -> None:
        """Write the index to ``folder`` (created): bm25s's files and ``retriever.json``."""
        if self._index is None:
            raise RuntimeError("call index() before save()")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self._index.save(str(folder), show_progress=False)
        (folder / RETRIEVER_FILE).write_text(json.dumps({**asdict(self), "n_docs": self._n_docs}, indent=1))

    @classmethod
    def load(cls, folder: str | Path, *, mmap: bool = True) -> BM25Retriever:
        """The index :meth:`save` wrote to ``folder``; ``mmap`` maps its arrays instead of reading them."""
        import bm25s

        folder = Path(folder)
        settings = json.loads((folder / RETRIEVER_FILE).read_text())
        n_docs = settings.pop("n_docs")
        retriever = cls(**settings)
        retriever._index = bm25s.BM25.load(str(folder), mmap=mmap, show_progress=False)
        retriever._n_docs = n_docs
        return retriever

    @property
    def n_docs(self) -> int:
        return self._n_docs

    def statistics(self) -> Any:
        """The fitted bm25s index (its vocabulary, per-token score columns and parameters), which
        :class:`~ragfolio.core.retrieval.indexes.delta_bm25.DeltaBM25` scores new passages against."""
        if self._index is None:
            raise RuntimeError("call index() or load() before statistics()")
        return self._index

    def retrieve(self, queries: Sequence[str], k: int, *, allowed: np.ndarray | None = None) -> RetrievalResult:
        """Top-``k`` corpus rows per query, ``-1``-padded where a query matches fewer passages.

        ``allowed``: an ``(n_docs,)`` bool mask; the rows it leaves out are never returned (bm25s's
        ``weight_mask``, so a query still gets ``k`` passages when ``k`` allowed ones match).
        """
        if self._index is None:
            raise RuntimeError("call index() before retrieve()")
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        vocab = self._index.vocab_dict
        query_tokens = [[t for t in q if t in vocab] for q in tokenize(queries, self.stopwords)]
        depth = min(k, self._n_docs)
        doc_ids = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        nonempty = [i for i, q in enumerate(query_tokens) if q]
        if nonempty:
            mask = None if allowed is None else np.asarray(allowed, dtype=np.float32)
            ids, sc = self._index.retrieve(
                [query_tokens[i] for i in nonempty], k=depth, show_progress=False, n_threads=1, weight_mask=mask
            )
            ids = np.asarray(ids, dtype=np.int64)
            sc = np.asarray(sc, dtype=np.float32)
            # A passage that shares no term with the query scores 0: it was not retrieved.
            ids[sc <= 0] = -1
            sc[sc <= 0] = -np.inf
            doc_ids[nonempty, :depth] = ids
            scores[nonempty, :depth] = sc
        return RetrievalResult(doc_ids, scores)
