"""How well judged support agrees with real labels, for questions that have both.

A judged row (:func:`~ragfolio.core.synthesis.judging.judge_pool`) carries every passage judged for
its question as a context, ``is_supporting`` the verdict; a labelled question of the same text
(whitespace and case folded) carries its gold supporting passages. Per question, with ``J`` the
passage ids judged relevant, ``G`` the gold ones and ``P`` the pooled (judged) ones:

* precision ``|J & G| / |J|`` (undefined when ``J`` is empty: that question is left out of the mean);
* recall ``|J & G| / |G|``; F1 ``2PR / (P + R)``, 0 when both are 0 (or ``J`` is empty);
* pooled recall ``|P & G| / |G|``: the share of gold passages the pool reached at all, the ceiling
  of the judge's recall;
* judge recall ``|J & G| / |P & G|``: the judge's own recall on the gold passages it was shown
  (undefined when the pool reached none).

Questions without gold support are left out. The summary gives each measure's mean over the
questions where it is defined, and micro precision and recall over all pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.data.records import Context, Question, normalize_whitespace

Scores = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Agreement:
    """Per-question agreement of judged with gold support (NaN where a measure is undefined).

    Attributes:
        ids: ``(n,)`` ids of the labelled questions matched to a judged row.
        precision, recall, f1, pooled_recall, judge_recall: ``(n,)`` per-question scores (module docstring).
        counts: ``(n, 4)`` ``|J|, |G|, |J & G|, |P & G|`` per question.
    """

    ids: tuple[str, ...]
    precision: Scores
    recall: Scores
    f1: Scores
    pooled_recall: Scores
    judge_recall: Scores
    counts: npt.NDArray[np.int64]

    def summary(self) -> dict[str, Any]:
        """Means over the questions where each is defined, micro precision and recall, and the counts."""
        judged, gold, hit, pooled = (int(c) for c in self.counts.sum(axis=0)) if len(self.ids) else (0, 0, 0, 0)
        out: dict[str, Any] = {"questions": len(self.ids)}
        for name in ("precision", "recall", "f1", "pooled_recall", "judge_recall"):
            values = getattr(self, name)
            defined = values[~np.isnan(values)]
            out[name] = round(float(defined.mean()), 4) if defined.size else None
        out["micro"] = {"precision": round(hit / judged, 4) if judged else None,
                        "recall": round(hit / gold, 4) if gold else None}
        out["gold_per_question"] = round(gold / len(self.ids), 3) if self.ids else None
        out["gold_in_pool"], out["gold_judged_relevant"] = pooled, hit
        return out


def judged_agreement(judged: Sequence[Mapping[str, Any]], labelled: Sequence[Question]) -> Agreement:
    """Agreement of ``judged`` rows' support with that of the labelled questions of the same text.

    Args:
        judged: Judged rows (``{"question", "contexts": [{"title", "text", "is_supporting"}, ...]}``),
            every judged passage a context.
        labelled: Labelled questions; those with no judged row of their text, or no gold support,
            are left out.

    Raises:
        ValueError: Two judged rows have the same text (which verdicts go with the question is unclear).
    """
    by_text: dict[str, Mapping[str, Any]] = {}
    for row in judged:
        text = _folded(row["question"])
        if text in by_text:
            raise ValueError(f"two judged rows ask {row['question']!r}")
        by_text[text] = row
    ids, counts, scores = [], [], []
    for q in labelled:
        found, gold = by_text.get(_folded(q.question)), set(q.gold_passage_ids())
        if found is None or not gold:
            continue
        contexts = [Context(c["title"], c["text"], c["is_supporting"]) for c in found["contexts"]]
        relevant = {c.passage_id for c in contexts if c.is_supporting}
        pooled = {c.passage_id for c in contexts}
        hit, reached = len(relevant & gold), len(pooled & gold)
        precision = hit / len(relevant) if relevant else np.nan
        recall = hit / len(gold)
        f1 = 2 * precision * recall / (precision + recall) if relevant and hit else 0.0
        ids.append(q.id)
        counts.append((len(relevant), len(gold), hit, reached))
        scores.append((precision, recall, f1, reached / len(gold), hit / reached if reached else np.nan))
    table = np.array(scores, dtype=np.float64).reshape(-1, 5)
    return Agreement(tuple(ids), precision=table[:, 0], recall=table[:, 1], f1=table[:, 2],
                     pooled_recall=table[:, 3], judge_recall=table[:, 4],
                     counts=np.array(counts, dtype=np.int64).reshape(-1, 4))


def _folded(question: str) -> str:
    return normalize_whitespace(question).lower()
