"""Per-query scores: support recall, answer recall, exact match and F1 (SQuAD normalisation).

Every function scores one query; :mod:`ragfolio.core.scoring.utility` applies them over batches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

from ragfolio.core.answer_text import normalize_answer

__all__ = ["answer_recall", "contains_answer", "exact_match", "f1_score", "normalize_answer", "support_recall"]


def support_recall(predicted: Iterable[Hashable], gold: Iterable[Hashable], num_docs: int) -> float:
    """``|pred ∩ gold| / min(num_docs, |gold|)`` over passage ids or corpus rows (the paper's support recall).

    The denominator is the number of passages asked for, not the number returned, so a short list
    cannot score higher than a full one with the same hits; this is the score of the utility matrix
    (:func:`ragfolio.core.scoring.utility.support_recall_matrix` computes it for every candidate).

    Args:
        predicted: The retrieved passages (duplicates count once), at most ``num_docs`` of them.
        gold: The query's gold passages, non-empty.
        num_docs: The passages asked for (the retrieval budget), ``>= 1``.

    Returns:
        A score in ``[0, 1]``; 0.0 when nothing was predicted.

    Raises:
        ValueError: ``gold`` is empty (the score is undefined: the caller must leave such a query out
            rather than count it as 0), ``num_docs < 1``, or more than ``num_docs`` passages predicted.
    """
    pred, gold_set = set(predicted), set(gold)
    if not gold_set:
        raise ValueError("support recall is undefined for a query without gold passages")
    if num_docs < 1:
        raise ValueError(f"num_docs={num_docs} must be >= 1")
    if len(pred) > num_docs:
        raise ValueError(f"{len(pred)} passages predicted for num_docs={num_docs}")
    return len(pred & gold_set) / min(num_docs, len(gold_set))


def contains_answer(passage: str, answers: Iterable[str]) -> bool:
    """Whether some normalised answer alias occurs, as whole words, in the normalised passage."""
    haystack = f" {normalize_answer(passage)} "
    return any((needle := normalize_answer(a)) and f" {needle} " in haystack for a in answers)


def answer_recall(passages: Sequence[str], answers: Sequence[str]) -> float:
    """1.0 if some retrieved passage contains some answer alias (see :func:`contains_answer`)."""
    return float(any(contains_answer(p, answers) for p in passages))


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals some normalised alias, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def f1_score(prediction: str, answers: Iterable[str]) -> float:
    """Token-level F1 between prediction and the best-matching alias (SQuAD definition)."""
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for answer in answers:
        gold_tokens = normalize_answer(answer).split()
        common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if not pred_tokens or not gold_tokens:
            best = max(best, float(pred_tokens == gold_tokens))
            continue
        if common:
            precision, recall = common / len(pred_tokens), common / len(gold_tokens)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best
