"""Vendi-RAG as its authors publish it: the ``vendirag`` package's loop with ragfolio's LLM, pool and encoder.

:class:`vendirag.VendiRAG` (Rezaei & Dieng, 2025; MIT) runs the paper's Algorithm 1 with the
paper's prompts: per round a chain of thought, an answer to the original question, an LLM judge
(coherence, relevance and query alignment from 1 to 10; ``Q = mean / 10``) and an LLM-rewritten
query, with ``s_1 = 0.8``, ``beta = 0.3``, ``tau = 0.85`` and at most ``T = 5`` rounds. Here it
reads what every other system reads:

- **the LLM**: the answerer's backend, behind vendirag's one-call LLM interface (a prompt in, the
  reply's text out); each call is recorded as a :class:`~ragfolio.core.llm.chat.Completion` for
  tokens and latency, and limited to the tokens :data:`MAX_TOKENS` gives its step;
- **the retrieval**: :class:`vendirag.retriever.VendiReranker` over the candidate pool the port
  uses (the runner's ``prefilter``-deep base ranking of the round's query) with the pool encoder's
  passage and query embeddings, picking ``num_docs`` passages (the pool's 4; the paper's 5).

A run returns the port's :class:`~ragfolio_lab.answering.vendi_rag.VendiRagResult`, so both
are reported the same way: a round's ``score`` and ``quality`` are the judge's ``Q`` and
``support`` the share of the answer's words in its passages (reported, not used by the loop).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from vendirag import VendiRAG as PackagedVendiRAG
from vendirag.prompts import DEFAULT_PROMPTS
from vendirag.retriever import VendiReranker
from vendirag.types import Document

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm.chat import ChatBackend, Completion, LocalModel
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio_lab.answering.vendi_rag import (
    BETA,
    EPSILON,
    INITIAL_S,
    MAX_ITERATIONS,
    TAU,
    VendiRagResult,
    VendiRound,
    answer_support,
    candidate_pool,
)

# Tokens each of the loop's four steps may generate. The reference calls a hosted model with
# 1,024; a 270M model's reasoning past a few sentences is repetition, and every token costs.
MAX_TOKENS = {"cot": 128, "answer": 32, "judge": 32, "refine": 48}


class RecordingLLM:
    """vendirag's LLM interface over a ragfolio backend: ``complete(prompt) -> text``, every call kept.

    The step a prompt belongs to is told by the start of its template (vendirag's prompts differ
    in their first words), which sets its token limit.
    """

    def __init__(self, backend: ChatBackend, max_tokens: dict[str, int] | None = None) -> None:
        self.backend = backend
        self.max_tokens = {**MAX_TOKENS, **(max_tokens or {})}
        self.calls: list[Completion] = []
        self._starts = {step: template.split("{", 1)[0][:40] for step, template in DEFAULT_PROMPTS.items()}

    def step(self, prompt: str) -> str:
        """The loop step whose template ``prompt`` was made from (``answer`` when none matches)."""
        return next((step for step, start in self._starts.items() if prompt.startswith(start)), "answer")

    def complete(self, prompt: str) -> str:
        messages, max_tokens = [{"role": "user", "content": prompt}], self.max_tokens[self.step(prompt)]
        if isinstance(self.backend, LocalModel):  # no short-answer stop strings: the reply is JSON
            call = self.backend.generate([self.backend.prompt(messages) or prompt], max_tokens=max_tokens)[0]
        else:
            call = self.backend.complete(messages, max_tokens=max_tokens)
        self.calls.append(call)
        return call.text


class AuthorsVendiRAG:
    """The ``vendi_rag`` system: vendirag's loop over one corpus (see the module docstring).

    Args:
        answerer: Its backend is the loop's LLM (the answerer's prompts are not used).
        runner: Gives the candidate pool and the embeddings.
        encoder: Encoder of the similarities (and of the default pool).
        prefilter: Base ranking of the pool; ``None`` means ``f"dense:{encoder}"``.
        num_docs: Passages per round.
        s_init, beta, epsilon, tau, max_iterations, dynamic_s: vendirag's, with its defaults.
        refine_query: Whether the LLM rewrites the query between rounds (vendirag's default).
        max_tokens: Token limits per step, over :data:`MAX_TOKENS`.
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
        refine_query: bool = True,
        max_tokens: dict[str, int] | None = None,
    ) -> None:
        if unknown := sorted(set(max_tokens or {}) - set(MAX_TOKENS)):
            raise ValueError(f"max_tokens steps {unknown} are not vendirag's {sorted(MAX_TOKENS)}")
        self.answerer, self.runner, self.encoder = answerer, runner, encoder
        self.prefilter = prefilter or f"dense:{encoder}"
        self.num_docs, self.s_init, self.tau = num_docs, s_init, tau
        self.settings = {"max_iterations": max_iterations, "quality_threshold": tau, "initial_s": s_init,
                         "k_docs": num_docs, "beta": beta, "epsilon": epsilon, "dynamic_s": dynamic_s,
                         "refine_query": refine_query}
        self.max_tokens = max_tokens
        self._retrieval_s = 0.0
        self.reranker = VendiReranker(self._candidates, s=s_init, k=num_docs)

    def _candidates(self, query: str, n: int) -> tuple[list[Document], np.ndarray, np.ndarray]:
        """The pool for ``query``: the prefilter's ranking (its own depth; ``n`` is vendirag's 50)."""
        tick = time.perf_counter()
        rows, passages, query_emb = candidate_pool(self.runner, self.prefilter, self.encoder, query)
        docs = [Document(text=f"{self.runner.titles[r]}: {self.runner.texts[r]}", id=str(r)) for r in rows]
        self._retrieval_s += time.perf_counter() - tick
        return docs, passages, query_emb

    def retrieve(self, query: str, s: float) -> list[int]:
        """Corpus rows of the ``num_docs`` passages vendirag's VRS picks for ``query`` at weight ``s``."""
        return [int(d.id) for d in self.reranker.retrieve(query, s=s) if d.id is not None]

    def run(self, question: str) -> VendiRagResult:
        """vendirag's loop on ``question``; the best-judged round's answer and passages."""
        start, self._retrieval_s = time.perf_counter(), 0.0
        llm = RecordingLLM(self.answerer.backend, self.max_tokens)
        result = PackagedVendiRAG(self.reranker, llm=llm, **self.settings).answer(question)
        rounds = [self._round(it) for it in result.iterations]
        best = result.best_iteration
        return VendiRagResult(
            answer=result.answer, doc_ids=[int(d.id) for d in (best.documents if best else []) if d.id is not None],
            rounds=rounds, completions=llm.calls, latency_ms=(time.perf_counter() - start) * 1000.0,
            retrieval_ms=self._retrieval_s * 1000.0,
        )

    def _round(self, iteration: Any) -> VendiRound:
        rows = [int(d.id) for d in iteration.documents if d.id is not None]
        passages: Sequence[tuple[str, str]] = [(self.runner.titles[r], self.runner.texts[r]) for r in rows]
        quality = float(iteration.quality)
        return VendiRound(float(iteration.s), iteration.query, rows, iteration.answer,
                          answer_support(iteration.answer, passages), quality, quality, quality >= self.tau)
