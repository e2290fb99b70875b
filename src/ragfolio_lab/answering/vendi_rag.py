"""Vendi-RAG: iterative retrieval that steers a diversity weight by an LLM judge's quality score.

After Rezaei & Dieng (2025), "Vendi-RAG: Adaptively Trading-Off Diversity And Quality
Significantly Improves Retrieval Augmented Generation With LLMs", as its reference code
(github.com/vertaix/Vendi-RAG, ``vendirag/pipeline.py``) runs it. Starting from ``q_1 = q`` and
``s_1 = 0.8``, round i

1. takes the ``prefilter_depth`` most similar passages of ``q_i`` (the candidate pool ``C``) and
   picks ``num_docs`` of them greedily by ``VRS(D) = s * VS~(D) + (1 - s) * SS~(q_i, D)``
   (the authors' own :func:`vendirag.retriever.vrs_select`);
2. answers the *original* question from them;
3. scores the answer ``Q_i`` in [0, 1] (:meth:`VendiRAG.judge`), keeps the best answer so far, and
   stops when ``Q_i >= tau`` (0.85);
4. otherwise moves ``s`` towards ``s_target = clip(1 - Q_i / max(best, eps), 0, 1)`` by the EMA
   ``s <- beta * s + (1 - beta) * s_target`` (beta = 0.3) and refines the query with the LLM;

for at most ``max_iterations`` (T = 5) rounds, and returns the best-scored answer.

The judge. The reference's judge (a GPT-4o-class model) rates coherence, relevance to the
retrieved documents and query alignment from 1 to 10. The embedded 270M model rated nearly every
answer as acceptable (a yes/no judge accepted ~all first answers, so the loop never iterated), so
here ``Q_i = support * score``: ``score`` is the LLM's 1-10 rating of how well the passages
support the answer (divided by 10; 0.5, the reference's neutral score, when the reply holds none),
and ``support`` is the share of the answer's normalised words that occur in the passages. An answer
the passages do not contain cannot reach ``tau`` whatever the model says, which is what "supported
by the retrieved documents" requires. Kept from the reference without change: s_1, beta, eps,
tau, T, the candidate pool of 50, best-answer tracking and LLM query refinement. Left out: its
chain-of-thought call per round (every system here answers with the same short-answer prompt, so
answers differ by their passages only); ``num_docs`` is the pool's (4), the reference's 5.

Why an adaptation beside the authors' loop. :mod:`ragfolio_lab.answering.vendirag_loop` runs the
``vendirag`` package's own loop (system ``vendi_rag_authors``). Its four prompts ask for JSON; the
embedded 270M base model continues them with prose or a restated prompt, never the JSON object,
so every answer is empty and every judgement the neutral 0.5: with that model the authors' loop
answers nothing (``docs/benchmarks.md``, "Vendi-RAG: the authors' loop and the adaptation"). With an
instruction-following endpoint (``llm.kind: openai``) it runs as published.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from vendirag.retriever import vrs_select

from ragfolio.core.answer_text import normalize_answer
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.prompts import clean_answer, format_passages
from ragfolio.core.llm.chat import Completion, Messages
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

logger = logging.getLogger(__name__)

# The reference code's defaults (vendirag/pipeline.py).
INITIAL_S, BETA, EPSILON, TAU, MAX_ITERATIONS = 0.8, 0.3, 0.01, 0.85, 5
NEUTRAL_SCORE = 0.5  # the reference's judge falls back to 5/10 on an unparseable reply

_YES = {"yes", "y", "true", "correct", "supported"}
_NO = {"no", "n", "false", "incorrect", "unsupported", "not"}
_JUDGE_DEMOS = (  # one supported and one unsupported answer, so the score's scale is shown both ways
    ("Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
     "In which city is the Eiffel Tower?", "Paris", 9),
    ("Big Ben: Big Ben is the nickname for the Great Bell of the clock at the Palace of Westminster.",
     "In which country was the composer of the Big Ben chimes born?", "Germany", 2),
)


def candidate_pool(
    runner: PoolRunner, prefilter: str, encoder: str, query: str
) -> tuple[list[int], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Vendi-RAG's candidate pool for ``query``: the corpus rows of base ``prefilter``'s ranking
    (``-1`` padding dropped), their ``encoder`` embeddings and the query's."""
    rows = [int(r) for r in runner.base(prefilter, [query]).doc_ids[0] if r >= 0]
    query_emb = np.asarray(runner.query_embeddings(encoder, [query])[0])
    return rows, np.asarray(runner.passage_embeddings(encoder))[rows], query_emb


def judge_messages(
    question: str, answer: str, passages: Sequence[tuple[str, str]], *, max_passage_words: int = 100
) -> Messages:
    """Asks for a 1-10 score of how well the ``(title, text)`` passages support ``answer`` to ``question``.

    Two worked examples (a supported answer scored 9, an unsupported one 2) show the scale; the
    prompt ends with ``"Score:"`` so that base models reply with a number.
    """
    demos = "".join(
        f"Passages:\n[1] {passage}\nQuestion: {q}\nProposed answer: {a}\nScore: {score}\n\n"
        for passage, q, a, score in _JUDGE_DEMOS
    )
    content = (
        "Rate from 1 to 10 how well the passages support the proposed answer to the question: 10 when the "
        "passages state it, 1 when they do not mention it. Reply with the number only.\n\n"
        f"{demos}Passages:\n{format_passages(passages, max_passage_words)}\nQuestion: {question}\n"
        f"Proposed answer: {answer}\nScore:"
    )
    return [{"role": "user", "content": content}]


