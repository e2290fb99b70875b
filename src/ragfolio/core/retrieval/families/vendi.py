"""``vendi``: relevance traded against the Vendi score of the picks, over a prefilter base.

See :func:`~ragfolio.core.retrieval.ranking.diversification.vendi` for ``s``.
"""

from __future__ import annotations

from ragfolio.core.retrieval.families.diversifying import PrefilterDiversifier
from ragfolio.core.retrieval.family import register
from ragfolio.core.retrieval.ranking.diversification import vendi


@register
class VendiFamily(PrefilterDiversifier):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "vendi"
    params = {"prefilter": None, "encoder": None, "s": 0.5}
    algorithm = staticmethod(vendi)
    options = {"s": "s"}
