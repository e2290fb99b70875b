"""The portfolio report's curves and the paired intervals of its comparisons."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.selection.best_of_k import comparison_intervals, per_question_best_of_k, split_report


def complementary(n: int = 200, seed: int = 0) -> np.ndarray:
    """Columns: 0 good on the first half, 1 a near copy of 0, 2 good on the second half, 3 noise.

    Means: 0 and 1 about 0.5 each, 2 about 0.45: top-by-average takes 0 then 1 (no gain), greedy 0 then 2.
    """
    rng = np.random.default_rng(seed)
    first = np.arange(n) < n // 2
    U = np.zeros((n, 4), dtype=np.float32)
    U[:, 0] = np.where(first, 1.0, 0.0)
    U[:, 1] = np.where(first, 1.0, 0.0) * (rng.random(n) < 0.99)
    U[:, 2] = np.where(~first, 1.0, 0.0) * (rng.random(n) < 0.9)
    U[:, 3] = rng.random(n) * 0.3
    return U


def test_intervals_match_the_curves_and_separate_greedy_from_top_by_average() -> None:
    U = complementary()
    greedy, top = [0, 2, 3], [0, 1, 2]
    report = split_report(U, greedy, top, [[3, 2, 1]], seed=1)
    diff = report["greedy_minus_top_by_average_at_k"]
    for i in range(3):
        assert diff[i]["estimate"] == pytest.approx(report["greedy_at_k"][i] - report["top_by_average_at_k"][i])
        assert report["greedy_interval_at_k"][i]["estimate"] == pytest.approx(report["greedy_at_k"][i])
        assert report["top_by_average_interval_at_k"][i]["estimate"] == pytest.approx(report["top_by_average_at_k"][i])
        single = report["greedy_minus_single_best_at_k"][i]
        assert single["estimate"] == pytest.approx(report["greedy_at_k"][i] - report["single_best"])
        assert diff[i]["n"] == 200
    assert diff[0] == {"estimate": 0.0, "low": 0.0, "high": 0.0, "n": 200}  # same first pick: no difference at all
    assert diff[1]["low"] > 0.3  # greedy's second pick covers the other half; top-by-average's copies the first
    assert report["greedy_interval_at_k"][1]["low"] <= report["greedy_at_k"][1] <= report["greedy_interval_at_k"][1]["high"]


def test_intervals_are_left_out_on_request_and_seeded() -> None:
    U = complementary(50)
    plain = split_report(U, [0, 2], [0, 1], [[1, 3]], confidence=None)
    assert "greedy_minus_top_by_average_at_k" not in plain and plain["greedy_at_k"]
    assert comparison_intervals(U, [0, 2], [0, 1], seed=3) == comparison_intervals(U, [0, 2], [0, 1], seed=3)
    assert split_report(U[:0], [0], [0], [[0]]) == {"n": 0}


def test_per_question_best_of_k_by_hand() -> None:
    U = np.array([[0.2, 0.9, 0.5], [1.0, 0.0, 0.5]])
    assert per_question_best_of_k(U, [2, 1, 0]).tolist() == [[0.5, 0.9, 0.9], [0.5, 0.5, 1.0]]
