"""The served system's retrieval: routing a query, and a batch, as the router was trained, each member run once."""

from __future__ import annotations

import pytest
from routed_portfolio import routed_portfolio, switching_portfolio

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings
from ragfolio.core.routing.routers.cascade import CascadeRouter
from ragfolio.core.routing.routers.learned import SWITCH_MARGINS
from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter, PreRetrievalRouter
from ragfolio.core.system.routed_system import RoutedSystem


@pytest.fixture
def routed_parts(tiny_dir, monkeypatch, small_grid):
    return routed_portfolio(tiny_dir, monkeypatch, small_grid)


def test_a_routed_system_retrieves_for_the_router_it_was_given(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    system = RoutedSystem(runner, members, router, hasher, ["minilm"])
    assert len(system.retrieve(queries[0], 1).results.ok_runs) == 1
    system.close()
    with pytest.raises(ValueError, match="2 members for a router over 3"):
        RoutedSystem(runner, members[:2], router, hasher, ["minilm"])


@pytest.fixture
def switching(switching_dir, monkeypatch):
    """The switching portfolio: BM25 wins half the questions, a graph walk the other half."""
    return switching_portfolio(switching_dir, monkeypatch)


def _fitted(router_class, runner, members, queries, U):
    """``(router, featurizer)``: a ``router_class`` with its default settings (a cascade: shortlisting
    2 of the 3 members) fitted on the retrieval features of ``queries``; it must not fall back."""
    featurizer = RetrievalFeaturizer(("minilm",), runner.num_docs)
    first, member_features = featurizer.compute(runner, queries, members)
    router = CascadeRouter(members_run=2) if router_class is CascadeRouter else router_class()
    router.fit(RouteInputs({"first_stage": first}, {"members": member_features}), U, [m.name for m in members])
    assert not router.fallback_, router.selection()
    return router, featurizer


@pytest.mark.parametrize("router_class", [PreRetrievalRouter, CascadeRouter, PostRetrievalRouter])
def test_a_router_that_sees_the_retrieval_is_served_as_trained(switching, router_class, monkeypatch) -> None:
    """A routed system routes with the featurizer router training used, on questions where its
    router switches members (no fallback, first picks that vary); post-retrieval runs each member once."""
    runner, members, U, _, hasher, queries = switching
    router, featurizer = _fitted(router_class, runner, members, queries, U)
    with pytest.raises(ValueError, match="reads the retrieval: pass retrieval_features"):
        RoutedSystem(runner, members, router, hasher, ["minilm"])
    system = RoutedSystem(runner, members, router, hasher, ["minilm"],
                          retrieval_features=RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth))
    asked: list[list[int]] = []
    run_batch = system.executor.run_batch
    monkeypatch.setattr(system.executor, "run_batch",
                        lambda qs, chosen: asked.extend(list(c) for c in chosen) or run_batch(qs, chosen))
    served: list[list[int]] = []
    for i, query in enumerate(queries[:8]):
        f, m = featurizer.compute(runner, [query], members)
        expected = router.route(RouteInputs({"first_stage": f}, {"members": m}), 2)[0][0].tolist()
        got = system.retrieve(query, 2)
        assert got.members == expected and [r.name for r in got.results.runs] == [members[j].name for j in expected]
        assert len(got.router_scores) == 2 and got.route_ms >= 0
        if router.reads == "members":
            assert asked[-1] == [0, 1, 2] and len(asked) == i + 1  # all k once, nothing run twice
        elif router.reads == "shortlist":  # its two shortlisted members once, nothing run twice
            assert asked[-1] == router.shortlist(RouteInputs({"first_stage": f}))[0].tolist() and len(asked) == i + 1
        else:
            assert asked[-1] == expected
        served.append(got.members)
    assert len({first for first, _ in served}) > 1, served  # it switches members by question
    system.close()


