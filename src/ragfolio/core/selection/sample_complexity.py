"""How many training questions a portfolio needs: drawing them, the bound, and the empirical curve.

Algorithm 1 starts by sampling N queries i.i.d. from the query distribution and runs greedy on
their utility matrix. :func:`draw_rows` and :func:`sample_queries` do that draw (uniformly without
replacement from the train questions, seeded). :func:`required_sample_size` is DESIGN.md's bound
(Hoeffding and a union bound over the ``m^k`` portfolios) and :func:`epsilon_at` its inverse: the
accuracy the bound promises at a given N. :func:`sample_complexity` measures what the bound only
bounds: the test best-of-k of the greedy portfolio chosen on N drawn train questions, over seeds.

Draws are nested: one seeded permutation of the train rows per seed, and the sample of size N is
its first N rows (sorted), so with one seed each larger sample contains the smaller ones, and the
curve over N varies only by the questions added (common random numbers).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.scoring.utility_index import ALL, UtilityIndex, split_rows
from ragfolio.core.selection.baseline_portfolios import portfolio_value
from ragfolio.core.selection.gains import check_k
from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.selection.query_sample import Draw, QuerySample

ALL_ROWS = "all"  # a sample size meaning every train question


def required_sample_size(m: int, k: int, epsilon: float, delta: float) -> int:
    """Queries needed so that the sample's ``F`` is within ``epsilon`` for every portfolio.

    With scores in ``[0, 1]``, the two-sided Hoeffding inequality gives
    ``P(|F_hat(S) - F(S)| > eps) <= 2 exp(-2 N eps^2)`` for one portfolio; a union bound over the
    ``m^k`` portfolios of size k makes ``|F_hat(S) - F(S)| <= eps`` hold for all of them at once
    with probability ``>= 1 - delta`` once

        N >= ln(2 m^k / delta) / (2 epsilon^2) = (k ln m + ln(2 / delta)) / (2 epsilon^2),

    which is what greedy's ``F(S_greedy) >= (1 - 1/e) OPT - O(epsilon)`` on the population needs
    (both sides are used: the sample must not overrate the chosen portfolio nor underrate the best).

    Args:
        m: number of candidate retrievers, ``>= 1``.
        k: portfolio size, ``1 <= k <= m``.
        epsilon: accuracy, ``> 0``.
        delta: failure probability in ``(0, 1)``.

    Returns:
        The smallest integer ``N`` meeting the bound.
    """
    _check_bound_args(m, k, delta)
    if not epsilon > 0:
        raise ValueError(f"epsilon={epsilon} must be > 0")
    return math.ceil(_log_terms(m, k, delta) / (2 * epsilon**2))


def epsilon_at(n: int, m: int, k: int, delta: float = 0.05) -> float:
    """The bound's accuracy at ``n`` queries: ``sqrt((k ln m + ln(2 / delta)) / (2 n))``.

    The inverse of :func:`required_sample_size`: with probability ``>= 1 - delta`` every portfolio's
    sample value is within this of its population value (``required_sample_size(m, k,
    epsilon_at(n, m, k, delta), delta) <= n``, up to float rounding).
    """
    _check_bound_args(m, k, delta)
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    return math.sqrt(_log_terms(m, k, delta) / (2 * n))


def _log_terms(m: int, k: int, delta: float) -> float:
    """``ln(2 m^k / delta) = k ln m + ln(2 / delta)``: the two-sided Hoeffding and union bound's log term."""
    return k * math.log(m) + math.log(2 / delta)


def _check_bound_args(m: int, k: int, delta: float) -> None:
    if m < 1:
        raise ValueError(f"m={m} must be >= 1")
    check_k(k, m)
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta} must be in (0, 1)")


def key_seed(seed: int, key: str) -> list[int]:
    """A seed for ``key``'s draws that does not depend on which other keys (datasets) exist."""
    return [seed, zlib.crc32(key.encode("utf-8"))]


