"""Bootstrap confidence intervals for means and paired differences of per-question scores.

Every report compares systems on the same questions, so a difference is bootstrapped **paired**:
the per-question differences ``d[q] = a[q] - b[q]`` are resampled (with replacement, rows at
random) and the interval is taken on the mean of ``d``. Pairing removes the between-question
variance the two systems share, which is most of it when they agree on easy and hard questions;
an unpaired interval on ``mean(a) - mean(b)`` would be much wider.

The resampling is :func:`scipy.stats.bootstrap` with the **percentile** method: BCa needs a
jackknife that degenerates (``nan`` and a warning) on the constant or heavily tied columns that
utilities on a coarse grid (0, 1/2, 1) often give, and for means of bounded scores over tens of
questions or more the percentile interval covers about as well. Columns of a matrix are resampled
with one shared draw of rows, so the intervals of one report come from the same resamples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

N_RESAMPLES = 2000
BATCH = 200  # resamples per vectorised call: memory is O(batch * n * columns)


@dataclass(frozen=True)
class Interval:
    """A mean (or mean difference) with its two-sided bootstrap confidence interval.

    Attributes:
        estimate: The sample mean.
        low: Lower end of the interval (``nan`` when ``n == 1``: one value says nothing of spread).
        high: Upper end (``nan`` when ``n == 1``).
        n: Number of values (questions) the mean is over.
    """

    estimate: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        """``{"estimate", "low", "high", "n"}`` for JSON; an undefined end is ``None``, not NaN."""
        def clean(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {"estimate": self.estimate, "low": clean(self.low), "high": clean(self.high), "n": self.n}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Interval:
        """The interval :meth:`to_dict` wrote (an undefined end back to ``nan``)."""
        def end(x: float | None) -> float:
            return math.nan if x is None else float(x)

        return cls(float(data["estimate"]), end(data.get("low")), end(data.get("high")), int(data.get("n", 0)))

    def __str__(self) -> str:
        """``+0.022 [-0.030, +0.070]``; ``+0.022 [undefined]`` when one value gives no spread."""
        if math.isnan(self.low) or math.isnan(self.high):
            return f"{self.estimate:+.3f} [undefined]"
        return f"{self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def interval_text(x: Interval | Mapping[str, Any] | None, *, with_n: bool = False) -> str:
    """An interval, or its :meth:`Interval.to_dict` as reports hold it, as text (:meth:`Interval.__str__`,
    then `` on 42 questions`` with ``with_n``); ``-`` when there is none. The one way reports, logs
    and reasons write an interval."""
    if not x:
        return "-"
    interval = x if isinstance(x, Interval) else Interval.from_dict(x)
    return f"{interval} on {interval.n} questions" if with_n else str(interval)


def mean_intervals(
    X: npt.ArrayLike, *, confidence: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> list[Interval]:
    """Percentile-bootstrap interval of each column's mean, rows resampled jointly.

    Args:
        X: ``(n, c)`` values, one row per question.
        confidence: Two-sided confidence level in ``(0, 1)``.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling; the same seed gives the same intervals.

    Returns:
        ``c`` intervals. A constant column gets ``low = high = estimate``; with ``n == 1`` the ends are
        ``nan``.

    Raises:
        ValueError: ``X`` is not 2-D, has no rows, holds a non-finite value, or a setting is out of range.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, c), got shape {X.shape}")
    n, c = X.shape
    if n == 0:
        raise ValueError("an interval needs at least one value, got n=0")
    if not np.isfinite(X).all():
        raise ValueError("X holds a NaN or infinite value")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must be in (0, 1)")
    if n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples} must be >= 1")
    means = X.mean(axis=0)
    low, high = np.full(c, np.nan), np.full(c, np.nan)
    if n == 1:  # one value: no spread to resample
        return [Interval(float(m), math.nan, math.nan, 1) for m in means]
    constant = np.ptp(X, axis=0) == 0
    low[constant] = high[constant] = means[constant]
    varying = ~constant
    if varying.any():
        result = stats.bootstrap(
            (X[:, varying],), np.mean, axis=0, vectorized=True, n_resamples=n_resamples, batch=BATCH,
            confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed),
        )
        low[varying] = result.confidence_interval.low
        high[varying] = result.confidence_interval.high
    return [Interval(float(m), float(lo), float(hi), n) for m, lo, hi in zip(means, low, high, strict=True)]


def mean_interval(
    x: npt.ArrayLike, *, confidence: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Interval:
    """Percentile-bootstrap interval of the mean of ``x`` (``(n,)`` values); see :func:`mean_intervals`."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D (n,), got shape {x.shape}")
    return mean_intervals(x[:, None], confidence=confidence, n_resamples=n_resamples, seed=seed)[0]


def paired_difference(
    a: npt.ArrayLike, b: npt.ArrayLike, *, confidence: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Interval:
    """Paired-bootstrap interval of ``mean(a - b)``: ``a[q]`` and ``b[q]`` are two systems' scores on question q.

    Args:
        a: ``(n,)`` scores of the first system.
        b: ``(n,)`` scores of the second, on the same questions in the same order.
        confidence: Two-sided confidence level.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        The interval of the mean per-question difference ``a - b`` (positive: ``a`` is better).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"a and b must be 1-D of one length (paired), got shapes {a.shape} and {b.shape}")
    return mean_interval(a - b, confidence=confidence, n_resamples=n_resamples, seed=seed)


def paired_differences(
    A: npt.ArrayLike, B: npt.ArrayLike, *, confidence: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> list[Interval]:
    """Column by column :func:`paired_difference` of ``(n, c)`` ``A`` and ``B`` (one shared resampling).

    ``B`` may be ``(n,)``, one baseline for every column of ``A``.
    """
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    if B.ndim == 1:
        B = B[:, None]
    if A.ndim != 2 or B.ndim != 2 or len(A) != len(B) or B.shape[1] not in (1, A.shape[1]):
        raise ValueError(f"A (n, c) and B (n, c) or (n,) must be paired row by row, got {A.shape} and {B.shape}")
    return mean_intervals(A - B, confidence=confidence, n_resamples=n_resamples, seed=seed)
