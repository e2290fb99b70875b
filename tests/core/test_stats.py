"""The shared bootstrap intervals: coverage, width, pairing, degenerate inputs and determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ragfolio.core.stats import Interval, mean_interval, mean_intervals, paired_difference, paired_differences


def correlated_pair(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two systems' 0/1 scores on n questions: b copies a on 80% of questions, else a coin.

    E[a] = 0.6, E[b] = 0.8 * 0.6 + 0.2 * 0.5 = 0.58, so E[a - b] = 0.02.
    """
    a = (rng.random(n) < 0.6).astype(float)
    copy = rng.random(n) < 0.8
    b = np.where(copy, a, (rng.random(n) < 0.5).astype(float))
    return a, b


def test_the_paired_interval_covers_the_true_difference_in_most_trials() -> None:
    covered = 0
    for trial in range(50):
        a, b = correlated_pair(300, np.random.default_rng(trial))
        interval = paired_difference(a, b, n_resamples=1000, seed=trial)
        covered += interval.low <= 0.02 <= interval.high
        assert interval.low <= interval.estimate <= interval.high
        assert interval.estimate == pytest.approx(float(np.mean(a - b)))
    assert 43 <= covered <= 50  # about 95% of 50; below 43 has probability < 0.5% for a 95% interval


def test_the_interval_narrows_like_one_over_root_n() -> None:
    def width(n: int) -> float:
        widths = []
        for trial in range(5):
            x = np.random.default_rng(trial).random(n)
            iv = mean_interval(x, n_resamples=1000, seed=trial)
            widths.append(iv.high - iv.low)
        return float(np.mean(widths))

    small, large = width(50), width(800)
    assert large < 0.4 * small  # sqrt(50 / 800) = 0.25
    assert 2 * 1.96 * math.sqrt(1 / 12 / 800) == pytest.approx(large, rel=0.2)  # uniform: sd = sqrt(1/12)


def test_pairing_matters_when_the_systems_are_correlated() -> None:
    a, b = correlated_pair(400, np.random.default_rng(0))
    paired = paired_difference(a, b, seed=0)
    unpaired = stats.bootstrap((a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis), paired=False,
                               n_resamples=2000, method="percentile", rng=np.random.default_rng(0))
    unpaired_width = unpaired.confidence_interval.high - unpaired.confidence_interval.low
    assert paired.high - paired.low < 0.6 * unpaired_width


def test_constant_input_gives_a_point_interval_and_one_value_no_interval() -> None:
    assert mean_interval([0.5] * 10) == Interval(0.5, 0.5, 0.5, 10)
    a = np.array([0.0, 0.5, 1.0, 1.0])
    assert paired_difference(a, a) == Interval(0.0, 0.0, 0.0, 4)
    one = mean_interval([0.25])
    assert one.estimate == 0.25 and math.isnan(one.low) and math.isnan(one.high) and one.n == 1
    assert one.to_dict() == {"estimate": 0.25, "low": None, "high": None, "n": 1}
    with pytest.raises(ValueError, match="n=0"):
        mean_interval([])


def test_columns_share_one_resampling() -> None:
    x = np.random.default_rng(3).random(60)
    twice, same, flat = mean_intervals(np.stack([x, 2 * x, np.full(60, 0.3)], axis=1), seed=5)
    alone = mean_interval(x, seed=5)
    # Resampled jointly, the doubled column's ends are exactly twice the first's.
    assert (same.low, same.high) == pytest.approx((2 * twice.low, 2 * twice.high))
    assert (twice.low, twice.high) == pytest.approx((alone.low, alone.high))
    assert flat == Interval(pytest.approx(0.3), pytest.approx(0.3), pytest.approx(0.3), 60)
    columns = paired_differences(np.stack([x, x + 0.1], axis=1), x)
    assert columns[0] == Interval(0.0, 0.0, 0.0, 60) and columns[1].estimate == pytest.approx(0.1)


def test_a_seed_repeats_the_interval_and_another_seed_moves_it() -> None:
    x = np.random.default_rng(1).random(100)
    assert mean_interval(x, seed=7) == mean_interval(x, seed=7)
    assert mean_interval(x, seed=7) != mean_interval(x, seed=8)
    wider = mean_interval(x, confidence=0.99, seed=7)
    narrower = mean_interval(x, confidence=0.8, seed=7)
    assert wider.low < narrower.low and wider.high > narrower.high


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: paired_difference([1.0, 2.0], [1.0]), "paired"),
        (lambda: mean_interval([1.0, float("nan")]), "NaN"),
        (lambda: mean_interval([1.0, 2.0], confidence=1.0), "confidence=1.0"),
        (lambda: mean_intervals(np.ones(3)), "2-D"),
        (lambda: paired_differences(np.ones((3, 2)), np.ones((3, 3))), "paired row by row"),
    ],
)
def test_bad_input_fails_naming_it(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_one_way_to_write_an_interval() -> None:
    from ragfolio.core.stats import Interval, interval_text

    x = Interval(0.0221, -0.0284, 0.0712, 42)
    assert interval_text(x) == "+0.022 [-0.028, +0.071]" == str(x)
    assert interval_text(x.to_dict(), with_n=True) == "+0.022 [-0.028, +0.071] on 42 questions"
    assert Interval.from_dict(x.to_dict()) == x
    assert interval_text(Interval(0.5, float("nan"), float("nan"), 1).to_dict()) == "+0.500 [undefined]"
    assert interval_text(None) == interval_text({}) == "-"
