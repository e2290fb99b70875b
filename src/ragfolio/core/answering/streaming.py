"""Adaptive RAG's answer as it is written: the reader's tokens when one reader answer is the answer.

:func:`stream_answer` is :meth:`~ragfolio.core.answering.adaptive_rag.AdaptiveRAG.answer` as a generator:
it yields the final answer's text in pieces and returns the same
:class:`~ragfolio.core.answering.adaptive_rag.RAGAnswer` (same answer, candidates, calls and tokens).

- **One member's passages** (l = 1, or every routed member but one failed): the selector is not
  called for a single candidate, so the reader's answer is the final answer, and it is streamed
  as the reader writes it (:meth:`~ragfolio.core.answering.answerer.Answerer.answer_stream`). With
  no member's passages the closed-book answer is streamed the same way.
- **An abstention rule** (the answerer's ``abstain``, not ``"off"``): the reply is read whole before
  anything is sent, since its end may call the answer a guess; then the final answer (or
  :data:`~ragfolio.core.answering.abstention.NO_ANSWER`) comes in one piece.
- **Two or more**: the final answer exists only once every reader has answered and the selector
  has chosen, so nothing is yielded; the answer is computed as ``AdaptiveRAG.answer`` computes it.
"""

from __future__ import annotations

import time
from collections.abc import Generator

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG, RAGAnswer
from ragfolio.core.answering.answerer import Answer
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedRetrieval


def stream_answer(
    rag: AdaptiveRAG, request: RetrievalRequest, *, retrieval: RoutedRetrieval | None = None
) -> Generator[str, None, RAGAnswer]:
    """``rag.answer(request, retrieval=retrieval)``: the answer's text in pieces (see the module
    docstring; some may be empty, one per token the reader writes, so that a consumer can stop it
    anywhere), then the :class:`RAGAnswer`; the pieces join to its ``answer``.

    Raises:
        ragfolio.core.llm.chat.LLMUnavailableError: The LLM cannot be reached (before or while
            the pieces are yielded).
    """
    answerer, query = rag.answerer, request.query
    if retrieval is None:
        retrieval = rag.system.retrieve(request)
    runs = retrieval.results.ok_runs
    if len(runs) > 1:
        return rag.answer(request, retrieval=retrieval)
    start = time.perf_counter()
    reply = answerer.answer_stream(query, rag.system.passages(runs[0].doc_ids) if runs else [])
    if answerer.abstain == "off":
        said = yield from reply
    else:  # the answer may yet be called a guess: nothing is sent before the whole reply is read
        said = _drain(reply)
    reader_ms = 1000 * (time.perf_counter() - start)
    if runs:  # as AdaptiveRAG.answer: one candidate, and the selector's no-call choice of it
        start = time.perf_counter()
        selection = answerer.choose(query, [said], [[]])
        result = rag.result(retrieval, [said], selection.index, False, selection.completion,
                            {"answer": reader_ms, "select": 1000 * (time.perf_counter() - start)})
    else:  # every member failed: closed-book, timed as AdaptiveRAG.answer times it (its "select" stage)
        result = rag.result(retrieval, [said], -1, False, None, {"answer": 0.0, "select": reader_ms})
    if answerer.abstain != "off":
        yield result.answer
    return result


def _drain(reply: Generator[str, None, Answer]) -> Answer:
    """The value a generator returns, its pieces dropped."""
    while True:
        try:
            next(reply)
        except StopIteration as stop:
            return stop.value
