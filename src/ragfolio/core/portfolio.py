"""Retriever-portfolio selection on a utility matrix.

``U`` is an ``(N, m)`` matrix: ``U[q, r]`` in ``[0, 1]`` says how well candidate retriever ``r``
serves query ``q``. A portfolio ``S`` is worth its best-of-``S`` utility averaged over queries,

    F(S) = (1 / N) * sum_q max_{r in S} U[q, r],        F(empty) = 0,

a monotone submodular (facility-location) function, so greedy selection reaches ``(1 - 1/e) OPT``.
The objective lives in one place, :class:`~ragfolio.core.gains.GainTracker` in
:mod:`ragfolio.core.gains`, which keeps every candidate's marginal gain up to date; the optimizers
here (naive, lazy, stochastic greedy) only decide which gains to look at, as in apricot.
Exhaustive search, the paper's baselines and the a-posteriori certificate sit beside them; the
sample-size bound is in :mod:`ragfolio.core.sample_complexity`.

Every function reads ``U`` in blocks of rows, so an ``np.memmap`` (``np.load(path, mmap_mode="r")``)
is never loaded whole (:func:`select_exhaustive` excepted); a float16 ``U`` is widened to float32 a
block at a time, which is exact, so it gives the results of ``U.astype(np.float32)``.
Sums are accumulated in float64; for utilities on a coarse grid (0, 1/3, 1/2, ... as support
recall gives) they are exact, so every optimizer here breaks ties identically: among equal gains
the lowest column index wins.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragfolio.core.gains import (
    BLOCK_ROWS,
    FloatMatrix,
    GainTracker,
    as_utility,
    check_k,
    check_values,
    column_sums,
    row_blocks,
    top_gains,
    widen,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GreedyResult:
    """The picks of a greedy optimizer and what the certificate needs.

    Attributes:
        indices: picked columns of ``U``, in pick order (length k).
        values: ``values[i] = F(S_{i+1})``, the portfolio value after ``i + 1`` picks (length k).
        gains: ``gains[i] = F(S_{i+1}) - F(S_i)``, the marginal gain of pick ``i`` (length k).
        gain_bounds: ``(k + 1, w)`` float64 or ``None``; row ``i`` holds upper bounds on the ``w``
            largest marginal gains w.r.t. the first ``i`` picks, descending (exact gains for
            :func:`select_greedy`, stale but still valid ones for :func:`select_lazy_greedy`,
            ``None`` for :func:`select_stochastic_greedy`). Used by :func:`certificate`.
        n_evaluations: column-gain evaluations, counting the initial one of every column.
    """

    indices: list[int]
    values: list[float]
    gains: list[float]
    gain_bounds: npt.NDArray[np.float64] | None
    n_evaluations: int

    @property
    def value(self) -> float:
        """``F`` of the whole portfolio."""
        return self.values[-1]


@dataclass(frozen=True)
class ExhaustiveResult:
    """The optimal portfolio: ``indices`` (ascending, length k) and its ``value`` ``F``."""

    indices: list[int]
    value: float


@dataclass(frozen=True)
class Certificate:
    """An a-posteriori optimality certificate.

    Attributes:
        upper_bound: a value no portfolio of size k can exceed on this ``U`` (``>= OPT``).
        ratio: ``F(S_greedy) / upper_bound`` in ``(0, 1]``: the portfolio is at least this
            fraction of optimal (``1.0`` when ``U`` is all zeros).
    """

    upper_bound: float
    ratio: float


# --------------------------------------------------------------------------------------------
# optimizers


def select_greedy(
    U: npt.ArrayLike, k: int, *, block_rows: int = BLOCK_ROWS, n_threads: int | None = None
) -> GreedyResult:
    """Algorithm 1: k times add the column with the largest marginal gain.

    With ``b`` the per-query best so far (zeros at start), the gain of column ``r`` is
    ``sum_q max(0, U[q, r] - b[q])``; after picking ``r``, ``b = max(b, U[:, r])``. Ties go to the
    lowest column index. Gains are updated incrementally (see :class:`GainTracker`), which reads
    only the rows whose best changed, and are kept for :func:`certificate`, including the gains
    w.r.t. the final portfolio (one more cheap update).

    Args:
        U: ``(N, m)`` utilities in ``[0, 1]`` (any finite non-negative scale works); float16,
            float32 and float64 are used as is (float16 widened per block), an ``np.memmap`` is
            read by row blocks of at most ``block_rows`` rows and never loaded whole.
        k: portfolio size, ``1 <= k <= m``.
        block_rows: rows per block (about 2 MB of ``U`` per block fits in cache).
        n_threads: threads over row blocks; ``None`` uses every available core.

    Returns:
        The picks, ``F`` after each pick, the gains and the exact top-k gains per prefix.
    """
    U = as_utility(U)
    n, m = U.shape
    check_k(k, m)
    indices: list[int] = []
    values: list[float] = []
    gains: list[float] = []
    bounds = np.zeros((k + 1, k))
    with GainTracker(U, block_rows, n_threads) as tracker:
        for step in range(k + 1):
            if step:
                tracker.refresh()
            g = tracker.gains()
            g[~tracker.live] = -np.inf
            bounds[step] = top_gains(g, k) / n
            if step == k:
                break
            p = int(np.argmax(g))
            tracker.add(p)
            indices.append(p)
            gains.append(float(g[p]) / n)
            values.append(tracker.best_sum / n)
            logger.debug("greedy pick %d: column %d, F=%.6f", step + 1, p, values[-1])
        n_evaluations = tracker.n_evaluations
    return GreedyResult(indices, values, gains, bounds, n_evaluations)


def select_lazy_greedy(
    U: npt.ArrayLike,
    k: int,
    *,
    batch_size: int = 8,
    block_rows: int = BLOCK_ROWS,
    n_threads: int | None = None,
) -> GreedyResult:
    """Lazy greedy (Minoux): re-evaluate only columns whose stale gain could still be the best.

    Gains only shrink as the portfolio grows (submodularity), so a stale gain is an upper bound.
    Columns wait in a max-heap keyed by ``(stale gain, index)``. Each step first refreshes the
    ``batch_size`` columns with the largest bounds among those fresh at the previous step (their
    catch-up reads only the rows the last pick changed), then, if the top is still stale, every
    stale column whose bound reaches the best fresh gain, in one read of ``U``; a fresh column on
    top is then the argmax (the lowest index among ties), so the picks are exactly those of
    :func:`select_greedy`. ``gain_bounds`` holds the heap's bounds (valid upper bounds, not
    always tight).

    Args:
        U: ``(N, m)`` utilities, as for :func:`select_greedy`.
        k: portfolio size, ``1 <= k <= m``.
        batch_size: columns refreshed in the first round of a step.
        block_rows: rows per block.
        n_threads: threads over row blocks; ``None`` uses every available core.

    Returns:
        A :class:`GreedyResult`; ``n_evaluations`` shows how many evaluations laziness saved.
    """
    U = as_utility(U)
    n, m = U.shape
    check_k(k, m)
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    indices: list[int] = []
    values: list[float] = []
    gains: list[float] = []
    bounds = np.zeros((k + 1, k))
    with GainTracker(U, block_rows, n_threads) as tracker:
        heap = [(-g, r) for r, g in enumerate(tracker.gains().tolist())]
        heapq.heapify(heap)
        for step in range(k):
            best_fresh = -np.inf  # the largest gain refreshed in this step
            while tracker.version[heap[0][1]] != tracker.step:
                # First a cheap batch for a good best fresh gain; then every stale column whose
                # bound reaches it, after which the top of the heap is fresh.
                if best_fresh == -np.inf:
                    stale = _pop_recent(heap, tracker.version, tracker.step - 1, batch_size)
                else:
                    stale = []
                    while heap and tracker.version[heap[0][1]] != tracker.step and (
                        -heap[0][0] >= best_fresh
                    ):
                        stale.append(heapq.heappop(heap)[1])
                cols = np.array(stale, dtype=np.intp)
                tracker.refresh(cols)
                fresh = tracker.gains(cols).tolist()
                for r, g in zip(stale, fresh, strict=True):
                    heapq.heappush(heap, (-g, r))
                best_fresh = max(best_fresh, max(fresh))
            neg_gain, p = heapq.heappop(heap)
            others = [-key for key, _ in heapq.nsmallest(k - 1, heap)]
            bounds[step] = top_gains(np.array([-neg_gain, *others]), k) / n
            tracker.add(p)
            indices.append(p)
            gains.append(-neg_gain / n)
            values.append(tracker.best_sum / n)
            logger.debug("lazy greedy pick %d: column %d, F=%.6f", step + 1, p, values[-1])
        bounds[k] = top_gains(np.array([-key for key, _ in heapq.nsmallest(k, heap)]), k) / n
        n_evaluations = tracker.n_evaluations
    return GreedyResult(indices, values, gains, bounds, n_evaluations)


def _pop_recent(
    heap: list[tuple[float, int]], version: npt.NDArray[np.int64], recent: int, size: int
) -> list[int]:
    """Pop and return the ``size`` columns with the largest bounds among those last fresh at step
    ``recent`` (the top ``size`` of the heap when none is).

    Catching up from the previous step reads only the rows the last pick changed, as one step of
    :func:`select_greedy` does, so this first batch costs little of a matrix on disk; any batch
    gives a valid best fresh gain, so the picks do not depend on the choice.
    """
    ranked = sorted(heap)  # (-bound, index): the largest bound (then lowest index) first
    chosen = [r for _, r in ranked if version[r] == recent][:size] or [r for _, r in ranked[:size]]
    keep = set(chosen)
    heap[:] = [entry for entry in heap if entry[1] not in keep]
    heapq.heapify(heap)
    return chosen


def select_stochastic_greedy(
    U: npt.ArrayLike,
    k: int,
    epsilon: float = 0.1,
    random_state: int | np.random.Generator | None = None,
    *,
    block_rows: int = BLOCK_ROWS,
    n_threads: int | None = None,
) -> GreedyResult:
    """Stochastic greedy (Mirzasoleiman et al., 2015): the best of a random sample each step.

    Each step draws ``s = ceil((m / k) * ln(1 / epsilon))`` unpicked columns uniformly without
    replacement and adds the one with the largest gain (lowest index among ties); in expectation
    ``F(S) >= (1 - 1/e - epsilon) OPT`` with ``O(m ln(1 / epsilon))`` evaluations in all.

    Args:
        U: ``(N, m)`` utilities, as for :func:`select_greedy`.
        k: portfolio size, ``1 <= k <= m``.
        epsilon: accuracy in ``(0, 1)``; smaller means larger samples.
        random_state: seed or generator; a fixed value gives the same picks every run.
        block_rows: rows per block.
        n_threads: threads over row blocks; ``None`` uses every available core.

    Returns:
        A :class:`GreedyResult` with ``gain_bounds=None`` (the certificate recomputes them).
    """
    U = as_utility(U)
    n, m = U.shape
    check_k(k, m)
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon={epsilon} must be in (0, 1)")
    rng = np.random.default_rng(random_state)
    sample_size = max(1, math.ceil(m / k * math.log(1 / epsilon)))
    indices: list[int] = []
    values: list[float] = []
    gains: list[float] = []
    with GainTracker(U, block_rows, n_threads) as tracker:
        for step in range(k):
            live = np.flatnonzero(tracker.live)
            sample = np.sort(rng.choice(live, size=min(sample_size, live.size), replace=False))
            tracker.refresh(sample)
            g = tracker.gains(sample)
            best = int(np.argmax(g))
            p = int(sample[best])
            tracker.add(p)
            indices.append(p)
            gains.append(float(g[best]) / n)
            values.append(tracker.best_sum / n)
            logger.debug("stochastic greedy pick %d: column %d, F=%.6f", step + 1, p, values[-1])
        n_evaluations = tracker.n_evaluations
    return GreedyResult(indices, values, gains, None, n_evaluations)


def select_exhaustive(
    U: npt.ArrayLike, k: int, *, max_subsets: int = 2_000_000
) -> ExhaustiveResult:
    """The optimal portfolio, by evaluating ``F`` on all ``C(m, k)`` subsets.

    Ties go to the lexicographically first subset. ``U`` is loaded into memory.

    Args:
        U: ``(N, m)`` utilities.
        k: portfolio size, ``1 <= k <= m``.
        max_subsets: refuse (``ValueError``) when ``C(m, k)`` exceeds this.

    Returns:
        The optimal ``indices`` (ascending) and ``OPT``.
    """
    U = np.asarray(as_utility(U))
    n, m = U.shape
    check_k(k, m)
    n_subsets = math.comb(m, k)
    if n_subsets > max_subsets:
        raise ValueError(
            f"exhaustive search over C(m={m}, k={k})={n_subsets} subsets exceeds "
            f"max_subsets={max_subsets}; use select_greedy and certificate instead"
        )
    check_values(U, "U")
    chunk = max(1, 2**24 // (n * k))  # about 64 MB of float32 per chunk
    subsets = itertools.combinations(range(m), k)
    best_value, best_subset = -1.0, tuple[int, ...]()
    while block := list(itertools.islice(subsets, chunk)):
        idx = np.array(block, dtype=np.intp)  # (c, k)
        totals = U[:, idx].max(axis=2).sum(axis=0, dtype=np.float64)  # (N, c, k) -> (c,)
        i = int(np.argmax(totals))
        if totals[i] > best_value:
            best_value, best_subset = float(totals[i]), block[i]
    return ExhaustiveResult(list(best_subset), best_value / n)


# --------------------------------------------------------------------------------------------
# values and baselines


def portfolio_value(U: npt.ArrayLike, indices: Sequence[int] | None) -> float:
    """``F(S) = (1 / N) * sum_q max_{r in S} U[q, r]``; ``0.0`` for an empty ``S``.

    ``indices=None`` means every column, which gives :func:`oracle_value`.
    """
    U = as_utility(U)
    idx = None if indices is None else _check_indices(indices, U.shape[1])
    if idx is not None and idx.size == 0:
        return 0.0
    total = 0.0
    for s, e in row_blocks(U.shape[0], BLOCK_ROWS):
        best = widen(U[s:e] if idx is None else U[s:e][:, idx]).max(axis=1)
        check_values(best, f"rows {s}..{e - 1}")
        total += float(best.sum(dtype=np.float64))
    return total / U.shape[0]


def best_of_k_curve(U: npt.ArrayLike, order: Sequence[int]) -> list[float]:
    """``F`` of each prefix of ``order``: entry ``i`` is the value of its first ``i + 1``."""
    U = as_utility(U)
    idx = _check_indices(order, U.shape[1])
    totals = np.zeros(idx.size)
    for s, e in row_blocks(U.shape[0], BLOCK_ROWS):
        block = widen(U[s:e][:, idx])
        check_values(block, f"rows {s}..{e - 1}")
        totals += np.maximum.accumulate(block, axis=1).sum(axis=0, dtype=np.float64)
    return (totals / U.shape[0]).tolist()


def oracle_value(U: npt.ArrayLike) -> float:
    """The best-of-all value ``(1 / N) * sum_q max_r U[q, r]``, an upper bound on any portfolio."""
    return portfolio_value(U, None)


def top_k_by_average(U: npt.ArrayLike, k: int) -> list[int]:
    """The k columns with the highest mean utility, best first (ties: lowest index first)."""
    U = as_utility(U)
    check_k(k, U.shape[1])
    return np.argsort(-column_sums(U), kind="stable")[:k].tolist()


def single_best(U: npt.ArrayLike) -> int:
    """The column with the highest mean utility (ties: lowest index)."""
    return top_k_by_average(U, 1)[0]


def random_k(
    U: npt.ArrayLike, k: int, random_state: int | np.random.Generator | None = None
) -> list[int]:
    """k distinct columns drawn uniformly at random (a fixed ``random_state`` repeats them)."""
    m = as_utility(U).shape[1]
    check_k(k, m)
    return np.random.default_rng(random_state).choice(m, size=k, replace=False).tolist()


def _check_indices(indices: Sequence[int], m: int) -> npt.NDArray[np.intp]:
    idx = np.asarray(list(indices), dtype=np.intp)
    bad = idx[(idx < 0) | (idx >= m)]
    if bad.size:
        raise ValueError(f"column index {int(bad[0])} is out of range for m={m} columns")
    return idx


# --------------------------------------------------------------------------------------------
# guarantees


def certificate(U: npt.ArrayLike, result: GreedyResult, k: int | None = None) -> Certificate:
    """Bound ``OPT`` from the sets greedy met, by submodularity.

    For any set ``S_i`` (the first ``i`` picks, ``i = 0 .. len``) and any ``|T| <= k``,
    ``F(T) <= F(S_i) + sum_{r in T} gain(r | S_i)``, hence

        OPT <= min( oracle, min_i [ F(S_i) + sum of the k largest gain(r | S_i) ] ),

    with ``oracle = (1 / N) sum_q max_r U[q, r]``. The gains come from ``result.gain_bounds``
    when it has at least k of them per prefix, else they are recomputed from ``U``.

    Args:
        U: the ``(N, m)`` utilities the result was computed on.
        result: a greedy result.
        k: the portfolio size to bound ``OPT`` for; defaults to ``len(result.indices)``.

    Returns:
        The upper bound on ``OPT`` and ``ratio = F(S_k) / upper_bound``, ``S_k`` the first ``k``
        picks.
    """
    U = as_utility(U)
    k = len(result.indices) if k is None else k
    check_k(k, U.shape[1])
    bounds = result.gain_bounds
    if bounds is None or bounds.shape[1] < k:
        bounds = _exact_gain_bounds(U, result.indices, k)
    prefix_values = np.array([0.0, *result.values])
    upper = min(oracle_value(U), float(np.min(prefix_values + bounds[:, :k].sum(axis=1))))
    # The greedy portfolio of size k is the first k picks (a longer run still bounds OPT_k: every
    # prefix S_i gives a valid bound).
    value = result.values[min(k, len(result.values)) - 1]
    upper = max(upper, value)  # only float rounding can put it below an achieved value
    ratio = 1.0 if upper == 0 else min(1.0, value / upper)
    return Certificate(upper_bound=upper, ratio=ratio)


def _exact_gain_bounds(U: FloatMatrix, indices: list[int], k: int) -> npt.NDArray[np.float64]:
    """``(len + 1, k)``: the k largest gains w.r.t. each prefix of ``indices``, descending."""
    n, m = U.shape
    sums = np.zeros((len(indices) + 1, m))
    for s, e in row_blocks(n, BLOCK_ROWS):
        block = widen(U[s:e])  # float16 differences would round
        best = np.zeros(e - s, dtype=block.dtype)
        for i in range(len(indices) + 1):
            if i:
                np.maximum(best, block[:, indices[i - 1]], out=best)
            sums[i] += np.maximum(block - best[:, None], 0).sum(axis=0, dtype=np.float64)
    return np.stack([top_gains(row, k) for row in sums]) / n
