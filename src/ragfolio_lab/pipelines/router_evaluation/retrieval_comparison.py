"""Nodes of ``router_evaluation`` for the routers that see the retrieval (``pre_retrieval``,
``post_retrieval``, the cascade and a user's): their routings of each portfolio's test questions, from
the retrieval features ``router_training`` computed (``retrieval_inputs``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
from ragfolio.core.routing.judging.evaluation import RoutingComparison, route_all
from ragfolio.core.routing.judging.splits import RoutersByKind, retrieval_split, routers_of
from ragfolio.core.scoring.utility_index import UtilityIndex
from ragfolio.core.selection.portfolios import Portfolios


def compare_retrieval_routers(
    query_router_comparison: dict[str, RoutingComparison], router_inputs: dict[str, Features],
    retrieval_inputs: RetrievalInputs, utility_matrices: dict[str, np.ndarray], utility_index: UtilityIndex,
    portfolios: Portfolios, retrieval_routers: RoutersByKind,
) -> dict[str, RoutingComparison]:
    """Each portfolio's comparison with the routings of its test questions by every router of
    ``retrieval_routers`` added."""
    out = {}
    for key, comparison in query_router_comparison.items():
        test = retrieval_split(router_inputs, retrieval_inputs, utility_matrices, utility_index, portfolios, key, "test")
        out[key] = replace(comparison, picks={**comparison.picks, **route_all(routers_of(retrieval_routers, key), test)})
    return out

def cascade_curves(
    router_inputs: dict[str, Features], retrieval_inputs: RetrievalInputs, utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex, portfolios: Portfolios, retrieval_routers: RoutersByKind,
) -> dict[str, dict[str, Any]]:
    """Per portfolio with test questions, the cascade's test best-of-1 at every number of members run
    m = 1..k (:meth:`~ragfolio.core.routing.routers.cascade.CascadeRouter.members_run_curve`: the same
    fitted stages, nothing refitted); ``{}`` without a cascade."""
    out = {}
    for key, router in retrieval_routers.get("cascade", {}).items():
        curve = getattr(router, "members_run_curve", None)
        test = retrieval_split(router_inputs, retrieval_inputs, utility_matrices, utility_index, portfolios, key, "test")
        if callable(curve) and len(test.utilities):
            out[key] = curve(test.inputs, test.utilities)
    return out
