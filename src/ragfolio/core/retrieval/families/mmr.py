"""``mmr``: maximal marginal relevance over a prefilter base.

See :func:`~ragfolio.core.retrieval.diversity.mmr` for ``lambda`` (the weight of relevance).
"""

from __future__ import annotations

from ragfolio.core.retrieval.diversity import mmr
from ragfolio.core.retrieval.families.diversify import PrefilterDiversifier
from ragfolio.core.retrieval.family import register


@register
class MMRFamily(PrefilterDiversifier):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "mmr"
    params = {"prefilter": None, "encoder": None, "lambda": 0.5}
    algorithm = staticmethod(mmr)
    options = {"lambda": "lambda_"}
