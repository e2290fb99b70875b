"""Do no harm on answers: what is served at an l must not answer worse, on dev, than the single best member.

Router training's do-no-harm rule (:mod:`ragfolio.core.routing.judging.choice`) routes at an l only
where the routed members' passages beat the single best member's in support recall. Passages that
hold more of the support can still be answered worse (a reader confused by more passages, a
selector that gives back what routing found), so packaging checks the answers too: the bundle's
reader answers a seeded sample of dev questions (never test ones) from

- the **single best member's** ``num_docs`` passages, the baseline (one call a question);
- at each l the bundle **routes** at, the routed system as served (l reader calls and the
  selector's choice, :class:`~ragfolio.core.answering.adaptive_rag.AdaptiveRAG`);
- at each unrouted l >= 2, the single best member's **wide** prompt of ``l * num_docs`` passages.

Each is compared with the baseline by the paired 95% bootstrap interval of the exact-match
difference, per question (:func:`~ragfolio.core.stats.paired_difference`). Where the interval lies
wholly below zero the dev answers *say it loses*, and it is not served: a routed l is taken out of
``routed_ls``, and the single best member then serves it at ``num_docs`` passages (out of
``wide_ls``); a wide prompt that loses is likewise served at ``num_docs``. Anything else is kept: a
few dozen questions rarely say more, and the support-recall evidence already chose it. EM is the
reader's answer's, abstained or not (abstention applies to every system alike).

:func:`check_answers` returns an :class:`AnswerCheck`: the decision, every interval, and its cost
in calls, tokens and seconds, which packaging records in the bundle's ``selection`` and reports.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG, RAGAnswer
from ragfolio.core.metrics import exact_match
from ragfolio.core.stats import interval_text, paired_difference
from ragfolio.core.system.request import RetrievalRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnswerCheck:
    """Do no harm on answers, as decided on dev questions.

    Attributes:
        n: Dev questions answered.
        tests: By ``l<l>``: ``system`` (``routed`` or ``single_best_wide``), ``em``, ``em_single_best``,
            the difference's ``estimate``, ``low``, ``high`` and ``n``, and ``loses`` (the interval
            lies below zero).
        routed_ls: The l's routed after the check (None: every l, as the bundle had it).
        wide_ls: The l's at which the single best member, where it serves, gives the wide prompt
            after the check: every l but those where routing or the wide prompt loses.
        calls: Reader and selector calls made.
        tokens: Their prompt and completion tokens.
        seconds: Wall time of the check.
        reason: One sentence: what was kept and what was not, with the numbers.
    """

    n: int
    tests: dict[str, dict[str, Any]]
    routed_ls: tuple[int, ...] | None
    wide_ls: tuple[int, ...]
    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "tests": self.tests, "routed_ls": None if self.routed_ls is None else list(self.routed_ls),
                "wide_ls": list(self.wide_ls), "calls": self.calls, "tokens": self.tokens, "reason": self.reason}
        # no seconds: the same inputs give the same bundle and report bytes (the time is logged)


def _reader_answer(result: RAGAnswer) -> str:
    """The reader's answer, abstained or not."""
    return result.guess if result.guess is not None else result.answer


def check_answers(
    rag: AdaptiveRAG, questions: Sequence[tuple[str, Sequence[str]]], ls: Sequence[int], *,
    progress: Callable[[int, int], None] | None = None,
) -> AnswerCheck:
    """Answer the dev ``questions`` (``(question, gold answers)``) as the module docstring says, at
    each l of ``ls``, and decide what ``rag``'s system may serve there.

    Raises:
        ValueError: No questions, or an l outside 1..k.
    """
    system, depth = rag.system, rag.system.depth
    if not questions:
        raise ValueError("the answer check needs dev questions: none were given")
    if bad := [l for l in ls if not 1 <= l <= system.k]:
        raise ValueError(f"l={bad} outside 1..{system.k}")
    judged = {l: ("routed" if system.routes_at(l) else "single_best_wide") for l in sorted(set(ls))
              if system.routes_at(l) or l >= 2}
    start, calls, tokens = time.perf_counter(), 0, 0
    baseline, em = np.zeros(len(questions)), {l: np.zeros(len(questions)) for l in judged}
    for q, (question, answers) in enumerate(questions):
        results: list[tuple[int | None, RAGAnswer]] = [
            (None, rag.answer(RetrievalRequest(question, 1, depth), members=[system.single_best]))]
        results += [(l, rag.answer(RetrievalRequest(question, l, depth))) for l in judged]
        for l, result in results:
            score = exact_match(_reader_answer(result), list(answers))
            if l is None:
                baseline[q] = score
            else:
                em[l][q] = score
            calls += sum(c.completion_tokens > 0 for c in result.calls.values())
            tokens += result.tokens
        if progress is not None:
            progress(q + 1, len(questions))
    tests: dict[str, dict[str, Any]] = {}
    routed = set(system.routed_ls) if system.routed_ls is not None else None
    narrow = set() if system.wide_ls is None else set(range(1, system.k + 1)) - set(system.wide_ls)
    for l, kind in judged.items():
        diff = paired_difference(em[l], baseline)
        loses = bool(diff.high < 0)  # an undefined interval (NaN) never says it loses
        tests[f"l{l}"] = {"system": kind, "em": float(em[l].mean()), "em_single_best": float(baseline.mean()),
                          **diff.to_dict(), "loses": loses}
        if loses:
            narrow.add(l)
            if kind == "routed":
                routed = (set(range(1, system.k + 1)) if routed is None else routed) - {l}
    routed_ls = None if routed is None else tuple(sorted(routed))
    wide = [l for l in range(1, system.k + 1) if l not in narrow]
    kept = [f"l = {l} {tests[f'l{l}']['system']} ({interval_text(tests[f'l{l}'])} EM against the single best's "
            f"{depth} passages: {'loses, not served' if tests[f'l{l}']['loses'] else 'kept'})" for l in judged]
    reason = (f"Do no harm on answers, {len(questions)} dev questions: " + ("; ".join(kept) or "nothing to judge")
              + ".")
    logger.info("%s (%.0f s)", reason, time.perf_counter() - start)
    return AnswerCheck(len(questions), tests, routed_ls, tuple(sorted(wide)), calls, tokens,
                       time.perf_counter() - start, reason)
