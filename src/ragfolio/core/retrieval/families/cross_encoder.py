"""``cross_encoder``: a prefilter base reranked by the cross-encoder trained on the train labels.

The cross-encoder reads each (question, passage) pair jointly, which no other family does. Candidate
scoring trains it (:mod:`ragfolio.core.retrieval.reranking`) when the grid holds this family, and
the pool runner loads it from the folder its settings name (``PoolSettings.cross_encoder``); without
one the family refuses, naming the setting. ``depth``: how many of the prefilter's top passages are
scored (at most ``prefilter_depth``); the family returns them by descending score.

``fusion``: ``none`` ranks by the cross-encoder's score alone; ``rrf`` by reciprocal rank fusion
of its rank and the prefilter's, ``1 / (60 + rank)`` summed (Cormack et al. 2009, the constant
theirs). On ``../shared/data``'s dev questions the fine-tuned cross-encoder alone reranks BM25's
top 20 to BM25's own recall@4 and MRR; the two orders err on different questions, which the fused
order can use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.family import Family, Parts, SharedParts, register
from ragfolio.core.retrieval.results import RetrievalResult


@register
class CrossEncoderFamily(Family):
    """Reorders base ``prefilter``'s top ``depth`` passages by the cross-encoder's score."""

    name = "cross_encoder"
    params = {"prefilter": None, "depth": 20}
    required = ("prefilter",)
    optional = {"fusion": "none"}
    choices = {"fusion": ("none", "rrf")}
    first_stage = "prefilter"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        return SharedParts(bases=(params["prefilter"],), cross_encoder=True)

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], k: int) -> RetrievalResult:
        if int(params["depth"]) < 1:
            raise ValueError(f"cross_encoder: depth={params['depth']} must be >= 1")
        prefilter = parts.base(params["prefilter"], queries)
        depth = min(int(params["depth"]), prefilter.k)
        scores = parts.cross_scores(params["prefilter"], queries, depth)  # -inf on padding
        if params["fusion"] == "rrf":
            scores = reciprocal_rank_fusion(scores)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # ties keep the prefilter's order
        doc_ids = np.full((len(queries), k), -1, dtype=np.int64)  # depth < k: the runner completes the rows
        top = np.full((len(queries), k), -np.inf, dtype=np.float32)
        doc_ids[:, : order.shape[1]] = np.take_along_axis(prefilter.doc_ids[:, :depth], order, axis=1)
        top[:, : order.shape[1]] = np.take_along_axis(scores, order, axis=1)
        return RetrievalResult(doc_ids, top)


RRF_K = 60  # Cormack, Clarke and Buettcher (2009)


def reciprocal_rank_fusion(scores: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``(n, depth)`` RRF scores of the prefilter's columns: its rank (the column) and the rank by
    ``scores`` (ties in column order), each as ``1 / (RRF_K + rank)``; ``-inf`` stays ``-inf``."""
    depth = scores.shape[1]
    order = np.argsort(-scores, axis=1, kind="stable")
    by_score = np.empty_like(order)
    np.put_along_axis(by_score, order, np.arange(1, depth + 1)[None, :], axis=1)
    fused = 1.0 / (RRF_K + np.arange(1, depth + 1))[None, :] + 1.0 / (RRF_K + by_score)
    return np.where(np.isfinite(scores), fused, -np.inf).astype(np.float32)
