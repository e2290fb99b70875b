"""Known answers for the facility-location objective: tracked gains equal gains from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.selection.gains import GainTracker, as_utility, row_blocks, top_gains


def gains_from_scratch(U: np.ndarray, picks: list[int]) -> np.ndarray:
    """``sum_q max(0, U[q, r] - b[q])`` for every column, with ``b`` the best of ``picks``."""
    best = U[:, picks].max(axis=1) if picks else np.zeros(U.shape[0])
    return np.maximum(U - best[:, None], 0).sum(axis=0, dtype=np.float64)


@pytest.mark.parametrize(("block_rows", "n_threads"), [(2048, 1), (7, 1), (7, 3)])
def test_refreshed_gains_match_gains_from_scratch(block_rows: int, n_threads: int) -> None:
    U = np.random.default_rng(0).random((60, 9))
    picks = [4, 0, 7]
    with GainTracker(as_utility(U), block_rows, n_threads) as tracker:
        np.testing.assert_allclose(tracker.gains(), gains_from_scratch(U, []))
        for i, p in enumerate(picks):
            tracker.add(p)
            if i == 0:  # columns 1 and 2 go stale here and catch up over two picks at the end
                tracker.refresh(np.array([3, 5, 6, 8]))
        tracker.refresh()
        live = np.flatnonzero(tracker.live)
        np.testing.assert_allclose(tracker.gains(live), gains_from_scratch(U, picks)[live])
        assert tracker.best_sum == pytest.approx(U[:, picks].max(axis=1).sum())


def test_tracker_rejects_bad_values_and_threads() -> None:
    with pytest.raises(ValueError, match="rows 0..1 has min=-1.0"):
        GainTracker(as_utility([[0.5, -1.0], [0.2, 0.3]]), 2048, 1)
    with pytest.raises(ValueError, match="column 1 sums to inf"):
        GainTracker(as_utility([[0.5, np.inf], [0.2, 0.3]]), 2048, 1)
    with pytest.raises(ValueError, match="n_threads=0"):
        GainTracker(as_utility([[0.5]]), 2048, 0)


def test_row_blocks_and_top_gains_by_hand() -> None:
    assert row_blocks(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert top_gains(np.array([0.2, -1.0, 0.5]), 4).tolist() == [0.5, 0.2, 0.0, 0.0]
