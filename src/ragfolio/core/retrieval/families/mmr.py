"""``mmr``: maximal marginal relevance over a prefilter base.

See :func:`~ragfolio.core.retrieval.ranking.diversification.mmr` for ``lambda`` (the weight of relevance).
"""

from __future__ import annotations

from ragfolio.core.retrieval.families.diversifying import PrefilterDiversifier
from ragfolio.core.retrieval.family import register
from ragfolio.core.retrieval.ranking.diversification import mmr


@register
class MMRFamily(PrefilterDiversifier):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "mmr"
    params = {"prefilter": None, "encoder": None, "lambda": 0.5}
    algorithm = staticmethod(mmr)
    options = {"lambda": "lambda_"}
