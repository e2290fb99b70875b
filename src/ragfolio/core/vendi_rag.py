"""Vendi-RAG: iterative retrieval that trades diversity for quality until an LLM judge accepts.

After Rezaei & Dieng (2025), "Vendi-RAG: Adaptively Trading-Off Diversity And Quality
Significantly Improves Retrieval Augmented Generation With LLMs". Each iteration

1. retrieves ``num_docs`` passages from a dense prefilter with the Vendi objective
   ``s * VS(D) / |D| + (1 - s) * mean rel(q, D)`` (:func:`~ragfolio.core.retrievers.diversity.vendi`),
2. answers the question from them,
3. asks the LLM whether the answer is supported by the passages and answers the question.

A rejected answer means the passages lacked evidence, so the next iteration raises the diversity
weight (``s <- min(s + s_step, 0.9)``) and refines the query with the current answer and the
titles retrieved so far. The accepted answer, or the last one, is returned, with every LLM call.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ragfolio.core.answering import Answerer, format_passages
from ragfolio.core.llm import Completion, Messages
from ragfolio.core.pool_runner import PoolRunner
from ragfolio.core.retrievers.diversity import vendi

logger = logging.getLogger(__name__)

S_MAX = 0.9  # diversity weight cap: at s = 1 relevance would no longer count at all

_YES = {"yes", "y", "true", "correct", "supported"}
_NO = {"no", "n", "false", "incorrect", "unsupported", "not"}


def judge_messages(
    question: str, answer: str, passages: Sequence[tuple[str, str]], *, max_passage_words: int = 100
) -> Messages:
    """Asks whether ``answer`` is supported by the ``(title, text)`` passages and answers the question.

    Ends with ``"Answer:"``, like the answer prompts, so that base models reply too.
    """
    content = (
        f"Passages:\n{format_passages(passages, max_passage_words)}\n\nQuestion: {question}\n"
        f"Proposed answer: {answer}\n\nIs the proposed answer supported by the passages, and does it "
        "answer the question? Reply with yes or no.\nAnswer:"
    )
    return [{"role": "user", "content": content}]


def parse_judgement(text: str) -> bool | None:
    """``True`` for a yes, ``False`` for a no, ``None`` when the reply says neither.

    The first word decides (``"Yes."``, ``"**No**"``, ``"Correct"``); otherwise the first
    standalone ``yes`` or ``no`` anywhere in the reply.
    """
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return None
    if words[0] in _YES or words[0] in _NO:
        return words[0] in _YES
    return next((w == "yes" for w in words if w in ("yes", "no")), None)


@dataclass(frozen=True)
class VendiRagResult:
    """The outcome of one Vendi-RAG run.

    Attributes:
        answer: The accepted answer, or the last one when none was accepted.
        doc_ids: Corpus rows of the passages that answer was generated from.
        iterations: Retrieve-answer-judge rounds run, ``1 <= iterations <= max_iterations``.
        s_history: The diversity weight ``s`` of each round, ``(iterations,)``.
        completions: Every LLM call in order (answer, judge, answer, judge, ...).
        latency_ms: Wall time of the run, retrieval included, in milliseconds.
    """

    answer: str
    doc_ids: list[int]
    iterations: int
    s_history: list[float]
    completions: list[Completion]
    latency_ms: float

    @property
    def prompt_tokens(self) -> int:
        return Completion.total(self.completions).prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return Completion.total(self.completions).completion_tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class VendiRAG:
    """The iterative Vendi-RAG baseline over one corpus.

    Args:
        answerer: Answers from passages; its backend also serves as the judge.
        runner: Gives the prefilter ranking and the embeddings of the corpus.
        encoder: Encoder of the Vendi similarities (and of the default prefilter).
        prefilter: Base ranking to diversify (``dense:<encoder>``, ``bm25``, ``hybrid:<encoder>``);
            ``None`` means ``f"dense:{encoder}"``.
        num_docs: Passages per answer.
        s_init: Diversity weight of the first round, in ``[0, 1]``.
        s_step: Increase of ``s`` after a rejected answer, ``>= 0`` (capped at :data:`S_MAX`).
        max_iterations: Rounds at most, ``>= 1``.
        max_judge_tokens: Generation limit of a judgement.
    """

    def __init__(
        self,
        answerer: Answerer,
        runner: PoolRunner,
        *,
        encoder: str = "minilm",
        prefilter: str | None = None,
        num_docs: int = 4,
        s_init: float = 0.3,
        s_step: float = 0.2,
        max_iterations: int = 3,
        max_judge_tokens: int = 4,
    ) -> None:
        if num_docs < 1 or max_iterations < 1 or max_judge_tokens < 1:
            raise ValueError(
                f"num_docs={num_docs}, max_iterations={max_iterations} and "
                f"max_judge_tokens={max_judge_tokens} must be >= 1"
            )
        if not 0.0 <= s_init <= 1.0 or s_step < 0:
            raise ValueError(f"s_init={s_init} must be in [0, 1] and s_step={s_step} >= 0")
        self.answerer, self.runner, self.encoder = answerer, runner, encoder
        self.prefilter = prefilter or f"dense:{encoder}"
        self.num_docs, self.s_init, self.s_step = num_docs, s_init, s_step
        self.max_iterations, self.max_judge_tokens = max_iterations, max_judge_tokens

    def _retrieve(self, query: str, s: float) -> list[int]:
        """Corpus rows of the ``num_docs`` Vendi picks for ``query``, in pick order."""
        prefilter = self.runner.base(self.prefilter, [query])
        picked = vendi(
            prefilter,
            self.runner.query_embeddings(self.encoder, [query]),
            self.runner.passage_embeddings(self.encoder),
            self.num_docs,
            s=s,
        )
        return [int(i) for i in picked.doc_ids[0] if i >= 0]

    def run(self, question: str) -> VendiRagResult:
        """Retrieve, answer and judge until the judge accepts or ``max_iterations`` rounds ran."""
        start = time.perf_counter()
        s, query = self.s_init, question
        s_history: list[float] = []
        completions: list[Completion] = []
        seen_titles: list[str] = []
        answer, doc_ids = "", []
        for round_ in range(1, self.max_iterations + 1):
            s_history.append(s)
            doc_ids = self._retrieve(query, s)
            passages = [(self.runner.titles[i], self.runner.texts[i]) for i in doc_ids]
            answer, completion = self.answerer.answer(question, passages)
            completions.append(completion)
            accepted = False
            if answer:  # an empty answer is rejected without asking
                judged = self.answerer.backend.complete(
                    judge_messages(question, answer, passages, max_passage_words=self.answerer.max_passage_words),
                    max_tokens=self.max_judge_tokens,
                )
                completions.append(judged)
                accepted = parse_judgement(judged.text) is True
            logger.debug("round %d s=%.2f answer=%r accepted=%s", round_, s, answer, accepted)
            if accepted or round_ == self.max_iterations:
                break
            seen_titles += [t for t, _ in passages if t not in seen_titles]
            s = max(s, min(s + self.s_step, S_MAX))
            query = " ".join([question, answer, *seen_titles]).strip()
        return VendiRagResult(
            answer=answer,
            doc_ids=doc_ids,
            iterations=len(s_history),
            s_history=s_history,
            completions=completions,
            latency_ms=(time.perf_counter() - start) * 1000.0,
        )
