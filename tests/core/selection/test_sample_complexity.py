"""Sampling queries, the sample-size bound and its inverse, and the empirical sample-complexity curve."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragfolio.core.scoring.utility_index import UtilityIndex
from ragfolio.core.selection.baseline_portfolios import portfolio_value
from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.selection.query_sample import QuerySample
from ragfolio.core.selection.sample_complexity import (
    draw_rows,
    epsilon_at,
    key_seed,
    required_sample_size,
    resolve_sizes,
    sample_complexity,
    sample_queries,
)


def test_required_sample_size_by_hand() -> None:
    # two-sided: ln(2 * 10**3 / 0.01) / (2 * 0.1**2) = ln(2e5) / 0.02 = 610.3...
    assert required_sample_size(m=10, k=3, epsilon=0.1, delta=0.01) == 611
    # (5 ln 360 + ln(2 / 0.05)) / (2 * 0.05**2) = (29.430 + 3.689) / 0.005 = 6623.9...
    assert required_sample_size(360, 5, 0.05, 0.05) == 6624
    with pytest.raises(ValueError, match="delta=1.5"):
        required_sample_size(10, 3, 0.1, 1.5)
    with pytest.raises(ValueError, match="epsilon=0"):
        required_sample_size(10, 3, 0, 0.1)
    with pytest.raises(ValueError, match="k=11"):
        required_sample_size(10, 11, 0.1, 0.1)


def test_epsilon_inverts_the_bound_and_falls_with_n() -> None:
    assert epsilon_at(611, 10, 3, 0.01) == pytest.approx(0.1, rel=1e-3)
    sizes = [25, 50, 100, 400, 1600]
    eps = [epsilon_at(n, 215, 5) for n in sizes]
    assert all(a > b for a, b in zip(eps, eps[1:], strict=False))
    assert eps[0] / eps[-1] == pytest.approx(8.0)  # 1 / sqrt(n): 64 times the questions, an eighth of epsilon
    for n in sizes:
        assert required_sample_size(215, 5, epsilon_at(n, 215, 5) * (1 + 1e-9), 0.05) == n
    with pytest.raises(ValueError, match="n=0"):
        epsilon_at(0, 10, 3)


def test_draws_are_uniform_nested_seeded_and_all_means_every_row() -> None:
    assert draw_rows(7, None, 0).tolist() == list(range(7)) == draw_rows(7, 50, 0).tolist()
    small, large = draw_rows(100, 10, [1, 2]), draw_rows(100, 40, [1, 2])
    assert len(set(small.tolist())) == 10 and small.tolist() == sorted(small.tolist())
    assert set(small.tolist()) <= set(large.tolist())  # one seed: nested samples
    assert draw_rows(100, 10, [1, 3]).tolist() != small.tolist()
    counts = np.bincount(np.concatenate([draw_rows(20, 5, s) for s in range(4000)]), minlength=20)
    assert counts.min() > 0.9 * 1000 and counts.max() < 1.1 * 1000  # each row in 5/20 of 4000 draws
    with pytest.raises(ValueError, match="n=0"):
        draw_rows(10, 0, 0)


def tiny_index() -> UtilityIndex:
    return UtilityIndex.from_dict({
        "score": "support_recall", "num_docs": 4, "candidates": ["c0"], "families": ["bm25"], "corpus": {},
        "datasets": {
            "a": {"ids": [f"a{i}" for i in range(6)], "split": ["train", "test"] * 3, "type": ["x"] * 6},
            "b": {"ids": [f"b{i}" for i in range(5)], "split": ["train"] * 4 + ["test"], "type": ["y"] * 5},
        },
    })


def test_sample_queries_draws_per_key_and_records_the_questions() -> None:
    sample = sample_queries(tiny_index(), 2, seed=3)
    assert sample.n_queries == 2 and set(sample.samples) == {"a", "b", "all"}
    for key, n_train in (("a", 3), ("b", 4), ("all", 7)):
        drawn = sample.draw(key)
        assert drawn.n_train == n_train and drawn.n == 2 == len(drawn.rows) == len(set(drawn.rows))
        assert drawn.rows == draw_rows(n_train, 2, key_seed(3, key)).tolist()
    train_ids = {"a": ["a/a0", "a/a2", "a/a4"], "b": ["b/b0", "b/b1", "b/b2", "b/b3"]}
    train_ids["all"] = train_ids["a"] + train_ids["b"]
    for key, drawn in sample.samples.items():
        assert drawn.ids == [train_ids[key][i] for i in drawn.rows]
    everything = sample_queries(tiny_index(), None, seed=3)
    assert everything.draw("all").ids == train_ids["all"] and everything.draw("b").n == 4


def test_the_query_sample_is_a_record_that_reads_back_and_names_a_bad_key() -> None:
    sample = sample_queries(tiny_index(), 2, seed=3)
    assert QuerySample.from_dict(json.loads(json.dumps(sample.to_dict()))) == sample
    broken = sample.to_dict()
    broken["samples"]["a"]["row"] = broken["samples"]["a"].pop("rows")
    with pytest.raises(ValueError, match=r"unknown keys \['row'\], missing keys \['rows'\]"):
        QuerySample.from_dict(broken)
    with pytest.raises(ValueError, match="no draw for 'c'"):
        sample.draw("c")


def test_sizes_are_capped_at_the_train_questions() -> None:
    assert resolve_sizes([25, 50, 100, "all"], 60) == [25, 50, 60]
    assert resolve_sizes([800, "all"], 60) == [60]
    with pytest.raises(ValueError, match="'most'"):
        resolve_sizes(["most"], 60)


def structured(n: int, m: int = 30, seed: int = 0) -> np.ndarray:
    """Utilities on the {0, .25, ..., 1} grid with column-specific strengths by question cluster."""
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, 6, size=n)
    strength = rng.random((6, m)) ** 3
    p = strength[cluster]
    return (np.round(4 * np.clip(p + 0.25 * rng.standard_normal((n, m)), 0, 1)) / 4).astype(np.float32)


def test_study_on_all_rows_reproduces_full_train_greedy_and_small_draws_vary() -> None:
    U_train, U_test = structured(300), structured(200, seed=1)
    study = sample_complexity(U_train, U_test, 3, sizes=[10, 40, "all"], n_seeds=6, seed=key_seed(0, "x"))
    assert study.sizes == [10, 40, 300]
    full = portfolio_value(U_test, select_greedy(U_train, 3).indices)
    assert study.full_train == full and (study.test_values[-1] == full).all()
    assert len(set(study.test_values[0].tolist())) > 1  # different seeds draw different questions
    assert study.oracle == pytest.approx(portfolio_value(U_test, None))
    assert study.oracle >= study.test_values.max()
    # each draw's portfolio is greedy's on exactly the drawn rows
    rows = draw_rows(300, 10, [*key_seed(0, "x"), 4])
    assert study.test_values[0, 4] == portfolio_value(U_test, select_greedy(U_train[rows], 3).indices)
    assert study.sample_values[0, 4] == pytest.approx(select_greedy(U_train[rows], 3).value)
    optimism = (study.sample_values - study.test_values).mean(axis=1)
    assert optimism[0] > optimism[-1]  # few questions: greedy fits their noise
    assert study.epsilon == [epsilon_at(n, 30, 3) for n in (10, 40, 300)]
    again = sample_complexity(U_train, U_test, 3, sizes=[10, 40, "all"], n_seeds=6, seed=key_seed(0, "x"))
    assert (again.test_values == study.test_values).all()


def test_study_summary_reports_mean_and_the_seeds_range() -> None:
    study = sample_complexity(structured(120), structured(60, seed=1), 2, sizes=[10, "all"], n_seeds=10)
    summary = study.to_dict()
    small, full = summary["sizes"]
    assert summary["n_seeds"] == 10 and summary["k"] == 2 and full["n"] == 120
    assert small["test_low"] <= small["test_mean"] <= small["test_high"]
    assert small["test_mean"] == pytest.approx(np.mean(small["test_values"]))
    assert small["test_low"] == pytest.approx(np.percentile(small["test_values"], 2.5))
    assert full["test_low"] == full["test_high"] == pytest.approx(summary["full_train"])
    assert full["test_mean"] == pytest.approx(summary["full_train"]) and full["test_sd"] == pytest.approx(0, abs=1e-12)
    with pytest.raises(ValueError, match="one column count"):
        sample_complexity(structured(10), structured(10, m=5), 2)
