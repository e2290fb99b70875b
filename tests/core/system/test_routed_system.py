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
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem


@pytest.fixture
def routed_parts(tiny_dir, monkeypatch, small_grid):
    return routed_portfolio(tiny_dir, monkeypatch, small_grid)


def test_a_routed_system_retrieves_for_the_router_it_was_given(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    system = RoutedSystem(runner, members, router, hasher, ["minilm"])
    assert len(system.retrieve(RetrievalRequest(queries[0], 1, system.depth)).results.ok_runs) == 1
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
        got = system.retrieve(RetrievalRequest(query, 2, system.depth))
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
    alone = [system.retrieve(RetrievalRequest(q, 2, system.depth)) for q in batch]
    assert len({r.members[0] for r in alone}) > 1, [r.members for r in alone]  # it switches members by question
    runs: list[int] = []
    predicts: list[int] = []
    run_batch, route = system.executor.run_batch, router.route
    monkeypatch.setattr(system.executor, "run_batch", lambda qs, chosen: runs.append(len(qs)) or run_batch(qs, chosen))
    monkeypatch.setattr(router, "route", lambda inputs, l: predicts.append(len(inputs)) or route(inputs, l))
    together = system.retrieve_batch([RetrievalRequest(q, 2, system.depth) for q in batch])
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
    mixed = system.retrieve_batch([RetrievalRequest(q, l, system.depth) for q, l in zip(batch[:3], [1, 2, 3], strict=True)])
    assert [len(r.members) for r in mixed] == [1, 2, 3]
    assert [r.members[0] for r in mixed] == [r.members[0] for r in alone[:3]]
    system.close()


@pytest.mark.parametrize("router_class", [PostRetrievalRouter, None])
def test_a_request_at_another_depth_is_routed_at_the_bundles_and_run_at_its_own(switching, router_class,
                                                                               monkeypatch) -> None:
    """Routed as at the bundle's depth (post-retrieval: the k members run there, for the features),
    its routed members run once at the request's depth; an unrouted l is the single best at l x depth."""
    runner, members, U, router, hasher, queries = switching
    settings = None
    if router_class is not None:
        router, featurizer = _fitted(router_class, runner, members, queries, U)
        settings = RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth)
    system = RoutedSystem(runner, members, router, hasher, ["minilm"], retrieval_features=settings, routed_ls=(1, 2))
    depth = system.depth + 2
    batch = queries[:4]
    at_bundle = system.retrieve_batch([RetrievalRequest(q, 2, system.depth) for q in batch])
    asked: list[tuple[int, list[list[int]]]] = []
    deeper = system.executor.at_depth(depth)
    for executor in (system.executor, deeper):
        monkeypatch.setattr(executor, "run_batch", lambda qs, chosen, e=executor, run=executor.run_batch: asked.append(
            (e.runner.num_docs, [list(c) for c in chosen])) or run(qs, chosen))
    got = system.retrieve_batch([RetrievalRequest(q, 2, depth) for q in batch] + [RetrievalRequest(batch[0], 3, depth)])
    assert [r.members for r in got[:4]] == [r.members for r in at_bundle]  # routed at the bundle's depth
    routing = [(system.depth, [[0, 1, 2]] * len(batch))] if router_class else []  # post-retrieval: all k, to route
    assert asked == routing + [(depth, [r.members for r in at_bundle])]  # then the routed ones, once, at its depth
    assert all(len(run.doc_ids) == depth for r in got[:4] for run in r.results.runs)
    unrouted = got[4]
    assert not unrouted.routed and unrouted.members == [system.single_best]
    assert len(unrouted.results.runs[0].doc_ids) == min(3 * depth, runner.prefilter_depth)
    system.close()


def test_a_system_with_another_router_keeps_the_rest(switching) -> None:
    """``with_router`` is the served system with its router changed: every other field is carried
    over, so a caller does not rebuild (and miswire) the system by hand."""
    runner, members, U, learned, hasher, queries = switching
    post, featurizer = _fitted(PostRetrievalRouter, runner, members, queries, U)
    settings = RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth)
    system = RoutedSystem(runner, members, post, hasher, ["minilm"], timeout_s=7.0, retrieval_features=settings,
                          routed_ls=(1,), single_best=2)
    other = system.with_router(learned)  # routed at every l: routed_ls was chosen for the served router
    assert other.runner is runner and other.router is learned and other.routed_ls is None and other.online is None
    assert (other.timeout_s, other.retrieval_features, other.single_best) == (7.0, settings, 2)
    by_hand = RoutedSystem(runner, members, learned, hasher, ["minilm"])
    assert [other.route(q, 2)[0] for q in queries[:4]] == [by_hand.route(q, 2)[0] for q in queries[:4]]
    back, post_by_hand = other.with_router(post), RoutedSystem(runner, members, post, hasher, ["minilm"],
                                                               retrieval_features=settings)
    requests = [RetrievalRequest(q, 2, system.depth) for q in queries[:4]]
    assert [back.retrieve(r).members for r in requests] == [post_by_hand.retrieve(r).members for r in requests]
    for s in (system, other, by_hand, back, post_by_hand):
        s.close()
