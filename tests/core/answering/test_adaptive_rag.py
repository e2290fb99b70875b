"""AdaptiveRAG and SystemRunner: per-member answers, selection, fallbacks, costs, the systems compared."""

from __future__ import annotations

import numpy as np
import pytest
from fake_encoders import tiny_runner
from routed_portfolio import routed_portfolio

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm.chat import Completion
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
from ragfolio.core.routing.online import OnlineRetrievalRouting
from ragfolio.core.routing.routers.cascade import CascadeRouter
from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter, PreRetrievalRouter
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio_lab.answering.scores import score_all
from ragfolio_lab.answering.summary import summarize
from ragfolio_lab.answering.systems import SystemRunner, run_order, system_names
from ragfolio_lab.answering.vendi_rag import VendiRAG
from ragfolio_lab.answering.vendirag_loop import AuthorsVendiRAG


class EchoBackend:
    """Answers with the first passage title it was shown ("none" closed-book); selects by script."""

    def __init__(self, selector_reply: str = "1") -> None:
        self.selector_reply, self.calls = selector_reply, []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        prompt = messages[-1]["content"]
        self.calls.append(prompt)
        if "candidate answers" in prompt.lower() or "candidates" in prompt.lower():
            return Completion(self.selector_reply, 20, 1, 2.0)
        if prompt.startswith("Rate from 1 to 10"):  # Vendi-RAG's judge
            return Completion("9", 30, 1, 2.0)
        if prompt.startswith("The answer found so far"):  # Vendi-RAG's query refinement
            return Completion("a rewritten question about it", 20, 6, 2.0)
        if "Passages:" not in prompt:
            return Completion("none", 20, 1, 1.0)
        last = prompt.rsplit("Passages:\n", 1)[1]  # after the prompt's worked example
        text = last.split("[1] ", 1)[1].split(":")[0]
        return Completion(text, 50, 3, 5.0)


@pytest.fixture
def routed_parts(tiny_dir, monkeypatch, small_grid):
    return routed_portfolio(tiny_dir, monkeypatch, small_grid)


