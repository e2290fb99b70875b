"""Nodes of ``router_training`` for the servable routers beside the learned one: the routers that
see the retrieval (``pre_retrieval``, ``post_retrieval``) and any a user registers
(``router_modules``; :func:`~ragfolio.core.routing.registry.servable_names`), kept in one
``retrieval_routers`` mapping ``{router kind: {portfolio: router}}``.

Features of the shared first stage (per dataset) and of each portfolio member's results (per
portfolio and dataset) are computed from the pool runners of the ``scored_pool`` record, in blocks
of ``retrieval_routing.query_block_size`` questions: with candidate scoring's block size the
rankings come from the retrieval cache it filled, so the features cost only their arithmetic.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.routing.features.list_judgements import ListJudge
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
from ragfolio.core.routing.judging.budget import BudgetRuns, same_budget_tests
from ragfolio.core.routing.judging.choice import RouterChoice, RouterSelection, choose_router
from ragfolio.core.routing.judging.evaluation import RoutingComparison, dev_baselines, route_all
from ragfolio.core.routing.judging.splits import RoutersByKind, TrainedRouters, query_split, retrieval_split, routers_of
from ragfolio.core.routing.registry import make_router, members_ran, servable_names
from ragfolio.core.routing.routers.learned import SWITCH_MARGINS, Router
from ragfolio.core.scoring.runners import ScoredPool
from ragfolio.core.scoring.utility_index import UtilityIndex, datasets_of, row_questions, split_questions
from ragfolio.core.selection.portfolios import Portfolios
from ragfolio.core.timings import Stopwatch
from ragfolio.router_params import RouterTrainingParams

logger = logging.getLogger(__name__)


def build_retrieval_features(
    questions: list[dict[str, Any]], utility_index: UtilityIndex, portfolios: Portfolios, scored_pool: ScoredPool,
    params: dict[str, Any],
) -> tuple[RetrievalInputs, dict[str, Any]]:
    """Retrieval features of every utility-matrix row, in row order (``retrieval_inputs``), and what
    computing them cost (``retrieval_feature_cost``, a timings file: ``08_reporting/timings/``).

    Returns:
        The blocks per dataset (members: per portfolio and dataset) with their column names; and
        ``{"cost": ...}``: the graph build (once per corpus, s), reading the rankings (cache hits
        when candidate scoring ran the same blocks) and computing each block, in ms per query
        (members: per query and portfolio).
    """
    p = RouterTrainingParams(**params)
    r = p.retrieval_routing
    runners, specs, settings = scored_pool.runners(), scored_pool.candidates, scored_pool.settings
    featurizer = p.retrieval_features(settings.cross_encoder).featurizer(settings.num_docs)
    names = {"first_stage": featurizer.first_stage_names(), "members": featurizer.member_names()}
    clock, n_queries, n_member_rows = Stopwatch(), 0, 0
    first: dict[str, npt.NDArray[np.float32]] = {}
    members: dict[str, dict[str, npt.NDArray[np.float32]]] = {key: {} for key in portfolios.keys}
    for dataset in utility_index.datasets:
        texts = [q.question for q in row_questions(questions, utility_index, dataset)]
        runner = runners.for_dataset(dataset)
        with clock("graph"):
            graph = runner.graph()
        keys = [key for key in portfolios.keys if dataset in datasets_of(utility_index, key)]
        parts: list[npt.NDArray[np.float32]] = [np.zeros((0, len(names["first_stage"])), np.float32)]
        member_parts = {key: [np.zeros((0, len(portfolios.members(key)), len(names["members"])), np.float32)]
                        for key in keys}
        blocks = range(0, len(texts), r.query_block_size)
        for start in tqdm(blocks, desc=f"{dataset} routing features", unit="block", disable=len(blocks) < 2):
            block = texts[start : start + r.query_block_size]
            with clock("fetch"):
                bases = featurizer.fetch_bases(runner, block)
            with clock("first_stage"):
                parts.append(featurizer.first_stage(block, bases, runner.titles, graph))
            for key in keys:
                with clock("fetch"):
                    results = [runner.run(specs[i], block) for i in portfolios.members(key)]
                with clock("members"):
                    member_parts[key].append(featurizer.members(block, results, bases, runner.titles, graph,
                                                                ListJudge(runner)))
        first[dataset] = np.concatenate(parts)
        for key in keys:
            members[key][dataset] = np.concatenate(member_parts[key])
        n_queries, n_member_rows = n_queries + len(texts), n_member_rows + len(texts) * len(keys)
    sec = clock.seconds
    cost = {
        "n_queries": n_queries, "graph_build_s": sec.get("graph", 0.0),
        "fetch_ms_per_query": 1e3 * sec.get("fetch", 0.0) / max(n_queries, 1),
        "first_stage_ms_per_query": 1e3 * sec.get("first_stage", 0.0) / max(n_queries, 1),
        "members_ms_per_query": 1e3 * sec.get("members", 0.0) / max(n_member_rows, 1),
    }
    logger.info("retrieval features of %d questions: %d first-stage, %d per member; %.2f ms/query first stage, "
                "%.2f ms/query/portfolio members, %.2f ms/query reading rankings, graph %.1f s", n_queries,
                len(names["first_stage"]), len(names["members"]), cost["first_stage_ms_per_query"],
                cost["members_ms_per_query"], cost["fetch_ms_per_query"], cost["graph_build_s"])
    return RetrievalInputs(first, members, names), {"cost": cost}


def train_retrieval_routers(
    router_inputs: dict[str, Features], retrieval_inputs: RetrievalInputs, utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex, portfolios: Portfolios, params: dict[str, Any],
) -> RoutersByKind:
    """Per servable router kind but the learned one (:func:`~ragfolio.core.routing.registry.servable_names`,
    a user's included), per portfolio: the router fitted on its train questions, with its
    ``router_training.retrieval_routing.<kind>`` hyperparameters."""
    p = RouterTrainingParams(**params)
    kinds = servable_names(learned=False)
    out: RoutersByKind = {kind: {} for kind in kinds}
    for key, sel in portfolios.selections.items():
        train = retrieval_split(router_inputs, retrieval_inputs, utility_matrices, utility_index, portfolios, key, "train")
        for kind in kinds:
            router = make_router(kind, **{"random_state": p.seed, **p.retrieval_routing.hyperparameters(kind)})
            out[kind][key] = router.fit(train.inputs, train.utilities, sel.portfolio)
    return out


def compare_on_dev(
    router_inputs: dict[str, Features], retrieval_inputs: RetrievalInputs, utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex, portfolios: Portfolios, trained_routers: TrainedRouters,
) -> dict[str, RoutingComparison]:
    """Per portfolio with dev questions (``data_prep.dev_fraction``): the routers that can be served
    and the fixed baselines (:func:`~ragfolio.core.routing.judging.evaluation.dev_baselines`,
    fitted on train), routing its dev questions.

    This is what ``bundle.router: auto`` chooses by and what the report's ``dev`` block shows; the
    test questions are not read.
    """
    out = {}
    for key, sel in portfolios.selections.items():
        dev = retrieval_split(router_inputs, retrieval_inputs, utility_matrices, utility_index, portfolios, key, "dev")
        if not len(dev.utilities):
            continue
        members = portfolios.members(key)
        train = query_split(router_inputs, utility_matrices, utility_index, key, members, "train")
        baselines = {name: make_router(name).fit(train.inputs, train.utilities, sel.portfolio)
                     for name in dev_baselines()}
        dev_queries = query_split(router_inputs, utility_matrices, utility_index, key, members, "dev")
        learned = trained_routers.learned[key]  # it reads query features only
        picks = {**route_all({learned.name: learned}, dev_queries),
                 **route_all({**routers_of(trained_routers.retrieval, key), **baselines}, dev)}
        out[key] = RoutingComparison(picks, dev.utilities)
    return out


def judge_on_dev(
    dev_comparison: dict[str, RoutingComparison], questions: list[dict[str, Any]], utility_index: UtilityIndex,
    portfolios: Portfolios, scored_pool: ScoredPool,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per portfolio with dev questions, per servable router: the dev same-budget test at l = 1..k
    (``dev_same_budget``), the evidence the do-no-harm rule of ``bundle.router: auto`` reads
    (:mod:`ragfolio.core.routing.judging.choice`).

    Returns:
        ``{portfolio: {router: {"l1": test, ...}}}``: does the recall of the router's routed union
        of l members beat the single best member's given ``l * num_docs`` passages on the dev
        questions, every servable router (those ``bundle.max_members_run`` leaves out included, so
        the family is fixed before the choice) at every l one family under Holm's step-down, each
        with its interval at its Holm level (:func:`~ragfolio.core.routing.judging.budget.same_budget_tests`).
    """
    runners, specs = scored_pool.runners(), scored_pool.candidates
    out: dict[str, dict[str, dict[str, Any]]] = {}
    servable = servable_names()
    for key, comparison in dev_comparison.items():
        sel = portfolios.selection(key)
        members, single = [specs[i] for i in portfolios.members(key)], specs[sel.single_best]
        devs = {d: split_questions(questions, utility_index, d, "dev") for d in datasets_of(utility_index, key)}
        runs = BudgetRuns.concatenate([BudgetRuns.retrieve(runners, scored_pool.corpora.name_for(d), qs, members, single)
                                       for d, qs in devs.items() if qs])
        routers = {name: picks for name, picks in comparison.picks.items() if name in servable}
        out[key] = same_budget_tests(runs, routers, range(1, portfolios.k + 1))
    return out


def dev_values(comparison: RoutingComparison) -> dict[str, dict[str, float]]:
    """Per served router of a dev comparison: ``dev_best_of_1`` and ``dev_default`` (the default
    member's, the best train mean, on the same dev questions)."""
    curves = comparison.curves
    default = curves["top_average"][0]
    return {name: {"dev_best_of_1": curves[name][0], "dev_default": default}
            for name in servable_names() if name in curves}


def routing_selection(
    trained_routers: TrainedRouters, dev_comparison: dict[str, RoutingComparison], params: dict[str, Any],
    dev_same_budget: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> RouterSelection:
    """What validation on train questions chose per portfolio and router, and which router each
    portfolio would serve (``choices``): the ``router_selection`` record ``packaging`` serves from.

    The learned router falls back when its tuned switch margin is the largest (it never leaves
    the default member); the retrieval routers say so themselves (``fallback``). Each router's
    ``val_best_of_1`` is its validation best-of-1 as it routes and ``val_default`` the default
    member's on the same questions; where the portfolio has dev questions, ``dev_best_of_1`` and
    ``dev_default`` are the same on them (:func:`compare_on_dev`). ``choices[key]`` is
    :func:`~ragfolio.core.routing.judging.choice.choose_router` of them under ``router_training.bundle.router``
    (``auto``: the largest gain over the default member on dev, among the routers whose dev
    same-budget test, ``dev_same_budget`` of :func:`judge_on_dev`, passed Holm's step-down at
    some l; routing only at the l's where it did, by default at the smallest of them).
    """
    bundle = RouterTrainingParams(**params).bundle
    validation: dict[str, dict[str, Any]] = {}  # per portfolio
    choices: dict[str, RouterChoice] = {}
    retrieval_routers, by_kind = trained_routers.retrieval, trained_routers.by_kind()
    for key, learned in trained_routers.learned.items():
        entry: dict[str, Any] = {}
        if isinstance(learned, Router):
            entry[learned.name] = {"fallback": learned.switch_margin_ >= max(SWITCH_MARGINS),
                                "val_best_of_1": learned.val_routed_best_of_1_,
                                "val_best_of_1_top_scored": learned.val_best_of_1_,
                                "val_default": learned.val_default_, "switch_margin": learned.switch_margin_}
        for kind, trained in retrieval_routers.items():  # a router without selection() is judged on dev only
            selection = getattr(trained[key], "selection", None)
            entry[kind] = selection() if callable(selection) else {}
        if key in dev_comparison:
            for name, values in dev_values(dev_comparison[key]).items():
                entry[name] = {**entry.get(name, {}), **values}
        validation[key] = entry
        k = len(learned.members_)
        ran = {kind: members_ran(trained[key], 1, k) for kind, trained in by_kind.items()}
        choices[key] = choose_router(entry, bundle.router, evidence=(dev_same_budget or {}).get(key),
                                     ls=tuple(range(1, k + 1)), members_ran=ran, max_members_run=bundle.max_members_run,
                                     default_l=bundle.default_l)
        logger.info("%s: serves %s, routing %s, default l = %s (%s)", key, choices[key].router, choices[key].routing,
                    choices[key].default_l, choices[key].reason)
    return RouterSelection(validation, choices)
