"""When the reader's answer is not read from the passages: the rule that makes the service abstain.

The reader replies with the passages it read its answer from (``"used"``) and a one-line
explanation, ``"guess"`` when the passages do not hold the answer
(:func:`~ragfolio.core.answering.prompts.answer_messages`). A rule reads those two signals:

- ``"guess"``: the explanation says it is a guess;
- ``"no_passage"``: the reply names no passage;
- ``"guess_or_no_passage"``: either;
- ``"off"``: never abstain.

An answer the rule calls unsupported is not served as the answer: the service says that the
documents do not answer the question (:data:`NO_ANSWER`) and returns the reader's answer as a
guess, in a field of its own. A closed-book answer (no passages) is never called unsupported by
``"no_passage"``: it has no passage to name. The default rule and how it was chosen on dev
questions are in ``docs/answering.md`` ("Abstention").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ragfolio.core.answer_text import normalize_answer

AbstainRule = Literal["off", "guess", "no_passage", "guess_or_no_passage"]
ABSTAIN_RULES: tuple[str, ...] = ("off", "guess", "no_passage", "guess_or_no_passage")
NO_ANSWER = "The documents do not answer this question."


def is_guess(explanation: str) -> bool:
    """Whether an explanation says the answer is a guess (its first word, after SQuAD normalisation)."""
    words = normalize_answer(explanation).split()
    return bool(words) and words[0] in ("guess", "guessed", "guessing")


def unsupported(rule: str, explanation: str, used: Sequence[int], n_passages: int) -> bool:
    """Whether ``rule`` calls an answer unsupported by its ``n_passages`` passages.

    Raises:
        ValueError: ``rule`` is not one of :data:`ABSTAIN_RULES`.
    """
    if rule not in ABSTAIN_RULES:
        raise ValueError(f"abstain={rule!r} is not one of {', '.join(ABSTAIN_RULES)}")
    guess = rule in ("guess", "guess_or_no_passage") and is_guess(explanation)
    no_passage = rule in ("no_passage", "guess_or_no_passage") and n_passages > 0 and not used
    return guess or no_passage
