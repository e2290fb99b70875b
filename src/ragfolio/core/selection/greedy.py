"""Greedy retriever-portfolio selection on a utility matrix.

``U`` is an ``(N, m)`` matrix: ``U[q, r]`` in ``[0, 1]`` says how well candidate retriever ``r``
serves query ``q``. A portfolio ``S`` is worth its best-of-``S`` utility averaged over queries,

    F(S) = (1 / N) * sum_q max_{r in S} U[q, r],        F(empty) = 0,

a monotone submodular (facility-location) function, so greedy selection reaches ``(1 - 1/e) OPT``.
The objective lives in one place, :class:`~ragfolio.core.selection.gains.GainTracker` in
:mod:`ragfolio.core.selection.gains`, which keeps every candidate's marginal gain up to date; the optimizers
here (naive, lazy, stochastic greedy) only decide which gains to look at, as in apricot.
Exhaustive search and the paper's baselines are :mod:`~ragfolio.core.selection.baseline_portfolios`, the
a-posteriori certificate :mod:`~ragfolio.core.selection.certificate`, the sample-size bound
:mod:`~ragfolio.core.selection.sample_complexity`.

Every function reads ``U`` in blocks of rows, so an ``np.memmap`` (``np.load(path, mmap_mode="r")``)
is never loaded whole; a float16 ``U`` is widened to float32 a
block at a time, which is exact, so it gives the results of ``U.astype(np.float32)``.
Sums are accumulated in float64; for utilities on a coarse grid (0, 1/3, 1/2, ... as support
recall gives) they are exact, so every optimizer here breaks ties identically: among equal gains
the lowest column index wins.
"""

from __future__ import annotations

import heapq
import logging
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragfolio.core.selection.gains import (
    BLOCK_ROWS,
    GainTracker,
    as_utility,
    check_k,
    top_gains,
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
            ``None`` for :func:`select_stochastic_greedy`). Used by :func:`~ragfolio.core.selection.certificate.certificate`.
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


# --------------------------------------------------------------------------------------------
# optimizers


def select_greedy(
    U: npt.ArrayLike, k: int, *, block_rows: int = BLOCK_ROWS, n_threads: int | None = None
) -> GreedyResult:
    """Algorithm 1: k times add the column with the largest marginal gain.

    With ``b`` the per-query best so far (zeros at start), the gain of column ``r`` is
    ``sum_q max(0, U[q, r] - b[q])``; after picking ``r``, ``b = max(b, U[:, r])``. Ties go to the
    lowest column index. Gains are updated incrementally (see :class:`GainTracker`), which reads
    only the rows whose best changed, and are kept for :func:`~ragfolio.core.selection.certificate.certificate`, including the gains
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
