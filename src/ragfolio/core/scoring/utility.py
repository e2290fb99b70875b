"""The utility matrix ``U`` (queries x candidates): how well each candidate serves each query.

``U[q, r] = s(q, r)`` in [0, 1]. Two scores are built in:

* ``support_recall``: ``|pred ∩ gold| / min(num_docs, |gold|)`` over passage ids (the paper's
  default). The denominator is the list length asked for, not the passages a candidate returned,
  so a short list cannot score higher than a full one with the same hits (the pool returns full
  lists anyway; see :mod:`ragfolio.core.retrieval.ranking.completion`);
* ``answer_recall``: 1 if some retrieved passage contains a gold answer alias (SQuAD-normalised).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import Question
from ragfolio.core.metrics import contains_answer
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.scoring.runners import SCORES, Score

# The scores, named once: parameters, reports and the dispatch below all read these.


def score_targets(score: Score, questions: Sequence[Question], corpus: Corpus) -> tuple[tuple[Any, ...], ...]:
    """What each question's score is measured against: the corpus rows of its gold passages
    (``support_recall``) or its answer aliases (``answer_recall``)."""
    if score == "support_recall":
        row_of = corpus.row_of()
        return tuple(tuple(row_of[g] for g in q.gold_passage_ids()) for q in questions)
    if score == "answer_recall":
        return tuple(tuple(q.answers) for q in questions)
    raise ValueError(f"score={score!r} must be one of {SCORES}")


def utility_matrix(
    score: Score, results: Sequence[RetrievalResult], targets: Sequence[Sequence[Any]], passage_texts: Sequence[str]
) -> npt.NDArray[np.float32]:
    """``(n_queries, m)`` utilities under ``score`` (see :func:`score_targets` for ``targets``)."""
    if score == "support_recall":
        return support_recall_matrix(results, targets)
    if score == "answer_recall":
        return answer_recall_matrix(results, passage_texts, targets)
    raise ValueError(f"score={score!r} must be one of {SCORES}")


def _stack(results: Sequence[RetrievalResult]) -> npt.NDArray[np.int64]:
    if not results:
        raise ValueError("need at least one candidate's results")
    return np.stack([r.doc_ids for r in results], axis=1)  # (n_queries, m, num_docs)


def support_recall_matrix(
    results: Sequence[RetrievalResult], gold_rows: Sequence[Sequence[int]]
) -> npt.NDArray[np.float32]:
    """Support recall of every candidate on every query: :func:`ragfolio.core.metrics.support_recall`
    with ``num_docs`` the rankings' width, vectorised over the candidates.

    Args:
        results: One ranking per candidate, each ``(n_queries, num_docs)`` corpus rows.
        gold_rows: For each query, the corpus rows of its gold passages (non-empty).

    Returns:
        ``(n_queries, m)`` float32 matrix.
    """
    docs = _stack(results)
    if len(gold_rows) != docs.shape[0]:
        raise ValueError(f"{len(gold_rows)} gold lists for {docs.shape[0]} queries")
    utility = np.zeros(docs.shape[:2], dtype=np.float32)
    for q, gold in enumerate(gold_rows):
        gold_arr = np.unique(np.asarray(gold, dtype=np.int64))
        if gold_arr.size == 0:
            raise ValueError(f"query {q} has no gold passages; support recall is undefined")
        rows = docs[q]  # (m, num_docs) distinct passages; a -1 pad never matches gold
        hits = np.isin(rows, gold_arr).sum(axis=1)
        utility[q] = hits / min(rows.shape[1], gold_arr.size)
    return utility


def answer_recall_matrix(
    results: Sequence[RetrievalResult], passage_texts: Sequence[str], answers: Sequence[Sequence[str]]
) -> npt.NDArray[np.float32]:
    """Answer recall of every candidate on every query: ``(n_queries, m)`` float32 of 0/1.

    Each distinct retrieved passage of a query is checked once, whatever number of candidates
    retrieved it.
    """
    docs = _stack(results)
    if len(answers) != docs.shape[0]:
        raise ValueError(f"{len(answers)} answer lists for {docs.shape[0]} queries")
    utility = np.zeros(docs.shape[:2], dtype=np.float32)
    for q, aliases in enumerate(answers):
        rows = docs[q]
        seen = np.unique(rows[rows >= 0])
        good = np.array([r for r in seen if contains_answer(passage_texts[r], aliases)], dtype=np.int64)
        if good.size:
            utility[q] = np.isin(rows, good).any(axis=1)
    return utility
