"""The cascade router: post-retrieval at m = k, the default member at m = 1, blind to members it did not run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.judging.evaluation import best_of_l
from ragfolio.core.routing.registry import load_router, make_router, servable_names
from ragfolio.core.routing.routers.cascade import CascadeRouter, ran_first, shortlist
from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter

K = 4
SCALES = np.array([1.0, 10.0, 0.1, 3.0])  # members' score scales differ


def _synthetic(n: int, seed: int) -> tuple[RouteInputs, np.ndarray]:
    """Member 0 is best on ~55% of questions, each other member on ~15%; the best member's list has a
    higher top score (column 0 of its features), and the first stage hints, noisily, which it is.

    Utilities: 1 for the best member, 0.6 for member 0 otherwise, 0.5 for the rest: member 0 is the
    default (best train mean) and moving to the best member gains 0.4 where it is not member 0.
    """
    rng = np.random.default_rng(seed)
    best = rng.choice(K, n, p=[0.55, 0.15, 0.15, 0.15])
    U = np.full((n, K), 0.5, dtype=np.float32)
    U[:, 0] = 0.6
    U[np.arange(n), best] = 1.0
    members = rng.normal(size=(n, K, 5)).astype(np.float32)
    members[:, :, 0] *= SCALES
    members[np.arange(n), best, 0] += 3.0 * SCALES[best]
    first_stage = rng.normal(size=(n, 6)).astype(np.float32)
    first_stage[:, :K] += 1.5 * np.eye(K)[best]  # a hint of the best member, weaker than its list
    return RouteInputs({"first_stage": first_stage}, {"members": members}), U


@pytest.fixture(scope="module")
def data() -> tuple[RouteInputs, np.ndarray, RouteInputs, np.ndarray]:
    train, U = _synthetic(500, seed=0)
    test, U_test = _synthetic(300, seed=1)
    return train, U, test, U_test


def test_all_members_run_is_the_post_retrieval_router_and_one_is_the_default(data) -> None:
    train, U, test, U_test = data
    names = ["a", "b", "c", "d"]
    for completion in ("greedy", "top"):
        post = PostRetrievalRouter(completion=completion).fit(train, U, names)
        every = CascadeRouter(members_run=K, cross_member_columns=[], post={"completion": completion}).fit(train, U, names)
        for l in range(1, K + 1):
            np.testing.assert_array_equal(every.route(test, l)[0], post.route(test, l)[0])
        assert every.members_ran(1) == K and not every.fallback_
    one = CascadeRouter(members_run=1).fit(train, U, names)
    picks = one.route(test, K)[0]
    assert (picks[:, 0] == one.default_).all() and one.default_ == 0 and one.fallback_
    assert one.members_ran(1) == 1 and one.members_ran(3) == 3


def test_a_shortlist_of_two_routes_and_gains_and_m_is_chosen_on_train(data) -> None:
    train, U, test, U_test = data
    two = CascadeRouter(members_run=2).fit(train, U)
    assert not two.fallback_ and not two.pre_.fallback_ and not two.post_.fallback_
    first = two.route(test, 1)[0][:, 0]
    assert len(set(first.tolist())) > 1  # picks vary
    short = two.shortlist(test)
    assert short.shape == (300, 2) and (short[:, 0] == 0).all() and (first[:, None] == short).any(axis=1).all()
    value, default = best_of_l(U_test, two.route(test, 1)[0])[0], float(U_test[:, 0].mean())
    assert value > default + 0.05
    chosen = CascadeRouter().fit(train, U)
    curve = chosen.val_curve_
    assert curve.shape == (K,) and curve[0] == pytest.approx(chosen.val_default_) and curve[-1] > curve[0] + 0.05
    assert chosen.members_run_ == int(np.argmax(curve >= curve.max() - 1e-12)) + 1 > 1
    assert chosen.selection()["val_best_of_1"] == pytest.approx(curve.max())
    lenient = CascadeRouter(tolerance=1.0).fit(train, U)
    assert lenient.members_run_ == 1 and lenient.fallback_  # everything within tolerance: the fewest members


def test_features_of_members_not_shortlisted_do_not_change_the_routing(data) -> None:
    train, U, test, _ = data
    router = CascadeRouter(members_run=2).fit(train, U)
    picks, scores = router.route(test, K)
    ran = np.zeros((len(U_ := scores), K), dtype=bool)
    ran[np.arange(len(U_))[:, None], router.shortlist(test)] = True
    corrupted = np.array(test.results["members"], copy=True)
    corrupted[~ran] = np.random.default_rng(5).normal(scale=100.0, size=(int((~ran).sum()), corrupted.shape[2]))
    again, again_scores = router.route(RouteInputs(test.query, {"members": corrupted}), K)
    np.testing.assert_array_equal(again, picks)
    np.testing.assert_array_equal(again_scores, scores)
    np.testing.assert_array_equal(scores[~ran], router.pre_.predict(test)[~ran])  # the query-only prediction
    assert np.take_along_axis(ran, picks[:, :2], axis=1).all()  # l <= m: only members that ran


@pytest.mark.parametrize("completion", ["greedy", "top"])
def test_save_and_load_give_identical_routes(data, completion: str, tmp_path: Path) -> None:
    train, U, test, _ = data
    router = make_router("cascade", post={"completion": completion}, random_state=3).fit(train, U, list("abcd"))
    router.save(tmp_path)
    config = json.loads((tmp_path / "router.json").read_text())
    assert config["name"] == "cascade" and config["members_run"] == router.members_run_  # type: ignore[attr-defined]
    loaded = load_router(tmp_path)
    assert isinstance(loaded, CascadeRouter) and loaded.members_ == list("abcd")
    assert loaded.selection() == router.selection()  # type: ignore[attr-defined]
    for l in range(1, K + 1):
        picks, scores = router.route(test, l)
        again, loaded_scores = loaded.route(test, l)
        np.testing.assert_array_equal(again, picks)
        np.testing.assert_allclose(loaded_scores, scores)


def test_registered_servable_between_first_stage_and_every_member() -> None:
    assert servable_names() == ["learned", "pre_retrieval", "cascade", "post_retrieval"]
    assert CascadeRouter.reads == "shortlist"
    with pytest.raises(ValueError, match="cascade pre: .*unexpected keyword argument 'nope'"):
        CascadeRouter(pre={"nope": 1}).fit(*_synthetic(40, seed=0))
    with pytest.raises(ValueError, match=r"members_run=5 must be in 1..4"):
        CascadeRouter(members_run=5).fit(*_synthetic(40, seed=0))
    with pytest.raises(RuntimeError, match="not fitted"):
        CascadeRouter().shortlist(_synthetic(4, seed=0)[0])


def test_shortlist_and_ran_first_by_hand() -> None:
    pre = np.array([[0.1, 0.9, 0.5, 0.5], [0.9, 0.0, 0.2, 0.3]])
    assert shortlist(pre, 2, 3).tolist() == [[2, 1, 3], [2, 0, 3]]  # default first; ties: the lower index
    assert shortlist(pre, 0, 1).tolist() == [[0], [0]]
    ran = np.array([[True, False, True, False], [False, True, True, True]])
    order = np.array([[1, 0, 3, 2], [0, 1, 2, 3]])
    assert ran_first(order, ran).tolist() == [[0, 2, 1, 3], [1, 2, 3, 0]]


def test_online_a_cascade_runs_only_its_shortlist(tiny_dir, small_grid, monkeypatch) -> None:
    """Served, the cascade runs the m shortlisted members per query and picks what the offline
    features of all k members give it; routed to l > m, its plan leaves the picks beyond the
    shortlist to the executor, which runs only those."""
    from fake_encoders import install_hashing_encoder, tiny_runner

    from ragfolio.core.retrieval.pool import expand_grid
    from ragfolio.core.retrieval.running.member_executor import PortfolioExecutor
    from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
    from ragfolio.core.routing.online import OnlineRetrievalRouting, routes_on_retrieval

    install_hashing_encoder(monkeypatch)
    runner, queries = tiny_runner(tiny_dir)
    members = [m for m in expand_grid(small_grid) if m.family in ("bm25", "dense", "mmr")][:3]
    featurizer = RetrievalFeaturizer(("minilm",), runner.num_docs)
    first, member_features = featurizer.compute(runner, queries, members)
    U = np.zeros((len(queries), 3), dtype=np.float32)
    U[np.arange(len(queries)), np.arange(len(queries)) % 3] = 1.0
    stage = {"min_questions": 1, "min_z": 0.0, "n_folds": 2}
    router = CascadeRouter(members_run=2, pre=stage, post=stage).fit(
        RouteInputs({"first_stage": first}, {"members": member_features}), U, [m.name for m in members])
    assert routes_on_retrieval(router)
    executor = PortfolioExecutor(runner, members)
    asked: list[list[int]] = []
    run_batch = executor.run_batch
    monkeypatch.setattr(executor, "run_batch",
                        lambda qs, chosen: asked.extend(list(c) for c in chosen) or run_batch(qs, chosen))
    online = OnlineRetrievalRouting(router, executor, featurizer)
    batch = queries[:6]
    offline = RouteInputs({"first_stage": first[:6]}, {"members": member_features[:6]})
    short, expected = router.shortlist(offline).tolist(), router.route(offline, 3)[0]
    routed = online.route_batch(batch, [2] * len(batch))
    assert asked == short  # one call for the batch: each query's two shortlisted members, nothing else
    assert [r.members for r in routed.routes] == expected[:, :2].tolist()
    assert all(sorted(r.plan.ran) == sorted(s) and not r.plan.missing for r, s in zip(routed.routes, short, strict=True))
    assert {"first_stage", "members", "features", "predict"} <= set(routed.stages_ms)
    asked.clear()
    again = executor.run_plans([r.plan for r in routed.routes])  # the shortlist ran: nothing runs again
    assert asked == [] and [[run.name for run in got.runs] for got in again] == [
        [members[j].name for j in r.members] for r in routed.routes]
    wide = online.route_batch(batch[:2], [3, 3])  # l > m: the third member is the plan's to run
    assert asked == short[:2] and [r.members for r in wide.routes] == expected[:2].tolist()
    assert [r.plan.missing for r in wide.routes] == [[j for j in range(3) if j not in s] for s in short[:2]]
    results = executor.run_plans([r.plan for r in wide.routes])
    assert asked == short[:2] + [[j for j in range(3) if j not in s] for s in short[:2]]  # only those, once
    assert all([run.name for run in got.runs] == [members[j].name for j in r.members] and all(run.ok for run in got.runs)
               for r, got in zip(wide.routes, results, strict=True))
    executor.close()
