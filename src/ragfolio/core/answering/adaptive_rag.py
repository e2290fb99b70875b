"""Adaptive RAG end to end: a routed retrieval -> one answer per routed member -> the selector picks one.

:class:`AdaptiveRAG` puts the LLM answerer and selector (:mod:`ragfolio.core.answering.answerer`) on
top of the served system's retrieval (:class:`~ragfolio.core.system.routed_system.RoutedSystem`:
route, run the top-l members concurrently). Each of the l routed members' passages goes to its own
answer prompt; the selector sees the question and the candidate answers in a seeded random order
(:meth:`~ragfolio.core.answering.answerer.Answerer.shown_order`) and picks one.
Latency is recorded per stage and tokens per call, so a caller can report both per query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm.chat import Completion
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedRetrieval, RoutedSystem

if TYPE_CHECKING:
    from ragfolio.core.bundle import PortfolioBundle


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
    """A routed system and the LLM that answers from its members' passages.

    Args:
        system: The portfolio and router over one corpus (what ``/retrieve`` serves).
        answerer: The LLM answerer and selector.
    """

    def __init__(self, system: RoutedSystem, answerer: Answerer) -> None:
        self.system, self.answerer = system, answerer

    @classmethod
    def from_bundle(
        cls, bundle: PortfolioBundle, answerer: Answerer, *, timeout_s: float = 5.0, num_docs: int | None = None
    ) -> AdaptiveRAG:
        """The bundle's portfolio and router (:meth:`RoutedSystem.from_bundle
        <ragfolio.core.system.routed_system.RoutedSystem.from_bundle>`), answering with ``answerer``."""
        return cls(RoutedSystem.from_bundle(bundle, timeout_s=timeout_s, num_docs=num_docs), answerer)

    def answer(
        self, request: RetrievalRequest, *, members: Sequence[int] | None = None,
        retrieval: RoutedRetrieval | None = None,
    ) -> RAGAnswer:
        """Retrieve with ``request.l`` routed members (or the given ``members``), answer from each
        member's passages, select one answer.

        ``retrieval``: the query's routed retrieval when it was already made (e.g. in a batch,
        :meth:`~ragfolio.core.system.routed_system.RoutedSystem.retrieve_batch`); then only
        ``request.query`` is used.

        Raises:
            ragfolio.core.llm.chat.LLMUnavailableError: The LLM endpoint cannot be reached.
        """
        query = request.query
        if retrieval is None:
            retrieval = self.system.retrieve(request, members=members)
        calls: dict[str, Completion] = {}
        candidates: list[tuple[str, str]] = []
        explanations: list[str] = []
        start = time.perf_counter()
        for run in retrieval.results.ok_runs:
            said = self.answerer.answer(query, self.system.passages(run.doc_ids))
            calls[f"answer:{run.name}"] = said.completion
            candidates.append((run.name, said.text))
            explanations.append(said.explanation)
        answer_ms = 1000 * (time.perf_counter() - start)
        start = time.perf_counter()
        if candidates:
            selection = self.answerer.select(query, [text for _, text in candidates], explanations)
            calls["select"] = selection.completion
            chosen, final, fallback = selection.index, selection.answer, selection.fallback
        else:  # every member failed: answer closed-book rather than not at all
            said = self.answerer.answer(query, [])
            calls["answer:closed_book"] = said.completion
            final, chosen, fallback = said.text, -1, False
        select_ms = 1000 * (time.perf_counter() - start)
        latency = {
            "route": retrieval.route_ms, "retrieve": retrieval.results.latency_ms, "answer": answer_ms,
            "select": select_ms,
        }
        latency["total"] = float(np.sum(list(latency.values())))
        return RAGAnswer(final, candidates, chosen, fallback, retrieval, calls, latency)

    def close(self) -> None:
        self.system.close()
