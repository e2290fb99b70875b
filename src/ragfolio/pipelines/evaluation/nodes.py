"""Nodes of ``evaluation``: the portfolio report (JSON), its summary table and its plots."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict

from ragfolio.core.evaluation import split_report, win_shares
from ragfolio.core.utility_index import ALL, split_rows, stacked
from ragfolio.plotting import subplots

logger = logging.getLogger(__name__)


class EvaluationParams(BaseModel):
    """``evaluation`` parameters (conf/base/parameters_evaluation.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    report_k: list[int] = [1, 3, 5]


def _types(utility_index: dict[str, Any], split: str) -> dict[str, list[str]]:
    """Question types of ``split`` rows, per dataset and for ``all`` (prefixed by dataset there)."""
    per = {d: [info["type"][i] for i in split_rows(utility_index, d, split)] for d, info in utility_index["datasets"].items()}
    return {**per, ALL: [f"{d}/{t}" for d, types in per.items() for t in types]}


def evaluate_portfolios(
    utility_matrices: dict[str, np.ndarray],
    utility_index: dict[str, Any],
    portfolios: dict[str, Any],
    candidates: list[dict[str, Any]],
    params: dict[str, Any],
) -> dict[str, Any]:
    """Best-of-k curves of greedy, top-by-average and random-k on train and test, per question type.

    ``corpus`` names the corpus the utilities were scored over (the utility index's: the mode and
    the fingerprint of the union corpus, or per-dataset fingerprints labelled as such).
    """
    p = EvaluationParams(**params)
    report: dict[str, Any] = {
        "score": utility_index["score"],
        "num_docs": utility_index["num_docs"],
        "corpus": utility_index["corpus"],
        "n_candidates": len(candidates),
        "candidates_by_family": dict(Counter(c["family"] for c in candidates)),
        "k": portfolios["k"],
        "datasets": {},
    }
    test_types = _types(utility_index, "test")
    for split in ("train", "test"):
        for key, U in stacked(utility_matrices, utility_index, split).items():
            sel = portfolios["selections"][key]
            entry = report["datasets"].setdefault(key, {
                "n_train": sel["n_train"], "portfolio": sel["portfolio"], "certificate": sel["certificate"],
                "required_sample_size": sel["required_sample_size"],
            })
            entry[f"n_{split}"] = int(len(U))
            orders = (sel["greedy"], sel["top_by_average"], sel["random"])
            entry[split] = split_report(U, *orders)
            if len(U):  # scalars at the portfolio's k: `dvc metrics show/diff` reads scalars only, not lists
                k = portfolios["k"]
                entry[split]["at_portfolio_k"] = {
                    name: entry[split][f"{name}_at_k"][k - 1] for name in ("greedy", "top_by_average", "random")
                }
            if split == "test" and len(U):
                labels = np.asarray(test_types[key])
                entry[split]["by_type"] = {
                    t: split_report(U[labels == t], *orders) for t in sorted(set(test_types[key]))
                }
    _log_summary(report, p.report_k)
    return report


def _log_summary(report: dict[str, Any], report_k: list[int]) -> None:
    """Log the test table: greedy vs top-by-average at each reported k, single best and oracle."""
    head = "".join(f"  greedy@{k} avg@{k}" for k in report_k)
    lines = [f"test {report['score']} ({report['n_candidates']} candidates, {report['num_docs']} passages each)",
             f"{'dataset':<18}{'n':>5}{head}  single  oracle"]
    for key, entry in report["datasets"].items():
        test = entry["test"]
        if not test.get("n"):
            continue
        cells = "".join(
            f"  {test['greedy_at_k'][k - 1]:8.3f} {test['top_by_average_at_k'][k - 1]:5.3f}"
            for k in report_k if k <= len(test["greedy_at_k"])
        )
        lines.append(f"{key:<18}{test['n']:>5}{cells}  {test['single_best']:6.3f}  {test['oracle_all']:6.3f}")
    logger.info("\n".join(lines))


def plot_best_of_k(metrics: dict[str, Any]) -> Figure:
    """One panel per dataset (and ``all``): test best-of-k of greedy, top-by-average, random, oracle."""
    keys = [k for k, e in metrics["datasets"].items() if e["test"].get("n")]
    fig, axes = subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), sharey=True)
    for ax, key in zip(axes[0], keys, strict=True):
        test = metrics["datasets"][key]["test"]
        ks = np.arange(1, len(test["greedy_at_k"]) + 1)
        ax.plot(ks, test["greedy_at_k"], "o-", label="greedy")
        ax.plot(ks, test["top_by_average_at_k"], "s--", label="top-k by average")
        ax.plot(ks, test["random_at_k"], "^:", label="random k")
        ax.axhline(test["oracle_all"], color="grey", lw=1, label="oracle (all candidates)")
        ax.set_title(f"{key} (n={test['n']} test)")
        ax.set_xlabel("portfolio size k")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"best-of-k {metrics['score'].replace('_', ' ')}")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def plot_winners(
    utility_matrices: dict[str, np.ndarray], utility_index: dict[str, Any], portfolios: dict[str, Any]
) -> Figure:
    """Heatmap: share of each question type's test questions won by each member of the ``all`` portfolio."""
    sel = portfolios["selections"][ALL]
    members = sel["greedy"][: portfolios["k"]]
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
    names = [portfolios["candidates"][i] for i in members]
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
    return pd.DataFrame({
        "k": np.arange(1, len(test["greedy_at_k"]) + 1), "greedy": test["greedy_at_k"],
        "top_by_average": test["top_by_average_at_k"], "random": test["random_at_k"],
        "single_best": test["single_best"], "oracle": test["oracle_all"],
    })
