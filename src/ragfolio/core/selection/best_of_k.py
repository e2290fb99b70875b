"""Evaluate candidate orders on held-out rows of a utility matrix: best-of-k curves and win shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.selection.baseline_portfolios import best_of_k_curve, oracle_value
from ragfolio.core.stats import N_RESAMPLES, mean_intervals

Matrix = npt.NDArray[np.floating[Any]]


def split_report(
    U: Matrix,
    greedy: Sequence[int],
    top_by_average: Sequence[int],
    random_orders: Sequence[Sequence[int]],
    *,
    confidence: float | None = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Best-of-k curves of the three selection rules on ``U``'s rows, with the reference values.

    Args:
        U: ``(n_questions, m)`` utilities of the rows to evaluate on (train or test).
        greedy: Candidate indices in greedy pick order, chosen on train rows.
        top_by_average: Candidate indices by decreasing train mean.
        random_orders: Seeded random candidate orders; ``random_at_k`` is their mean.
        confidence: Level of the bootstrap intervals; ``None`` leaves them out.
        n_resamples: Bootstrap resamples (:mod:`ragfolio.core.stats`).
        seed: Seed of the bootstrap.

    Returns:
        ``{"n", "greedy_at_k", "top_by_average_at_k", "random_at_k", "single_best", "oracle_all"}``;
        ``*_at_k[i]`` is the value with ``i + 1`` members. ``single_best`` is the candidate with the
        best train mean, evaluated here; ``oracle_all`` the best of every candidate per question.
        With ``confidence``, also lists of intervals (``{"estimate", "low", "high", "n"}`` per k,
        see :func:`comparison_intervals`).
    """
    U = np.asarray(U, dtype=np.float32)
    if len(U) == 0:
        return {"n": 0}
    random_curves = np.array([best_of_k_curve(U, order) for order in random_orders])
    report: dict[str, Any] = {
        "n": int(len(U)),
        "greedy_at_k": [float(v) for v in best_of_k_curve(U, greedy)],
        "top_by_average_at_k": [float(v) for v in best_of_k_curve(U, top_by_average)],
        "random_at_k": [float(v) for v in random_curves.mean(axis=0)],
        "single_best": float(U[:, top_by_average[0]].mean()),
        "oracle_all": float(oracle_value(U)),
    }
    if confidence is not None:
        report.update(comparison_intervals(
            U, greedy, top_by_average, confidence=confidence, n_resamples=n_resamples, seed=seed
        ))
    return report


def per_question_best_of_k(U: Matrix, order: Sequence[int]) -> npt.NDArray[np.float64]:
    """``(n_questions, len(order))``: entry ``[q, i]`` is question q's best utility among ``order[:i + 1]``."""
    return np.maximum.accumulate(np.asarray(U, dtype=np.float64)[:, list(order)], axis=1)


def comparison_intervals(
    U: Matrix,
    greedy: Sequence[int],
    top_by_average: Sequence[int],
    *,
    confidence: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> dict[str, list[dict[str, Any]]]:
    """Paired-bootstrap intervals of the report's comparisons at each k, from one shared resampling.

    With ``g[q, i]``, ``t[q, i]`` question q's best-of-(i + 1) under greedy and top-by-average and
    ``s[q]`` its single-best utility, the per-question differences ``g - t`` and ``g - s`` are
    bootstrapped paired (:func:`ragfolio.core.stats.paired_differences`), and the curves ``g`` and
    ``t`` themselves for the plot's bands.

    Returns:
        ``{"greedy_minus_top_by_average_at_k", "greedy_minus_single_best_at_k",
        "greedy_interval_at_k", "top_by_average_interval_at_k"}``, each a list (entry ``i``: ``i + 1``
        members) of ``{"estimate", "low", "high", "n"}``.
    """
    if len(greedy) != len(top_by_average):
        raise ValueError(f"greedy ({len(greedy)}) and top_by_average ({len(top_by_average)}) orders must be one length")
    g = per_question_best_of_k(U, greedy)
    t = per_question_best_of_k(U, top_by_average)
    s = np.asarray(U, dtype=np.float64)[:, top_by_average[0]]
    k = g.shape[1]
    columns = np.concatenate([g - t, g - s[:, None], g, t], axis=1)  # one resampling for all four
    found = mean_intervals(columns, confidence=confidence, n_resamples=n_resamples, seed=seed)
    names = ("greedy_minus_top_by_average_at_k", "greedy_minus_single_best_at_k",
             "greedy_interval_at_k", "top_by_average_interval_at_k")
    return {name: [iv.to_dict() for iv in found[j * k:(j + 1) * k]] for j, name in enumerate(names)}


def win_shares(U: Matrix, members: Sequence[int], groups: Sequence[str]) -> dict[str, list[float]]:
    """For each group of questions, the share each portfolio member wins.

    A member wins a question when it scores the portfolio's best there; tied winners share the
    question equally, and a question no member scores above 0 on counts for nobody.

    Args:
        U: ``(n_questions, m)`` utilities.
        members: The portfolio's candidate indices (columns of ``U``).
        groups: ``n_questions`` group labels (e.g. question types).

    Returns:
        ``{group: [share of member 0, ...]}`` with shares in [0, 1] summing to at most 1.
    """
    sub = np.asarray(U, dtype=np.float32)[:, list(members)]
    best = sub.max(axis=1, keepdims=True)
    winners = (sub == best) & (best > 0)
    credit = winners / np.maximum(winners.sum(axis=1, keepdims=True), 1)
    labels = np.asarray(groups)
    return {g: [float(x) for x in credit[labels == g].mean(axis=0)] for g in sorted(set(groups))}
