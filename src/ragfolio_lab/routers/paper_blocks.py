"""Node of ``router_evaluation`` for the paper's router (``paper_router``; off: null).

Its query blocks are the pool's query embeddings (``router_inputs``) and, when asked, its own
encodings (``mpnet``, ``gemma``: :mod:`ragfolio_lab.routers.paper_encoders`), which only it
reads: this node encodes them (``paper_query_blocks``) and times every block (``paper_encoders``);
:mod:`.paper_comparison` fits the router and judges it on test. Not served.
"""

from __future__ import annotations

import logging
from typing import Any

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.encoders.kinds import Encoder, make_encoder
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.router_features import RouterFeatures
from ragfolio.core.scoring.runners import PoolSettings
from ragfolio.core.scoring.utility_index import UtilityIndex, row_questions
from ragfolio_lab.routers.paper_encoders import (
    PAPER_ENCODERS,
    block_identity,
    check_installed,
    encode_blocks,
    make_block_encoder,
    time_blocks,
)
from ragfolio_lab.routers.params import PaperRouterParams, paper_router_params

logger = logging.getLogger(__name__)


def _own_blocks(paper: PaperRouterParams, router_features: RouterFeatures) -> list[str]:
    """The blocks the paper router encodes itself: those it reads that are not the pool's."""
    return [name for name in paper.encoders or [] if name in PAPER_ENCODERS and name not in router_features.encoders]


def build_paper_blocks(
    questions: list[dict[str, Any]], utility_index: UtilityIndex, pool_settings: PoolSettings,
    router_features: RouterFeatures, paper_router: dict[str, Any] | None, cache: ArrayCache,
) -> tuple[dict[str, Features], dict[str, Any], dict[str, Any]]:
    """The paper router's own query blocks of every utility-matrix row, per dataset, in row order
    (``paper_query_blocks``), what its blocks are (``paper_encoders``) and what they cost
    (``paper_block_cost``, a timings file: ``08_reporting/timings/``).

    Returns:
        ``({dataset: {block: (n, dim)}}, {"encoders": [...], "blocks": {block: {"source", "dim"}}},
        {"cost": {block: {"ms_per_query", "n_queries", "dim"}}})``; all empty when the paper router
        is off. ``cost`` times every block it reads on the first ``timing_queries`` questions, the
        pool's encoders too (their embeddings come from the cache, but a new query pays for them).

    Raises:
        ImportError: A block's package is missing (one line naming what to install), before any encoding.
    """
    paper = paper_router_params(paper_router, router_features.encoders)
    if paper is None:
        return {}, {}, {}
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
    return blocks, {"encoders": read, "blocks": described}, {"cost": cost}


