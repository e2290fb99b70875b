"""Holm's step-down over the do-no-harm tests: known answers, and intervals that agree with the decisions."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.routing.judging.multiplicity import bootstrap_means, holm, holm_intervals


def test_holm_by_hand_stops_at_the_first_p_value_above_its_level() -> None:
    # sorted 0.01, 0.03, 0.04 against 0.05/3, 0.05/2, 0.05/1: 0.01 < 0.0167 passes, 0.03 >= 0.025 stops
    found = holm([0.01, 0.04, 0.03], alpha=0.05)
    assert found.passed.tolist() == [True, False, False]
    assert found.adjusted == pytest.approx([0.03, 0.06, 0.06])  # min(1, max_{j<=r} (m-j+1) p_(j))
    assert found.levels == pytest.approx([0.05 / 3, 0.05 / 1, 0.05 / 2])


def test_holm_by_hand_passes_more_than_bonferroni_and_less_than_no_correction() -> None:
    # sorted 0.01, 0.02, 0.04 against 0.0167, 0.025, 0.05: every step passes; Bonferroni (0.0167 each) passes one
    p = [0.04, 0.01, 0.02]
    found = holm(p, alpha=0.05)
    assert found.passed.tolist() == [True, True, True]
    assert found.adjusted == pytest.approx([0.04, 0.03, 0.04])
    assert (np.asarray(p) * 3 < 0.05).tolist() == [False, True, False]  # Bonferroni
    assert holm([0.03, 0.03], alpha=0.05).passed.tolist() == [False, False]  # each passes alone, not together
    assert holm([0.03], alpha=0.05).passed.tolist() == [True]  # one test: Holm is no correction
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        holm([0.5, 1.5])


def test_each_interval_is_at_its_holm_level_and_above_zero_exactly_where_its_step_passes() -> None:
    rng = np.random.default_rng(1)
    D = rng.normal(size=(80, 6)) + np.array([0.45, 0.3, 0.25, 0.1, 0.0, -0.2])  # one clear, two borderline
    tests = holm_intervals(D, alpha=0.025, n_resamples=4000, seed=0)
    assert [t["m"] for t in tests] == [6] * 6 and all(t["n"] == 80 for t in tests)
    order = np.argsort([t["p"] for t in tests], kind="stable")
    for rank, i in enumerate(order):  # rank 0 is Bonferroni's level, the last is uncorrected
        assert tests[i]["confidence"] == pytest.approx(1 - 2 * 0.025 / (6 - rank))
        assert (tests[i]["low"] > 0) == (tests[i]["p"] < 0.025 / (6 - rank))  # the interval is the step's test
        if tests[i]["passed"]:
            assert tests[i]["low"] > 0 and tests[i]["p_holm"] < 0.025
    assert tests[0]["passed"] and tests[1]["passed"] and not tests[5]["passed"]
    assert tests[3]["p"] < 0.025 and not tests[3]["passed"]  # would pass alone, not as one of six
    assert [t["passed"] for t in tests] == holm([t["p"] for t in tests], 0.025).passed.tolist()
    assert tests[0]["estimate"] == pytest.approx(D[:, 0].mean())
    # one test alone: the paired 95% two-sided interval, the rule before the correction
    alone = holm_intervals(D[:, [1]], alpha=0.025, n_resamples=4000)[0]
    assert alone["confidence"] == pytest.approx(0.95) and alone["p_holm"] == alone["p"]


def test_the_bootstrap_p_value_is_the_share_of_resampled_means_at_or_below_zero() -> None:
    D = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]])
    means = bootstrap_means(D, n_resamples=500, seed=3)
    assert means.shape == (2, 500) and (means[1] == 0).all()  # a constant column needs no resampling
    assert set(np.round(means[0] * 4).astype(int)) <= {-4, -2, 0, 2, 4}
    tests = holm_intervals(D, n_resamples=500, seed=3)
    assert tests[0]["p"] == pytest.approx((means[0] <= 0).mean())
    assert tests[1] | {"p": 1.0, "passed": False} == tests[1]  # no difference at all: no evidence
