"""The types every retriever family shares.

Retrieval in ragfolio is batched: a family receives all queries of a split at once and returns
one :class:`RetrievalResult` whose rows are queries. Passages are referred to by their row index in
the corpus (``Corpus.ids[i]`` is the stable passage id of row ``i``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class RetrievalResult:
    """Ranked passages for a batch of queries.

    Attributes:
        doc_ids: ``(n_queries, k)`` int64 corpus row indices, best first; ``-1`` pads rows that
            found fewer than ``k`` passages.
        scores: ``(n_queries, k)`` float32 scores aligned with ``doc_ids`` (higher is better;
            ``-inf`` on padding).
    """

    doc_ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]

    def __post_init__(self) -> None:
        if self.doc_ids.shape != self.scores.shape or self.doc_ids.ndim != 2:
            raise ValueError(
                f"doc_ids {self.doc_ids.shape} and scores {self.scores.shape} must be equal 2-d shapes"
            )

    @property
    def k(self) -> int:
        return int(self.doc_ids.shape[1])

    def top(self, k: int) -> RetrievalResult:
        """The first ``k`` columns (a view)."""
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        return RetrievalResult(self.doc_ids[:, :k], self.scores[:, :k])


# A prefilter is a deep first-stage ranking (e.g. the top-100 dense hits per query) that
# reranking and diversification families reorder; it has the same shape contract.
Prefilter = RetrievalResult


def pad_rows(rows: list[list[int]], row_scores: list[list[float]], k: int) -> RetrievalResult:
    """Stack ragged per-query rankings into a padded :class:`RetrievalResult` of width ``k``."""
    n = len(rows)
    doc_ids = np.full((n, k), -1, dtype=np.int64)
    scores = np.full((n, k), -np.inf, dtype=np.float32)
    for i, (ids, sc) in enumerate(zip(rows, row_scores, strict=True)):
        m = min(k, len(ids))
        doc_ids[i, :m] = ids[:m]
        scores[i, :m] = sc[:m]
    return RetrievalResult(doc_ids, scores)
