"""``mmr``: maximal marginal relevance over a prefilter base.

See :func:`~ragfolio.core.retrievers.diversity.mmr` for ``lambda`` (the weight of relevance).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrievers.base import RetrievalResult
from ragfolio.core.retrievers.diversity import mmr
from ragfolio.core.retrievers.family import Family, Parts, SharedParts, register


@register
class MMRFamily(Family):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "mmr"
    params = {"prefilter": None, "encoder": None, "lambda": 0.5}
    required = ("prefilter", "encoder")
    first_stage = "prefilter"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        encoder = params["encoder"]
        return SharedParts(bases=(params["prefilter"],), query_encoders=(encoder,), passage_encoders=(encoder,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], k: int) -> RetrievalResult:
        prefilter = parts.base(params["prefilter"], queries)
        q_emb, p_emb = parts.query_embeddings(params["encoder"], queries), parts.passage_embeddings(params["encoder"])
        return mmr(prefilter, q_emb, p_emb, k, lambda_=params["lambda"])
