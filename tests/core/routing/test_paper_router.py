"""The paper's router recipe: bins and caps, balanced batches, and it learns a detectable subpopulation."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.registry import load_router, make_router
from ragfolio.core.routing.routers.paper import round_robin_batches, winner_bins


def test_bins_drop_no_winner_and_wide_ties_and_cap_the_tied_ones() -> None:
    U = np.array([[1, 0, 0, 0]] * 10 + [[0, 1, 0, 0]] * 10 + [[1, 1, 0, 0]] * 20 + [[1, 1, 1, 0]] * 5
                 + [[1, 1, 1, 1]] * 3 + [[0, 0, 0, 0]] * 4, dtype=np.float32)
    bins = winner_bins(U, max_ties=3, cap_2=0.5, cap_3=0.1)
    sizes = [len(b) for b in bins]
    assert sizes == [10, 10, 10, 2]  # two unique-winner bins; 2-way ties capped at 50% of 20, 3-way at 10%
    assert set(bins[2]) <= set(range(20, 40)) and set(bins[3]) <= set(range(40, 45))


def test_round_robin_batches_give_every_bin_an_equal_share_up_to_the_oversampling_cap() -> None:
    bins = [np.arange(100), np.arange(100, 103)]
    batches = round_robin_batches(bins, 8, 10.0, np.random.default_rng(0))
    rows = np.concatenate(batches)
    assert (rows < 100).sum() == (rows >= 100).sum() == 30  # min(100, 10 x 3) from each
    assert all((b < 100).sum() == (b >= 100).sum() for b in batches)


def test_the_paper_router_learns_a_minority_a_non_default_member_wins(tmp_path) -> None:
    rng = np.random.default_rng(0)
    n = 600
    x = rng.normal(size=(n, 8)).astype(np.float32)
    minority = x[:, 0] > 1.0  # about 16% of questions, detectable from the query
    U = np.zeros((n, 3), dtype=np.float32)
    U[~minority, 0] = 1.0  # the default member wins the rest
    U[minority, 2] = 1.0
    train, test = np.arange(400), np.arange(400, n)
    inputs = RouteInputs({"e5": x})
    router = make_router("paper", width=32, max_epochs=30, lr=3e-3, temperature=0.1,
                         random_state=0).fit(inputs.take(train), U[train])
    picks, scores = router.route(inputs.take(test), 1)
    value = U[test, picks[:, 0]].mean()
    assert value > U[test, 0].mean() + 0.05  # beats always taking the default member (0.84 here)
    assert (picks[minority[test], 0] == 2).mean() > 0.7  # most of the minority goes to its winner
    assert router.val_best_of_1_ > router.val_default_
    router.save(tmp_path / "paper")
    again = load_router(tmp_path / "paper")
    assert again.name == "paper"
    np.testing.assert_allclose(again.route(inputs.take(test), 2)[1], router.route(inputs.take(test), 2)[1], atol=1e-6)
    with pytest.raises(ValueError, match="dense query blocks"):
        make_router("paper", blocks=["mpnet"]).fit(inputs, U)


def test_router_comparison_reports_the_paper_router_when_asked() -> None:
    from ragfolio.core.routing.judging.evaluation import RoutingSplit, compare_routers
    from ragfolio.core.routing.routers.learned import Router

    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 4)).astype(np.float32)
    U = np.zeros((120, 3), dtype=np.float32)
    U[:, 0] = 1.0
    U[x[:, 0] > 1.0, 0], U[x[:, 0] > 1.0, 2] = 0.0, 1.0
    train, test = RoutingSplit(RouteInputs({"e5": x[:80]}), U[:80]), RoutingSplit(RouteInputs({"e5": x[80:]}), U[80:])
    learned = Router(hidden=8, embedding_dim=4, max_epochs=3, random_state=0).fit(train.inputs, train.utilities)
    comparison = compare_routers(learned, train, test, seed=0, logistic_c=1.0,
                                 extra={"paper": {"width": 16, "max_epochs": 3}})
    report = comparison.report()
    assert comparison.picks["paper"].shape == (40, 3) and len(report["paper"]["best_of_l"]) == 3
    assert "l1" in report["paper"]["minus_single_best"]
