"""Adaptive RAG end to end: a routed retrieval -> one answer per routed member -> the selector picks one.

:class:`AdaptiveRAG` puts the LLM answerer and selector (:mod:`ragfolio.core.answering.answerer`) on
top of the served system's retrieval (:class:`~ragfolio.core.system.routed_system.RoutedSystem`:
route, run the top-l members concurrently). Each of the l routed members' passages goes to its own
answer prompt; the selector picks one in the answerer's ``select_mode``
(:mod:`~ragfolio.core.answering.selector`: the LLM judge, shown the candidates in a seeded random
order, :meth:`~ragfolio.core.answering.answerer.Answerer.shown_order`; or the readers' confidence
or agreement, without a call). When the chosen
answer is not read from its passages (the answerer's abstention rule,
:mod:`~ragfolio.core.answering.abstention`), the answer is
:data:`~ragfolio.core.answering.abstention.NO_ANSWER` and the reader's answer is kept as a guess.
The citations are the passages the chosen reader says it read its answer from.
Latency is recorded per stage and tokens per call, so a caller can report both per query.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ragfolio.core.answering.abstention import NO_ANSWER
from ragfolio.core.answering.answerer import Answer, Answerer
from ragfolio.core.llm.chat import Completion
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedRetrieval, RoutedSystem

if TYPE_CHECKING:
    from ragfolio.core.bundle import PortfolioBundle


@dataclass(frozen=True)
class RAGAnswer:
    """A selected answer with its provenance and costs.

    Attributes:
        answer: The final answer; :data:`~ragfolio.core.answering.abstention.NO_ANSWER` when abstained.
        candidates: ``(member name, its answer)`` of every member that answered, router order.
        chosen: Position in ``candidates`` of the selected answer.
        fallback: The selector's reply named no candidate, so the top-routed answer was taken.
        retrieval: The routed retrieval the answers came from.
        calls: Every LLM call by stage name (``answer:<member>``, ``select``).
        latency_ms: Per stage: ``route``, ``retrieve``, ``answer``, ``select`` and ``total``.
        abstained: The chosen answer is not read from its passages (the answerer's abstention rule).
        guess: The reader's answer when abstained, else None.
        cited: Corpus rows of the passages the chosen reader says it read the answer from, in
            its order, each once ([] closed-book).
    """

    answer: str
    candidates: list[tuple[str, str]]
    chosen: int
    fallback: bool
    retrieval: RoutedRetrieval
    calls: dict[str, Completion] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    abstained: bool = False
    guess: str | None = None
    cited: list[int] = field(default_factory=list)

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
        runs = retrieval.results.ok_runs
        start = time.perf_counter()
        passages = [self.system.passages(run.doc_ids) for run in runs]
        answers = [self.answerer.answer(query, ps) for ps in passages]
        answer_ms = 1000 * (time.perf_counter() - start)
        start = time.perf_counter()
        if answers:
            selection = self.answerer.choose(query, answers, passages)
            chosen, fallback, select_call = selection.index, selection.fallback, selection.completion
        else:  # every member failed: answer closed-book rather than not at all
            answers, chosen, fallback, select_call = [self.answerer.answer(query, [])], -1, False, None
        select_ms = 1000 * (time.perf_counter() - start)
        return self.result(retrieval, answers, chosen, fallback, select_call,
                           {"answer": answer_ms, "select": select_ms})

    @staticmethod
    def result(
        retrieval: RoutedRetrieval, answers: Sequence[Answer], chosen: int, fallback: bool,
        select_call: Completion | None, stages_ms: dict[str, float],
    ) -> RAGAnswer:
        """The :class:`RAGAnswer` of the readers' ``answers`` (one per ok run of ``retrieval``, in
        its order; or the closed-book answer alone, ``chosen`` -1) and the selector's choice
        (``select_call``: its call, None closed-book); ``stages_ms``: ``answer`` and ``select``."""
        runs = retrieval.results.ok_runs
        said = answers[max(chosen, 0)]
        if chosen >= 0:
            calls = {f"answer:{run.name}": a.completion for run, a in zip(runs, answers, strict=True)}
            calls["select"] = select_call if select_call is not None else Completion.none()
            candidates = [(run.name, a.text) for run, a in zip(runs, answers, strict=True)]
            cited = [runs[chosen].doc_ids[i] for i in said.used]
        else:
            calls, candidates, cited = {"answer:closed_book": said.completion}, [], []
        latency = {"route": retrieval.route_ms, "retrieve": retrieval.results.latency_ms, **stages_ms}
        latency["total"] = float(np.sum(list(latency.values())))
        answer, guess = (NO_ANSWER, said.text) if said.unsupported else (said.text, None)
        return RAGAnswer(answer, candidates, chosen, fallback, retrieval, calls, latency, said.unsupported, guess,
                         list(dict.fromkeys(cited)))

    def close(self) -> None:
        self.system.close()
