"""The universal router: fitted once on the union of every dataset's train rows, judged per dataset."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.judging.evaluation import RoutingComparison, RoutingSplit
from ragfolio.core.routing.registry import make_router
from ragfolio_lab.routers.universal import fit_universal, judge_universal, route_universal, stack_splits


class _Recording:
    """Remembers what it was fitted on; routes a query to member 0 where ``x[:, 0] > 0``, else to member 1."""

    name = "recording"

    def fit(self, inputs: RouteInputs, U: Any, members: Any = None) -> _Recording:
        self.seen, self.U, self.members_ = np.asarray(inputs.query["e5"]), np.asarray(U), list(members)
        return self

    def route(self, inputs: RouteInputs, l: int) -> tuple[np.ndarray, np.ndarray]:
        first = (np.asarray(inputs.query["e5"])[:, 0] <= 0).astype(np.int64)
        picks = np.stack([first, 1 - first, np.full_like(first, 2)], axis=1)[:, :l]
        return picks, np.zeros((len(first), 3))


def _split(x: np.ndarray, U: np.ndarray) -> RoutingSplit:
    return RoutingSplit(RouteInputs({"e5": x.astype(np.float32)}), U.astype(np.float32))


def test_the_universal_router_is_fitted_on_the_union_of_every_datasets_train_rows() -> None:
    rng = np.random.default_rng(0)
    train = {d: _split(rng.normal(size=(n, 4)), rng.random((n, 3))) for d, n in (("hotpotqa", 7), ("musique", 5))}
    router = fit_universal(_Recording, train, ["a", "b", "c"])
    assert router.seen.shape == (12, 4) and router.members_ == ["a", "b", "c"]
    np.testing.assert_array_equal(router.seen, np.concatenate([s.inputs.query["e5"] for s in train.values()]))
    np.testing.assert_array_equal(router.U, np.concatenate([s.utilities for s in train.values()]))
    with pytest.raises(ValueError, match="different member counts"):
        stack_splits({"a": _split(np.zeros((2, 4)), np.zeros((2, 3))), "b": _split(np.zeros((2, 4)), np.zeros((2, 2)))})


def test_the_universal_router_is_judged_on_each_datasets_test_rows_against_its_own_single_best() -> None:
    x = {"hotpotqa": np.array([[1.0], [-1.0], [1.0], [-1.0]]), "musique": np.array([[1.0], [1.0], [-1.0]])}
    # shared members: member 0 wins where x > 0, member 1 elsewhere; the universal router knows it
    shared = {d: np.stack([(v[:, 0] > 0), (v[:, 0] <= 0), np.zeros(len(v))], axis=1).astype(np.float32)
              for d, v in x.items()}
    router = _Recording().fit(_split(x["hotpotqa"], shared["hotpotqa"]).inputs, shared["hotpotqa"], ["a", "b", "c"])
    routing = route_universal(router, {d: _split(x[d], shared[d]) for d in x})
    assert set(routing.picks) == {"hotpotqa", "musique"} and routing.picks["musique"].shape == (3, 3)
    # each dataset's own portfolio: its single best member (top_average's first pick) is right half the time
    own_U = {"hotpotqa": np.array([[1, 0, 0], [0, 0, 1], [1, 0, 0], [0, 0, 1]], dtype=np.float32),
             "musique": np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float32)}
    for d, U in own_U.items():
        own = RoutingComparison({"top_average": np.tile([0, 1, 2], (len(U), 1))}, U)
        entry = judge_universal(routing, d, own)
        assert entry["members"] == ["a", "b", "c"] and entry["best_of_l"][0] == 1.0
        single = U[:, 0].mean()
        assert entry["minus_single_best"]["l1"]["estimate"] == pytest.approx(1.0 - single)
        assert entry["gap_closed_l1"] == pytest.approx(1.0)  # the dataset's own oracle is 1.0 too
    with pytest.raises(ValueError, match="universal test rows"):
        judge_universal(routing, "musique", RoutingComparison({"top_average": np.zeros((2, 3), dtype=np.int64)},
                                                              np.zeros((2, 3), dtype=np.float32)))


def test_a_universal_paper_router_learns_a_subpopulation_the_datasets_share() -> None:
    rng = np.random.default_rng(0)

    def data(n: int, share: float) -> RoutingSplit:
        x = rng.normal(size=(n, 8)).astype(np.float32)
        minority = rng.random(n) < share
        x[minority, 0] += 3.0  # detectable from the query
        U = np.zeros((n, 3), dtype=np.float32)
        U[~minority, 0], U[minority, 2] = 1.0, 1.0
        return _split(x, U)

    train = {"hotpotqa": data(250, 0.25), "musique": data(250, 0.25)}
    router = fit_universal(lambda: make_router("paper", width=32, max_epochs=20, lr=3e-3, temperature=0.1,
                                               random_state=0), train, ["a", "b", "c"])
    test = {"hotpotqa": data(120, 0.25), "musique": data(120, 0.25)}
    routing = route_universal(router, test)
    for d, split in test.items():
        own = RoutingComparison({"top_average": np.tile([0, 1, 2], (len(split.utilities), 1))}, split.utilities)
        entry = judge_universal(routing, d, own)
        assert entry["best_of_l"][0] > split.utilities[:, 0].mean() + 0.05, d
        assert entry["minus_single_best"]["l1"]["estimate"] > 0.05, d
