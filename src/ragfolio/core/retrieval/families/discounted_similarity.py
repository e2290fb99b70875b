"""``ds``: discounted similarity, a greedy diversifier over a prefilter base.

See :func:`~ragfolio.core.retrieval.ranking.diversification.discounted_similarity` for ``gamma`` and ``r``.
"""

from __future__ import annotations

from ragfolio.core.retrieval.families.diversifying import PrefilterDiversifier
from ragfolio.core.retrieval.family import register
from ragfolio.core.retrieval.ranking.diversification import discounted_similarity


@register
class DiscountedSimilarityFamily(PrefilterDiversifier):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "ds"
    params = {"prefilter": None, "encoder": None, "gamma": 1.0, "r": 0.5}
    algorithm = staticmethod(discounted_similarity)
    options = {"gamma": "gamma", "r": "r"}
