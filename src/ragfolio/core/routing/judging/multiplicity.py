"""Many one-sided tests on the same questions: Holm's step-down, and the interval each test is reported at.

The do-no-harm rule (:mod:`ragfolio.core.routing.judging.choice`) asks, for every servable router
and every l, whether routing helps: ``H0: mean d <= 0`` against ``mean d > 0``, where ``d[q]`` is
question q's recall of the routed union of l members minus the single best member's given
``l * num_docs`` passages. Up to 4 routers x k values of l are tested on the same dev questions, so
a rule that routes wherever one 95% interval clears zero would route somewhere by chance alone.
The ``m`` tests are therefore one family, controlled by **Holm's step-down** at the one-sided
familywise level ``alpha`` (0.025: with one test the rule is the single 95% two-sided interval
above zero it replaces):

* each test's **p-value** is the paired bootstrap's one-sided ``p = #{b: mean*_b <= 0} / B``, the
  share of ``B`` resampled means (questions drawn with replacement, one shared draw for every
  column, :func:`bootstrap_means`) at or below zero;
* sort them, ``p_(1) <= ... <= p_(m)`` (ties in column order); step r compares ``p_(r)`` with the
  level ``a_r = alpha / (m - r + 1)``. Tests ``(1) .. (R)`` **pass**, R the largest r with
  ``p_(j) < a_j`` for every ``j <= r``; the rest do not (a test after the first failure does not
  pass, whatever its own p). Equivalently the **Holm-adjusted p-value**
  ``p~_(r) = min(1, max_{j <= r} (m - j + 1) p_(j))`` is below ``alpha``. The chance that any passed
  test's router does not in fact help at its l is then at most ``alpha``, whichever of them is
  served afterwards (so choosing among the passed ones by their point gain is safe);
* each test's **interval** is the two-sided percentile interval at level ``1 - 2 a_r``, the level
  its step compares it at: ``[Q(a_r), Q(1 - a_r)]`` with ``Q`` the smallest resampled mean whose
  empirical CDF reaches its argument (numpy's ``inverted_cdf``), so that ``Q(a_r) > 0`` exactly when
  ``p < a_r``. A passed test's interval lies above zero; the first-ranked test's level is
  Bonferroni's ``1 - 2 alpha / m``. These intervals are the ones Holm's steps judge, not jointly
  simultaneous ones (intervals simultaneous with Holm's decisions bound a passed effect only at
  zero; Strassburger and Bretz, 2008).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from ragfolio.core.stats import BATCH

ALPHA = 0.025  # one-sided familywise level: one test alone is the 95% two-sided interval above zero
N_RESAMPLES = 10_000  # the first step's level is alpha / m (0.001 for 25 tests): 10 resamples in that tail


@dataclass(frozen=True)
class Holm:
    """Holm's step-down over ``m`` one-sided p-values.

    Attributes:
        p: ``(m,)`` the p-values, in the caller's order.
        adjusted: ``(m,)`` Holm-adjusted p-values ``min(1, max_{j <= r} (m - j + 1) p_(j))``.
        levels: ``(m,)`` the level each p-value's step compares it with, ``alpha / (m - r + 1)``.
        passed: ``(m,)`` whether each test passes (``adjusted < alpha``).
        alpha: The familywise level.
    """

    p: npt.NDArray[np.float64]
    adjusted: npt.NDArray[np.float64]
    levels: npt.NDArray[np.float64]
    passed: npt.NDArray[np.bool_]
    alpha: float


def holm(p_values: npt.ArrayLike, alpha: float = ALPHA) -> Holm:
    """Holm's step-down of ``p_values`` (``(m,)``) at familywise level ``alpha`` (module docstring).

    Raises:
        ValueError: ``p_values`` is not 1-D, holds a value outside ``[0, 1]``, or ``alpha`` is not in ``(0, 1)``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p_values must be 1-D values in [0, 1], got {p!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} must be in (0, 1)")
    m = len(p)
    order = np.argsort(p, kind="stable")
    steps = m - np.arange(m)  # m - r + 1 for r = 1..m
    adjusted, levels = np.empty(m), np.empty(m)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(steps * p[order]))
    levels[order] = alpha / steps
    return Holm(p, adjusted, levels, adjusted < alpha, alpha)


def bootstrap_means(D: npt.ArrayLike, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> npt.NDArray[np.float64]:
    """``(c, n_resamples)``: each column's mean over ``n_resamples`` resamples of the rows of ``D``
    (``(n, c)``, rows drawn with replacement, one shared draw for every column; :func:`scipy.stats.bootstrap`).

    A constant column's resampled means are its value (no resampling needed); with ``n == 1`` every
    resample is the one row.

    Raises:
        ValueError: ``D`` is not 2-D with rows, or holds a non-finite value.
    """
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or not len(D) or not np.isfinite(D).all():
        raise ValueError(f"D must be (n, c) finite values with n >= 1, got shape {D.shape}")
    out = np.repeat(D.mean(axis=0)[:, None], n_resamples, axis=1)
    varying = np.ptp(D, axis=0) > 0
    if varying.any() and len(D) > 1:
        result = stats.bootstrap((D[:, varying],), np.mean, axis=0, vectorized=True, n_resamples=n_resamples,
                                 batch=BATCH, method="percentile", rng=np.random.default_rng(seed))
        out[varying] = result.bootstrap_distribution
    return out


def holm_intervals(D: npt.ArrayLike, *, alpha: float = ALPHA, n_resamples: int = N_RESAMPLES,
                   seed: int = 0) -> list[dict[str, Any]]:
    """Test each column of ``D`` (``(n, m)`` per-question differences, one test a column) for a
    mean above zero, the ``m`` tests one family under Holm's step-down (module docstring).

    Args:
        D: ``(n, m)``: ``D[q, i]`` is question q's difference of test i (positive: routing helps).
        alpha: One-sided familywise level.
        n_resamples: Bootstrap resamples (one shared draw of rows).
        seed: Seed of the resampling.

    Returns:
        Per column, ``{"estimate", "low", "high", "n", "confidence", "p", "p_holm", "passed", "m", "alpha"}``:
        the mean difference, its interval at two-sided ``confidence = 1 - 2 a_r`` (the level of its
        Holm step r), its one-sided bootstrap p-value, Holm-adjusted p-value, whether it passes,
        the family's size and level. Readable by :meth:`ragfolio.core.stats.Interval.from_dict`.
    """
    D = np.asarray(D, dtype=np.float64)
    means = bootstrap_means(D, n_resamples=n_resamples, seed=seed)
    test = holm((means <= 0).mean(axis=1), alpha)
    out = []
    for i in range(D.shape[1]):
        low, high = np.quantile(means[i], [test.levels[i], 1 - test.levels[i]], method="inverted_cdf")
        out.append({"estimate": float(D[:, i].mean()), "low": float(low), "high": float(high), "n": len(D),
                    "confidence": float(1 - 2 * test.levels[i]), "p": float(test.p[i]),
                    "p_holm": float(test.adjusted[i]), "passed": bool(test.passed[i]), "m": D.shape[1],
                    "alpha": alpha})
    return out
