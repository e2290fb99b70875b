"""Evaluate candidate orders on held-out rows of a utility matrix: best-of-k curves and win shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.portfolio import best_of_k_curve, oracle_value

Matrix = npt.NDArray[np.floating[Any]]


def split_report(
    U: Matrix,
    greedy: Sequence[int],
    top_by_average: Sequence[int],
    random_orders: Sequence[Sequence[int]],
) -> dict[str, Any]:
    """Best-of-k curves of the three selection rules on ``U``'s rows, with the reference values.

    Args:
        U: ``(n_questions, m)`` utilities of the rows to evaluate on (train or test).
        greedy: Candidate indices in greedy pick order, chosen on train rows.
        top_by_average: Candidate indices by decreasing train mean.
        random_orders: Seeded random candidate orders; ``random_at_k`` is their mean.

    Returns:
        ``{"n", "greedy_at_k", "top_by_average_at_k", "random_at_k", "single_best", "oracle_all"}``;
        ``*_at_k[i]`` is the value with ``i + 1`` members. ``single_best`` is the candidate with the
        best train mean, evaluated here; ``oracle_all`` the best of every candidate per question.
    """
    U = np.asarray(U, dtype=np.float32)
    if len(U) == 0:
        return {"n": 0}
    random_curves = np.array([best_of_k_curve(U, order) for order in random_orders])
    return {
        "n": int(len(U)),
        "greedy_at_k": [float(v) for v in best_of_k_curve(U, greedy)],
        "top_by_average_at_k": [float(v) for v in best_of_k_curve(U, top_by_average)],
        "random_at_k": [float(v) for v in random_curves.mean(axis=0)],
        "single_best": float(U[:, top_by_average[0]].mean()),
        "oracle_all": float(oracle_value(U)),
    }


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
