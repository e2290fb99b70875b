"""The checks a written question must pass to be kept, and the reason each drop is counted under.

In the order they run (free checks first, then the reader's two calls):

1. ``unparsed``: the reply was not the JSON asked for.
2. ``duplicate``: the same question (after SQuAD normalisation) was kept already.
3. ``copied``: more than ``max_copied`` of the question's word trigrams occur in its passages
   (:func:`copied_share`). A question that copies its passage is a BM25 query, and a pool judged
   on such questions favours the lexical retrievers.
4. ``answer_not_in_passages``: the answer (yes/no aside) is not in the passages.
5. ``answer_in_question``: the question holds its own answer ("Who was Ian Harland?" -> "Ian
   Harland"), or names the passage it was written from ("the university mentioned in passage [1]"):
   a user has no passage to point at. A comparison names both candidates, so only the second applies.
6. ``answered_closed_book``: the reader, given no passage, answers it (the answer matches): it tests
   what the model knows, not retrieval.
7. ``not_answered_from_gold``: the reader, given the gold passages, does not answer it (token F1
   with the written answer under ``min_answer_f1``): it is unanswerable, ambiguous, or wrongly
   answered by the writer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ragfolio.core.answer_text import normalize_answer
from ragfolio.core.metrics import contains_answer, exact_match, f1_score

REASONS: Final = ("unparsed", "duplicate", "copied", "answer_not_in_passages", "answer_in_question",
                  "answered_closed_book", "not_answered_from_gold")
YES_NO: Final = frozenset({"yes", "no"})
_PASSAGE_REFERENCE: Final = re.compile(r"\b(passages?|paragraphs?|the text|this article)\b|\[\d\]", re.IGNORECASE)


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def copied_share(question: str, passages: Sequence[tuple[str, str]], n: int = 3) -> float:
    """The share of the question's word ``n``-grams (SQuAD-normalised words) found in the passages' texts.

    0 for a question shorter than ``n`` words. Titles are left out: a question may name its subject.
    """
    words = normalize_answer(question).split()
    grams = _ngrams(words, n)
    if not grams:
        return 0.0
    found = set().union(*(_ngrams(normalize_answer(text).split(), n) for _, text in passages))
    return len(grams & found) / len(grams)


def answer_in_passages(answer: str, passages: Sequence[tuple[str, str]]) -> bool:
    """Whether ``answer`` occurs in a passage's title or text (normalised); yes/no answers always do."""
    if normalize_answer(answer) in YES_NO:
        return True
    return any(contains_answer(f"{title} {text}", [answer]) for title, text in passages)


def answer_in_question(answer: str, question: str, *, comparison: bool = False) -> bool:
    """Whether the question points at its passage, or (not a comparison) holds its own answer
    (normalised, whole words; yes/no answers never do)."""
    if _PASSAGE_REFERENCE.search(question):
        return True
    return not comparison and normalize_answer(answer) not in YES_NO and contains_answer(question, [answer])


def answers_match(predicted: str, written: str, min_f1: float) -> bool:
    """Whether the reader's answer is the written one: exact match, or token F1 at least ``min_f1``
    with a token in common. An answer sharing no token with the written one never matches, even at
    ``min_f1 = 0``: else every closed-book answer would match and every question be dropped."""
    if exact_match(predicted, [written]):
        return True
    f1 = f1_score(predicted, [written])
    return f1 > 0.0 and f1 >= min_f1
