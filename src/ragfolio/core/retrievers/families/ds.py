"""``ds``: discounted similarity, a greedy diversifier over a prefilter base.

See :func:`~ragfolio.core.retrievers.diversity.discounted_similarity` for ``gamma`` and ``r``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrievers.base import RetrievalResult
from ragfolio.core.retrievers.diversity import discounted_similarity
from ragfolio.core.retrievers.family import Family, Parts, SharedParts, register


@register
class DiscountedSimilarityFamily(Family):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "ds"
    params = {"prefilter": None, "encoder": None, "gamma": 1.0, "r": 0.5}
    required = ("prefilter", "encoder")
    first_stage = "prefilter"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        encoder = params["encoder"]
        return SharedParts(bases=(params["prefilter"],), query_encoders=(encoder,), passage_encoders=(encoder,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], k: int) -> RetrievalResult:
        prefilter = parts.base(params["prefilter"], queries)
        q_emb, p_emb = parts.query_embeddings(params["encoder"], queries), parts.passage_embeddings(params["encoder"])
        return discounted_similarity(prefilter, q_emb, p_emb, k, gamma=params["gamma"], r=params["r"])
