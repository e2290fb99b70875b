"""Out-of-core selection: a memory-mapped ``.npy`` (float32 or float16) gives the in-memory picks
and is read in bounded row blocks, never whole."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.selection.baseline_portfolios import best_of_k_curve, portfolio_value, top_k_by_average
from ragfolio.core.selection.certificate import certificate
from ragfolio.core.selection.gains import GainTracker
from ragfolio.core.selection.greedy import GreedyResult, select_greedy, select_lazy_greedy, select_stochastic_greedy

BLOCK_ROWS = 256


def low_rank_utility(seed: int, shape: tuple[int, int]) -> np.ndarray:
    """Correlated candidates (rank 4 plus noise) in [0, 1], float32, so lazy greedy prunes."""
    rng = np.random.default_rng(seed)
    n, m = shape
    U = rng.random((n, 4)) @ rng.random((4, m)) / 4 + rng.normal(0, 0.15, shape)
    return np.clip(U, 0, 1).astype(np.float32)


def on_disk(tmp_path: Path, U: np.ndarray, name: str) -> np.memmap:
    np.save(tmp_path / name, U)
    mapped = np.load(tmp_path / name, mmap_mode="r")
    assert isinstance(mapped, np.memmap) and mapped.dtype == U.dtype
    return mapped


def same_result(a: GreedyResult, b: GreedyResult) -> bool:
    return a.indices == b.indices and a.values == b.values and a.gains == b.gains


def run_all(U: np.ndarray, k: int) -> list[GreedyResult]:
    kwargs = {"block_rows": BLOCK_ROWS, "n_threads": 2}
    return [
        select_greedy(U, k, **kwargs),
        select_lazy_greedy(U, k, **kwargs),
        select_stochastic_greedy(U, k, 0.2, 7, **kwargs),
    ]


@pytest.mark.parametrize("seed", range(3))
def test_float32_memmap_equals_in_memory(tmp_path: Path, seed: int) -> None:
    U = low_rank_utility(seed, (3000, 40))
    mapped = on_disk(tmp_path, U, "U32.npy")
    for in_memory, out_of_core in zip(run_all(U, 8), run_all(mapped, 8), strict=True):
        assert same_result(out_of_core, in_memory)
    greedy = select_greedy(mapped, 8)
    assert np.array_equal(greedy.gain_bounds, select_greedy(U, 8).gain_bounds)
    assert certificate(mapped, greedy) == certificate(U, greedy)


@pytest.mark.parametrize("seed", range(3))
def test_float16_memmap_equals_in_memory_greedy_on_the_rounded_matrix(
    tmp_path: Path, seed: int
) -> None:
    U16 = low_rank_utility(seed, (3000, 40)).astype(np.float16)
    mapped = on_disk(tmp_path, U16, "U16.npy")
    rounded32, rounded64 = U16.astype(np.float32), U16.astype(np.float64)
    for reference in (rounded32, rounded64):
        for in_memory, out_of_core in zip(run_all(reference, 8), run_all(mapped, 8), strict=True):
            assert same_result(out_of_core, in_memory)
    greedy = select_greedy(mapped, 8)
    assert greedy.indices == select_lazy_greedy(mapped, 8).indices
    assert np.array_equal(greedy.gain_bounds, select_greedy(rounded32, 8).gain_bounds)
    assert certificate(mapped, greedy) == certificate(rounded64, greedy)
    assert portfolio_value(mapped, greedy.indices) == portfolio_value(rounded64, greedy.indices)
    assert best_of_k_curve(mapped, greedy.indices) == best_of_k_curve(rounded64, greedy.indices)
    assert top_k_by_average(mapped, 5) == top_k_by_average(rounded64, 5)


def test_float16_in_memory_equals_float32(tmp_path: Path) -> None:
    U16 = low_rank_utility(5, (1000, 30)).astype(np.float16)
    for a, b in zip(run_all(U16, 6), run_all(U16.astype(np.float32), 6), strict=True):
        assert same_result(a, b)


class RecordingMemmap(np.memmap):
    """A memmap that records how many rows each read through indexing or ``take`` returns."""

    rows_read: list[int]

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        out = super().__getitem__(key)
        if isinstance(out, np.ndarray) and out.ndim >= 1:
            self.rows_read.append(out.shape[0])
        return out

    def take(self, indices, axis=None, out=None, mode="raise"):  # type: ignore[no-untyped-def]
        self.rows_read.append(np.size(indices) if axis == 0 else self.shape[0])
        return np.asarray(self).take(indices, axis=axis, out=out, mode=mode)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_every_read_is_at_most_block_rows(tmp_path: Path, dtype: type) -> None:
    U = low_rank_utility(1, (5000, 24)).astype(dtype)
    mapped = on_disk(tmp_path, U, "U.npy").view(RecordingMemmap)
    RecordingMemmap.rows_read = []
    results = run_all(mapped, 6)
    reads = RecordingMemmap.rows_read
    assert reads, "the recording memmap saw no reads"
    assert max(reads) <= BLOCK_ROWS
    assert len(reads) > 3 * U.shape[0] // BLOCK_ROWS  # it really went through the recorder
    for in_memory, out_of_core in zip(run_all(U, 6), results, strict=True):
        assert same_result(out_of_core, in_memory)


@pytest.mark.parametrize(
    "select",
    [
        lambda U: select_greedy(U, 10, block_rows=BLOCK_ROWS, n_threads=1),
        lambda U: select_lazy_greedy(U, 10, block_rows=BLOCK_ROWS, n_threads=1),
        lambda U: select_stochastic_greedy(U, 10, 0.1, 0, block_rows=BLOCK_ROWS, n_threads=1),
    ],
    ids=["greedy", "lazy", "stochastic"],
)
def test_float16_memmap_is_not_materialised(
    tmp_path: Path, select: Callable[[np.ndarray], GreedyResult]
) -> None:
    """numpy's allocations stay far below the file's own size (a float64 copy would be 4x it)."""
    U16 = low_rank_utility(2, (40_000, 64)).astype(np.float16)
    mapped = on_disk(tmp_path, U16, "U16.npy")
    tracemalloc.start()
    try:
        result = select(mapped)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < U16.nbytes / 2, f"peak {peak} bytes for a {U16.nbytes}-byte file"
    assert result.indices == select(U16.astype(np.float32)).indices


class TopLevelMemmap(np.memmap):
    """Records the rows of every read of the mapped matrix itself, as the benchmark counts them:
    a block view it hands out is a read, and what is then taken from that view is not another."""

    top: np.memmap | None = None
    rows_read: list[int] = []

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        out = super().__getitem__(key)
        if self is TopLevelMemmap.top and isinstance(out, np.ndarray) and out.ndim >= 1:
            self.rows_read.append(out.shape[0])
        return out

    def take(self, indices, axis=None, out=None, mode="raise"):  # type: ignore[no-untyped-def]
        if self is TopLevelMemmap.top:
            self.rows_read.append(np.size(indices) if axis == 0 else self.shape[0])
        return np.asarray(self).take(indices, axis=axis, out=out, mode=mode)


@pytest.mark.parametrize(
    "select",
    [
        lambda U: select_lazy_greedy(U, 8, block_rows=BLOCK_ROWS, n_threads=2),
        lambda U: select_stochastic_greedy(U, 8, 0.1, 3, block_rows=BLOCK_ROWS, n_threads=2),
    ],
    ids=["lazy", "stochastic"],
)
def test_every_refresh_reads_each_row_at_most_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, select: Callable[[np.ndarray], GreedyResult]
) -> None:
    """Columns stale since different steps catch up from one read of the changed rows."""
    U = low_rank_utility(4, (4000, 48)).astype(np.float16)
    mapped = on_disk(tmp_path, U, "U16.npy").view(TopLevelMemmap)
    TopLevelMemmap.top, TopLevelMemmap.rows_read = mapped, []
    per_call: list[tuple[int, int]] = []  # (rows read, staleness versions) per refresh
    refresh = GainTracker.refresh

    def recorded(self: GainTracker, cols: np.ndarray | None = None) -> None:
        before = sum(TopLevelMemmap.rows_read)
        cols = np.flatnonzero(self.live) if cols is None else np.asarray(cols)
        stale = self.version[cols][self.version[cols] < self.step]
        refresh(self, cols)
        per_call.append((sum(TopLevelMemmap.rows_read) - before, np.unique(stale).size))

    monkeypatch.setattr(GainTracker, "refresh", recorded)
    result = select(mapped)
    assert max(rows for rows, _ in per_call) <= U.shape[0]
    assert max(versions for _, versions in per_call) >= 2  # several staleness groups met
    monkeypatch.undo()
    assert same_result(result, select(U.astype(np.float32)))
