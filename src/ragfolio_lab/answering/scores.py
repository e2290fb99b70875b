"""The scores of stored answers: exact match, F1 and the answer recall of the passages handed to the LLM.

The answer store keeps what each system did (its prediction and the corpus rows of its passages,
:meth:`ragfolio_lab.answering.systems.SystemAnswer.record`); the scores are computed here from
those rows each time a run reads them, so adding or changing a metric re-scores hours of stored
LLM answers in seconds instead of making them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragfolio.core.metrics import answer_recall, exact_match, f1_score

SCORES = ("em", "f1", "answer_recall")  # the per-question scores :func:`scored` adds, in report order


def scored(record: dict[str, Any], texts: Sequence[str]) -> dict[str, Any]:
    """``record`` with its :data:`SCORES` against its ``answers``; ``texts``: the corpus rows its
    ``doc_ids`` index (no passages: answer recall 0)."""
    prediction, answers, rows = record["prediction"], record["answers"], record.get("doc_ids") or []
    return {**record, "em": exact_match(prediction, answers), "f1": f1_score(prediction, answers),
            "answer_recall": answer_recall([texts[i] for i in rows], answers) if rows else 0.0}


def score_all(
    records: Iterable[dict[str, Any]], texts: Sequence[str], gold: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """Every record :func:`scored`; with ``gold`` (question id -> its answers now), against that gold
    rather than the gold stored with the record."""
    return [scored(record if gold is None else {**record, "answers": list(gold[str(record["id"])])}, texts)
            for record in records]
