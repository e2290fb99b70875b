"""Adaptive RAG end to end: route a query -> run the top-l members concurrently -> answer -> select.

:class:`AdaptiveRAG` ties together the router (:mod:`ragfolio.core.routing.learned`), the concurrent
member execution (:mod:`ragfolio.core.retrieval.executor`) and the LLM answerer and selector
(:mod:`ragfolio.core.answering.answerer`). Each of the l routed members' passages goes to its own answer
prompt; the selector sees the question and the candidate answers in a seeded random order
(:meth:`~ragfolio.core.answering.answerer.Answerer.shown_order`) and picks one.
Latency is recorded per stage and tokens per call, so a caller can report both per query.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.llm import Completion
from ragfolio.core.retrieval.executor import MemberResults, PortfolioExecutor
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.pool_runner import PoolRunner
from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.online import OnlineRetrievalRouting, routes_on_retrieval
from ragfolio.core.routing.query_features import Features, TextHasher, query_features
from ragfolio.core.routing.retrieval_features import RetrievalFeaturizer

if TYPE_CHECKING:
    from ragfolio.core.bundle import PortfolioBundle


@dataclass(frozen=True)
class RoutedRetrieval:
    """The routed members' passages for one query.

    Attributes:
        members: Routed member indices into the portfolio, best first, ``(l,)``.
        router_scores: The router's score of each routed member, aligned with ``members``.
        results: What each member returned (failed or timed-out members carry their error).
        route_ms: Time to build the query's features and score the members, in milliseconds.
    """

    members: list[int]
    router_scores: list[float]
    results: MemberResults
    route_ms: float

    @property
    def latency_ms(self) -> float:
        return self.route_ms + self.results.latency_ms


@dataclass(frozen=True)
class RAGAnswer:
    """A selected answer with its provenance and costs.

    Attributes:
        answer: The final answer.
        candidates: ``(member name, its answer)`` of every member that answered, router order.
        chosen: Position in ``candidates`` of the selected answer.
        fallback: The selector's reply named no candidate, so the top-routed answer was taken.
        retrieval: The routed retrieval the answers came from.
        calls: Every LLM call by stage name (``answer:<member>``, ``select``).
        latency_ms: Per stage: ``route``, ``retrieve``, ``answer``, ``select`` and ``total``.
    """

    answer: str
    candidates: list[tuple[str, str]]
    chosen: int
    fallback: bool
    retrieval: RoutedRetrieval
    calls: dict[str, Completion] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        return Completion.total(self.calls.values()).prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return Completion.total(self.calls.values()).completion_tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class AdaptiveRAG:
    """A trained portfolio and router over one corpus, answering one query at a time.

    Args:
        runner: The pool runner over the corpus (a disabled disk cache for online use).
        members: The portfolio's members, in the router's member order.
        router: The fitted router over those members (any registered kind that reads query features).
        hasher: The text features the router was trained with.
        encoders: Encoders whose query embeddings the router reads (block names of its features).
        answerer: The LLM answerer and selector; None for retrieval only.
        timeout_s: Per-member deadline of a retrieval.
        retrieval_features: The retrieval featurizer's settings (``encoders``, ``agreement_depth``),
            needed when ``router`` reads the retrieval (``pre_retrieval``: the first-stage rankings;
            ``post_retrieval``: every member's results, so all k members run before it routes).
    """

    def __init__(
        self,
        runner: PoolRunner,
        members: Sequence[CandidateSpec],
        router: RouterProtocol,
        hasher: TextHasher,
        encoders: Sequence[str],
        answerer: Answerer | None = None,
        *,
        timeout_s: float = 5.0,
        retrieval_features: Mapping[str, Any] | None = None,
    ) -> None:
        if len(members) != len(router.members_):
            raise ValueError(f"{len(members)} members for a router over {len(router.members_)}")
        self.runner, self.members, self.router = runner, list(members), router
        self.hasher, self.encoders, self.answerer = hasher, list(encoders), answerer
        self.executor = PortfolioExecutor(runner, self.members, timeout_s=timeout_s)
        self.retrieval_features = dict(retrieval_features or {})
        self.online: OnlineRetrievalRouting | None = None
        if routes_on_retrieval(router):
            if not self.retrieval_features:
                raise ValueError(f"the {router.name} router reads the retrieval: pass retrieval_features "
                                 "(the featurizer router training used, router_features['retrieval_features'])")
            featurizer = RetrievalFeaturizer(
                tuple(self.retrieval_features["encoders"]), runner.num_docs, int(self.retrieval_features["agreement_depth"])
            )
            self.online = OnlineRetrievalRouting(router, self.executor, featurizer, self.features)

    @classmethod
    def from_bundle(
        cls, bundle: PortfolioBundle, answerer: Answerer | None = None, *, timeout_s: float = 5.0, num_docs: int | None = None
    ) -> AdaptiveRAG:
        """The bundle's portfolio and router, ready to route, retrieve and (with ``answerer``) answer.

        Corpus parts (indexes, the passage graph) are built on the first query; call
        ``rag.runner.prepare(bundle.members, ["warm-up"])`` to build them up front.
        """
        return cls(
            PoolRunner.from_bundle(bundle, num_docs=num_docs), bundle.members, bundle.router,
            TextHasher.from_dict(bundle.routing["text_features"]), bundle.routing["encoders"], answerer,
            timeout_s=timeout_s, retrieval_features=bundle.routing.get("retrieval_features"),
        )

    @property
    def k(self) -> int:
        return len(self.members)

    def features(self, queries: Sequence[str]) -> Features:
        """The router's input for ``queries`` (query embeddings are shared with the members)."""
        embeddings = {name: self.runner.query_embeddings(name, list(queries)) for name in self.encoders}
        return query_features(list(queries), embeddings, self.hasher)

    def route(self, query: str, l: int) -> tuple[list[int], list[float], float]:
        """``(member indices, their scores, milliseconds)`` of the top-l routing of ``query``.

        A router that reads the retrieval computes its features from the first-stage rankings
        (which the routed members then reuse); a post-retrieval router runs all k members first,
        and their time is part of the routing's.
        """
        if self.online is not None:
            routed = self.online.route(query, l)
            return routed.members, routed.scores, routed.route_ms
        start = time.perf_counter()
        features = self.features([query])
        picks, scores = self.router.route(RouteInputs(features), l)  # one forward pass for both
        picks, scores = picks[0], scores[0]
        return [int(j) for j in picks], [float(scores[j]) for j in picks], 1000 * (time.perf_counter() - start)

    def retrieve(self, query: str, l: int, *, members: Sequence[int] | None = None) -> RoutedRetrieval:
        """Route ``query`` to l members (or use the given ``members``) and run them concurrently.

        Post-retrieval, the routed members' results are those the router saw (nothing runs twice):
        ``route_ms`` is then the features and routing, and the results' latency the k members' run.
        """
        if members is not None:
            chosen = list(members)
            return RoutedRetrieval(chosen, [float("nan")] * len(chosen), self.executor.run(query, chosen), 0.0)
        if self.online is not None and self.online.reads_results:
            routed = self.online.route(query, l)
            assert routed.results is not None  # a post-retrieval router ran every member
            seen = routed.results
            results = MemberResults(seen.query, [seen.runs[j] for j in routed.members], seen.shared_ms, seen.latency_ms)
            return RoutedRetrieval(routed.members, routed.scores, results, max(0.0, routed.route_ms - seen.latency_ms))
        chosen, scores, route_ms = self.route(query, l)
        return RoutedRetrieval(chosen, scores, self.executor.run(query, chosen), route_ms)

    def passages(self, doc_ids: Sequence[int]) -> list[tuple[str, str]]:
        """``(title, text)`` of corpus rows."""
        return [(self.runner.titles[i], self.runner.texts[i]) for i in doc_ids]

    def answer(self, query: str, l: int, *, members: Sequence[int] | None = None) -> RAGAnswer:
        """Retrieve with l routed members, answer from each member's passages, select one answer.

        Raises:
            RuntimeError: This instance has no answerer.
            ragfolio.core.answering.llm.LLMUnavailableError: The LLM endpoint cannot be reached.
        """
        if self.answerer is None:
            raise RuntimeError("this AdaptiveRAG was built without an answerer (retrieval only)")
        retrieval = self.retrieve(query, l, members=members)
        calls: dict[str, Completion] = {}
        candidates: list[tuple[str, str]] = []
        start = time.perf_counter()
        for run in retrieval.results.ok_runs:
            text, completion = self.answerer.answer(query, self.passages(run.doc_ids))
            calls[f"answer:{run.name}"] = completion
            candidates.append((run.name, text))
        answer_ms = 1000 * (time.perf_counter() - start)
        start = time.perf_counter()
        if candidates:
            selection = self.answerer.select(query, [text for _, text in candidates])
            calls["select"] = selection.completion
            chosen, final, fallback = selection.index, selection.answer, selection.fallback
        else:  # every member failed: answer closed-book rather than not at all
            final, completion = self.answerer.answer(query, [])
            calls["answer:closed_book"] = completion
            chosen, fallback = -1, False
        select_ms = 1000 * (time.perf_counter() - start)
        latency = {
            "route": retrieval.route_ms, "retrieve": retrieval.results.latency_ms, "answer": answer_ms,
            "select": select_ms,
        }
        latency["total"] = float(np.sum(list(latency.values())))
        return RAGAnswer(final, candidates, chosen, fallback, retrieval, calls, latency)

    def close(self) -> None:
        self.executor.close()
