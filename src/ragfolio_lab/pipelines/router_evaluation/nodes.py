"""Nodes of ``router_evaluation``: every router on the test questions, and the router report.

It reads what ``router_training`` wrote (the routers, their inputs as one ``routing_rows`` record,
the dev routings and the ``router_selection`` record) and routes each portfolio's test questions:
the learned router beside every ablation (:func:`compare_on_test`), then the paper router
(``paper_comparison``) and the routers that see the retrieval (``retrieval_comparison``). The report
is written in parts: the same-budget check of the test routings (:func:`same_budget_on_test`, from
runners built of the ``scored_pool`` record), each portfolio's entry (:func:`portfolio_reports`),
what the routers' features are and cost (:func:`router_feature_report`), then :func:`evaluate_routers`
puts them together as ``router_metrics``. It reads ``seed``, ``logistic_c``, ``encoders`` and ``bundle`` of
``router_training``'s parameters, each on its own, and the lab's ``paper_router``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ragfolio.bundle_params import BundleParams
from ragfolio.core.routing.base import LEARNED, RouterProtocol
from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
from ragfolio.core.routing.judging.budget import BudgetRuns, same_budget_comparison, same_budget_recall
from ragfolio.core.routing.judging.choice import RouterChoice, RouterSelection
from ragfolio.core.routing.judging.evaluation import RoutingComparison, compare_routers, gap_closed, report_order
from ragfolio.core.routing.judging.served import served_entry
from ragfolio.core.routing.judging.splits import RoutingRows
from ragfolio.core.routing.registry import servable_names
from ragfolio.core.scoring.runners import ScoredPool
from ragfolio.core.scoring.utility_index import ALL, datasets_of, split_questions
from ragfolio.core.stats import interval_text
from ragfolio.router_params import RouterTrainingParams
from ragfolio_lab.judging.headroom import headroom
from ragfolio_lab.routers.universal import UniversalRouting, judge_universal

logger = logging.getLogger(__name__)


def compare_on_test(
    routing_rows: RoutingRows, routers: dict[str, RouterProtocol], seed: int, logistic_c: float,
) -> dict[str, RoutingComparison]:
    """Per portfolio with test questions: the learned router and every ablation on them
    (``query_router_comparison``; the paper router is added after, by ``compare_paper_routers``),
    the random ablation seeded with ``router_training.seed``, the logistic one at ``router_training.logistic_c``."""
    p = RouterTrainingParams(seed=seed, logistic_c=logistic_c)  # checked as router training checks them
    out = {}
    for key in routing_rows.portfolios.keys:
        test = routing_rows.query_split(key, "test")
        if len(test.utilities):
            train = routing_rows.query_split(key, "train")
            out[key] = compare_routers(routers[key], train, test, seed=p.seed, logistic_c=p.logistic_c)
    return out


def same_budget_on_test(
    router_comparison: dict[str, RoutingComparison], router_selection: RouterSelection,
    questions: list[dict[str, Any]], routing_rows: RoutingRows, scored_pool: ScoredPool,
) -> dict[str, dict[str, Any]]:
    """Per portfolio with test questions, the same-budget check of its test routings (``test_same_budget``):
    ``same_budget`` of the learned router's routed unions, and for the router router training chose
    (when the comparison holds it) ``chosen_router`` and ``chosen_same_budget``."""
    runners, specs, portfolios = scored_pool.runners(), scored_pool.candidates, routing_rows.portfolios
    out: dict[str, dict[str, Any]] = {}
    for key, comparison in router_comparison.items():
        sel = portfolios.selection(key)
        members, single = [specs[i] for i in portfolios.members(key)], specs[sel.single_best]
        tests = {d: split_questions(questions, routing_rows.utility_index, d, "test")
                 for d in datasets_of(routing_rows.utility_index, key)}
        runs = BudgetRuns.concatenate([BudgetRuns.retrieve(runners, scored_pool.corpora.name_for(d), qs, members, single)
                                       for d, qs in tests.items()])
        out[key] = {"same_budget": same_budget_recall(runs, comparison.picks[LEARNED])}
        if (choice := router_selection.choices.get(key)) is not None and choice.router in comparison.picks:
            out[key]["chosen_router"] = choice.to_dict()
            out[key]["chosen_same_budget"] = same_budget_comparison(runs, comparison.picks[choice.router])
    return out


def portfolio_reports(
    router_comparison: dict[str, RoutingComparison], test_same_budget: dict[str, dict[str, Any]],
    dev_comparison: dict[str, RoutingComparison], router_selection: RouterSelection,
    cascade_curves: dict[str, dict[str, Any]] | None = None, universal_routing: UniversalRouting | None = None,
) -> dict[str, dict[str, Any]]:
    """Each portfolio's report entry on its test questions (``portfolio_reports``): ``n_test``, every
    router's entry (:meth:`~ragfolio.core.routing.judging.evaluation.RoutingComparison.report`), the
    same-budget check (``test_same_budget``), ``dev`` where it has dev questions, ``cascade_curve``,
    ``paper_universal``, then :func:`_with_headroom`'s additions (:func:`evaluate_routers` adds the members)."""
    out = {}
    for key, comparison in router_comparison.items():
        entry = {"n_test": len(comparison.utilities), **comparison.report(), **test_same_budget[key]}
        if key in dev_comparison:
            entry["dev"] = dev_comparison[key].dev_report()
        if key in (cascade_curves or {}):
            entry["cascade_curve"] = cascade_curves[key]  # type: ignore[index]
        if universal_routing is not None and key != ALL and key in universal_routing.picks:
            entry["paper_universal"] = judge_universal(universal_routing, key, comparison)
        out[key] = _with_headroom(entry, comparison, router_selection.validation.get(key, {}))
    return out


