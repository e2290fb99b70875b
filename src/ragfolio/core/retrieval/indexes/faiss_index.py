"""Dense retrieval: a bi-encoder's passage embeddings in a FAISS inner-product index.

Embeddings are L2-normalised, so inner product is cosine similarity. ``index_type`` is ``flat``
(exact) or ``hnsw`` (approximate, for corpora where exact search is too slow).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.results import RetrievalResult

INDEX_TYPES = ("flat", "hnsw")


@dataclass
class DenseRetriever:
    """Exact or HNSW inner-product search over precomputed passage embeddings.

    Args:
        index_type: ``flat`` or ``hnsw``.
        hnsw_m: Neighbours per HNSW node (``hnsw`` only).
    """

    index_type: str = "flat"
    hnsw_m: int = 32

    def __post_init__(self) -> None:
        if self.index_type not in INDEX_TYPES:
            raise ValueError(f"index_type={self.index_type!r} must be one of {INDEX_TYPES}")
        self._index = None

    def index(self, passage_emb: npt.NDArray[np.float32]) -> DenseRetriever:
        """Index ``passage_emb`` of shape ``(n_passages, dim)``."""
        import faiss

        emb = np.ascontiguousarray(passage_emb, dtype=np.float32)
        if emb.ndim != 2 or len(emb) == 0:
            raise ValueError(f"passage_emb must be a non-empty 2-d array, got shape {emb.shape}")
        index: Any
        if self.index_type == "flat":
            index = faiss.IndexFlatIP(emb.shape[1])
        else:
            index = faiss.IndexHNSWFlat(emb.shape[1], self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.add(emb)
        self._index = index
        return self

    def retrieve_embedded(self, query_emb: npt.NDArray[np.float32], k: int) -> RetrievalResult:
        """Top-``k`` rows for each of ``query_emb``'s ``(n_queries, dim)`` rows."""
        if self._index is None:
            raise RuntimeError("call index() before retrieve_embedded()")
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        scores, ids = self._index.search(np.ascontiguousarray(query_emb, dtype=np.float32), k)
        scores = scores.astype(np.float32)
        scores[ids < 0] = -np.inf
        return RetrievalResult(ids.astype(np.int64), scores)
