"""Headroom over the default member, and what a router's first pick takes of it, by hand."""

import numpy as np
import pytest

from ragfolio_lab.judging.headroom import headroom


def test_headroom_by_hand() -> None:
    U = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 1.0], [0.5, 0.5]])  # member 1 beats the default on rows 1, 2
    picks = {"stays": np.zeros((4, 2), dtype=int), "moves": np.array([[1, 0], [1, 0], [0, 1], [1, 0]])}
    report = headroom(U, 0, picks)
    assert report["default"] == 0 and report["n"] == 4 and report["share"] == pytest.approx(0.5)
    assert report["routers"]["stays"] == {"captured": 0.0, "worse": 0.0, "switched": 0.0}
    # "moves": better on row 1 (of the two headroom rows), worse on row 0, tied on row 3
    assert report["routers"]["moves"] == pytest.approx({"captured": 0.5, "worse": 0.25, "switched": 0.75})
    empty = headroom(np.zeros((0, 2)), 0, {"stays": np.zeros((0, 2), dtype=int)})
    assert empty["share"] is None and empty["routers"]["stays"]["captured"] is None