def router_feature_report(
    retrieval_inputs: RetrievalInputs, retrieval_feature_cost: Mapping[str, Any] | None = None,
    paper_encoders: dict[str, Any] | None = None, paper_block_cost: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the routers read and what it costs (``router_feature_report``): ``retrieval_features``, the
    retrieval features' names (``retrieval_inputs``) and cost (``retrieval_feature_cost``, measured by
    router training; none when its timings file is absent), and with ``paper_router``
    set, ``paper_router``: its query blocks and what each costs a query (``paper_block_cost``)."""
    out: dict[str, Any] = {"retrieval_features": {"names": retrieval_inputs.names, **(retrieval_feature_cost or {})}}
    if paper_encoders:
        out["paper_router"] = {**paper_encoders, **(paper_block_cost or {})}
    return out


def evaluate_routers(
    portfolio_reports: dict[str, dict[str, Any]], routing_rows: RoutingRows, scored_pool: ScoredPool,
    router_selection: RouterSelection, router_feature_report: dict[str, Any], bundle: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Best-of-l of every router per portfolio, gap closed, and the same-budget check (``router_metrics``):
    ``k``, ``num_docs``, the ``corpus`` retrieved from (or the per-dataset corpora), each portfolio's
    entry (``portfolio_reports``, its ``members`` second), ``router_feature_report``'s parts and ``served``.

    ``served`` names the router the bundle serves (``router_training.bundle``: its portfolio, the
    router :func:`~ragfolio.core.routing.judging.choice.choose_router` picked and why, the validation values
    compared, its default l; :func:`~ragfolio.core.routing.judging.served.served_entry`) with the test
    figures of what is served (the router's best-of-l, interval minus the single best member and
    recall at the l's it routes, the single best member's at the others), and the same-budget check
    of its routing (routed union at l against the single best member given ``l * num_docs``
    passages, with the paired interval, as if it routed there); each portfolio's ``chosen_router`` and
    ``chosen_same_budget`` are the same for the router it would serve.

    Each router's entry also gets its own ``gap_closed_l1``; each portfolio's ``headroom`` says how
    often a member beats the default one (the best train mean) and how much of that each router's
    first pick took (:func:`~ragfolio_lab.judging.headroom.headroom`), and ``selection`` what
    validation on train questions chose, with the routers that fell back to the default member
    (``router_selection``). Where the portfolio has dev questions, ``dev`` holds the servable
    routers' and the baselines' best-of-l there, their gap closed and intervals minus the single
    best member (what ``auto`` chose by); every other number is on test.
    With ``paper_router.universal``, each dataset's entry has ``paper_universal``, the
    router trained over every dataset's train questions (:func:`~ragfolio_lab.routers.universal.judge_universal`).
    With a cascade router, each portfolio's ``cascade_curve`` is its test best-of-1 at m = 1..k
    members run (``cascade_curves``; its best-of-l at the m chosen is its entry like any router's).
    """
    portfolios = routing_rows.portfolios
    report: dict[str, Any] = {
        "k": portfolios.k, "num_docs": scored_pool.settings.num_docs, "corpus": scored_pool.corpora.describe(),
        "datasets": {key: {"n_test": entry["n_test"], "members": portfolios.selection(key).portfolio, **entry}
                     for key, entry in portfolio_reports.items()},
        **router_feature_report,
    }
    report["served"] = _served(report, BundleParams(**(bundle or {})), router_selection.choices)
    _log_summary(report)
    return report

