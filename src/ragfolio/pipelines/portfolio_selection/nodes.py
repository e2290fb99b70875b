"""Nodes of ``portfolio_selection``: the query sample, greedy portfolios, baselines' orders and the certificate."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragfolio.core.scoring.utility_index import ALL, UtilityIndex, stacked
from ragfolio.core.selection.baseline_portfolios import random_k, top_k_by_average
from ragfolio.core.selection.certificate import certificate
from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.selection.portfolios import Portfolios, Selection
from ragfolio.core.selection.query_sample import QuerySample
from ragfolio.core.selection.sample_complexity import required_sample_size
from ragfolio.core.selection.sample_complexity import sample_queries as draw_sample
from ragfolio.core.selection.separation import MAX_EPSILON, separation, tie_order

logger = logging.getLogger(__name__)


class PortfolioSelectionParams(BaseModel):
    """``portfolio_selection`` parameters (conf/base/parameters_portfolio_selection.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1)
    k_max: int = Field(8, ge=1)
    random_draws: int = Field(20, ge=1)
    n_queries: int | None = Field(None, ge=1)  # train questions drawn per selection key; None: all
    seed: int = 42
    max_epsilon: float = Field(MAX_EPSILON, gt=0.0)  # above it the questions are too few to separate the candidates


def sample_queries(utility_index: UtilityIndex, params: dict[str, Any]) -> QuerySample:
    """Algorithm 1's first step: ``n_queries`` train questions per dataset and ``all``, drawn with ``seed``.

    Returns:
        The draw (:func:`ragfolio.core.selection.sample_complexity.sample_queries`): per key the rows (positions
        among its train rows) and question ids greedy selects on, as a
        :class:`~ragfolio.core.selection.query_sample.QuerySample`.
    """
    p = PortfolioSelectionParams(**params)
    sample = draw_sample(utility_index, p.n_queries, p.seed)
    for key, drawn in sample.samples.items():
        logger.info("%s: selecting on %d of %d train questions", key, drawn.n, drawn.n_train)
    return sample


def select_portfolios(
    utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex,
    query_sample: QuerySample,
    params: dict[str, Any],
) -> Portfolios:
    """Greedy (Algorithm 1), top-by-average and random orders of the candidates on the sampled train rows.

    Returns:
        The :class:`~ragfolio.core.selection.portfolios.Portfolios`: per key (each dataset and
        ``all``) candidate indices in pick order (``k_max`` long), the portfolio (the first ``k``
        greedy picks, by name), the submodularity certificate at ``k``, the number of train
        questions selected on (``n_train``, of ``n_train_available``), and the sample size
        DESIGN.md's bound asks for (epsilon = delta = 0.05).
    """
    p = PortfolioSelectionParams(**params)
    names = list(utility_index.candidates)
    m = len(names)
    k, k_max = min(p.k, m), min(max(p.k_max, p.k), m)
    rng = np.random.default_rng(p.seed)
    selections = {}
    for key, U_all in stacked(utility_matrices, utility_index, "train").items():
        if not len(U_all):  # test questions only: judged with ALL's portfolio
            logger.info("%s: no train questions, so no portfolio of its own (its test is judged with %s's)", key, ALL)
            continue
        drawn = query_sample.draw(key)
        if drawn.n_train != len(U_all):
            raise ValueError(f"{key}: the query sample was drawn from {drawn.n_train} train questions, the "
                             f"utility matrices have {len(U_all)}: rerun sample_queries")
        U = U_all[np.asarray(drawn.rows, dtype=np.int64)]
        order = np.asarray(tie_order(U, names), dtype=np.int64)  # ties go to the family rule, not grid order
        greedy = select_greedy(U[:, order], k_max)
        cert = certificate(U[:, order], greedy, k)
        split = separation(greedy, len(U), m, k, p.max_epsilon)
        selections[key] = Selection(
            n_train=int(len(U)),
            n_train_available=int(len(U_all)),
            greedy=[int(order[i]) for i in greedy.indices],
            greedy_train_values=[float(v) for v in greedy.values],
            portfolio=[names[order[i]] for i in greedy.indices[:k]],
            top_by_average=[int(i) for i in top_k_by_average(U, k_max)],
            random=[random_k(U, k_max, rng) for _ in range(p.random_draws)],
            certificate={"upper_bound": float(cert.upper_bound), "ratio": float(cert.ratio)},
            required_sample_size=int(required_sample_size(m, k, epsilon=0.05, delta=0.05)),
            separation=split.to_dict(),
        )
        if not split.separates:
            logger.warning("%s: these %d questions do not separate the %d candidates: %s", key, len(U), m,
                           "; ".join(split.reasons()))
        logger.info(
            "%s: portfolio of %d on %d train questions, F=%.3f (within %.1f%% of the bound %.3f)",
            key, k, len(U), greedy.values[k - 1], 100 * (1 - cert.ratio), cert.upper_bound,
        )
    return Portfolios(k=k, k_max=k_max, n_queries=p.n_queries, candidates=list(names), selections=selections)
