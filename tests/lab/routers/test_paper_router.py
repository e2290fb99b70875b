"""The paper's router recipe: the official defaults, the split by winner, bins and caps, balanced batches,
and it learns a detectable subpopulation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from torch import nn

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.registry import load_router, make_router
from ragfolio_lab.routers.paper import (
    EARLIER_PORT_OPTIONS,
    PaperRouter,
    official_quotas,
    quota_batches,
    round_robin_batches,
    stratified_split,
    winner_bins,
)


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


def _minority_data(n: int = 200) -> tuple[RouteInputs, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    U = np.zeros((n, 3), dtype=np.float32)
    U[x[:, 0] <= 1.0, 0], U[x[:, 0] > 1.0, 2] = 1.0, 1.0
    return RouteInputs({"e5": x}), U


def test_the_defaults_are_the_official_codes_settings() -> None:
    # train_portfolio_router.py: lr 3e-4, weight decay 0, 10 epochs, batch 64, grad clip 1.0, dev ratio 0.1
    # split by winner, plain cosines (temperature 1.0), ties 3 / 50% / 10%, the quota sampler (10x)
    router = PaperRouter()
    assert (router.lr, router.weight_decay, router.max_epochs, router.batch_size, router.grad_clip) == (
        3e-4, 0.0, 10, 64, 1.0)
    assert router.temperature is None and router.tie_loss == "mean_over_winners"
    assert (router.dev_fraction, router.stratify_dev) == (0.1, True)
    assert (router.oversampling, router.max_oversample) == ("official", 10.0)
    assert (router.width, router.dropout, router.max_ties, router.cap_2, router.cap_3) == (256, 0.1, 3, 0.5, 0.1)
    # portfolio_router.py: the fusion MLP has a LayerNorm after each of its two layers
    inputs, U = _minority_data()
    fitted = PaperRouter(width=8, max_epochs=1).fit(inputs, U)
    assert [type(m) for m in fitted.net_.fuse] == [nn.Linear, nn.ReLU, nn.Dropout, nn.LayerNorm] * 2
    with pytest.raises(ValueError, match="oversampling"):
        PaperRouter(oversampling="mean")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(5))
def test_the_split_by_winner_keeps_each_members_share_and_caps_the_ties(seed: int) -> None:
    wins = {0: 57, 1: 23, 2: 9, 3: 1}
    rows = [np.eye(4)[j] for j, n in wins.items() for _ in range(n)]
    rows += [[1, 1, 0, 0]] * 30 + [[0, 1, 1, 1]] * 8 + [[1, 1, 1, 1]] * 2 + [[0, 0, 0, 0]] * 5
    U = np.asarray(rows, dtype=np.float32)
    bins, dev = stratified_split(U, 0.1, np.random.default_rng(seed))
    unique_dev = dev[dev < sum(wins.values())]
    for j, n in wins.items():
        assert abs(int((U[unique_dev, j] == 1).sum()) - 0.1 * n) <= 1, j  # each member's share, within one
    assert [len(b) for b in bins] == [51, 21, 8, 1, 27, 7]  # 2-way: min(round(0.5 * 81), floor(0.9 * 30))
    assert len(dev) == 6 + 2 + 1 + 0 + 3 + 1  # the ties beyond the caps are dev
    neither = np.arange(len(U) - 7, len(U))  # 4-way ties and no winner: in no bin, not in dev
    assert not set(neither) & (set(dev) | set(np.concatenate(bins)))
    assert not set(dev) & set(np.concatenate(bins))


def test_the_official_sampler_takes_the_mean_bin_size_capped_at_ten_times_each_bin() -> None:
    bins = [np.arange(100), np.arange(100, 103), np.arange(103, 123), np.arange(123, 130)]
    quotas = official_quotas([len(b) for b in bins], 10.0)
    assert quotas == [32, 30, 32, 32]  # min(mean 32.5, 10 x size), floored; 3 rows give 30
    batches = quota_batches(bins, quotas, 8, np.random.default_rng(0))
    rows = np.concatenate(batches)
    assert [int(np.isin(rows, b).sum()) for b in bins] == quotas
    assert [len(b) for b in batches] == [8] * 15 + [6]
    bin_of = np.searchsorted([100, 103, 123], rows, side="right")
    assert all((np.bincount(bin_of[8 * i : 8 * i + 8], minlength=4) == 2).all() for i in range(15))  # 2 each


def test_a_router_saved_before_the_options_existed_loads_as_it_was_trained(tmp_path) -> None:
    inputs, U = _minority_data()
    earlier = dict(temperature=0.05, lr=1e-3, weight_decay=0.01, max_epochs=2, dev_fraction=0.2)
    router = PaperRouter(width=8, **earlier, **EARLIER_PORT_OPTIONS).fit(inputs, U)
    router.save(tmp_path / "paper")
    config = json.loads((tmp_path / "paper" / "router.json").read_text())
    for option in EARLIER_PORT_OPTIONS:
        del config["hyperparameters"][option]  # router.json as the earlier port wrote it
    (tmp_path / "paper" / "router.json").write_text(json.dumps(config))
    again = load_router(tmp_path / "paper")
    assert isinstance(again, PaperRouter)
    assert {option: getattr(again, option) for option in EARLIER_PORT_OPTIONS} == EARLIER_PORT_OPTIONS
    assert (again.temperature, again.lr, again.dev_fraction) == (0.05, 1e-3, 0.2)  # recorded, kept
    np.testing.assert_array_equal(again.route(inputs, 2)[1], router.route(inputs, 2)[1])
