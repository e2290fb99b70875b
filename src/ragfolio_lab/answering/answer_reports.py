"""Report nodes of ``answering_evaluation``: the summary with intervals, the logged table, the plots."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ragfolio.core.stats import interval_text
from ragfolio.core.timings import split_timings
from ragfolio.plotting import subplots
from ragfolio_lab.answering.summary import selector_positions, summarize

logger = logging.getLogger(__name__)


def _orders_summary(retrieval_orders: dict[str, Any]) -> dict[str, Any]:
    """Per dataset and system: mean retrieval ms when the systems ran in the fixed and in the reversed order."""
    out: dict[str, Any] = {}
    for dataset, rows in retrieval_orders.items():
        systems = list(rows[0]["fixed"]) if rows else []
        out[dataset] = {"n": len(rows), "systems": {
            s: {how: float(np.mean([r[how][s] for r in rows])) for how in ("fixed", "reversed")} for s in systems
        }}
    return out


def summarize_answers(answers: pd.DataFrame, retrieval_orders: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answer report and, apart, its timings (:func:`ragfolio.core.timings.split_timings`).

    The report: ``datasets.<dataset | all>.<system>.{em, f1, answer_recall (+ intervals,
    minus_single_best, and for routed systems minus.{single_best_wide, vendi_rag}), tokens_mean,
    selector_*, ...}``, ``selector_positions`` and ``foreign_query_hits`` (0 when no system reused
    another's query caches). The timings: ``datasets.<dataset | all>.<system>.{latency_ms_*,
    retrieval_ms_*}`` and ``retrieval_orders``.
    """
    records = answers.to_dict(orient="records")
    for r in records:  # pandas turns None into NaN
        for name in ("fallback", "selector_position", "rounds", "judged", "accepted"):
            value = r.get(name)
            r[name] = None if value is None or value != value else value
        r["fallback"] = None if r["fallback"] is None else bool(r["fallback"])
    per = summarize(records)
    datasets: dict[str, Any] = {**per, "all": summarize([{**r, "dataset": "all"} for r in records])["all"]}
    systems = list(datasets["all"])
    report = {
        "systems": systems, "datasets": datasets, "selector_positions": selector_positions(records),
        "retrieval_orders": _orders_summary(retrieval_orders),
        "foreign_query_hits": int(sum(int(r.get("foreign_query_hits") or 0) for r in records)),
    }
    _log_table(report)
    return split_timings(report)


def headline_answers(metrics: dict[str, Any]) -> dict[str, Any]:
    """The few numbers ``dvc metrics show`` prints for answering: EM of every system over all datasets.

    Returns:
        ``{"n": questions, "em": {system: ...}}`` (F1, answer recall and intervals: ``answer_metrics.json``).
    """
    overall: dict[str, dict[str, Any]] = metrics["datasets"]["all"]
    n = next((m["n"] for m in overall.values()), None)
    return {"n": n, "em": {name: m["em"] for name, m in overall.items()}}


def _log_table(report: dict[str, Any]) -> None:
    head = (f"{'dataset':<16}{'system':<19}{'n':>4}{'EM':>7}{'F1':>7}{'ans.rec':>8}{'ms mean':>9}{'ms p95':>9}"
            f"{'retr ms':>9}{'tokens':>8}  {'EM - single best':<22}{'F1 - single best':<22}")
    lines = [head]
    for dataset, systems in report["datasets"].items():
        for system, m in systems.items():
            diff = m.get("minus_single_best", {})
            lines.append(
                f"{dataset:<16}{system:<19}{m['n']:>4}{m['em']:>7.3f}{m['f1']:>7.3f}{m['answer_recall']:>8.3f}"
                f"{m['latency_ms_mean']:>9.0f}{m['latency_ms_p95']:>9.0f}{m['retrieval_ms_mean']:>9.1f}"
                f"{m['tokens_mean']:>8.0f}  {interval_text(diff.get('em')):<26}{interval_text(diff.get('f1')):<26}"
            )
    for loop in ("vendi_rag", "vendi_rag_authors"):
        if vendi := report["datasets"]["all"].get(loop, {}):
            rate = vendi["judge_acceptance_rate"]
            lines.append(f"{loop}: {vendi['rounds_mean']:.2f} rounds per question, judge acceptance "
                         f"{rate if rate is not None else float('nan'):.2f} of {vendi['judge_calls']} judgements, "
                         f"accepted on {vendi['accepted_share']:.2f} of questions")
    for system, m in report["datasets"]["all"].items():
        if room := m.get("headroom"):
            lines.append(f"{system} headroom over single_best ({room['n']} questions): a candidate right where "
                         f"single_best is wrong on {room['baseline_wrong_candidate_right']}, the selector found "
                         f"{room['selector_found']}; single_best right where {system} is wrong on "
                         f"{room['baseline_right_system_wrong']}")
    lines.append(f"selector positions picked (by candidates shown): {report['selector_positions']}")
    lines.append(f"foreign query-cache hits (must be 0): {report['foreign_query_hits']}")
    for dataset, entry in report["retrieval_orders"].items():
        pairs = ", ".join(f"{s} {v['fixed']:.1f}/{v['reversed']:.1f}" for s, v in entry["systems"].items())
        lines.append(f"retrieval ms fixed/reversed order, {dataset} (n={entry['n']}): {pairs}")
    logger.info("answering on test questions\n%s", "\n".join(lines))


def plot_em_vs_tokens(metrics: dict[str, Any]) -> Figure:
    """EM against mean tokens per query, one point per system, one panel per dataset."""
    keys = list(metrics["datasets"])
    fig, axes = subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6))
    for ax, key in zip(axes[0], keys, strict=True):
        for system, m in metrics["datasets"][key].items():
            ax.scatter(m["tokens_mean"], m["em"], s=30)
            ax.annotate(system, (m["tokens_mean"], m["em"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_title(f"{key} (n={next(iter(metrics['datasets'][key].values()))['n']})")
        ax.set_xlabel("tokens per query (mean)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("exact match")
    fig.tight_layout()
    return fig


def plot_selector_positions(metrics: dict[str, Any]) -> Figure:
    """Share of the selector's picks at each position shown, one group of bars per number of candidates."""
    by_n = metrics["selector_positions"]
    fig, axes = subplots(1, 1, figsize=(4.8, 3.2))
    ax = axes[0][0]
    width = 0.8 / max(len(by_n), 1)
    for i, (n, counts) in enumerate(by_n.items()):
        total = sum(counts.values()) or 1
        positions = np.arange(1, int(n) + 1)
        shares = [counts.get(str(pos), 0) / total for pos in positions]
        ax.bar(positions + (i - (len(by_n) - 1) / 2) * width, shares, width, label=f"{n} shown (n={total})")
        ax.hlines(1 / int(n), positions[0] - 0.4, positions[-1] + 0.4, colors="grey", linestyles=":", lw=0.8)
    ax.set_xlabel("position of the picked candidate")
    ax.set_ylabel("share of selector picks")
    if by_n:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no selector call", ha="center", va="center", transform=ax.transAxes)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def em_vs_tokens_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """Rows ``(system, tokens_mean, em, f1)`` over every dataset (``all``).

    The data behind ``em_vs_tokens.png``, for ``dvc plots show`` (a scatter of ``em`` on ``tokens_mean``).
    """
    systems = metrics["datasets"]["all"]
    return pd.DataFrame([
        {"system": system, **{key: m[key] for key in ("tokens_mean", "em", "f1")}}
        for system, m in systems.items()
    ], columns=["system", "tokens_mean", "em", "f1"])
