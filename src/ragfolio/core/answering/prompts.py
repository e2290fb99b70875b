"""Short-answer prompts, the selector's prompt, and reading the model's replies.

Prompts carry no ``system`` message because Gemma's chat template rejects that role; instructions
and one worked example go into the user message, which ends with ``"Answer:"`` so that base models
(prompted as plain text, see :data:`~ragfolio.core.llm.chat.PLAIN`) continue with the answer
too. The selector's worked example is neutral: its right answer is not the first candidate.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from ragfolio.core.llm.chat import Messages
from ragfolio.core.metrics import normalize_answer

logger = logging.getLogger(__name__)

def _truncate(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def format_passages(passages: Sequence[tuple[str, str]], max_passage_words: int) -> str:
    """``"[1] <title>: <first max_passage_words words of text>"``, one passage per line."""
    if max_passage_words < 1:
        raise ValueError(f"max_passage_words={max_passage_words} must be >= 1")
    return "\n".join(f"[{i}] {t}: {_truncate(x, max_passage_words)}" for i, (t, x) in enumerate(passages, 1))


# One worked example per prompt: it shows a base model the expected shape (a few words on the
# "Answer:" line) and costs an instruction-tuned model ~40 prompt tokens.
_DEMO_QUESTION, _DEMO_ANSWER = "In which city is the Eiffel Tower?", "Paris"
_DEMO_PASSAGE = ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.")
# The selector's worked examples put the right candidate once second and once first, so that
# neither position is what the examples teach.
_SELECT_DEMOS = (
    (_DEMO_QUESTION, ("London", "Paris"), _DEMO_ANSWER),
    ("Who wrote the play Hamlet?", ("William Shakespeare", "Charles Dickens"), "William Shakespeare"),
)


def answer_messages(
    question: str, passages: Sequence[tuple[str, str]], *, max_passage_words: int = 100
) -> Messages:
    """The short-answer prompt over ``(title, text)`` passages; closed-book when there are none.

    One worked example precedes the question; the prompt ends with ``"Answer:"``.
    """
    if not passages:
        content = (
            "Answer the question with a few words, no explanation.\n\n"
            f"Question: {_DEMO_QUESTION}\nAnswer: {_DEMO_ANSWER}\n\nQuestion: {question}\nAnswer:"
        )
    else:
        content = (
            "Answer the question using the passages. Reply with the answer only: a few words, no explanation."
            f"\n\nPassages:\n{format_passages([_DEMO_PASSAGE], max_passage_words)}\n\n"
            f"Question: {_DEMO_QUESTION}\nAnswer: {_DEMO_ANSWER}"
            f"\n\nPassages:\n{format_passages(passages, max_passage_words)}\n\nQuestion: {question}\nAnswer:"
        )
    return [{"role": "user", "content": content}]


def _numbered(candidates: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(candidates, 1))


def selector_messages(question: str, candidates: Sequence[str]) -> Messages:
    """Asks which of the numbered candidate answers is right, replying with exactly one of them.

    Two worked examples precede the question, their right answers at positions 2 and 1 (neutral
    about position); the prompt ends with ``"Answer:"``.
    """
    demos = "".join(
        f"Question: {q}\nCandidate answers:\n{_numbered(options)}\nAnswer: {right}\n\n"
        for q, options, right in _SELECT_DEMOS
    )
    content = (
        "Which candidate answers the question correctly? Reply with exactly one of the candidate answers, "
        f"copied as written, and nothing else.\n\n{demos}"
        f"Question: {question}\nCandidate answers:\n{_numbered(candidates)}\nAnswer:"
    )
    return [{"role": "user", "content": content}]


_PREFIX = re.compile(r"^(?:(?:the|final|short)\s+)?answer(?:\s+is)?(?:\s*[:\-]\s*|\s+)|^a:\s*", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[#>]+|[-*•])\s+")
_NUMBER = re.compile(r"^(?:answer|candidate|option)?\s*(?:#|no\.?\s*)?[\[(]?(\d+)[\])]?[.:]?$", re.IGNORECASE)
_ENUMERATED = re.compile(r"^[\[(]?(\d+)[\]).:]\s+(.+)$")
_QUOTES = "\"'`“”‘’«»"


def _clean_line(line: str) -> str:
    line = _BULLET.sub("", line.strip().replace("**", "").replace("__", ""), count=1).strip("*_ ")
    while (stripped := _PREFIX.sub("", line, count=1)) != line:
        line = stripped.strip()
    if line.lower().rstrip(":") in ("answer", "final answer"):
        return ""
    line = line.strip(_QUOTES + " ")
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1].strip(_QUOTES + " ")
    return line


def clean_answer(text: str) -> str:
    """The first non-empty line with ``Answer:`` prefixes, markdown, quotes and a final period removed."""
    for line in text.splitlines():
        if cleaned := _clean_line(line):
            return cleaned
    return ""


def parse_selection(text: str, candidates: Sequence[str]) -> int | None:
    """Index of the candidate the selector reply names, or ``None`` when it names none.

    Tried in order on the cleaned reply (SQuAD normalisation for text): equal to a candidate;
    a bare number ``2``/``[2]``/``Answer 2`` (1-based); an enumerated copy ``2. text``; a
    candidate contained in the reply (the longest wins); the reply contained in a candidate (the
    first in order wins).
    """
    if not candidates:
        raise ValueError("parse_selection needs at least one candidate")
    reply = clean_answer(text)
    norms = [normalize_answer(c) for c in candidates]

    def by_text(said: str) -> int | None:
        norm = normalize_answer(said)
        if not norm:
            return None
        if norm in norms:
            return norms.index(norm)
        inside = [i for i, c in enumerate(norms) if c and f" {c} " in f" {norm} "]
        if inside:
            return max(inside, key=lambda i: len(norms[i]))
        return next((i for i, c in enumerate(norms) if f" {norm} " in f" {c} "), None)

    if (number := _NUMBER.match(reply)) and normalize_answer(reply) not in norms:
        n = int(number.group(1))
        return n - 1 if 1 <= n <= len(candidates) else None
    if enumerated := _ENUMERATED.match(reply):
        found = by_text(enumerated.group(2))
        n = int(enumerated.group(1))
        return found if found is not None else (n - 1 if 1 <= n <= len(candidates) else None)
    return by_text(reply)
