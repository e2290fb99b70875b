"""What a cross-encoder learns from and is judged on: labelled (question, passage) pairs and rerank cases.

Training reads the **train** questions only (``split == "train"`` in ``data_prep``'s question
records): each supporting context of a question is a positive pair (label 1); its hard negatives
(label 0) are the passages the first stage ranks highest for it that are not supporting, taken in
turn from each first-stage ranking given (round robin), so the model learns to reorder what it
will rerank. Early stopping and the quality report read :class:`RerankCases`: a split's questions,
the first stage's top ``depth`` corpus rows for each, and the rows of its gold passages.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import Question

TRAIN_SPLIT = "train"  # the only split whose labels a cross-encoder is trained on


@dataclass(frozen=True)
class LabelledPairs:
    """Training pairs, one entry per pair in every field.

    Attributes:
        question_ids: The question each pair comes from.
        queries: The question texts.
        passages: The passage texts as retrievers see them (``"<title>. <text>"``).
        labels: 1.0 for a supporting passage, 0.0 for a hard negative.
    """

    question_ids: tuple[str, ...]
    queries: tuple[str, ...]
    passages: tuple[str, ...]
    labels: tuple[float, ...]

    def __post_init__(self) -> None:
        sizes = {len(self.question_ids), len(self.queries), len(self.passages), len(self.labels)}
        if len(sizes) != 1:
            raise ValueError(f"the fields of LabelledPairs must have one length, got {sorted(sizes)}")

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def concat(cls, parts: Sequence[LabelledPairs]) -> LabelledPairs:
        """The pairs of ``parts``, in order (one part per corpus)."""
        names = ("question_ids", "queries", "passages", "labels")
        return cls(**{name: tuple(x for part in parts for x in getattr(part, name)) for name in names})

    def without(self, question_ids: Collection[str]) -> LabelledPairs:
        """The pairs of every question but ``question_ids``, in order (a fold model's training set)."""
        drop = set(question_ids)
        keep = [i for i, qid in enumerate(self.question_ids) if qid not in drop]
        names = ("question_ids", "queries", "passages", "labels")
        return LabelledPairs(**{name: tuple(getattr(self, name)[i] for i in keep) for name in names})


@dataclass(frozen=True)
class RerankCases:
    """Questions with the first stage's passages for each: what a reranker reorders.

    Attributes:
        question_ids: ``(n,)`` question ids.
        queries: ``(n,)`` question texts.
        doc_ids: ``(n, depth)`` int64 corpus rows, the first stage's order, ``-1``-padded.
        gold: ``(n,)`` the corpus rows of each question's supporting passages.
    """

    question_ids: tuple[str, ...]
    queries: tuple[str, ...]
    doc_ids: npt.NDArray[np.int64]
    gold: tuple[frozenset[int], ...]

    def __len__(self) -> int:
        return len(self.question_ids)


def split_questions(
    records: Sequence[Mapping[str, Any]], split: str, *, limit: int | None = None, seed: int = 0
) -> list[Question]:
    """The questions of ``split`` that have supporting passages, in record order.

    Args:
        records: ``data_prep``'s question records (the JSONL keys and ``split``).
        split: ``train``, ``dev`` or ``test``.
        limit: At most this many, drawn uniformly without replacement (seeded), kept in record order.
        seed: Seed of that draw.
    """
    questions = [Question.from_record(dict(r), source="questions") for r in records if r["split"] == split]
    questions = [q for q in questions if q.gold_passage_ids()]
    if limit is not None and len(questions) > limit:
        keep = np.sort(np.random.default_rng(seed).choice(len(questions), size=limit, replace=False))
        questions = [questions[i] for i in keep]
    return questions


def gold_rows(question: Question, corpus: Corpus) -> frozenset[int]:
    """Corpus rows of ``question``'s supporting passages (those in ``corpus``)."""
    rows = corpus.row_of()
    return frozenset(rows[pid] for pid in question.gold_passage_ids() if pid in rows)


def labelled_pairs(
    questions: Sequence[Question],
    corpus: Corpus,
    passage_texts: Sequence[str],
    first_stages: Sequence[npt.NDArray[np.int64]],
    negatives: int,
) -> LabelledPairs:
    """Positive and hard-negative pairs of ``questions``.

    Args:
        questions: Train questions (:func:`split_questions` with :data:`TRAIN_SPLIT`).
        corpus: The corpus they retrieve from.
        passage_texts: ``(n_passages,)`` the text of each corpus row as retrievers see it.
        first_stages: ``(n_questions, depth)`` corpus rows of each first-stage ranking, ``-1``-padded;
            negatives are taken from them in turn, best first.
        negatives: Hard negatives per question (fewer when the rankings hold fewer).
    """
    fields: dict[str, list[Any]] = {"question_ids": [], "queries": [], "passages": [], "labels": []}
    for i, question in enumerate(questions):
        gold = gold_rows(question, corpus)
        ranked = [int(row) for rows in zip(*(stage[i] for stage in first_stages), strict=True) for row in rows]
        hard = [row for row in dict.fromkeys(ranked) if row >= 0 and row not in gold][:negatives]
        for row, label in [(row, 1.0) for row in sorted(gold)] + [(row, 0.0) for row in hard]:
            fields["question_ids"].append(question.id)
            fields["queries"].append(question.question)
            fields["passages"].append(passage_texts[row])
            fields["labels"].append(label)
    return LabelledPairs(**{name: tuple(values) for name, values in fields.items()})


def rerank_cases(questions: Sequence[Question], corpus: Corpus, first_stage: npt.NDArray[np.int64]) -> RerankCases:
    """The rerank cases of ``questions`` over ``first_stage``'s ``(n_questions, depth)`` corpus rows."""
    if len(first_stage) != len(questions):
        raise ValueError(f"first_stage has {len(first_stage)} rows for {len(questions)} questions")
    return RerankCases(
        question_ids=tuple(q.id for q in questions), queries=tuple(q.question for q in questions),
        doc_ids=np.asarray(first_stage, dtype=np.int64), gold=tuple(gold_rows(q, corpus) for q in questions),
    )
