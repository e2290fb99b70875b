"""``vendi``: relevance traded against the Vendi score of the picks, over a prefilter base.

See :func:`~ragfolio.core.retrievers.diversity.vendi` for ``s``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrievers.base import RetrievalResult
from ragfolio.core.retrievers.diversity import vendi
from ragfolio.core.retrievers.family import Family, Parts, SharedParts, register


@register
class VendiFamily(Family):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "vendi"
    params = {"prefilter": None, "encoder": None, "s": 0.5}
    required = ("prefilter", "encoder")
    first_stage = "prefilter"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        encoder = params["encoder"]
        return SharedParts(bases=(params["prefilter"],), query_encoders=(encoder,), passage_encoders=(encoder,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], k: int) -> RetrievalResult:
        prefilter = parts.base(params["prefilter"], queries)
        q_emb, p_emb = parts.query_embeddings(params["encoder"], queries), parts.passage_embeddings(params["encoder"])
        return vendi(prefilter, q_emb, p_emb, k, s=params["s"])