def draw_rows(n_available: int, n: int | None, seed: int | Sequence[int]) -> npt.NDArray[np.int64]:
    """``min(n, n_available)`` of ``range(n_available)`` uniformly without replacement, sorted.

    ``n=None`` (or ``n >= n_available``) returns every row. The draw is the first ``n`` of one
    seeded permutation, so one seed gives nested samples as ``n`` grows.
    """
    if n_available < 1:
        raise ValueError(f"n_available={n_available} must be >= 1")
    if n is not None and n < 1:
        raise ValueError(f"n={n} must be >= 1 (or None for every row)")
    if n is None or n >= n_available:
        return np.arange(n_available, dtype=np.int64)
    perm = np.random.default_rng(seed).permutation(n_available)
    return np.sort(perm[:n]).astype(np.int64)


def sample_queries(utility_index: UtilityIndex, n_queries: int | None, seed: int) -> QuerySample:
    """Algorithm 1's "sample queries": ``n_queries`` train questions per selection key, drawn with ``seed``.

    Keys are every dataset and :data:`~ragfolio.core.scoring.utility_index.ALL` (every dataset's train rows
    stacked in the index's order, as :func:`~ragfolio.core.scoring.utility_index.stacked` gives them); each
    key draws on its own (seeded by :func:`key_seed`). A dataset with no train question (labelled
    questions that are all test beside written ones, ``data_prep.questions: synthetic``) gets no
    portfolio of its own: it is judged with :data:`ALL`'s.

    Returns:
        The :class:`~ragfolio.core.selection.query_sample.QuerySample`: per key a
        :class:`~ragfolio.core.selection.query_sample.Draw` whose ``rows`` are positions among the
        key's train rows (ascending) and ``ids`` the drawn questions as ``"<dataset>/<id>"``.
    """
    train = {d: split_rows(utility_index, d, "train") for d in utility_index.datasets}
    ids = {d: [f"{d}/{utility_index.datasets[d].ids[i]}" for i in rows] for d, rows in train.items()}
    ids[ALL] = [qid for d in train for qid in ids[d]]
    samples = {}
    if not ids[ALL]:
        raise ValueError("no train questions to sample from")
    for key, key_ids in ids.items():
        if not key_ids:
            continue
        rows = draw_rows(len(key_ids), n_queries, key_seed(seed, key))
        samples[key] = Draw(n_train=len(key_ids), n=int(rows.size), rows=rows.tolist(),
                            ids=[key_ids[i] for i in rows])
    return QuerySample(n_queries=n_queries, seed=seed, samples=samples)


def resolve_sizes(sizes: Sequence[int | str], n_train: int) -> list[int]:
    """Sample sizes as ascending distinct ints, ``"all"`` as ``n_train``, each capped at ``n_train``."""
    out = set()
    for size in sizes:
        if size == ALL_ROWS:
            out.add(n_train)
        elif isinstance(size, int) and size >= 1:
            out.add(min(size, n_train))
        else:
            raise ValueError(f"sample size {size!r} must be an integer >= 1 or {ALL_ROWS!r}")
    return sorted(out)


