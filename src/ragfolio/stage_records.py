"""Nodes that group catalog datasets into the records several stages' nodes read.

A node reads a few records rather than a dozen datasets (``tests/pipelines/test_node_inputs.py``
keeps every node at six inputs or fewer). Each record is made in memory by one of the nodes below,
which every stage that reads it includes: Kedro keeps one copy of an identical node when stages are
summed (``kedro run`` of them all), and a stage run on its own makes its own. They live here so
that no pipeline imports another (as :mod:`ragfolio.router_params` and :mod:`ragfolio.bundle_params` do).

* ``scored_pool`` (:class:`~ragfolio.core.scoring.runners.ScoredPool`): the corpora, candidates,
  pool settings and retrieval cache, for a stage that runs the pool again;
* ``routing_rows`` (:class:`~ragfolio.core.routing.judging.splits.RoutingRows`): what routers read and
  are judged by, per utility-matrix row;
* ``trained_routers`` (:class:`~ragfolio.core.routing.judging.splits.TrainedRouters`): the learned
  routers and the other servable ones, by kind.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from kedro.pipeline import Node, node

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
from ragfolio.core.routing.judging.splits import RoutersByKind, RoutingRows, TrainedRouters
from ragfolio.core.scoring.runners import PoolSettings, ScoredPool
from ragfolio.core.scoring.utility_index import UtilityIndex
from ragfolio.core.selection.portfolios import Portfolios


def scored_pool(
    corpora: Corpora, candidates: list[dict[str, Any]], pool_settings: PoolSettings, cache: ArrayCache
) -> ScoredPool:
    """The pool as candidate scoring ran it (``scored_pool``)."""
    return ScoredPool.of(corpora, candidates, pool_settings, cache)


def routing_rows(
    router_inputs: dict[str, Features], utility_matrices: dict[str, np.ndarray], utility_index: UtilityIndex,
    portfolios: Portfolios, retrieval_inputs: RetrievalInputs,
) -> RoutingRows:
    """What routers read and are judged by, row by row (``routing_rows``)."""
    return RoutingRows(router_inputs, utility_matrices, utility_index, portfolios, retrieval_inputs)


def trained_routers(routers: dict[str, RouterProtocol], retrieval_routers: RoutersByKind) -> TrainedRouters:
    """The servable routers router training fitted (``trained_routers``)."""
    return TrainedRouters(routers, retrieval_routers)


def scored_pool_node() -> Node:
    return node(scored_pool, inputs={"corpora": "corpora", "candidates": "candidates", "pool_settings": "pool_settings",
                                     "cache": "retrieval_cache"}, outputs="scored_pool", name="scored_pool")


def routing_rows_node() -> Node:
    return node(routing_rows, inputs={
        "router_inputs": "router_inputs", "utility_matrices": "utility_matrices", "utility_index": "utility_index",
        "portfolios": "portfolios", "retrieval_inputs": "retrieval_inputs",
    }, outputs="routing_rows", name="routing_rows")


def trained_routers_node() -> Node:
    return node(trained_routers, inputs={"routers": "routers", "retrieval_routers": "retrieval_routers"},
                outputs="trained_routers", name="trained_routers")
