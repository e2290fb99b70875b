"""``vendi``: relevance traded against the Vendi score of the picks, over a prefilter base.

See :func:`~ragfolio.core.retrieval.diversity.vendi` for ``s``.
"""

from __future__ import annotations

from ragfolio.core.retrieval.diversity import vendi
from ragfolio.core.retrieval.families.diversify import PrefilterDiversifier
from ragfolio.core.retrieval.family import register


@register
class VendiFamily(PrefilterDiversifier):
    """Reorders base ``prefilter`` with ``encoder``'s embeddings."""

    name = "vendi"
    params = {"prefilter": None, "encoder": None, "s": 0.5}
    algorithm = staticmethod(vendi)
    options = {"s": "s"}