@dataclass(frozen=True)
class SampleComplexity:
    """Test best-of-k of greedy portfolios chosen on N drawn train questions, for several N.

    Attributes:
        sizes: ``(n_sizes,)`` sample sizes N, ascending; the last is every train question when
            ``"all"`` was asked for.
        test_values: ``(n_sizes, n_seeds)`` test best-of-k of the portfolio greedy chose on the draw.
        sample_values: ``(n_sizes, n_seeds)`` its best-of-k on the drawn questions themselves
            (what greedy saw: the gap to ``test_values`` is the optimism the bound bounds).
        epsilon: ``(n_sizes,)`` :func:`epsilon_at` each N (``delta`` as given).
        full_train: Test best-of-k of greedy on every train question.
        oracle: Test best-of-all-candidates (no portfolio of any size does better).
        k: Portfolio size; ``n_train``: train questions available; ``m``: candidates.
    """

    sizes: list[int]
    test_values: npt.NDArray[np.float64]
    sample_values: npt.NDArray[np.float64]
    epsilon: list[float]
    full_train: float
    oracle: float
    k: int
    n_train: int
    m: int

    def to_dict(self, confidence: float = 0.95) -> dict[str, Any]:
        """The study as JSON: per size the mean over seeds and the central ``confidence`` range.

        ``low`` / ``high`` are percentiles of the seeds' values (linear interpolation; with 10
        seeds and 95% about the second-lowest and second-highest): the range a single draw of N
        questions lands in, not an interval on the mean over seeds.
        """
        tail = 100 * (1 - confidence) / 2
        rows = [
            {
                "n": n, "epsilon": eps, "test_mean": float(values.mean()),
                "test_low": float(np.percentile(values, tail)), "test_high": float(np.percentile(values, 100 - tail)),
                "test_sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
                "sample_mean": float(sample.mean()), "test_values": [float(v) for v in values],
            }
            for n, eps, values, sample in zip(self.sizes, self.epsilon, self.test_values, self.sample_values, strict=True)
        ]
        return {"k": self.k, "n_train": self.n_train, "m": self.m, "n_seeds": int(self.test_values.shape[1]),
                "confidence": confidence, "full_train": self.full_train, "oracle": self.oracle, "sizes": rows}


def sample_complexity(
    U_train: npt.ArrayLike,
    U_test: npt.ArrayLike,
    k: int,
    *,
    sizes: Sequence[int | str] = (25, 50, 100, 200, 400, 800, ALL_ROWS),
    n_seeds: int = 10,
    seed: int | Sequence[int] = 0,
    delta: float = 0.05,
) -> SampleComplexity:
    """For each N, ``n_seeds`` times: draw N train rows, run greedy to ``k``, score the portfolio on test.

    Args:
        U_train: ``(n_train, m)`` train utilities to draw from.
        U_test: ``(n_test, m)`` test utilities the portfolios are scored on.
        k: Portfolio size, ``1 <= k <= m``.
        sizes: Sample sizes (ints or ``"all"``), capped at ``n_train`` (see :func:`resolve_sizes`).
        n_seeds: Draws per size; draw ``s`` uses the generator seeded ``[*seed, s]``.
        seed: Base seed (e.g. :func:`key_seed` of the dataset).
        delta: Failure probability of the bound's epsilon.

    Returns:
        The :class:`SampleComplexity` table. ``N = n_train`` is drawn once (every seed draws every
        row), so its spread is zero and its value equals ``full_train``.
    """
    U_train = np.asarray(U_train, dtype=np.float32)
    U_test = np.asarray(U_test, dtype=np.float32)
    if U_train.ndim != 2 or U_test.ndim != 2 or U_train.shape[1] != U_test.shape[1] or not len(U_train) or not len(U_test):
        raise ValueError(f"U_train {U_train.shape} and U_test {U_test.shape} must be non-empty with one column count")
    if n_seeds < 1:
        raise ValueError(f"n_seeds={n_seeds} must be >= 1")
    n_train, m = U_train.shape
    check_k(k, m)
    base = [seed] if isinstance(seed, int) else list(seed)
    grid = resolve_sizes(sizes, n_train)
    test_values = np.zeros((len(grid), n_seeds))
    sample_values = np.zeros((len(grid), n_seeds))
    for i, n in enumerate(grid):
        draws = n_seeds if n < n_train else 1  # every draw of all rows is the same draw
        for s in range(draws):
            rows = draw_rows(n_train, n, [*base, s])
            picks = select_greedy(U_train[rows], k, n_threads=1).indices
            test_values[i, s] = portfolio_value(U_test, picks)
            sample_values[i, s] = portfolio_value(U_train[rows], picks)
        test_values[i, draws:] = test_values[i, 0]
        sample_values[i, draws:] = sample_values[i, 0]
    full = select_greedy(U_train, k, n_threads=1).indices
    return SampleComplexity(
        sizes=grid, test_values=test_values, sample_values=sample_values,
        epsilon=[epsilon_at(n, m, k, delta) for n in grid], full_train=portfolio_value(U_test, full),
        oracle=portfolio_value(U_test, None), k=k, n_train=n_train, m=m,
    )
