"""End-to-end answering of one question by every system compared, each timed with cold query caches.

Systems (the keys of ``answer_metrics.json``; :func:`system_names` gives their order):

* ``no_retrieval``: the LLM alone (closed book).
* ``single_best``: the pool's best single candidate (by train mean) and one answer prompt.
* ``single_best_wide``: the same candidate's top ``2 x num_docs`` passages in one prompt (does a
  routed union gain from complementarity, or only from more passages?).
* ``served_l<l>``: what the bundle serves for a request of l members: its router (any kind) at the
  l's where router training's do-no-harm rule lets it route, one answer per routed member and the
  selector; at any other l the single best member's ``l x num_docs`` passages in one prompt
  (:class:`~ragfolio.core.system.routed_system.RoutedSystem`, as ``/answer`` runs it).
* ``routed_l<l>``: the learned query router's top-l members run concurrently, one answer per
  member, the selector picks (no selector at l = 1).
* ``pre_retrieval_l<l>``, ``post_retrieval_l<l>`` (and ``<kind>_l<l>`` for a user's servable
  router): the same with the routers that see the retrieval (:mod:`ragfolio.core.routing.online`);
  post-retrieval runs all k members, then routes.
* ``portfolio_all``: every member, no routing, every answer to the selector.
* ``vendi_rag``: the iterative Vendi-RAG baseline (:mod:`ragfolio_lab.answering.vendi_rag`).
* ``vendi_rag_authors``: the ``vendirag`` package's own loop (:mod:`ragfolio_lab.answering.vendirag_loop`),
  when ``answering_evaluation.vendi_rag_authors`` is set.

Fair timing: before each system every runner drops its query parts (query embeddings, first-stage
rankings, member results) and tags the ones computed next with the system's name
(:meth:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner.cold_queries`), so each system pays for its own
encoding and ranking, whichever runs first; the memo's counters (``foreign_query_hits``) prove no
system read another's. Corpus parts (indexes, passage embeddings, the graph) stay warm, as in a
service. The order the systems run in is the caller's (``run(question, order)``).

An answer to the same passages is generated once per question and shared by the systems that
use it, whichever member or candidate returned them (as is a selector call over the same
candidates): the LLM is deterministic, so only the retrieval is timed again. A system's latency is its retrieval (routing included) plus the
latencies of the LLM calls it needs, which an in-process LLM serves one after another.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG
from ragfolio.core.answering.answerer import Answer, Answerer, Selection
from ragfolio.core.llm.chat import Completion
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running.memo import COUNTERS
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.online import OnlineRetrievalRouting
from ragfolio.core.routing.registry import servable_names
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio_lab.answering.vendi_rag import VendiRAG
from ragfolio_lab.answering.vendirag_loop import AuthorsVendiRAG

ROUTED_L = (1, 2, 3)

def system_names(ls: Sequence[int] = ROUTED_L, modes: Sequence[str] | None = None) -> tuple[str, ...]:
    """Every system's name, in report order, for routed ``ls`` and the router kinds ``modes``
    (default: every servable router but the learned one, :func:`~ragfolio.core.routing.registry.servable_names`)."""
    modes = servable_names(learned=False) if modes is None else modes
    routed = [f"{prefix}_l{l}" for prefix in ("served", "routed", *modes) for l in ls]
    return ("no_retrieval", "single_best", "single_best_wide", *routed, "portfolio_all", "vendi_rag", "vendi_rag_authors")


SYSTEMS = system_names()
# The systems that answer the paper's end-to-end questions (the default of answering_evaluation):
# the closed book, the single best retriever alone and given l x num_docs passages, what the bundle
# serves at l = 1 and 2, routed l = 2 with the selector (post-retrieval, whether or not it is served),
# and Vendi-RAG as its authors run it.
PAPER_SYSTEMS = ("no_retrieval", "single_best", "single_best_wide", "served_l1", "served_l2", "post_retrieval_l2",
                 "vendi_rag_authors")


@dataclass(frozen=True)
class Retrieved:
    """What a system hands the LLM: one answer prompt per group of passages.

    Attributes:
        groups: ``(source, corpus rows)`` per answer prompt (``source`` names the member or
            candidate); prompts over the same rows are answered once per question.
        members: Names of the members (or candidate) the passages came from.
        retrieval_ms: Routing and retrieval, in milliseconds.
        select: Whether a selector picks among the groups' answers.
    """

    groups: list[tuple[str, list[int]]]
    members: list[str]
    retrieval_ms: float
    select: bool = False


@dataclass(frozen=True)
class SystemAnswer:
    """One system's answer to one question.

    Attributes:
        system: A name of :func:`system_names`.
        prediction: The final answer.
        latency_ms: End-to-end latency of the system on this question.
        calls: The LLM calls the system needed.
        doc_ids: Corpus rows of every passage the system handed the LLM.
        members: Portfolio members used (names), empty for systems without members.
        fallback: Whether the selector's reply named no candidate (None: no selector ran).
        retrieval_ms: Routing and retrieval, in milliseconds (Vendi-RAG: every round's).
        selector_position: 1-based position, in the order shown, of the candidate the selector
            named; None when it named none or was not called.
        selector_options: Candidates the selector was shown (0: no call).
        rounds: Vendi-RAG's retrieve-answer-judge rounds (None for the others).
        judged: Vendi-RAG's judge calls; ``accepted``: the rounds the judge's score accepted.
        run_position: 0-based position of the system in the question's run order.
        parse_failures: Reader and selector replies that were not the JSON asked for (read as text).
        candidates: The answers the selector chose among, in router order (empty: no selector).
        cache: The runners' memo counters (:data:`ragfolio.core.retrieval.running.memo.COUNTERS`) over this system's run.
    """

    system: str
    prediction: str
    latency_ms: float
    calls: list[Completion]
    doc_ids: list[int]
    members: list[str] = field(default_factory=list)
    fallback: bool | None = None
    retrieval_ms: float = 0.0
    selector_position: int | None = None
    selector_options: int = 0
    rounds: int | None = None
    judged: int | None = None
    accepted: int | None = None
    run_position: int = 0
    parse_failures: int = 0
    candidates: list[str] = field(default_factory=list)
    cache: dict[str, int] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        return Completion.total(self.calls).prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return Completion.total(self.calls).completion_tokens

    def record(self, question_id: str, dataset: str, answers: Sequence[str]) -> dict[str, Any]:
        """The per-question row the answer store keeps: what the system did, not yet scored
        (:func:`ragfolio_lab.answering.scores.scored` adds the scores, so a metric can change
        without answering again)."""
        return {
            "id": question_id, "dataset": dataset, "system": self.system, "prediction": self.prediction,
            "answers": list(answers), "latency_ms": round(self.latency_ms, 2),
            "retrieval_ms": round(self.retrieval_ms, 3),
            "tokens": self.prompt_tokens + self.completion_tokens, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "doc_ids": [int(i) for i in self.doc_ids],
            "n_passages": len(self.doc_ids), "members": self.members, "fallback": self.fallback,
            "selector_position": self.selector_position, "selector_options": self.selector_options,
            "rounds": self.rounds, "judged": self.judged, "accepted": self.accepted,
            "run_position": self.run_position, "parse_failures": self.parse_failures, "candidates": self.candidates,
            "n_calls": sum(c.tokens > 0 for c in self.calls), **{c: self.cache.get(c, 0) for c in COUNTERS},
        }


class SystemRunner:
    """Answers a question with every system, each with cold query caches, in the order asked.

    Args:
        rag: The served system with its answerer (``served_l<l>``; its members, runner and executor
            are the other systems' too), e.g. :meth:`AdaptiveRAG.from_bundle
            <ragfolio.core.answering.adaptive_rag.AdaptiveRAG.from_bundle>`.
        single_best: The pool's best single candidate.
        vendi: The Vendi-RAG baseline over the same corpus and LLM (``vendi_rag``).
        authors_vendi: vendirag's own loop over the same corpus and LLM (``vendi_rag_authors``);
            None leaves that system out.
        wide_runner: A runner over the same corpus returning ``2 x num_docs`` passages
            (``single_best_wide``); None leaves that system out.
        retrieval_routers: ``{router kind: routing}`` (``pre_retrieval``, ``post_retrieval``, a user's) over ``rag``'s
            members; the modes missing are left out.
        learned: The learned query router over ``rag``'s members and runner (``routed_l<l>``); None
            leaves those systems out.
        ls: The l of the routed systems (each at most k).
        cold_caches: Drop the query caches before each system (False only shows, in tests, what
            the counters see when systems share them).
        only: The systems to run, a subset of those the arguments above make (None: all of them),
            kept in report order: a long comparison of two systems need not pay for the others.
        strict: Whether ``only`` may name only systems the arguments make (False: the others are
            dropped, e.g. :data:`PAPER_SYSTEMS` where the authors' loop is not configured).

    Raises:
        ValueError: an argument is out of range, or ``only`` names a system the others do not make.
    """

    def __init__(
        self,
        rag: AdaptiveRAG,
        single_best: CandidateSpec,
        vendi: VendiRAG,
        *,
        authors_vendi: AuthorsVendiRAG | None = None,
        wide_runner: PoolRunner | None = None,
        retrieval_routers: dict[str, OnlineRetrievalRouting] | None = None,
        learned: RoutedSystem | None = None,
        ls: Sequence[int] = ROUTED_L,
        cold_caches: bool = True,
        only: Sequence[str] | None = None,
        strict: bool = True,
    ) -> None:
        if unknown := sorted(set(retrieval_routers or {}) - set(servable_names(learned=False))):
            raise ValueError(f"retrieval_routers {unknown} must be among {servable_names(learned=False)}")
        if not ls or min(ls) < 1:
            raise ValueError(f"ls={list(ls)} must be non-empty, each >= 1")
        self.rag, self.single_best, self.wide_runner = rag, single_best, wide_runner
        self.loops: dict[str, VendiRAG | AuthorsVendiRAG] = {"vendi_rag": vendi}
        if authors_vendi is not None:
            self.loops["vendi_rag_authors"] = authors_vendi
        self.retrieval_routers, self.learned = dict(retrieval_routers or {}), learned
        if learned is not None and [m.name for m in learned.members] != [m.name for m in rag.system.members]:
            raise ValueError("the learned router's system must have the served system's members, in order")
        if above := sorted(l for l in set(ls) if l > rag.system.k):
            raise ValueError(f"routed l {above} above the portfolio's k={rag.system.k}")
        self.ls = sorted(set(ls))
        self.cold_caches = cold_caches
        self.answerer: Answerer = rag.answerer
        modes = [m for m in servable_names(learned=False) if m in self.retrieval_routers]
        wide = () if wide_runner is None else ("single_best_wide",)
        left_out = {"single_best_wide"} - set(wide) | {"vendi_rag", "vendi_rag_authors"} - set(self.loops)
        if learned is None:
            left_out |= {f"routed_l{l}" for l in self.ls}
        made = tuple(s for s in system_names(self.ls, modes) if s not in left_out)
        if only is not None and not strict:
            only = [s for s in only if s in made] or list(made)
        if only is not None and (not only or set(only) - set(made)):
            raise ValueError(f"systems={list(only)} must be a non-empty subset of {list(made)}")
        self.systems = made if only is None else tuple(s for s in made if s in only)
        self._answers: dict[tuple[int, ...], Answer] = {}
        self._selections: dict[tuple[tuple[str, str, tuple[int, ...]], ...], Selection] = {}

    @property
    def runners(self) -> list[PoolRunner]:
        """The runners whose query caches the systems use."""
        return [self.rag.system.runner] + ([self.wide_runner] if self.wide_runner is not None else [])

    def run(self, question: str, order: Sequence[str] | None = None) -> list[SystemAnswer]:
        """The answers to ``question`` of the systems in ``order`` (default: every one of
        :attr:`systems`), run and returned in that order."""
        order = list(self.systems if order is None else order)
        if len(set(order)) != len(order) or set(order) - set(self.systems):
            raise ValueError(f"order={order} must list some of {list(self.systems)}, each once")
        self._answers, self._selections = {}, {}
        out = []
        for position, system in enumerate(order):
            before = self._start(system)
            answer = self._answer(system, question)
            after = self._counters()
            out.append(replace(answer, run_position=position, cache={c: after[c] - before[c] for c in COUNTERS}))
        return out

    def retrieval_ms(self, question: str, order: Sequence[str]) -> dict[str, float]:
        """Each system's retrieval latency alone (no LLM call), run in ``order`` with cold caches.

        Vendi-RAG's is its first round's retrieval; ``no_retrieval`` has none and is skipped.
        """
        out = {}
        for system in order:
            if system == "no_retrieval":
                continue
            self._start(system)
            if system in self.loops:
                start = time.perf_counter()
                self.loops[system].retrieve(question, self.loops[system].s_init)
                out[system] = 1000 * (time.perf_counter() - start)
            else:
                out[system] = self._retrieve(system, question).retrieval_ms
        return out

    # --- one system -----------------------------------------------------------------------------
    def _counters(self) -> dict[str, int]:
        stats = [runner.memo_stats() for runner in self.runners]
        return {c: sum(s[c] for s in stats) for c in COUNTERS}

    def _start(self, system: str) -> dict[str, int]:
        for runner in self.runners:
            runner.cold_queries(system, forget=self.cold_caches)
        return self._counters()

    def _retrieve(self, system: str, question: str) -> Retrieved:
        routed = self.rag.system
        if system == "no_retrieval":
            return Retrieved([], [], 0.0)
        if system in ("single_best", "single_best_wide"):
            runner = routed.runner if system == "single_best" else self.wide_runner
            if runner is None:
                raise ValueError(f"{system} needs a runner")
            start = time.perf_counter()
            ids = [int(i) for i in runner.run(self.single_best, [question]).doc_ids[0] if i >= 0]
            return Retrieved([(f"candidate:{self.single_best.name}", ids)], [self.single_best.name],
                             1000 * (time.perf_counter() - start))
        if system == "portfolio_all":
            return self._members(question, list(range(routed.k)), 0.0, select=True)
        prefix, _, l_text = system.rpartition("_l")
        l = int(l_text)
        if prefix == "served":  # as /answer serves it: routed where the bundle routes at l, else unrouted
            got = routed.retrieve(RetrievalRequest(question, l, routed.depth))
            runs = dict(zip(got.members, got.results.runs, strict=True))
            return self._from_runs(got.members, runs, got.latency_ms, select=got.routed and l > 1)
        if prefix == "routed" and self.learned is not None:
            chosen, _, route_ms = self.learned.route(question, l)
            return self._members(question, chosen[:l], route_ms, select=l > 1)
        route = self.retrieval_routers[prefix].route(question, l)  # its plan: the members routing ran and the rest
        results = routed.executor.run_plans([route.plan])[0]
        runs = dict(zip(route.members, results.runs, strict=True))
        return self._from_runs(route.members, runs, route.route_ms + (results.latency_ms - route.plan.latency_ms),
                               select=l > 1)

    def _members(self, question: str, chosen: list[int], route_ms: float, *, select: bool) -> Retrieved:
        results = self.rag.system.executor.run(question, chosen)
        runs = dict(zip(chosen, results.runs, strict=True))
        return self._from_runs(chosen, runs, route_ms + results.latency_ms, select=select)

    @staticmethod
    def _from_runs(chosen: list[int], runs: dict[int, Any], retrieval_ms: float, *, select: bool) -> Retrieved:
        ok = [(j, runs[j]) for j in chosen if runs[j].ok]
        groups = [(f"member:{run.name}", list(run.doc_ids)) for _, run in ok]
        return Retrieved(groups, [run.name for _, run in ok], retrieval_ms, select)

    def _answer(self, system: str, question: str) -> SystemAnswer:
        if system in self.loops:
            result = self.loops[system].run(question)
            return SystemAnswer(
                system, result.answer, result.latency_ms, list(result.completions), result.doc_ids,
                retrieval_ms=result.retrieval_ms, rounds=result.iterations, judged=result.judged,
                accepted=sum(r.accepted for r in result.rounds),
            )
        got = self._retrieve(system, question)
        if system == "no_retrieval" or not got.groups:  # every member failed: closed book
            said = self._shared_answer(question, [])
            return SystemAnswer(system, said.text, got.retrieval_ms + said.completion.latency_ms, [said.completion],
                                [], got.members, retrieval_ms=got.retrieval_ms, parse_failures=int(not said.parsed))
        parts = [self._shared_answer(question, ids) for _, ids in got.groups]
        calls = [a.completion for a in parts]
        failures = sum(not a.parsed for a in parts)
        doc_ids = list(dict.fromkeys(d for _, ids in got.groups for d in ids))
        latency = got.retrieval_ms + sum(c.latency_ms for c in calls)
        if not got.select or len(parts) == 1:
            return SystemAnswer(system, parts[0].text, latency, calls, doc_ids, got.members,
                                retrieval_ms=got.retrieval_ms, parse_failures=failures)
        selection = self._shared_selection(question, parts, [ids for _, ids in got.groups])
        return SystemAnswer(
            system, selection.answer, latency + selection.completion.latency_ms, [*calls, selection.completion],
            doc_ids, got.members, selection.fallback, got.retrieval_ms, selection.position, len(selection.shown),
            parse_failures=failures + int(selection.parsed is False), candidates=[a.text for a in parts],
        )

    def _shared_answer(self, question: str, doc_ids: list[int]) -> Answer:
        """The answer from the passages at ``doc_ids`` (in that order), generated once per question."""
        if tuple(doc_ids) not in self._answers:
            self._answers[tuple(doc_ids)] = self.answerer.answer(question, self.rag.system.passages(doc_ids))
        return self._answers[tuple(doc_ids)]

    def _shared_selection(self, question: str, parts: list[Answer], groups: list[list[int]]) -> Selection:
        """The selector's choice among ``parts`` (read from the passages at ``groups``), made once per question."""
        key = tuple((a.text, a.explanation, tuple(ids[k] for k in a.used)) for a, ids in zip(parts, groups, strict=True))
        if key not in self._selections:
            self._selections[key] = self.answerer.choose(question, parts, [self.rag.system.passages(ids)
                                                                           for ids in groups])
        return self._selections[key]


def run_order(systems: Sequence[str], how: str, seed: int, question_id: str) -> list[str]:
    """The order the systems run in for one question: ``fixed`` (as given), ``reversed``, or
    ``shuffled`` (a permutation drawn from ``seed`` and the question's id)."""
    if how == "fixed":
        return list(systems)
    if how == "reversed":
        return list(reversed(systems))
    if how == "shuffled":
        rng = np.random.default_rng([seed, zlib.crc32(question_id.encode("utf-8"))])
        return [systems[i] for i in rng.permutation(len(systems))]
    raise ValueError(f"system_order={how!r} must be 'fixed', 'reversed' or 'shuffled'")

