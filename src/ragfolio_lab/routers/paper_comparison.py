"""Node of ``router_evaluation`` for the paper's router (``paper_router``; off: null).

It is fitted per portfolio on the portfolio's train questions, from the pool's query embeddings
(``routing_rows``) and its own blocks (``paper_query_blocks``: :mod:`.paper_blocks`),
and, with ``universal``, once over every dataset's train questions together (the ``all``
portfolio's members), then judged on each dataset's test questions
(:mod:`ragfolio_lab.routers.universal`). Not served, so never trained in ``router_training``.
"""

from __future__ import annotations

import logging
from typing import Any

from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.judging.evaluation import RoutingComparison, RoutingSplit
from ragfolio.core.routing.judging.splits import RoutingRows
from ragfolio.core.scoring.utility_index import ALL, datasets_of
from ragfolio_lab.routers.paper import PaperRouter
from ragfolio_lab.routers.params import PaperRouterParams, paper_router_params
from ragfolio_lab.routers.universal import UniversalRouting, fit_universal, route_universal

logger = logging.getLogger(__name__)


def _paper_router(paper: PaperRouterParams, seed: int) -> RouterProtocol:
    return PaperRouter(**{"random_state": seed, **paper.hyperparameters, "blocks": paper.encoders})


def compare_paper_routers(
    routing_rows: RoutingRows, paper_query_blocks: dict[str, Features],
    query_router_comparison: dict[str, RoutingComparison], paper_router: dict[str, Any] | None, seed: int,
    encoders: list[str],
) -> tuple[dict[str, RoutingComparison], UniversalRouting]:
    """Each portfolio's comparison with the paper router's test routing added (``paper``), and the
    universal router's routing of each dataset's test questions (``universal_routing``; without
    ``universal``, one of no dataset: Kedro saves no None). ``paper_router`` is the lab's block;
    ``seed`` and ``encoders`` (the pool's query blocks) are ``router_training``'s.

    The paper router of the ``all`` portfolio is fitted on the same rows, in the same order, as the
    universal router, so with ``universal`` that one router serves both.
    """
    paper = paper_router_params(paper_router, encoders)
    if paper is None:
        return query_router_comparison, UniversalRouting([], {}, {})
    rows = routing_rows.with_query_blocks(paper_query_blocks)
    portfolios, utility_index = rows.portfolios, rows.utility_index

    def split(key: str, members: list[int], name: str) -> RoutingSplit:
        return rows.query_split(key, name, members)

    universal, routing = None, UniversalRouting([], {}, {})
    if paper.universal:
        if ALL not in portfolios.keys:
            raise ValueError(f"paper_router.universal needs the {ALL!r} portfolio; "
                             f"portfolios are {sorted(portfolios.keys)}")
        members = portfolios.members(ALL)
        datasets = datasets_of(utility_index, ALL)
        universal = fit_universal(lambda: _paper_router(paper, seed), {d: split(d, members, "train") for d in datasets},
                                  portfolios.selection(ALL).portfolio)
        routing = route_universal(universal, {d: split(d, members, "test") for d in datasets})
        logger.info("universal paper router: %d members, trained on %d datasets' train questions together",
                    len(universal.members_), len(datasets))
    out = {}
    for key, comparison in query_router_comparison.items():
        members = portfolios.members(key)
        test = split(key, members, "test")
        if key == ALL and universal is not None:
            router = universal
        else:
            train = split(key, members, "train")
            router = _paper_router(paper, seed).fit(train.inputs, train.utilities,
                                                     portfolios.selection(key).portfolio)
        out[key] = comparison.with_routings({"paper": router.route(test.inputs, test.utilities.shape[1])[0]})
    return out, routing
