"""The routers that see the retrieval: they learn a predictable best member, fall back on noise, and save."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.judging.evaluation import best_of_l
from ragfolio.core.routing.registry import load_router, make_router, router_names, servable_names
from ragfolio.core.routing.routers.retrieval_routers import (
    PostRetrievalRouter,
    PreRetrievalRouter,
    cdf_knots,
    cdf_transform,
    greedy_completions,
    paired_z,
)

K = 3

MODES = ("pre_retrieval", "post_retrieval")


def _synthetic(n: int, seed: int, *, signal: bool) -> tuple[RouteInputs, np.ndarray]:
    """Member 0 is best on ~60% of questions; with ``signal`` the best member's list has a higher top score.

    Utilities: 1 for the best member, 0.6 for member 0 otherwise, 0.5 for the rest, so member 0
    is the default (best mean) and moving to the best member gains 0.4 where it is not member 0.
    """
    rng = np.random.default_rng(seed)
    best = rng.choice(K, n, p=[0.6, 0.2, 0.2])
    U = np.full((n, K), 0.5, dtype=np.float32)
    U[:, 0] = 0.6
    U[np.arange(n), best] = 1.0
    members = rng.normal(size=(n, K, 4)).astype(np.float32)
    members[:, :, 0] *= np.array([1.0, 10.0, 0.1])  # members' score scales differ
    if signal:
        members[np.arange(n), best, 0] += 3.0 * np.array([1.0, 10.0, 0.1])[best]
    first_stage = rng.normal(size=(n, 5)).astype(np.float32)
    return RouteInputs({"first_stage": first_stage}, {"members": members}), U


def test_the_post_retrieval_router_learns_a_best_member_the_results_show() -> None:
    train, U = _synthetic(400, seed=0, signal=True)
    test, U_test = _synthetic(300, seed=1, signal=True)
    router = PostRetrievalRouter().fit(train, U, ["a", "b", "c"])
    assert not router.fallback_ and router.default_ == 0
    picks, scores = router.route(test, K)
    assert picks.shape == (300, K) and scores.shape == (300, K)
    routed, default = best_of_l(U_test, picks)[0], float(U_test[:, 0].mean())
    assert routed > default + 0.1  # the default gets ~0.84, the router close to 1
    assert (np.sort(picks, axis=1) == np.arange(K)).all()  # every routing is an order of the members
    # the pre-retrieval router sees only the (noise) first-stage features: it falls back to member 0
    pre = PreRetrievalRouter().fit(train, U)
    assert pre.fallback_ and (pre.route(test, 1)[0] == 0).all()


@pytest.mark.parametrize("mode", MODES)
def test_on_noise_a_router_falls_back_to_the_default_member(mode: str) -> None:
    for seed in range(5):
        train, U = _synthetic(300, seed=seed, signal=False)
        router = make_router(mode, random_state=seed).fit(train, U)
        assert router.fallback_, router.selection()  # type: ignore[attr-defined]
        picks = router.route(train, K)[0]
        np.testing.assert_array_equal(picks, np.tile(greedy_completions(U)[0], (300, 1)))


def test_too_few_questions_to_validate_fall_back() -> None:
    train, U = _synthetic(20, seed=0, signal=True)
    router = PostRetrievalRouter(min_questions=30).fit(train, U)
    assert router.fallback_ and router.selection()["alpha"] is None


@pytest.mark.parametrize("completion", ["greedy", "top"])
def test_save_and_load_give_identical_routes(completion: str, tmp_path: Path) -> None:
    train, U = _synthetic(400, seed=2, signal=True)
    test, _ = _synthetic(50, seed=3, signal=True)
    for mode in MODES:
        router = make_router(mode, completion=completion).fit(train, U, ["a", "b", "c"])
        router.save(tmp_path / mode)
        config = json.loads((tmp_path / mode / "router.json").read_text())
        assert config["name"] == mode and config["hyperparameters"]["completion"] == completion
        loaded = load_router(tmp_path / mode)
        assert type(loaded) is type(router) and loaded.members_ == ["a", "b", "c"]
        assert loaded.selection() == router.selection()  # type: ignore[attr-defined]
        for l in range(1, K + 1):
            picks, scores = router.route(test, l)
            again, loaded_scores = loaded.route(test, l)
            np.testing.assert_array_equal(again, picks)
            np.testing.assert_allclose(loaded_scores, scores)


def test_the_registry_knows_both_modes_and_serves_them_after_the_learned_router() -> None:
    assert set(MODES) <= set(router_names())
    # cheapest first, by what each reads (the cascade: a shortlist of members, between the two)
    assert servable_names() == ["learned", "pre_retrieval", "cascade", "post_retrieval"]
    assert servable_names(learned=False) == ["pre_retrieval", "cascade", "post_retrieval"]
    assert isinstance(make_router("pre_retrieval"), PreRetrievalRouter)
    assert isinstance(make_router("post_retrieval"), PostRetrievalRouter)


def test_missing_blocks_are_named() -> None:
    train, U = _synthetic(40, seed=0, signal=True)
    with pytest.raises(ValueError, match=r"query blocks \['first_stage'\] are missing"):
        PreRetrievalRouter().fit(RouteInputs({"other": np.zeros((40, 2))}), U)
    with pytest.raises(ValueError, match=r"reads results\['members'\] of shape \(n, 3, d\)"):
        PostRetrievalRouter().fit(RouteInputs(train.query), U)
    with pytest.raises(RuntimeError, match="not fitted"):
        PostRetrievalRouter().route(train, 1)


def test_cdf_transform_and_greedy_completions_by_hand() -> None:
    knots = cdf_knots(np.array([[0.0], [1.0], [2.0], [3.0]]), 4)
    np.testing.assert_allclose(cdf_transform(np.array([[-1.0], [1.0], [9.0]]), knots), [[0.0], [0.375], [1.0]])
    U = np.array([[1.0, 0.0, 0.9], [0.0, 1.0, 0.9], [0.0, 0.0, 0.9]])
    # from 0: member 2 adds most (0.9 on two questions), then 1; from 2: member 0 and 1 tie, the lower first
    assert greedy_completions(U).tolist() == [[0, 2, 1], [1, 2, 0], [2, 0, 1]]
    assert paired_z(np.array([0.1, 0.1])) == float("inf") and paired_z(np.zeros(3)) == 0.0
    assert paired_z(np.array([1.0, 0.0, 1.0, 0.0])) == pytest.approx(0.5 / (np.std([1, 0, 1, 0], ddof=1) / 2))
