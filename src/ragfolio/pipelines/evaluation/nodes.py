"""Nodes of ``evaluation``: the portfolio report (JSON), its summary table and plots, and the sample-complexity study."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from pydantic import BaseModel, ConfigDict, Field

from ragfolio.core.data.sources import LOG, SYNTHETIC
from ragfolio.core.scoring.utility_index import ALL, SPLITS, UtilityIndex, has_split, split_rows, stacked
from ragfolio.core.selection.best_of_k import split_report, win_shares
from ragfolio.core.selection.portfolios import Portfolios
from ragfolio.core.selection.sample_complexity import key_seed, sample_complexity
from ragfolio.core.stats import interval_text
from ragfolio.plotting import subplots

logger = logging.getLogger(__name__)

DIFFERENCES = ("greedy_minus_top_by_average", "greedy_minus_single_best")  # the report's paired comparisons


class IntervalParams(BaseModel):
    """Paired-bootstrap intervals of the report's comparisons (:mod:`ragfolio.core.stats`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    confidence: float = Field(0.95, gt=0, lt=1)
    n_resamples: int = Field(2000, ge=100)
    seed: int = 0


class SampleComplexityParams(BaseModel):
    """The sample-complexity study: greedy on N drawn train questions, ``seeds`` draws per N."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sizes: list[int | Literal["all"]] = [25, 50, 100, 200, 400, 800, "all"]
    seeds: int = Field(10, ge=1)
    seed: int = 0
    delta: float = Field(0.05, gt=0, lt=1)  # failure probability of the bound's epsilon


class EvaluationParams(BaseModel):
    """``evaluation`` parameters (conf/base/parameters_evaluation.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    report_k: list[int] = [1, 3, 5]
    intervals: IntervalParams = IntervalParams()
    sample_complexity: SampleComplexityParams = SampleComplexityParams()


def _types(utility_index: UtilityIndex, split: str) -> dict[str, list[str]]:
    """Question types of ``split`` rows, per dataset and for ``all`` (prefixed by dataset there)."""
    per = {d: [rows.type[i] for i in split_rows(utility_index, d, split)] for d, rows in utility_index.datasets.items()}
    return {**per, ALL: [f"{d}/{t}" for d, types in per.items() for t in types]}


def test_questions(key: str, utility_index: UtilityIndex) -> str:
    """``"labelled"``, or ``"synthetic"`` where a key's test questions were written or judged by the
    reader (data_prep.questions synthetic or log without labelled questions): every such figure says so."""
    tested = {d for d in utility_index.datasets if len(split_rows(utility_index, d, "test"))}
    keys = tested if key == ALL else {key}
    return "synthetic" if keys and keys <= {SYNTHETIC, LOG} else "labelled"


def evaluate_portfolios(
    utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex,
    portfolios: Portfolios,
    candidates: list[dict[str, Any]],
    params: dict[str, Any],
) -> dict[str, Any]:
    """Best-of-k curves of greedy, top-by-average and random-k on train, dev (when the split has dev
    rows) and test, per question type on test.

    ``corpus`` names the corpus the utilities were scored over (the utility index's: the mode and
    the fingerprint of the union corpus, or per-dataset fingerprints labelled as such). The test
    and dev splits also hold paired-bootstrap intervals of greedy - top-by-average and greedy - single
    best at every k and at the portfolio's k (``intervals`` says how they were computed); train
    values are in-sample (greedy was chosen on them), so they get none. Dev numbers are the ones to
    choose settings by; test numbers are for the report.
    """
    p = EvaluationParams(**params)
    iv = p.intervals
    report: dict[str, Any] = {
        "score": utility_index.score,
        "num_docs": utility_index.num_docs,
        "corpus": dict(utility_index.corpus),
        "n_candidates": len(candidates),
        "candidates_by_family": dict(Counter(c["family"] for c in candidates)),
        "k": portfolios.k,
        "intervals": {"confidence": iv.confidence, "n_resamples": iv.n_resamples, "method": "paired percentile bootstrap"},
        "datasets": {},
    }
    test_types = _types(utility_index, "test")
    for split in [s for s in SPLITS if s != "dev" or has_split(utility_index, "dev")]:
        for key, U in stacked(utility_matrices, utility_index, split).items():
            if key not in portfolios.keys:  # a dataset with test questions only: in ALL's figures
                continue
            sel = portfolios.selection(key)
            entry = report["datasets"].setdefault(key, {
                "n_selected_on": sel.n_train, "portfolio": sel.portfolio, "certificate": sel.certificate,
                "required_sample_size": sel.required_sample_size, "separation": sel.separation,
                "test_questions": test_questions(key, utility_index),
            })
            entry[f"n_{split}"] = int(len(U))
            orders = (sel.greedy, sel.top_by_average, sel.random)
            confidence = iv.confidence if split != "train" else None  # in-sample differences need no interval
            entry[split] = split_report(U, *orders, confidence=confidence, n_resamples=iv.n_resamples, seed=iv.seed)
            if len(U):  # scalars at the portfolio's k: `dvc metrics show/diff` reads scalars only, not lists
                k = portfolios.k
                entry[split]["at_portfolio_k"] = {
                    **{name: entry[split][f"{name}_at_k"][k - 1] for name in ("greedy", "top_by_average", "random")},
                    **{name: entry[split][f"{name}_at_k"][k - 1] for name in DIFFERENCES if f"{name}_at_k" in entry[split]},
                }
            if split == "test" and len(U):
                labels = np.asarray(test_types[key])
                entry[split]["by_type"] = {
                    t: split_report(U[labels == t], *orders, confidence=None) for t in sorted(set(test_types[key]))
                }
    measured = max((len(e.get("test", {}).get("greedy_at_k", [])) for e in report["datasets"].values()), default=0)
    if beyond := [k for k in p.report_k if k > measured]:
        logger.warning("evaluation.report_k %s is beyond the %d members measured: left out of the summary",
                       beyond, measured)
    _log_summary(report, p.report_k)
    return report


def headline_portfolios(metrics: dict[str, Any]) -> dict[str, Any]:
    """The few numbers ``dvc metrics show`` prints for selection: test support recall at the portfolio's k.

    Returns:
        ``{"k", "greedy": {dataset: ...}, "top_by_average": {dataset: ...}, "single_best", "oracle"}``;
        the last two for ``all`` only (every dataset's are in ``portfolio_metrics.json``).
    """
    k, datasets = metrics["k"], metrics["datasets"]
    tested = {key: entry for key, entry in datasets.items() if entry["test"].get("n")}  # written questions may have no test
    at_k = {name: {key: entry["test"][f"{name}_at_k"][k - 1] for key, entry in tested.items()}
            for name in ("greedy", "top_by_average")}
    overall = datasets.get(ALL, {}).get("test", {})
    return {"k": k, **at_k, "single_best": overall.get("single_best"), "oracle": overall.get("oracle_all")}


def _log_summary(report: dict[str, Any], report_k: list[int]) -> None:
    """Log the test table: greedy vs top-by-average at each reported k with the difference's interval."""
    level = round(100 * report["intervals"]["confidence"])
    head = "".join(f"  greedy@{k} avg@{k} {f'diff@{k} [{level}% CI]':<24}" for k in report_k)
    lines = [f"test {report['score']} ({report['n_candidates']} candidates, {report['num_docs']} passages each)",
             f"{'dataset':<18}{'n':>5}{head}  single  oracle"]
    for key, entry in report["datasets"].items():
        test = entry["test"]
        if not test.get("n"):
            continue
        cells = "".join(
            f"  {test['greedy_at_k'][k - 1]:8.3f} {test['top_by_average_at_k'][k - 1]:5.3f}"
            f" {interval_text(test['greedy_minus_top_by_average_at_k'][k - 1]):<24}"
            for k in report_k if k <= len(test["greedy_at_k"])
        )
        name = f"{key} (synthetic)" if entry.get("test_questions") == "synthetic" else key
        lines.append(f"{name:<18}{test['n']:>5}{cells}  {test['single_best']:6.3f}  {test['oracle_all']:6.3f}")
    for key, entry in report["datasets"].items():
        if not entry.get("separation", {}).get("separates", True):
            lines.append(f"{key}: the questions do not separate the candidates: {'; '.join(entry['separation']['reasons'])}")
    logger.info("\n".join(lines))


def _test_label(entry: dict[str, Any]) -> str:
    """``"test"``, or ``"synthetic test"`` for questions the reader wrote."""
    return "synthetic test" if entry.get("test_questions") == "synthetic" else "test"


def _band(intervals: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` arrays of a list of interval dicts (``nan`` where undefined)."""
    def ends(side: str) -> np.ndarray:
        return np.array([np.nan if iv[side] is None else iv[side] for iv in intervals], dtype=float)

    return ends("low"), ends("high")


def plot_best_of_k(metrics: dict[str, Any]) -> Figure:
    """One panel per dataset (and ``all``): test best-of-k of greedy, top-by-average, random, oracle.

    Greedy and top-by-average carry shaded bootstrap bands (their curves' intervals, when the
    report has them; the intervals of their difference are in the JSON and the summary table).
    """
    keys = [k for k, e in metrics["datasets"].items() if e["test"].get("n")]
    fig, axes = subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), sharey=True)
    for ax, key in zip(axes[0], keys, strict=True):
        test = metrics["datasets"][key]["test"]
        ks = np.arange(1, len(test["greedy_at_k"]) + 1)
        for name, style, label, color in (("greedy", "o-", "greedy", "C0"), ("top_by_average", "s--", "top-k by average", "C1")):
            ax.plot(ks, test[f"{name}_at_k"], style, color=color, label=label)
            if f"{name}_interval_at_k" in test:
                ax.fill_between(ks, *_band(test[f"{name}_interval_at_k"]), color=color, alpha=0.18, lw=0)
        ax.plot(ks, test["random_at_k"], "^:", color="C2", label="random k")
        ax.axhline(test["oracle_all"], color="grey", lw=1, label="oracle (all candidates)")
        ax.set_title(f"{key} (n={test['n']} {_test_label(metrics['datasets'][key])})")
        ax.set_xlabel("portfolio size k")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"best-of-k {metrics['score'].replace('_', ' ')}")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    if "intervals" in metrics:
        handles.append(Patch(color="grey", alpha=0.25, lw=0))
        labels.append(f"shaded: {round(100 * metrics['intervals']['confidence'])}% bootstrap interval")
    axes[0][-1].legend(handles, labels, loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_winners(
    utility_matrices: dict[str, np.ndarray], utility_index: UtilityIndex, portfolios: Portfolios
) -> Figure:
    """Heatmap: share of each question type's test questions won by each member of the ``all`` portfolio."""
    members = portfolios.members(ALL)
    U = stacked(utility_matrices, utility_index, "test")[ALL]
    types = _types(utility_index, "test")[ALL]
    shares = win_shares(U, members, types) if len(U) else {}
    rows = list(shares)
    fig, axes = subplots(figsize=(2.0 + 1.3 * len(members), 1.2 + 0.45 * max(len(rows), 1)))
    ax = axes[0][0]
    data = np.array([shares[r] for r in rows]) if rows else np.zeros((1, len(members)))
    image = ax.imshow(data, cmap="viridis", vmin=0, vmax=max(float(data.max()), 1e-6), aspect="auto")
    for (i, j), value in np.ndenumerate(data):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="w" if value < data.max() / 2 else "k", fontsize=8)
    names = [portfolios.candidates[i] for i in members]
    ax.set_xticks(range(len(members)), [n.replace(",", ",\n", 2) for n in names], fontsize=6, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows or ["(no test questions)"], fontsize=8)
    ax.set_title("share of test questions each portfolio member wins, by question type")
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    return fig


def best_of_k_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """The ``all`` portfolio's test best-of-k curves: rows ``(k, greedy, top_by_average, random, single_best, oracle)``.

    The data behind ``best_of_k.png``'s ``all`` panel, in a form ``dvc plots show`` renders and
    ``dvc plots diff`` compares (per-dataset curves are in ``portfolio_metrics.json``).
    """
    test = metrics["datasets"][ALL]["test"]
    table = pd.DataFrame({
        "k": np.arange(1, len(test["greedy_at_k"]) + 1), "greedy": test["greedy_at_k"],
        "top_by_average": test["top_by_average_at_k"], "random": test["random_at_k"],
        "single_best": test["single_best"], "oracle": test["oracle_all"],
    })
    if "greedy_minus_top_by_average_at_k" in test:  # the difference and its interval, per k
        diff = test["greedy_minus_top_by_average_at_k"]
        low, high = _band(diff)
        table = table.assign(greedy_minus_top_by_average=[iv["estimate"] for iv in diff],
                             greedy_minus_top_by_average_low=low, greedy_minus_top_by_average_high=high)
    return table


def study_sample_complexity(
    utility_matrices: dict[str, np.ndarray], utility_index: UtilityIndex, portfolios: Portfolios,
    params: dict[str, Any],
) -> dict[str, Any]:
    """Test best-of-k of greedy portfolios chosen on N drawn train questions, per dataset and ``all``.

    For each N of ``sample_complexity.sizes`` (capped at the train questions) and each of ``seeds``
    draws: N train rows uniformly without replacement, greedy to the portfolio's k, best-of-k on
    every test row. Beside each N, the epsilon DESIGN.md's sample-size bound gives there.

    Returns:
        ``{"score", "k", "delta", "interval", "datasets": {key: SampleComplexity.to_dict() +
        "test_mean_by_n"}}``; keys without test questions are left out.
    """
    p = EvaluationParams(**params).sample_complexity
    train = stacked(utility_matrices, utility_index, "train")
    test = stacked(utility_matrices, utility_index, "test")
    k = portfolios.k
    out: dict[str, Any] = {
        "score": utility_index.score, "k": k, "delta": p.delta,
        "interval": "2.5th-97.5th percentile of the seeds' test values (the range one draw of N lands in)",
        "datasets": {},
    }
    for key, U_train in train.items():
        if not len(test[key]) or not len(U_train):
            continue
        study = sample_complexity(U_train, test[key], k, sizes=p.sizes, n_seeds=p.seeds,
                                  seed=key_seed(p.seed, key), delta=p.delta).to_dict(0.95)
        study["test_mean_by_n"] = {str(row["n"]): row["test_mean"] for row in study["sizes"]}  # scalars for dvc
        out["datasets"][key] = study
    _log_sample_complexity(out)
    return out


def _log_sample_complexity(study: dict[str, Any]) -> None:
    lines = [f"sample complexity: test best-of-{study['k']} {study['score']} of greedy on N train questions "
             f"(mean [2.5%, 97.5%] over seeds; eps: the bound at delta={study['delta']})"]
    for key, entry in study["datasets"].items():
        cells = "  ".join(f"N={r['n']}: {r['test_mean']:.3f} [{r['test_low']:.3f}, {r['test_high']:.3f}] eps={r['epsilon']:.2f}"
                          for r in entry["sizes"])
        lines.append(f"{key:<18} {cells}  | full train {entry['full_train']:.3f}, oracle {entry['oracle']:.3f}")
    logger.info("\n".join(lines))


def _readable_ticks(n: np.ndarray, min_gap: float = 0.08) -> list[int]:
    """Indices of ``n`` (ascending) to label on a log axis: the last always, others at least ``min_gap`` of
    the axis' log span from the next labelled one (so labels do not overlap)."""
    span = max(float(np.log(n[-1] / n[0])), 1e-9)
    keep = [len(n) - 1]
    for i in range(len(n) - 2, -1, -1):
        if np.log(n[keep[-1]] / n[i]) / span >= min_gap:
            keep.append(i)
    return sorted(keep)


def plot_sample_complexity(study: dict[str, Any]) -> Figure:
    """One panel per dataset and ``all``: test best-of-k vs N (log x) with the seeds' band.

    Each tick names N and the epsilon DESIGN.md's sample-size bound gives there; the full-train
    greedy value and the oracle are horizontal lines.
    """
    keys = list(study["datasets"])
    fig, axes = subplots(1, max(len(keys), 1), figsize=(4.2 * max(len(keys), 1), 4.0))
    for ax, key in zip(axes[0], keys, strict=False):
        entry = study["datasets"][key]
        rows = entry["sizes"]
        n = np.array([r["n"] for r in rows])
        ax.fill_between(n, [r["test_low"] for r in rows], [r["test_high"] for r in rows], color="C0", alpha=0.2, lw=0,
                        label="central 95% of seeds")
        ax.plot(n, [r["test_mean"] for r in rows], "o-", color="C0", label=f"greedy on N drawn (mean of {entry['n_seeds']} seeds)")
        ax.axhline(entry["full_train"], color="C1", ls="--", lw=1.2, label="greedy on all train questions")
        ax.axhline(entry["oracle"], color="grey", lw=1, label="oracle (all candidates)")
        ax.set_xscale("log")
        shown = _readable_ticks(n)
        ax.set_xticks(n[shown], [f"{n[i]}\nε={rows[i]['epsilon']:.2f}" for i in shown], fontsize=7)
        ax.minorticks_off()
        ax.set_title(f"{key} ({entry['n_train']} train, k={entry['k']}, m={entry['m']})", fontsize=10)
        ax.set_xlabel("train questions N (log scale), the bound's ε at N", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"test best-of-{study['k']} {study['score'].replace('_', ' ')}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(f"How many labelled questions? ε: the sample-size bound's accuracy at N (δ={study['delta']})",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
