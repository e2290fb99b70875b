"""The served system's retrieval: routing a query, and a batch, as the router was trained, each member run once."""

from __future__ import annotations

import numpy as np
import pytest
from routed_portfolio import routed_portfolio

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings
from ragfolio.core.routing.routers.cascade import CascadeRouter
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


def _seeing(router_class):
    """An unfitted router of ``router_class`` that validates on the tiny fixture's few questions
    (a cascade: shortlisting 2 of the 3 members)."""
    stage = {"min_questions": 1, "min_z": 0.0, "n_folds": 2}
    if router_class is CascadeRouter:
        return CascadeRouter(members_run=2, pre=stage, post=stage)
    return router_class(**stage)


@pytest.mark.parametrize("router_class", [PreRetrievalRouter, CascadeRouter, PostRetrievalRouter])
def test_a_router_that_sees_the_retrieval_is_served_as_trained(routed_parts, router_class, monkeypatch) -> None:
    """A routed system routes with the featurizer router training used; post-retrieval runs each member once."""
    runner, members, _, hasher, queries = routed_parts
    featurizer = RetrievalFeaturizer(("minilm",), runner.num_docs)
    first, member_features = featurizer.compute(runner, queries, members)
    U = np.zeros((len(queries), 3), dtype=np.float32)
    U[np.arange(len(queries)), np.arange(len(queries)) % 3] = 1.0  # a different best member by query
    router = _seeing(router_class).fit(
        RouteInputs({"first_stage": first}, {"members": member_features}), U, [m.name for m in members]
    )
    with pytest.raises(ValueError, match="reads the retrieval: pass retrieval_features"):
        RoutedSystem(runner, members, router, hasher, ["minilm"])
    system = RoutedSystem(runner, members, router, hasher, ["minilm"],
                          retrieval_features=RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth))
    asked: list[list[int]] = []
    run_batch = system.executor.run_batch
    monkeypatch.setattr(system.executor, "run_batch",
                        lambda qs, chosen: asked.extend(list(c) for c in chosen) or run_batch(qs, chosen))
    for i, query in enumerate(queries[:4]):
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
    system.close()


@pytest.mark.parametrize("router_class", [PreRetrievalRouter, CascadeRouter, PostRetrievalRouter, None])
def test_a_batch_is_routed_together_as_each_query_is_alone(routed_parts, router_class, monkeypatch) -> None:
    """Every router routes a batch with one first stage, one member run and one predict call per l,
    and picks for each query what it picks for the query alone (and what the offline features give)."""
    runner, members, router, hasher, queries = routed_parts
    featurizer = RetrievalFeaturizer(("minilm",), runner.num_docs)
    settings = None
    if router_class is not None:
        first, member_features = featurizer.compute(runner, queries, members)
        U = np.zeros((len(queries), 3), dtype=np.float32)
        U[np.arange(len(queries)), (np.arange(len(queries)) * 7) % 3] = 1.0
        router = _seeing(router_class).fit(
            RouteInputs({"first_stage": first}, {"members": member_features}), U, [m.name for m in members])
        settings = RetrievalFeatureSettings(("minilm",), featurizer.agreement_depth)
    system = RoutedSystem(runner, members, router, hasher, ["minilm"], retrieval_features=settings)
    batch = queries[:6]
    alone = [system.retrieve(q, 2) for q in batch]
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
