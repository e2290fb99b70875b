"""``two_hop``: retrieve, append the top passage to the query, retrieve again, merge the hops.

See :mod:`ragfolio.core.retrieval.ranking.hops` for ``append`` (title | text) and ``merge``
(interleave | first1 | first2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrieval.family import Expansion, Family, Parts, SharedParts, register
from ragfolio.core.retrieval.ranking.hops import merge_hops
from ragfolio.core.retrieval.results import RetrievalResult


@register
class TwoHopFamily(Family):
    """Base ``first``, then base ``second`` on the expanded queries."""

    name = "two_hop"
    params = {"first": None, "append": "title", "second": None, "merge": "interleave"}
    required = ("first", "second")
    first_stage = "first"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        expansion = Expansion(params["first"], params["append"], params["second"])
        return SharedParts(bases=(params["first"],), expansions=(expansion,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        first = parts.base(params["first"], queries)
        expanded = parts.expanded_queries(params["first"], params["append"], queries)
        second = parts.retrieve_with(params["second"], expanded, 2 * depth)
        return merge_hops(first, second, depth, rule=params["merge"])
