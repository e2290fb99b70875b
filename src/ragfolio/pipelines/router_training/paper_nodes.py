"""Nodes of ``router_training`` for the paper's router (``router_training.paper_router``; off: null).

Its query blocks are the pool's query embeddings (``router_inputs``) and, when asked, its own
encodings (``mpnet``, ``gemma``: :mod:`ragfolio.core.routing.features.paper_encoders`), which only it
reads. It is fitted per portfolio on the portfolio's train questions and, with ``universal``,
once over every dataset's train questions together (the ``all`` portfolio's members), then judged
on each dataset's test questions (:mod:`ragfolio.core.routing.routers.universal`). Not served.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.encoders.kinds import Encoder, make_encoder
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.features.paper_encoders import (
    PAPER_ENCODERS,
    block_identity,
    check_installed,
    encode_blocks,
    make_block_encoder,
    time_blocks,
)
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.router_features import RouterFeatures
from ragfolio.core.routing.judging.evaluation import RoutingComparison, RoutingSplit
from ragfolio.core.routing.registry import make_router
from ragfolio.core.routing.routers.universal import UniversalRouting, fit_universal, route_universal
from ragfolio.core.scoring.runners import PoolSettings
from ragfolio.core.scoring.utility_index import ALL, UtilityIndex, datasets_of, row_questions
from ragfolio.core.selection.portfolios import Portfolios
from ragfolio.pipelines.router_training.nodes import query_split
from ragfolio.pipelines.router_training.params import PaperRouterParams, RouterTrainingParams

logger = logging.getLogger(__name__)


def _own_blocks(paper: PaperRouterParams, router_features: RouterFeatures) -> list[str]:
    """The blocks the paper router encodes itself: those it reads that are not the pool's."""
    return [name for name in paper.encoders or [] if name in PAPER_ENCODERS and name not in router_features.encoders]


def build_paper_blocks(
    questions: list[dict[str, Any]], utility_index: UtilityIndex, pool_settings: PoolSettings,
    router_features: RouterFeatures, params: dict[str, Any], cache: ArrayCache,
) -> tuple[dict[str, Features], dict[str, Any]]:
    """The paper router's own query blocks of every utility-matrix row, per dataset, in row order
    (``paper_query_blocks``), and what its blocks are and cost (``paper_encoders``).

    Returns:
        ``({dataset: {block: (n, dim)}}, {"encoders": [...], "blocks": {block: {"source", "dim"}},
        "cost": {block: {"ms_per_query", "n_queries", "dim"}}})``; both empty when the paper router
        is off. ``cost`` times every block it reads on the first ``timing_queries`` questions, the
        pool's encoders too (their embeddings come from the cache, but a new query pays for them).

    Raises:
        ImportError: A block's package is missing (one line naming what to install), before any encoding.
    """
    paper = RouterTrainingParams(**params).paper_router
    if paper is None:
        return {}, {}
    own = _own_blocks(paper, router_features)
    check_installed(own)
    encoders: dict[str, Encoder] = {name: make_block_encoder(name) for name in own}
    texts = {d: [q.question for q in row_questions(questions, utility_index, d)] for d in utility_index.datasets}
    blocks = {d: encode_blocks(t, own, cache, encoders) for d, t in texts.items()}
    read = list(paper.encoders or router_features.encoders)
    specs = pool_settings.encoders
    timed = {name: encoders[name] if name in encoders else make_encoder(specs[name]) for name in read}
    sample = [t for ts in texts.values() for t in ts][: paper.timing_queries]
    cost = time_blocks(timed, sample)
    described = {name: {"source": block_identity(name)["spec"] if name in own else "pool query embeddings",
                        "dim": cost[name]["dim"]} for name in read}
    logger.info("paper router blocks: %s", ", ".join(f"{n} {c['dim']}-d {c['ms_per_query']:.2f} ms/query"
                                                     for n, c in cost.items()))
    return blocks, {"encoders": read, "blocks": described, "cost": cost}


def _paper_router(paper: PaperRouterParams, seed: int) -> RouterProtocol:
    return make_router("paper", **{"random_state": seed, **paper.hyperparameters, "blocks": paper.encoders})


def compare_paper_routers(
    router_inputs: dict[str, Features], paper_query_blocks: dict[str, Features], utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex, portfolios: Portfolios, query_router_comparison: dict[str, RoutingComparison],
    params: dict[str, Any],
) -> tuple[dict[str, RoutingComparison], UniversalRouting]:
    """Each portfolio's comparison with the paper router's test routing added (``paper``), and the
    universal router's routing of each dataset's test questions (``universal_routing``; without
    ``universal``, one of no dataset: Kedro saves no None).

    The paper router of the ``all`` portfolio is fitted on the same rows, in the same order, as the
    universal router, so with ``universal`` that one router serves both.
    """
    p = RouterTrainingParams(**params)
    paper = p.paper_router
    if paper is None:
        return query_router_comparison, UniversalRouting([], {}, {})
    inputs = {d: {**features, **paper_query_blocks.get(d, {})} for d, features in router_inputs.items()}

    def split(key: str, members: list[int], name: str) -> RoutingSplit:
        return query_split(inputs, utility_matrices, utility_index, key, members, name)

    universal, routing = None, UniversalRouting([], {}, {})
    if paper.universal:
        if ALL not in portfolios.keys:
            raise ValueError(f"router_training.paper_router.universal needs the {ALL!r} portfolio; "
                             f"portfolios are {sorted(portfolios.keys)}")
        members = portfolios.members(ALL)
        datasets = datasets_of(utility_index, ALL)
        universal = fit_universal(lambda: _paper_router(paper, p.seed), {d: split(d, members, "train") for d in datasets},
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
            router = _paper_router(paper, p.seed).fit(train.inputs, train.utilities,
                                                     portfolios.selection(key).portfolio)
        out[key] = comparison.with_routings({"paper": router.route(test.inputs, test.utilities.shape[1])[0]})
    return out, routing