def _served(report: dict[str, Any], bundle: BundleParams, choices: Mapping[str, RouterChoice]) -> dict[str, Any] | None:
    """What the bundle serves (its portfolio's chosen router) and what the report measured of it on test."""
    if (choice := choices.get(bundle.portfolio)) is None:
        return None
    return served_entry(bundle.portfolio, choice, report["datasets"].get(bundle.portfolio, {}),
                        default_l=bundle.default_l, num_docs=report["num_docs"], corpus=report["corpus"])

def _with_headroom(entry: dict[str, Any], comparison: RoutingComparison, selection: Mapping[str, Any]) -> dict[str, Any]:
    """``entry`` with every router's gap closed at l = 1, the retrieval routers' summary scalars,
    the headroom over the default member and the validation ``selection``."""
    curves, k = comparison.curves, comparison.utilities.shape[1]
    single, oracle = curves["top_average"][0], curves["oracle"][0]
    for name, curve in curves.items():
        if name != "oracle":
            entry[name]["gap_closed_l1"] = gap_closed(curve[0], single, oracle)
    for mode in servable_names(learned=False):
        if mode in curves:
            entry["summary"].update({f"{mode}_l{l}": curves[mode][l - 1] for l in (1, 2) if l <= k})
    default = int(comparison.picks["top_average"][0, 0]) if len(comparison.utilities) else 0
    routed = {name: picks for name, picks in comparison.picks.items() if name != "oracle"}
    entry["headroom"] = headroom(comparison.utilities, default, routed)
    entry["selection"] = selection
    return entry

def _log_summary(report: dict[str, Any]) -> None:
    lines = [f"test best-of-l support recall, l = 1..{report['k']}"]
    for key, entry in report["datasets"].items():
        room = entry["headroom"]
        lines.append(f"{key} (n={entry['n_test']}), a member beats the default on {_pct(room['share'])} "
                     f"of questions; fell back on validation: "
                     f"{[n for n, sel in entry['selection'].items() if sel.get('fallback')] or 'none'}")
        lines.append(f"  {'router':<15}{'best-of-l':<{6 * report['k']}} gap@1  captured worse  "
                     f"l=1 minus single best [95%]")
        for name in routed(entry):
            taken = room["routers"].get(name, {})
            lines.append(f"  {name:<15}" + " ".join(f"{v:.3f}" for v in entry[name]["best_of_l"])
                         + f" {_pct(entry[name].get('gap_closed_l1')):>6} {_pct(taken.get('captured')):>8}"
                         + f" {_pct(taken.get('worse')):>5}"
                         + f"  {interval_text(entry[name].get('minus_single_best', {}).get('l1'))}")
        if (curve := entry.get("cascade_curve")) is not None:
            lines.append("  cascade best-of-1 by members run " + " ".join(
                f"m={m}:{'-' if v is None else f'{v:.3f}'}" for m, v in zip(curve["members_run"], curve["best_of_1"],
                                                                          strict=True)) + f" (runs {curve['chosen']})")
        budget = entry["same_budget"]
        lines.append("  routed union   " + " ".join(f"{v:.3f}" for v in budget["routed_union_recall"]))
        lines.append("  single, l*n    " + " ".join(f"{v:.3f}" for v in budget["single_best_recall"]))
    if (served := report.get("served")) is not None:
        lines.append(f"served ({served['portfolio']}): {served['router']}, routing {served.get('routing', 'on')}: "
                     f"{served['reason']}")
        budget = (served.get("same_budget") or {}).get("union_minus_single", {}).get("l2")
        if budget:
            lines.append(f"  its routed union at l = 2 minus the single best given 2 x num_docs: {interval_text(budget)}")
    cost = report["retrieval_features"].get("cost")
    if served is not None and served.get("routing") != "on":
        logger.warning("routing %s for what is served (%s): %s", served.get("routing"), served["portfolio"],
                       served["reason"])
    if cost:
        lines.append(f"retrieval features: {cost['first_stage_ms_per_query']:.2f} ms/query first stage, "
                     f"{cost['members_ms_per_query']:.2f} ms/query/portfolio members")
    logger.info("\n".join(lines))

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"

def routed(entry: dict[str, Any]) -> list[str]:
    """The routers of a report entry (its keys holding a ``best_of_l`` curve), in report order: the compared
    routers, the others it holds (the paper's), then the servable ones (:func:`~ragfolio.core.routing.judging.evaluation.report_order`)."""
    curves = [name for name, value in entry.items() if isinstance(value, dict) and "best_of_l" in value]
    servable = servable_names()
    return [name for name in report_order(*(n for n in curves if n not in servable)) if name in curves]