@pytest.mark.parametrize("router_class", [PreRetrievalRouter, CascadeRouter, PostRetrievalRouter, None])
def test_a_batch_is_routed_together_as_each_query_is_alone(switching, router_class, monkeypatch) -> None:
    """Every router routes a batch with one first stage, one member run and one predict call per l,
    and picks for each query what it picks for the query alone (and what the offline features give),
    on questions where it switches members (no fallback, first picks that vary)."""
    runner, members, U, router, hasher, queries = switching
    settings = None
    if router_class is not None:
        router, featurizer = _fitted(router_class, runner, members, queries, U)
        settings = RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth)
    else:  # the learned router switches when its margin is below "never" (max(SWITCH_MARGINS))
        assert router.switch_margin_ < max(SWITCH_MARGINS)
    system = RoutedSystem(runner, members, router, hasher, ["minilm"], retrieval_features=settings)
    batch = queries[:8]
    alone = [system.retrieve(q, 2) for q in batch]
    assert len({r.members[0] for r in alone}) > 1, [r.members for r in alone]  # it switches members by question
    runs: list[int] = []
    predicts: list[int] = []
    run_batch, route = system.executor.run_batch, router.route
    monkeypatch.setattr(system.executor, "run_batch", lambda qs, chosen: runs.append(len(qs)) or run_batch(qs, chosen))
    monkeypatch.setattr(router, "route", lambda inputs, l: predicts.append(len(inputs)) or route(inputs, l))
    together = system.retrieve_batch(batch, [2] * len(batch))
    assert runs == [len(batch)] and predicts == [len(batch)]  # one member run, one predict call, whole batch
    assert [r.members for r in together] == [r.members for r in alone]
    assert [[run.doc_ids for run in r.results.runs] for r in together] == [[run.doc_ids for run in r.results.runs]
                                                                          for r in alone]
    assert all(r.batch_size == len(batch) and "predict" in r.stages_ms and "features" in r.stages_ms for r in together)
    if router_class is not None:  # offline features of the batch (as router training computes them) route the same
        first, member_features = featurizer.compute(runner, batch, members)
        offline = route(RouteInputs({"first_stage": first}, {"members": member_features}), 2)[0]
        assert [r.members for r in together] == offline.tolist()
        assert "first_stage" in together[0].stages_ms
        assert ("members" in together[0].stages_ms) == (router_class.reads in ("shortlist", "members"))
    mixed = system.retrieve_batch(batch[:3], [1, 2, 3])
    assert [len(r.members) for r in mixed] == [1, 2, 3]
    assert [r.members[0] for r in mixed] == [r.members[0] for r in alone[:3]]
    system.close()


def test_a_system_at_another_depth_and_with_another_router_keeps_the_rest(switching) -> None:
    """``at_depth`` and ``with_router`` are the served system with one thing changed: every other
    field is carried over, so a caller does not rebuild (and miswire) the system by hand."""
    runner, members, U, learned, hasher, queries = switching
    post, featurizer = _fitted(PostRetrievalRouter, runner, members, queries, U)
    settings = RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth)
    system = RoutedSystem(runner, members, post, hasher, ["minilm"], timeout_s=7.0, retrieval_features=settings,
                          routed_ls=(1,), single_best=2)
    deep = system.at_depth(2 * runner.num_docs)
    assert deep.runner.num_docs == 2 * runner.num_docs and deep.runner.titles is runner.titles
    assert (deep.members, deep.router, deep.hasher, deep.encoders) == (system.members, post, hasher, ["minilm"])
    assert (deep.timeout_s, deep.retrieval_features, deep.routed_ls, deep.single_best) == (7.0, settings, {1}, 2)
    assert deep.online is not None and deep.online.featurizer.num_docs == 2 * runner.num_docs
    got = deep.retrieve(queries[0], 2)  # unrouted at l = 2: the single best member, l x num_docs passages
    assert got.members == [2] and not got.routed and len(got.results.runs[0].doc_ids) == deep.unrouted_depth(2)

    other = system.with_router(learned)  # routed at every l: routed_ls was chosen for the served router
    assert other.runner is runner and other.router is learned and other.routed_ls is None and other.online is None
    assert (other.timeout_s, other.retrieval_features, other.single_best) == (7.0, settings, 2)
    by_hand = RoutedSystem(runner, members, learned, hasher, ["minilm"])
    assert [other.route(q, 2)[0] for q in queries[:4]] == [by_hand.route(q, 2)[0] for q in queries[:4]]
    back, post_by_hand = other.with_router(post), RoutedSystem(runner, members, post, hasher, ["minilm"],
                                                               retrieval_features=settings)
    assert [back.retrieve(q, 2).members for q in queries[:4]] == [post_by_hand.retrieve(q, 2).members for q in queries[:4]]
    for s in (system, deep, other, by_hand, back, post_by_hand):
        s.close()
