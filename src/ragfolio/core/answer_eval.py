"""End-to-end answering of one question by every system compared, with per-query costs.

Systems (the keys of ``answer_metrics.json``):

* ``no_retrieval``: the LLM alone (closed book).
* ``single_best``: the pool's best single candidate (by train mean) and one answer prompt.
* ``routed_l1``, ``routed_l2``, ``routed_lk``: the router's top-1, top-2 and all k members run
  concurrently, one answer per member, the selector picks (no selector at l = 1).
* ``portfolio_all``: every member, no routing, candidates to the selector in greedy order.
* ``vendi_rag``: the iterative Vendi-RAG baseline (:mod:`ragfolio.core.vendi_rag`).

A member's answer to a question is generated once and shared by the systems that use it; each
system's latency is the sum of the measured stages it needs (routing, its concurrent retrieval,
its answer calls, which an in-process LLM serves one after another, and its selector call), and
its tokens the sum over its calls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragfolio.core.answering import Answerer
from ragfolio.core.llm import Completion
from ragfolio.core.metrics import answer_recall, exact_match, f1_score
from ragfolio.core.pool import CandidateSpec
from ragfolio.core.rag import AdaptiveRAG
from ragfolio.core.stats import mean_interval, paired_difference
from ragfolio.core.vendi_rag import VendiRAG

SYSTEMS = ("no_retrieval", "single_best", "routed_l1", "routed_l2", "routed_lk", "portfolio_all", "vendi_rag")


@dataclass(frozen=True)
class SystemAnswer:
    """One system's answer to one question.

    Attributes:
        system: One of :data:`SYSTEMS`.
        prediction: The final answer.
        latency_ms: End-to-end latency of the system on this question.
        calls: The LLM calls the system needed.
        doc_ids: Corpus rows of every passage the system handed the LLM.
        members: Portfolio members used (names), empty for systems without members.
        fallback: Whether the selector's reply named no candidate (None: no selector ran).
    """

    system: str
    prediction: str
    latency_ms: float
    calls: list[Completion]
    doc_ids: list[int]
    members: list[str] = field(default_factory=list)
    fallback: bool | None = None

    @property
    def prompt_tokens(self) -> int:
        return Completion.total(self.calls).prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return Completion.total(self.calls).completion_tokens

    def record(self, question_id: str, dataset: str, answers: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
        """The per-question row of ``answers.jsonl`` (scores included)."""
        return {
            "id": question_id, "dataset": dataset, "system": self.system, "prediction": self.prediction,
            "answers": list(answers), "em": exact_match(self.prediction, answers),
            "f1": f1_score(self.prediction, answers), "latency_ms": round(self.latency_ms, 2),
            "tokens": self.prompt_tokens + self.completion_tokens, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "answer_recall": answer_recall([texts[i] for i in self.doc_ids], answers) if self.doc_ids else 0.0,
            "n_passages": len(self.doc_ids), "members": self.members, "fallback": self.fallback,
        }


class SystemRunner:
    """Answers a question with every system, sharing member answers between them.

    Args:
        rag: The routed portfolio with its answerer.
        single_best: The pool's best single candidate.
        vendi: The Vendi-RAG baseline over the same corpus and LLM.
    """

    def __init__(self, rag: AdaptiveRAG, single_best: CandidateSpec, vendi: VendiRAG) -> None:
        if rag.answerer is None:
            raise ValueError("the AdaptiveRAG needs an answerer to be evaluated end to end")
        self.rag, self.single_best, self.vendi = rag, single_best, vendi
        self.answerer: Answerer = rag.answerer

    def run(self, question: str) -> list[SystemAnswer]:
        """Every system's answer to ``question``, in :data:`SYSTEMS` order."""
        rag, k = self.rag, self.rag.k
        member_answers: dict[int, tuple[str, Completion, list[int]]] = {}

        def member_answer(j: int, doc_ids: list[int]) -> tuple[str, Completion, list[int]]:
            if j not in member_answers:
                text, completion = self.answerer.answer(question, rag.passages(doc_ids))
                member_answers[j] = (text, completion, doc_ids)
            return member_answers[j]

        closed, closed_call = self.answerer.answer(question, [])
        out = [SystemAnswer("no_retrieval", closed, closed_call.latency_ms, [closed_call], [])]

        start = time.perf_counter()
        single = rag.runner.run(self.single_best, [question]).doc_ids[0]
        single_ids = [int(i) for i in single if i >= 0]
        single_ms = 1000 * (time.perf_counter() - start)
        shared = [j for j, m in enumerate(rag.members) if m.name == self.single_best.name]
        if shared:  # usually the first greedy member: its answer is the single best's answer
            text, call, _ = member_answer(shared[0], single_ids)
        else:
            text, call = self.answerer.answer(question, rag.passages(single_ids))
        out.append(SystemAnswer("single_best", text, single_ms + call.latency_ms, [call], single_ids, [self.single_best.name]))

        routed, _, route_ms = rag.route(question, k)
        for system, l in (("routed_l1", 1), ("routed_l2", min(2, k)), ("routed_lk", k)):
            out.append(self._members_system(system, question, routed[:l], route_ms, member_answer, select=l > 1))
        out.append(self._members_system("portfolio_all", question, list(range(k)), 0.0, member_answer, select=True))

        result = self.vendi.run(question)
        out.append(SystemAnswer("vendi_rag", result.answer, result.latency_ms, list(result.completions), result.doc_ids))
        return out

    def _members_system(
        self, system: str, question: str, chosen: list[int], route_ms: float, member_answer: Any, *, select: bool
    ) -> SystemAnswer:
        results = self.rag.executor.run(question, chosen)
        answered = [(j, run) for j, run in zip(chosen, results.runs, strict=True) if run.ok]
        parts = [member_answer(j, run.doc_ids) for j, run in answered]
        calls = [call for _, call, _ in parts]
        doc_ids = list(dict.fromkeys(d for _, _, ids in parts for d in ids))
        names = [run.name for _, run in answered]
        latency = route_ms + results.latency_ms + sum(c.latency_ms for c in calls)
        if not parts:  # every member failed: closed book, as AdaptiveRAG.answer does
            text, call = self.answerer.answer(question, [])
            return SystemAnswer(system, text, latency + call.latency_ms, [call], [], names, None)
        if not select or len(parts) == 1:
            return SystemAnswer(system, parts[0][0], latency, calls, doc_ids, names, None)
        selection = self.answerer.select(question, [text for text, _, _ in parts])
        return SystemAnswer(
            system, selection.answer, latency + selection.completion.latency_ms, [*calls, selection.completion],
            doc_ids, names, selection.fallback,
        )


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per dataset and system: n, EM, F1, answer recall, latency mean/p95, tokens mean, fallbacks.

    EM also gets a 95% bootstrap interval (``em_interval``) and, for every system but
    ``single_best``, the paired interval of its per-question EM minus single best's
    (``em_minus_single_best``; left out unless both answered the same questions, by id).
    """
    out: dict[str, Any] = {}
    keys = sorted({(r["dataset"], r["system"]) for r in records}, key=lambda x: (x[0], SYSTEMS.index(x[1])))
    for dataset, system in keys:
        rows = [r for r in records if r["dataset"] == dataset and r["system"] == system]
        latency = np.array([r["latency_ms"] for r in rows], dtype=np.float64)
        selected = [r["fallback"] for r in rows if r["fallback"] is not None]
        out.setdefault(dataset, {})[system] = {
            "n": len(rows),
            "em": float(np.mean([r["em"] for r in rows])),
            "em_interval": mean_interval([float(r["em"]) for r in rows]).to_dict(),
            "f1": float(np.mean([r["f1"] for r in rows])),
            "answer_recall": float(np.mean([r["answer_recall"] for r in rows])),
            "latency_ms_mean": float(latency.mean()),
            "latency_ms_p95": float(np.percentile(latency, 95)),
            "tokens_mean": float(np.mean([r["tokens"] for r in rows])),
            "selector_fallbacks": int(sum(selected)),
        }
    for dataset, systems in out.items():
        base = {r["id"]: float(r["em"]) for r in records if r["dataset"] == dataset and r["system"] == "single_best"}
        for system, summary in systems.items():
            em = {r["id"]: float(r["em"]) for r in records if r["dataset"] == dataset and r["system"] == system}
            if system != "single_best" and base and em.keys() == base.keys() and len(em) == summary["n"]:
                ids = sorted(em)
                summary["em_minus_single_best"] = paired_difference([em[i] for i in ids], [base[i] for i in ids]).to_dict()
    return out
