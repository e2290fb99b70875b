"""The same-budget check: are l routed members better than the single best member given l times the passages?

Routing to l members hands the reader ``l * num_docs`` passages. The check compares, on test
questions, the recall of the union of the l routed members' passages with that of the single best
member (best train mean over the whole pool) retrieving ``l * num_docs`` passages. Recall is the
score the utility matrices measure (``candidate_scoring.score``): support recall against the gold
passages, or answer recall (some passage contains an answer alias) against the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.data.records import Question
from ragfolio.core.metrics import contains_answer, support_recall
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.base import Picks
from ragfolio.core.routing.judging.multiplicity import ALPHA, holm_intervals
from ragfolio.core.scoring.runners import CorpusRunners, Score
from ragfolio.core.scoring.utility import score_targets
from ragfolio.core.stats import paired_differences

DocIds = npt.NDArray[np.int64]  # (n_queries, depth) corpus rows, -1 where a ranking is shorter
Judge = Callable[[set[int], int], float]  # (retrieved corpus rows, passages asked for) -> score


@dataclass(frozen=True)
class BudgetRuns:
    """What the compared retrievals return for n test questions.

    Attributes:
        members: Per portfolio member j, its ``(n, num_docs)`` passages.
        single: Per l = 1..k, the single best member's ``(n, l * num_docs)`` passages.
        judges: Per question, its score of a set of corpus rows retrieved with a budget of so many
            passages (under the run's ``score``).
    """

    members: list[DocIds]
    single: list[DocIds]
    judges: list[Judge]

    @classmethod
    def retrieve(
        cls, runners: CorpusRunners, corpus: str, questions: Sequence[Question], members: Sequence[CandidateSpec],
        single: CandidateSpec,
    ) -> BudgetRuns:
        """Run the members and the single best member on ``questions`` over the corpus named ``corpus``."""
        num_docs, texts = runners.settings.num_docs, [q.question for q in questions]
        score, passages = runners.settings.score, runners.get(corpus).passage_texts
        targets = score_targets(score, questions, runners.corpora.corpora[corpus])

        def doc_ids(runner: PoolRunner, spec: CandidateSpec) -> DocIds:
            return np.asarray(runner.run(spec, texts).doc_ids, dtype=np.int64)

        depths = [l * num_docs for l in range(1, len(members) + 1)]
        return cls(
            members=[doc_ids(runners.get(corpus), spec) for spec in members],
            single=[doc_ids(runners.get(corpus, depth), single) for depth in depths],
            judges=[question_judge(score, target, passages) for target in targets],
        )

    @classmethod
    def concatenate(cls, parts: Sequence[BudgetRuns]) -> BudgetRuns:
        """The questions of every part, in order (e.g. the datasets of the ``all`` portfolio)."""
        k = len(parts[0].members)
        return cls(
            members=[np.concatenate([p.members[j] for p in parts]) for j in range(k)],
            single=[np.concatenate([p.single[i] for p in parts]) for i in range(k)],
            judges=[j for p in parts for j in p.judges],
        )


def question_judge(score: Score, target: Sequence[Any], passages: Sequence[str]) -> Judge:
    """One question's score of a set of corpus rows retrieved with a budget of ``num_docs`` passages:
    support recall against its gold rows (``|rows ∩ gold| / min(num_docs, |gold|)``), or answer recall."""
    if score == "support_recall":
        return lambda rows, num_docs: support_recall(rows, target, num_docs)
    return lambda rows, num_docs: float(any(contains_answer(passages[r], target) for r in rows))


def per_question_budget_recall(runs: BudgetRuns, picks: Picks) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``(union, single)``, each ``(n, k)``: per question, the recall of the routed union of the first
    l members and of the single best at ``l * num_docs`` passages, column ``l - 1``."""
    k, n = len(runs.members), len(runs.judges)
    num_docs = runs.members[0].shape[1] if k else 0
    union, alone = np.zeros((n, k)), np.zeros((n, k))
    for q, judge in enumerate(runs.judges):
        for l in range(1, k + 1):  # noqa: E741 - both sides have the budget of l * num_docs passages
            union[q, l - 1] = judge({int(d) for j in picks[q, :l] for d in runs.members[j][q] if d >= 0}, l * num_docs)
            alone[q, l - 1] = judge({int(d) for d in runs.single[l - 1][q] if d >= 0}, l * num_docs)
    return union, alone


def same_budget_comparison(runs: BudgetRuns, picks: Picks, ls: Sequence[int] = (1, 2)) -> dict[str, Any]:
    """Mean recall of the routed union and the single best at ``l * num_docs``, and their paired interval.

    Returns:
        ``{"routed_union_recall": [k values], "single_best_recall": [k values], "union_minus_single":
        {"l1": interval, "l2": ...}}`` (95% paired-bootstrap intervals of the per-question
        differences, :func:`ragfolio.core.stats.paired_differences`; l above k left out).
    """
    union, alone = per_question_budget_recall(runs, picks)
    k, n = len(runs.members), len(runs.judges)
    out: dict[str, Any] = {"routed_union_recall": [float(v) for v in union.mean(axis=0)] if n else [0.0] * k,
                           "single_best_recall": [float(v) for v in alone.mean(axis=0)] if n else [0.0] * k}
    ls = [l for l in ls if l <= k]
    if n and ls:
        cols = [l - 1 for l in ls]
        found = paired_differences(union[:, cols], alone[:, cols])
        out["union_minus_single"] = {f"l{l}": interval.to_dict() for l, interval in zip(ls, found, strict=True)}
    return out


def same_budget_tests(runs: BudgetRuns, picks: Mapping[str, Picks], ls: Sequence[int],
                      *, alpha: float = ALPHA) -> dict[str, dict[str, dict[str, Any]]]:
    """The do-no-harm evidence: does each router's routed union of l members beat the single best
    member given ``l * num_docs`` passages, every router at every l one family of tests under
    Holm's step-down (:func:`~ragfolio.core.routing.judging.multiplicity.holm_intervals`).

    Args:
        runs: The retrievals of n questions (dev, for the rule).
        picks: Per router, its ``(n, k)`` routing of the same questions; every router given here is
            in the family (``m = len(picks) * len(ls)`` tests).
        ls: The l's tested (those above k are left out).
        alpha: One-sided familywise level.

    Returns:
        ``{router: {"l1": test, ...}}``, each test ``{"estimate", "low", "high", "n", "confidence",
        "p", "p_holm", "passed", "m", "alpha"}`` (the Holm-level interval of the per-question difference
        union minus single); empty without questions, routers or l's.
    """
    ls = [l for l in ls if l <= len(runs.members)]
    if not len(runs.judges) or not picks or not ls:
        return {}
    columns = []
    for routing in picks.values():
        union, alone = per_question_budget_recall(runs, routing)
        columns.append(union[:, [l - 1 for l in ls]] - alone[:, [l - 1 for l in ls]])
    found = iter(holm_intervals(np.concatenate(columns, axis=1), alpha=alpha))
    return {name: {f"l{l}": next(found) for l in ls} for name in picks}


def same_budget_recall(runs: BudgetRuns, picks: Picks) -> dict[str, list[float]]:
    """Mean recall (the run's score) at l = 1..k of the routed union and of the single best at ``l * num_docs``.

    Args:
        runs: The retrievals of n test questions.
        picks: ``(n, k)`` the router's routing of the same questions, best first.

    Returns:
        ``{"routed_union_recall": [...], "single_best_recall": [...]}``, k values each (0.0 for no questions).
    """
    union, alone = per_question_budget_recall(runs, picks)
    if not len(runs.judges):
        return {"routed_union_recall": [0.0] * len(runs.members), "single_best_recall": [0.0] * len(runs.members)}
    return {"routed_union_recall": [float(v) for v in union.mean(axis=0)],
            "single_best_recall": [float(v) for v in alone.mean(axis=0)]}
