"""The facility-location objective of portfolio selection, and its marginal gains.

``U`` is an ``(N, m)`` matrix: ``U[q, r]`` in ``[0, 1]`` says how well candidate retriever ``r``
serves query ``q``. A portfolio ``S`` is worth

    F(S) = (1 / N) * sum_q max_{r in S} U[q, r],        F(empty) = 0,

and the marginal gain of a column ``r`` given the per-query best ``b[q] = max_{s in S} U[q, s]`` is
``(1 / N) * sum_q max(0, U[q, r] - b[q])``. :class:`GainTracker` keeps every column's gain up to
date as ``S`` grows, reading ``U`` in blocks of :data:`BLOCK_ROWS` rows and, after each pick, only
the rows whose best changed. The optimizers that decide which gains to look at (naive, lazy and
stochastic greedy) live in :mod:`ragfolio.core.selection.greedy`, as in apricot; the input checks they
share live here with the objective.

``U`` may be float16, float32 or float64, in memory or an ``np.memmap``. float16 halves the bytes
read and stored; each block is widened to float32 when read (:func:`widen`), which is exact, so
results equal those on ``U.astype(np.float32)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.floating[Any]]
BLOCK_ROWS = 2048  # rows per block: 2048 x 360 float32 is 2.9 MB, a share of L3 per thread


# --------------------------------------------------------------------------------------------
# input checks


def as_utility(U: npt.ArrayLike) -> FloatMatrix:
    """Return ``U`` as a 2-d float16/32/64 array (a memmap stays a memmap, unread) or raise.

    Other dtypes are converted to float64 in memory.
    """
    arr = U if isinstance(U, np.ndarray) else np.asarray(U)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"U must be a non-empty 2-d (n_queries, m) array, not shape {arr.shape}")
    if arr.dtype not in (np.float16, np.float32, np.float64):
        arr = np.asarray(arr, dtype=np.float64)
    if not isinstance(arr, np.memmap) and not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)  # row blocks of a Fortran array would be strided
    return arr


def work_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    """The dtype blocks of ``U`` are computed in: float32 for float16 storage, else ``dtype``."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def widen(block: FloatMatrix) -> FloatMatrix:
    """``block`` in :func:`work_dtype`: a float16 block is copied to float32 (exactly)."""
    return block.astype(np.float32) if block.dtype == np.float16 else block


def take_into(
    src: FloatMatrix, indices: npt.NDArray[np.intp], axis: int, out: FloatMatrix
) -> FloatMatrix:
    """``np.take(src, indices, axis)`` written into ``out``, widening float16 on the way."""
    if src.dtype == out.dtype:
        return np.take(src, indices, axis=axis, out=out, mode="clip")
    out[...] = np.take(src, indices, axis=axis, mode="clip")
    return out


def check_k(k: int, m: int) -> None:
    """Raise unless ``k`` is an integer portfolio size in ``[1, m]``."""
    if not isinstance(k, int | np.integer) or not 1 <= k <= m:
        raise ValueError(f"k={k} must be an integer between 1 and m={m}")


def check_values(values: np.ndarray, where: str, *, check_max: bool = True) -> None:
    """Raise, naming ``where``, on NaN, negative or (with ``check_max``) infinite values."""
    low = values.min()
    high = values.max() if check_max else None
    if not (low >= 0 and (high is None or high < np.inf)):  # NaN fails every comparison
        found = f"min={low}" if high is None else f"min={low}, max={high}"
        raise ValueError(f"U must be finite and >= 0; {where} has {found}")


def row_blocks(n: int, block_rows: int) -> list[tuple[int, int]]:
    """Half-open ranges ``[(start, end), ...]`` of at most ``block_rows`` rows covering ``n``."""
    if block_rows < 1:
        raise ValueError(f"block_rows={block_rows} must be >= 1")
    return [(s, min(s + block_rows, n)) for s in range(0, n, block_rows)]


