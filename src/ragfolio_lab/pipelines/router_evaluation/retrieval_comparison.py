"""Nodes of ``router_evaluation`` for the routers that see the retrieval (``pre_retrieval``,
``post_retrieval``, the cascade and a user's): their routings of each portfolio's test questions, from
the retrieval features ``router_training`` computed (``retrieval_inputs``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ragfolio.core.routing.judging.evaluation import RoutingComparison, route_all
from ragfolio.core.routing.judging.splits import RoutersByKind, RoutingRows, routers_of


def compare_retrieval_routers(
    query_router_comparison: dict[str, RoutingComparison], routing_rows: RoutingRows, retrieval_routers: RoutersByKind,
) -> dict[str, RoutingComparison]:
    """Each portfolio's comparison with the routings of its test questions by every router of
    ``retrieval_routers`` added."""
    out = {}
    for key, comparison in query_router_comparison.items():
        test = routing_rows.retrieval_split(key, "test")
        out[key] = replace(comparison, picks={**comparison.picks, **route_all(routers_of(retrieval_routers, key), test)})
    return out

def cascade_curves(routing_rows: RoutingRows, retrieval_routers: RoutersByKind) -> dict[str, dict[str, Any]]:
    """Per portfolio with test questions, the cascade's test best-of-1 at every number of members run
    m = 1..k (:meth:`~ragfolio.core.routing.routers.cascade.CascadeRouter.members_run_curve`: the same
    fitted stages, nothing refitted); ``{}`` without a cascade."""
    out = {}
    for key, router in retrieval_routers.get("cascade", {}).items():
        curve = getattr(router, "members_run_curve", None)
        test = routing_rows.retrieval_split(key, "test")
        if callable(curve) and len(test.utilities):
            out[key] = curve(test.inputs, test.utilities)
    return out