def parse_judgement(text: str) -> bool | None:
    """``True`` for a yes, ``False`` for a no, ``None`` when the reply says neither."""
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return None
    if words[0] in _YES or words[0] in _NO:
        return words[0] in _YES
    return next((w == "yes" for w in words if w in ("yes", "no")), None)


def parse_score(text: str) -> float | None:
    """The judge's score in [0, 1]: the first number 1-10 of the reply divided by 10 (``"8"``,
    ``"Score: 7/10"``), else 1.0 for a yes and 0.0 for a no; None when the reply holds neither."""
    for number in re.findall(r"\d+(?:\.\d+)?", text):
        value = float(number)
        if 1.0 <= value <= 10.0:
            return value / 10.0
    verdict = parse_judgement(text)
    return None if verdict is None else float(verdict)


def answer_support(answer: str, passages: Sequence[tuple[str, str]]) -> float:
    """Share of the words of the normalised ``answer`` that occur in the normalised passages (0 when empty)."""
    words = normalize_answer(answer).split()
    if not words:
        return 0.0
    seen = set(normalize_answer(" ".join(f"{t} {x}" for t, x in passages)).split())
    return sum(w in seen for w in words) / len(words)


@dataclass(frozen=True)
class VendiRound:
    """One retrieve-answer-judge round.

    Attributes:
        s: Diversity weight the round retrieved with.
        query: The (refined) query it retrieved for.
        doc_ids: Corpus rows of its passages, in pick order.
        answer: Its answer to the original question.
        support: Share of the answer's words found in the passages.
        score: The LLM judge's score in [0, 1] (None: no judge call, for an empty answer).
        quality: ``support * score`` (``score`` 0.5 when unparseable), the round's ``Q_i``.
        accepted: ``quality >= tau``.
    """

    s: float
    query: str
    doc_ids: list[int]
    answer: str
    support: float
    score: float | None
    quality: float
    accepted: bool