def column_sums(U: FloatMatrix, block_rows: int = BLOCK_ROWS) -> npt.NDArray[np.float64]:
    """``(m,)`` float64 ``sum_q U[q, r]``, checking every block for NaN, inf and negatives."""
    total = np.zeros(U.shape[1])
    for s, e in row_blocks(U.shape[0], block_rows):
        block = widen(U[s:e])
        check_values(block, f"rows {s}..{e - 1}")
        total += block.sum(axis=0, dtype=np.float64)
    return total


# --------------------------------------------------------------------------------------------
# the objective: marginal gains kept up to date


class GainTracker:
    """Marginal gains of every column of ``U`` while the per-query best ``b`` grows.

    For every column ``r`` it keeps ``S[r] = sum_q max(U[q, r], b[q])`` (float64), so the gain of
    adding ``r`` is ``S[r] - sum_q b[q]``. When ``b`` grows from ``b_old`` to ``b_new`` on rows
    ``D = {q : b_new[q] > b_old[q]}``,

        S[r] += sum_{q in D} (b_new[q] - clip(U[q, r], b_old[q], b_new[q])),

    which reads only the rows in ``D`` (rows whose best already equals their row maximum never
    enter it again). The j-th pick raises ``b`` on about ``N / j`` rows when the candidates are
    alike, so a greedy run reads ``U`` about ``1 + H_k = 2 + 1/2 + ... + 1/k`` times (3.9 for
    k = 10) instead of k times. A column refreshed lazily catches up in one go from the snapshot
    of ``b`` taken when it was last fresh; columns stale since different steps catch up together,
    from one read of the rows changed since the oldest of those steps, which holds the rows
    changed since every later one (:meth:`refresh`). Row chunks are spread over threads (numpy
    releases the GIL) and their sums are added in chunk order, so the thread count does not
    change results.
    Every read of ``U`` covers at most ``block_rows`` rows, so a memmap is never loaded whole.
    """

    def __init__(self, U: FloatMatrix, block_rows: int, n_threads: int | None) -> None:
        if n_threads is None:
            n_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        if n_threads < 1:
            raise ValueError(f"n_threads={n_threads} must be >= 1")
        self.U = U
        self.n, self.m = U.shape
        self.block_rows = block_rows
        self.blocks = row_blocks(self.n, block_rows)
        self.workers = max(1, min(n_threads, len(self.blocks) // 4))  # threads cost ~1 ms
        self._pool = ThreadPoolExecutor(self.workers) if self.workers > 1 else None
        dtype = work_dtype(U.dtype)
        self._buffers = [np.empty(block_rows * self.m, dtype=dtype) for _ in range(self.workers)]
        # Gathered rows of U (its dtype), for refreshes that serve several staleness groups.
        self._raw: list[np.ndarray | None] = [None] * self.workers
        self.best = np.zeros(self.n, dtype=dtype)  # b
        self.best_sum = 0.0  # sum_q b[q]
        self.step = 0  # number of picks so far
        self.live = np.ones(self.m, dtype=bool)  # not yet picked
        self.version = np.zeros(self.m, dtype=np.int64)  # step at which S[r] was last exact
        self._snapshots: dict[int, np.ndarray] = {}  # step -> b at that step
        try:
            self.sums = self._total(self._map(self._scan_block, self.blocks), self.m)
        except ValueError:
            self.__exit__()
            raise
        if not np.isfinite(self.sums).all():
            self.__exit__()
            bad = int(np.flatnonzero(~np.isfinite(self.sums))[0])
            raise ValueError(f"U must be finite; column {bad} sums to {self.sums[bad]}")
        self.n_evaluations = self.m

    def __enter__(self) -> GainTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def gains(self, cols: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.float64]:
        """Unnormalised marginal gains ``S[r] - sum_q b[q]`` (exact only for fresh columns)."""
        sums = self.sums if cols is None else self.sums[cols]
        return sums - self.best_sum

    def add(self, p: int) -> None:
        """Pick column ``p``: ``b = max(b, U[:, p])``."""
        self._snapshots[self.step] = self.best.copy()
        for s, e in self.blocks:  # a strided read of column p, block by block
            np.maximum(self.best[s:e], self.U[s:e, p], out=self.best[s:e])
        self.best_sum = float(self.best.sum(dtype=np.float64))
        self.live[p] = False
        self.step += 1

    def refresh(self, cols: npt.NDArray[np.intp] | None = None) -> None:
        """Bring ``S`` up to date for ``cols`` (default: every unpicked column).

        The stale columns among ``cols`` may date from different steps; all of them catch up in
        one read of the rows changed since the oldest of those steps (:meth:`_catch_up`).
        """
        cols = np.flatnonzero(self.live) if cols is None else np.asarray(cols, dtype=np.intp)
        stale = cols[self.version[cols] < self.step]
        self.n_evaluations += stale.size
        if stale.size:
            self._catch_up(stale)
            self.version[stale] = self.step
        oldest = int(self.version[self.live].min()) if self.live.any() else self.step
        for v in [v for v in self._snapshots if v < oldest]:
            del self._snapshots[v]

    def _catch_up(self, stale: npt.NDArray[np.intp]) -> None:
        """``S[stale] += sum_q (b[q] - clip(U[q, r], b_v[q], b[q]))``, ``v`` each column's version.

        ``b`` only grows, so the rows changed since the oldest version ``v0`` hold the rows changed
        since every later one: they are read once, in chunks of at most ``block_rows`` rows, and
        every staleness group takes its delta from the same chunk (rows a group has not seen
        change add exactly 0 to it). The matrix is thus read once per call, not once per group.
        """
        versions = self.version[stale]
        steps = np.unique(versions)  # ascending, so steps[0] is the oldest
        groups = [stale[versions == v] for v in steps]
        olds = [self._snapshots[int(v)] for v in steps]
        chunks = self._chunks(np.flatnonzero(self.best > olds[0]))
        if len(groups) == 1:  # one group: no need to hold the rows for other groups
            group, old = groups[0], olds[0]
            # Most columns: compute all of them, which avoids gathering columns.
            subset = None if 2 * group.size > self.m else group
            parts = self._map(lambda w, chunk: self._delta(w, chunk, old, subset), chunks)
            delta = self._total(parts, self.m if subset is None else subset.size)
            self.sums[group] += delta if subset is not None else delta[group]
            return
        parts = self._map(lambda w, chunk: self._group_deltas(w, chunk, olds, groups), chunks)
        self.sums[np.concatenate(groups)] += self._total(parts, stale.size)

    def _chunks(self, rows: npt.NDArray[np.intp]) -> list[Any]:
        """The changed ``rows`` as whole row blocks when they are most rows (unchanged rows add
        exactly 0), else as index arrays of at most ``block_rows`` rows."""
        if 10 * rows.size > 7 * self.n:
            return self.blocks
        size = self.block_rows
        return [rows[i : i + size] for i in range(0, rows.size, size)]

    def _scan_block(self, worker: int, block: tuple[int, int]) -> npt.NDArray[np.float64]:
        s, e = block
        values = widen(self.U[s:e])
        check_values(values, f"rows {s}..{e - 1}", check_max=False)  # +inf shows in the sums
        return values.sum(axis=0, dtype=np.float64)

    def _delta(
        self,
        worker: int,
        chunk: tuple[int, int] | npt.NDArray[np.intp],
        old: np.ndarray,
        cols: npt.NDArray[np.intp] | None,
    ) -> npt.NDArray[np.float64]:
        """``sum_q (b[q] - clip(U[q, cols], old[q], b[q]))`` over a row block or row list."""
        width = self.m if cols is None else cols.size
        if isinstance(chunk, tuple):
            s, e = chunk
            lo, hi, src = old[s:e], self.best[s:e], self.U[s:e]
            work = self._buffers[worker][: (e - s) * width].reshape(e - s, width)
            if cols is not None:
                src = take_into(src, cols, 1, work)
        else:
            lo, hi = old[chunk], self.best[chunk]
            work = self._buffers[worker][: chunk.size * width].reshape(chunk.size, width)
            if cols is None:
                src = take_into(self.U, chunk, 0, work)
            else:
                src = take_into(self.U[chunk], cols, 1, work)
        if lo.any():  # the first pick has b_old = 0 <= U: the lower clip is a no-op
            src = np.maximum(src, lo[:, None], out=work)
        np.minimum(src, hi[:, None], out=work)
        return hi.sum(dtype=np.float64) - work.sum(axis=0, dtype=np.float64)

    def _group_deltas(
        self,
        worker: int,
        chunk: tuple[int, int] | npt.NDArray[np.intp],
        olds: list[np.ndarray],
        groups: list[npt.NDArray[np.intp]],
    ) -> npt.NDArray[np.float64]:
        """Per-group deltas over one row chunk, read from ``U`` once.

        Returns ``(sum of group sizes,)`` float64: for each group ``g`` in order, ``sum_q (b[q] -
        clip(U[q, g], old_g[q], b[q]))`` over the rows of ``chunk`` changed since ``old_g``.
        """
        rows = np.arange(*chunk) if isinstance(chunk, tuple) else chunk
        raw = self._read_rows(worker, chunk)  # (rows, m) in U's dtype
        best = self.best[rows]
        out = []
        for old, cols in zip(olds, groups, strict=True):
            lo, hi, src = old[rows], best, raw
            changed = np.flatnonzero(hi > lo)
            if 10 * changed.size <= 7 * rows.size:  # keep the changed rows; the others add 0
                lo, hi, src = lo[changed], hi[changed], raw.take(changed, axis=0)
            work = self._buffers[worker][: src.shape[0] * cols.size].reshape(-1, cols.size)
            take_into(src, cols, 1, work)
            if lo.any():  # the first pick has b_old = 0 <= U: the lower clip is a no-op
                np.maximum(work, lo[:, None], out=work)
            np.minimum(work, hi[:, None], out=work)
            out.append(hi.sum(dtype=np.float64) - work.sum(axis=0, dtype=np.float64))
        return np.concatenate(out)

    def _read_rows(
        self, worker: int, chunk: tuple[int, int] | npt.NDArray[np.intp]
    ) -> FloatMatrix:
        """``(rows, m)``: the rows of ``chunk`` in ``U``'s dtype, taken from ``U`` once.

        A block is a view: its pages are read from the file on first touch and, a block being a
        few MB, stay in the CPU cache while the other staleness groups use them; copying it would
        cost a pass over memory per call. Listed rows are gathered into a per-worker buffer.
        """
        if isinstance(chunk, tuple):
            return self.U[chunk[0] : chunk[1]]
        buffer = self._raw[worker]
        if buffer is None:
            buffer = self._raw[worker] = np.empty(self.block_rows * self.m, dtype=self.U.dtype)
        raw = buffer[: chunk.size * self.m].reshape(chunk.size, self.m)
        return take_into(self.U, chunk, 0, raw)

    def _map(self, fn: Callable[[int, Any], Any], chunks: list[Any]) -> list[Any]:
        """``fn(worker, chunk)`` for every chunk, spread over the workers; results in order."""
        if self._pool is None or len(chunks) < 2:
            return [fn(0, chunk) for chunk in chunks]
        w = self.workers

        def run(worker: int) -> list[Any]:
            return [fn(worker, chunk) for chunk in chunks[worker::w]]

        out: list[Any] = [None] * len(chunks)
        for worker, part in enumerate(self._pool.map(run, range(w))):
            out[worker::w] = part
        return out

    @staticmethod
    def _total(parts: list[Any], width: int) -> npt.NDArray[np.float64]:
        total = np.zeros(width)
        for part in parts:
            total += part
        return total


def top_gains(values: np.ndarray, width: int) -> npt.NDArray[np.float64]:
    """The ``width`` largest of ``values`` (at least 0, padded with 0), descending."""
    top = np.sort(np.maximum(values, 0.0))[::-1][:width]
    return np.pad(top, (0, width - top.size))