def test_answer_routes_answers_each_member_and_selects(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    backend = EchoBackend(selector_reply="2")
    rag = AdaptiveRAG(RoutedSystem(runner, members, router, hasher, ["minilm"]), Answerer(backend))
    result = rag.answer(RetrievalRequest(queries[0], 2, rag.system.depth))
    assert len(set(result.retrieval.members)) == 2 and set(result.retrieval.members) <= {0, 1, 2}
    assert [name for name, _ in result.candidates] == [members[j].name for j in result.retrieval.members]
    assert set(result.latency_ms) == {"route", "retrieve", "answer", "select", "total"}
    assert result.tokens == sum(c.tokens for c in result.calls.values()) > 0
    distinct = len({a.lower() for _, a in result.candidates}) > 1
    assert result.fallback is False
    assert result.answer == result.candidates[result.chosen][1]
    assert ("select" in result.calls) and (result.calls["select"].tokens > 0) == distinct
    rag.close()


def test_unmatched_selector_reply_falls_back_to_top_member(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    answerer = Answerer(EchoBackend(selector_reply="no idea"))
    rag = AdaptiveRAG(RoutedSystem(runner, members, router, hasher, ["minilm"]), answerer)
    for query in queries:
        result = rag.answer(RetrievalRequest(query, 3, rag.system.depth))
        if len({a.lower() for _, a in result.candidates}) > 1:
            assert result.fallback and result.chosen == 0 and result.answer == result.candidates[0][1]
            break
    else:
        pytest.skip("every query got identical member answers: the selector never ran")
    rag.close()


def test_failing_members_degrade_then_closed_book(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    broken = [CandidateSpec(f"broken{i}", "sparse", {}) for i in range(3)]
    rag = AdaptiveRAG(RoutedSystem(runner, broken, router, hasher, ["minilm"]), Answerer(EchoBackend()))
    result = rag.answer(RetrievalRequest(queries[0], 2, rag.system.depth))
    assert result.retrieval.results.degraded and result.candidates == []
    assert result.answer == "none" and "answer:closed_book" in result.calls


def _systems(routed_parts, tiny_dir, *, cold_caches: bool = True, selector_reply: str = "1", only=None, authors=False):
    """A SystemRunner over every system: wide runner and both retrieval routers included (vendirag's
    own loop when ``authors``)."""
    runner, members, router, hasher, queries = routed_parts
    answerer = Answerer(EchoBackend(selector_reply=selector_reply))
    # served: the same router, routing at l = 2 only (member 0, the single best, serves l = 1 and 3 unrouted)
    rag = AdaptiveRAG(RoutedSystem(runner, members, router, hasher, ["minilm"], routed_ls=(2,)), answerer)
    learned = RoutedSystem(runner, members, router, hasher, ["minilm"])
    featurizer = RetrievalFeaturizer(("minilm",), runner.num_docs)
    first, member_features = featurizer.compute(runner, queries, members)
    U = np.tile(np.array([[1.0, 0.5, 0.0]], dtype=np.float32), (len(queries), 1))
    inputs = RouteInputs({"first_stage": first}, {"members": member_features})
    online = {
        "pre_retrieval": OnlineRetrievalRouting(PreRetrievalRouter().fit(inputs, U), rag.system.executor, featurizer),
        "post_retrieval": OnlineRetrievalRouting(PostRetrievalRouter().fit(inputs, U), rag.system.executor, featurizer),
        "cascade": OnlineRetrievalRouting(CascadeRouter(members_run=2).fit(inputs, U), rag.system.executor, featurizer),
    }
    wide, _ = tiny_runner(tiny_dir)
    wide.num_docs = 2 * runner.num_docs
    vendi = VendiRAG(answerer, runner, num_docs=3, max_iterations=2)
    authors_vendi = AuthorsVendiRAG(answerer, runner, num_docs=3, max_iterations=2) if authors else None
    systems = SystemRunner(rag, members[0], vendi, authors_vendi=authors_vendi, wide_runner=wide,
                           retrieval_routers=online, learned=learned, ls=(1, 2, 3), cold_caches=cold_caches, only=only)
    return systems, runner, queries


def test_system_runner_covers_every_system_and_shares_member_answers(routed_parts, tiny_dir) -> None:
    systems, runner, queries = _systems(routed_parts, tiny_dir)
    assert systems.systems == system_names((1, 2, 3))[:-1]  # vendirag's own loop runs when asked for
    answers = systems.run(queries[0])
    assert [a.system for a in answers] == list(systems.systems) and [a.run_position for a in answers] == list(range(len(answers)))
    by = {a.system: a for a in answers}
    assert by["no_retrieval"].doc_ids == [] and by["no_retrieval"].prediction == "none"
    assert len(by["routed_l1"].calls) == 1 and len(by["routed_l3"].calls) >= 3
    assert len(by["single_best"].doc_ids) == 3 and len(by["single_best_wide"].doc_ids) == 6
    assert by["single_best_wide"].doc_ids[:3] == by["single_best"].doc_ids  # the same ranking, twice as deep
    # served: routed where the system routes (l = 2, as the learned router), else the single best member deeper
    best = systems.single_best.name
    assert by["served_l1"].doc_ids == by["single_best"].doc_ids and by["served_l1"].members == [best]
    assert by["served_l2"].members == by["routed_l2"].members and by["served_l2"].calls[0] is by["routed_l2"].calls[0]
    assert len(by["served_l2"].members) == 2 and by["served_l2"].candidates == by["routed_l2"].candidates
    deeper = min(3 * runner.num_docs, runner.prefilter_depth)  # l x num_docs passages in one prompt
    assert by["served_l3"].members == [best] and len(by["served_l3"].calls) == 1 and len(by["served_l3"].doc_ids) == deeper
    assert by["served_l3"].doc_ids[:6] == by["single_best_wide"].doc_ids  # the same ranking, deeper
    for mode in ("pre_retrieval", "post_retrieval", "cascade"):
        assert [len(by[f"{mode}_l{l}"].members) for l in (1, 2, 3)] == [1, 2, 3]
    # routed_l3 and portfolio_all answer from the same members: the member calls are the same objects
    assert {id(c) for c in by["routed_l3"].calls[:3]} == {id(c) for c in by["portfolio_all"].calls[:3]}
    assert by["vendi_rag"].rounds == 1 and by["vendi_rag"].judged == 1 and by["vendi_rag"].accepted == 1
    assert all(a.retrieval_ms > 0 for a in answers if a.system != "no_retrieval")
    records = score_all([a.record("q1", "tiny", ["x"]) for a in answers], runner.texts)
    assert all(r["tokens"] == r["prompt_tokens"] + r["completion_tokens"] for r in records)
    summary = summarize(records)["tiny"]
    assert list(summary) == list(systems.systems)
    assert summary["routed_l3"]["tokens_mean"] > summary["routed_l1"]["tokens_mean"]
    systems.rag.close()


def test_the_authors_vendi_loop_is_a_system_when_given(routed_parts, tiny_dir) -> None:
    systems, _, queries = _systems(routed_parts, tiny_dir, only=["vendi_rag", "vendi_rag_authors"], authors=True)
    assert systems.systems == ("vendi_rag", "vendi_rag_authors")
    authors = systems.run(queries[0])[1]
    assert authors.system == "vendi_rag_authors" and 1 <= authors.rounds <= 2 and authors.judged == authors.rounds
    systems.rag.close()


def test_only_the_systems_asked_for_run_in_report_order(routed_parts, tiny_dir) -> None:
    systems, runner, queries = _systems(routed_parts, tiny_dir, only=["post_retrieval_l1", "single_best"])
    assert systems.systems == ("single_best", "post_retrieval_l1")
    answers = systems.run(queries[0])
    assert [a.system for a in answers] == ["single_best", "post_retrieval_l1"]
    assert len(answers[1].members) == 1 and len(answers[1].calls) == 1  # one member, no selector call
    systems.rag.close()
    for only in ([], ["single_best", "routed_l4"]):
        with pytest.raises(ValueError, match="must be a non-empty subset of"):
            _systems(routed_parts, tiny_dir, only=only)
    runner, members, router, hasher, _ = routed_parts  # an l above k is refused, not answered at k
    rag = AdaptiveRAG(RoutedSystem(runner, members, router, hasher, ["minilm"]), Answerer(EchoBackend()))
    with pytest.raises(ValueError, match=r"routed l \[4\] above the portfolio's k=3"):
        SystemRunner(rag, members[0], VendiRAG(rag.answerer, runner, num_docs=3), ls=(1, 4))
    rag.close()


def test_each_system_runs_with_its_own_cold_query_caches(routed_parts, tiny_dir) -> None:
    """The memo's counters: with cold caches no system reads a query part another computed, in any order;
    sharing the caches (the old behaviour) shows up as foreign hits."""
    systems, _, queries = _systems(routed_parts, tiny_dir)
    for order in ("fixed", "reversed", "shuffled"):
        answers = systems.run(queries[1], run_order(systems.systems, order, 0, "q1"))
        for a in answers:
            assert a.cache["foreign_query_hits"] == 0, a.system
            if a.system.startswith(("routed", "pre_retrieval", "post_retrieval", "vendi")):
                assert a.cache["query_misses"] > 0, a.system  # it encoded and ranked the query itself
    shared, _, _ = _systems(routed_parts, tiny_dir, cold_caches=False)
    leaked = {a.system: a.cache["foreign_query_hits"] for a in shared.run(queries[2])}  # a query not run before
    assert leaked["no_retrieval"] == leaked["single_best"] == 0  # the first to retrieve computes its own parts
    assert leaked["routed_l2"] > 0  # it reads the query embeddings and results routed_l1 computed
    systems.rag.close()
    shared.rag.close()


def test_retrieval_latency_in_two_orders_and_run_orders(routed_parts, tiny_dir) -> None:
    systems, _, queries = _systems(routed_parts, tiny_dir)
    names = systems.systems
    forward = systems.retrieval_ms(queries[0], run_order(names, "fixed", 0, "q"))
    backward = systems.retrieval_ms(queries[0], run_order(names, "reversed", 0, "q"))
    assert set(forward) == set(backward) == set(names) - {"no_retrieval"}
    assert all(v > 0 for v in [*forward.values(), *backward.values()])
    shuffled = [run_order(names, "shuffled", 7, f"q{i}") for i in range(20)]
    assert all(sorted(o) == sorted(names) for o in shuffled) and len({tuple(o) for o in shuffled}) > 1
    assert run_order(names, "shuffled", 7, "q3") == shuffled[3]  # seeded per question
    with pytest.raises(ValueError, match="system_order='random'"):
        run_order(names, "random", 0, "q")
    assert [a.system for a in systems.run(queries[0], names[:1])] == list(names[:1])  # some systems only
    with pytest.raises(ValueError, match="each once"):
        systems.run(queries[0], [names[0], names[0]])
    systems.rag.close()