@dataclass(frozen=True)
class VendiRagResult:
    """The outcome of one Vendi-RAG run.

    Attributes:
        answer: The best-scored answer (the earliest among ties).
        doc_ids: Corpus rows of the passages that answer was generated from.
        rounds: Every round run, ``1 <= len(rounds) <= max_iterations``.
        completions: Every LLM call in order (answer, judge, refine, answer, ...).
        latency_ms: Wall time of the run, in milliseconds.
        retrieval_ms: The part of it spent retrieving (every round), in milliseconds.
    """

    answer: str
    doc_ids: list[int]
    rounds: list[VendiRound]
    completions: list[Completion]
    latency_ms: float
    retrieval_ms: float = 0.0
    s_history: list[float] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "s_history", [r.s for r in self.rounds])

    @property
    def iterations(self) -> int:
        return len(self.rounds)

    @property
    def accepted(self) -> bool:
        """Whether a round reached the threshold (the run stopped early, or at its last round)."""
        return any(r.accepted for r in self.rounds)

    @property
    def judged(self) -> int:
        """Rounds the LLM judge was asked about."""
        return sum(r.score is not None for r in self.rounds)

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
    """The iterative Vendi-RAG baseline over one corpus (see the module docstring).

    Args:
        answerer: Answers from passages; its backend also judges and refines queries.
        runner: Gives the candidate pool (its ``prefilter_depth``-deep base ranking) and the embeddings.
        encoder: Encoder of the similarities (and of the default pool).
        prefilter: Base ranking of the pool (``dense:<encoder>``, ``bm25``, ``hybrid:<encoder>``);
            ``None`` means ``f"dense:{encoder}"``.
        num_docs: Passages per answer.
        s_init: Diversity weight of the first round, in ``[0, 1]``.
        beta: EMA momentum of ``s``, in ``[0, 1]``.
        epsilon: Floor of the best quality in ``s_target``, > 0.
        tau: Quality that stops the loop, in ``[0, 1]``.
        max_iterations: Rounds at most (T), ``>= 1``.
        dynamic_s: False keeps ``s = s_init`` (the reference's fixed-s variant).
        refine_query: ``llm`` (the reference: the LLM rewrites the query), ``append`` (the query
            plus the answer and the titles seen, no LLM call) or ``none``.
        max_judge_tokens: Generation limit of a judgement.
        max_refine_tokens: Generation limit of a refined query.
    """

    def __init__(
        self,
        answerer: Answerer,
        runner: PoolRunner,
        *,
        encoder: str = "minilm",
        prefilter: str | None = None,
        num_docs: int = 4,
        s_init: float = INITIAL_S,
        beta: float = BETA,
        epsilon: float = EPSILON,
        tau: float = TAU,
        max_iterations: int = MAX_ITERATIONS,
        dynamic_s: bool = True,
        refine_query: Literal["llm", "append", "none"] = "llm",
        max_judge_tokens: int = 4,
        max_refine_tokens: int = 32,
    ) -> None:
        if min(num_docs, max_iterations, max_judge_tokens, max_refine_tokens) < 1:
            raise ValueError(
                f"num_docs={num_docs}, max_iterations={max_iterations}, max_judge_tokens={max_judge_tokens} "
                f"and max_refine_tokens={max_refine_tokens} must be >= 1"
            )
        for name, value in (("s_init", s_init), ("beta", beta), ("tau", tau)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value} must be in [0, 1]")
        if epsilon <= 0:
            raise ValueError(f"epsilon={epsilon} must be > 0")
        if refine_query not in ("llm", "append", "none"):
            raise ValueError(f"refine_query={refine_query!r} must be 'llm', 'append' or 'none'")
        self.answerer, self.runner, self.encoder = answerer, runner, encoder
        self.prefilter = prefilter or f"dense:{encoder}"
        self.num_docs, self.s_init, self.beta, self.epsilon, self.tau = num_docs, s_init, beta, epsilon, tau
        self.max_iterations, self.dynamic_s, self.refine_query = max_iterations, dynamic_s, refine_query
        self.max_judge_tokens, self.max_refine_tokens = max_judge_tokens, max_refine_tokens

    def retrieve(self, query: str, s: float) -> list[int]:
        """Corpus rows of the ``num_docs`` greedy-VRS picks for ``query`` from its candidate pool."""
        rows, passages, query_emb = candidate_pool(self.runner, self.prefilter, self.encoder, query)
        if not rows:
            return []
        return [rows[i] for i in vrs_select(passages, query_emb, k=self.num_docs, s=s)]

    def judge(self, question: str, answer: str, passages: Sequence[tuple[str, str]]) -> tuple[float, float | None, Completion | None]:
        """``(support, LLM score or None, the judge call or None)``; an empty answer gets no call."""
        support = answer_support(answer, passages)
        if not answer:
            return support, None, None
        messages = judge_messages(question, answer, passages, max_passage_words=self.answerer.max_passage_words)
        call = self.answerer.backend.complete(messages, max_tokens=self.max_judge_tokens)
        return support, parse_score(call.text), call

    def refine(self, query: str, answer: str, titles: Sequence[str]) -> tuple[str, Completion | None]:
        """The next round's query and the LLM call that wrote it (None for ``append`` and ``none``)."""
        if self.refine_query == "none":
            return query, None
        if self.refine_query == "append":
            return " ".join([query, answer, *titles]).strip(), None
        content = (
            "The answer found so far may be incomplete. Rewrite the question so that a search finds the missing "
            "information. Reply with the rewritten question only.\n\n"
            f"Question: {query}\nAnswer so far: {answer}\nRewritten question:"
        )
        call = self.answerer.backend.complete([{"role": "user", "content": content}], max_tokens=self.max_refine_tokens)
        rewritten = clean_answer(call.text)
        return (rewritten if len(rewritten.split()) >= 3 else " ".join([query, answer]).strip()), call

    def run(self, question: str) -> VendiRagResult:
        """Retrieve, answer and judge until a round scores ``>= tau`` or ``max_iterations`` rounds ran."""
        start = time.perf_counter()
        s, query, retrieval_s = self.s_init, question, 0.0
        rounds: list[VendiRound] = []
        completions: list[Completion] = []
        titles: list[str] = []
        best_quality = 0.0
        for i in range(1, self.max_iterations + 1):
            tick = time.perf_counter()
            doc_ids = self.retrieve(query, s)
            retrieval_s += time.perf_counter() - tick
            passages = [(self.runner.titles[d], self.runner.texts[d]) for d in doc_ids]
            said = self.answerer.answer(question, passages)
            answer = said.text
            completions.append(said.completion)
            support, score, judged = self.judge(question, answer, passages)
            completions += [judged] if judged is not None else []
            quality = support * (NEUTRAL_SCORE if score is None and judged is not None else (score or 0.0))
            this = VendiRound(s, query, doc_ids, answer, support, score, quality, quality >= self.tau)
            rounds.append(this)
            best_quality = max(best_quality, quality)
            logger.debug("round %d s=%.2f answer=%r support=%.2f score=%s Q=%.2f", i, s, answer, support, score, quality)
            if this.accepted or i == self.max_iterations:
                break
            if self.dynamic_s:
                target = float(np.clip(1.0 - quality / max(best_quality, self.epsilon), 0.0, 1.0))
                s = self.beta * s + (1.0 - self.beta) * target
            titles += [t for t, _ in passages if t not in titles]
            query, refined = self.refine(query, answer, titles)
            completions += [refined] if refined is not None else []
        best = rounds[int(np.argmax([r.quality for r in rounds]))]  # the earliest of the best
        return VendiRagResult(
            answer=best.answer, doc_ids=best.doc_ids, rounds=rounds, completions=completions,
            latency_ms=(time.perf_counter() - start) * 1000.0, retrieval_ms=retrieval_s * 1000.0,
        )
