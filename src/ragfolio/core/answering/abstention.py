"""When the reader's answer is not read from the passages: the rule that makes the service abstain.

The reader replies with the passages it read its answer from (``"used"``) and a one-line
explanation, ``"guess"`` when the passages do not hold the answer
(:func:`~ragfolio.core.answering.prompts.answer_messages`). A rule reads those two signals:

- ``"guess"``: the explanation says it is a guess;
- ``"no_passage"``: the reply names no passage;
- ``"guess_or_no_passage"``: either;
- ``"confidence"``: neither; only the threshold below;
- ``"off"``: never abstain.

Beside any rule but ``"off"``, ``min_confidence`` (None: none) also calls an answer unsupported
when the reader's confidence in it (:func:`~ragfolio.core.answering.confidence.answer_confidence`,
the mean log-probability of the answer's tokens, from the same call) is below it; an answer whose
confidence is unknown (a backend that gives no log-probabilities) is judged by the rule alone.

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

AbstainRule = Literal["off", "guess", "no_passage", "guess_or_no_passage", "confidence"]
ABSTAIN_RULES: tuple[str, ...] = ("off", "guess", "no_passage", "guess_or_no_passage", "confidence")
NO_ANSWER = "The documents do not answer this question."


def is_guess(explanation: str) -> bool:
    """Whether an explanation says the answer is a guess (its first word, after SQuAD normalisation)."""
    words = normalize_answer(explanation).split()
    return bool(words) and words[0] in ("guess", "guessed", "guessing")


def check_rule(rule: str | bool) -> str:
    """``rule`` when it is one of :data:`ABSTAIN_RULES`; ``False`` is ``"off"`` (YAML 1.1 reads an
    unquoted ``off`` as false).

    Raises:
        ValueError: It is not (the message lists them).
    """
    if rule is False:
        return "off"
    if rule not in ABSTAIN_RULES:
        raise ValueError(f"abstain={rule!r} is not one of {', '.join(ABSTAIN_RULES)}")
    return rule


def unsupported(
    rule: str, explanation: str, used: Sequence[int], n_passages: int, *, confidence: float | None = None,
    min_confidence: float | None = None,
) -> bool:
    """Whether ``rule`` (and ``min_confidence``) calls an answer unsupported by its ``n_passages`` passages.

    Raises:
        ValueError: ``rule`` is not one of :data:`ABSTAIN_RULES`.
    """
    if check_rule(rule) == "off":
        return False
    guess = rule in ("guess", "guess_or_no_passage") and is_guess(explanation)
    no_passage = rule in ("no_passage", "guess_or_no_passage") and n_passages > 0 and not used
    unsure = min_confidence is not None and confidence is not None and confidence < min_confidence
    return guess or no_passage or unsure
