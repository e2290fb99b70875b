"""``hybrid``: the shared ``bm25`` and ``dense:<encoder>`` bases fused by weighted RRF or scores.

``weight`` is the dense side's weight (BM25 gets ``1 - weight``); ``rrf_k`` is the RRF constant
(:mod:`ragfolio.core.retrieval.ranking.fusion`), unused by ``method=score``. As a base,
``hybrid:<encoder>`` is the RRF of the two bases with equal weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrieval.family import Family, Parts, SharedParts, register
from ragfolio.core.retrieval.ranking.fusion import reciprocal_rank_fusion, score_fusion
from ragfolio.core.retrieval.results import RetrievalResult


@register
class HybridFamily(Family):
    """Fusion of BM25 and ``encoder``'s dense ranking."""

    name = "hybrid"
    params = {"encoder": None, "method": "rrf", "rrf_k": 60, "weight": 0.5}
    required = ("encoder",)
    base = True
    base_encoder = True

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        return SharedParts(bases=("bm25", f"dense:{params['encoder']}"))

    def base_needs(self, encoder: str) -> SharedParts:
        return SharedParts(query_encoders=(encoder,), bases=("bm25", f"dense:{encoder}"))

    def rank_base(
        self, parts: Parts, encoder: str, queries: Sequence[str], depth: int, inputs: Sequence[RetrievalResult]
    ) -> RetrievalResult:
        return reciprocal_rank_fusion(inputs, depth)

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        ranked = [parts.base("bm25", queries), parts.base(f"dense:{params['encoder']}", queries)]
        weights = [1.0 - params["weight"], params["weight"]]
        if params["method"] == "rrf":
            return reciprocal_rank_fusion(ranked, depth, rrf_k=params["rrf_k"], weights=weights)
        if params["method"] == "score":
            return score_fusion(ranked, depth, weights=weights)
        raise ValueError(f"hybrid: method={params['method']!r} must be 'rrf' or 'score'")
