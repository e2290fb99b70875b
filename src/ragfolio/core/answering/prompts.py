"""The reader's prompt, the selector's prompt, and reading their replies.

The reader answers from passages in JSON: a short answer, the passages it read it from and a
one-word explanation (evidence, or "guess"). The selector's judge sees the question and the
candidates' answers with their explanations (:func:`selector_messages`, not the passages) or with
the passages they cite (:func:`judge_passages_messages`), and replies with a candidate's number. Both give the backend a JSON schema, which
llama.cpp enforces while decoding; replies that are not that JSON are still read (a cut-off reply,
or a backend that cannot constrain its output), and counted as parse failures. Prompts are kept
short: on a CPU, reading the prompt (prefill) is most of a call's time.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragfolio.core.answer_text import normalize_answer
from ragfolio.core.llm.chat import Messages

logger = logging.getLogger(__name__)

def _truncate(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def format_passages(passages: Sequence[tuple[str, str]], max_passage_words: int) -> str:
    """``"[1] <title>: <first max_passage_words words of text>"``, one passage per line."""
    if max_passage_words < 1:
        raise ValueError(f"max_passage_words={max_passage_words} must be >= 1")
    return "\n".join(f"[{i}] {t}: {_truncate(x, max_passage_words)}" for i, (t, x) in enumerate(passages, 1))


# The reader replies in JSON: a short answer, the numbers of the passages it read it from ("used",
# the paper's used_passages) and the explanation's mode, "evidence" (read from the passages) or
# "guess", as the paper's answer prompt asks (one word: a free-text explanation cost ~25 generated
# tokens a call, ~3 s on these cores, and the answer is written before it). A backend that can constrain its decoding (llama.cpp, OpenAI-compatible
# servers honouring response_format) is given the schema (:func:`answer_schema`: the passage numbers
# are an enum of the passages shown), so a reply cut only by max_tokens fails to parse;
# :func:`parse_reply` counts those. The answer comes first: it is what a stream sends.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": 80},
                   "explanation": {"type": "string", "enum": ["evidence", "guess"]}},
    "required": ["answer", "explanation"],
    "additionalProperties": False,
}
"""The closed-book reply (no passages to name)."""


def answer_schema(n_passages: int) -> dict[str, Any]:
    """The reply over ``n_passages`` passages: :data:`ANSWER_SCHEMA` with ``"used"``, a list of
    at most ``n_passages`` of the numbers 1..``n_passages``, after the explanation;
    :data:`ANSWER_SCHEMA` itself when there are none.

    The properties are in the order the reply writes them, which is also their sorted order: the
    grammar is built from the schema's canonical (sorted) JSON, in process and in the server."""
    if n_passages < 1:
        return ANSWER_SCHEMA
    used = {"type": "array", "items": {"type": "integer", "enum": list(range(1, n_passages + 1))},
            "maxItems": n_passages}
    return {**ANSWER_SCHEMA, "properties": {**ANSWER_SCHEMA["properties"], "used": used},
            "required": ["answer", "explanation", "used"]}


_ANSWER_RULES = (
    'Reply in JSON with "answer": the shortest exact answer (a name, date, number, place or yes/no; '
    'a few words, not a sentence)'
)


def answer_messages(
    question: str, passages: Sequence[tuple[str, str]], *, max_passage_words: int = 100
) -> Messages:
    """The reader's prompt over ``(title, text)`` passages; closed-book when there are none.

    One user message (no ``system`` role: some chat templates reject it), the passages first and the
    question last, replying as :func:`answer_schema` of the passages.
    """
    if not passages:
        content = (f'Answer the question. {_ANSWER_RULES} and "explanation": "evidence" if you know it, else '
                   f'"guess".\n\nQuestion: {question}')
    else:
        content = (
            f'Answer the question using only the passages. {_ANSWER_RULES}, "used": the numbers of the passages '
            f'that state the answer ([] if none), and "explanation": "evidence" if the passages state the answer, '
            f'"guess" if they do not.\n\nPassages:\n'
            f"{format_passages(passages, max_passage_words)}\n\nQuestion: {question}"
        )
    return [{"role": "user", "content": content}]


def selector_schema(n: int) -> dict[str, Any]:
    """The selector's reply: ``{"choice": k}``, ``k`` one of the ``n`` candidates' numbers."""
    return {"type": "object", "properties": {"choice": {"type": "integer", "enum": list(range(1, n + 1))}},
            "required": ["choice"], "additionalProperties": False}


def selector_messages(question: str, candidates: Sequence[tuple[str, str]]) -> Messages:
    """Asks which numbered candidate answer is right, each shown with its reader's explanation.

    The selector sees the question and the ``(answer, explanation)`` candidates, not the passages,
    and must pick one: it replies as :func:`selector_schema`.
    """
    shown = "\n".join(f"{i}. {answer} (explanation: {explanation or 'none'})"
                       for i, (answer, explanation) in enumerate(candidates, 1))
    content = (
        "Several readers answered the question from different passages. Which candidate answer is right? "
        "Prefer an answer whose explanation cites evidence over a guess. "
        f'Reply in JSON with "choice": the number of the right candidate.\n\nQuestion: {question}\n'
        f"Candidates:\n{shown}"
    )
    return [{"role": "user", "content": content}]


def judge_passages_messages(
    question: str, candidates: Sequence[tuple[str, Sequence[int]]], passages: Sequence[tuple[str, str]], *,
    max_passage_words: int = 100,
) -> Messages:
    """Asks which numbered candidate answer the passages support, shown the passages themselves.

    ``passages`` are the ``(title, text)`` passages the candidates were read from, each once;
    each candidate is ``(answer, numbers of the passages it cites)`` (1-based into ``passages``).
    The judge replies as :func:`selector_schema`. Candidates carry no explanation: the passages
    are the evidence.
    """
    shown = "\n".join(f"{i}. {answer} (cites: {', '.join(f'[{k}]' for k in cites) or 'none'})"
                       for i, (answer, cites) in enumerate(candidates, 1))
    content = (
        "Several readers answered the question from the passages below. Which candidate answer do the "
        "passages support? Judge by the passages, not by how an answer is written; if none is supported, "
        f'pick the most likely. Reply in JSON with "choice": the number of that candidate.\n\nPassages:\n'
        f"{format_passages(passages, max_passage_words)}\n\nQuestion: {question}\nCandidates:\n{shown}"
    )
    return [{"role": "user", "content": content}]


@dataclass(frozen=True)
class Reply:
    """The reader's reply, read.

    Attributes:
        answer: The short answer (cleaned).
        explanation: Its one-line explanation ("" when the reply had none).
        parsed: Whether the reply was JSON of :data:`ANSWER_SCHEMA`; False: read as plain text
            (a reply cut by ``max_tokens``, or a backend that cannot constrain its output).
        used: The passage numbers (1-based) the reply names under ``"used"``, in its order,
            each once; () when it names none, or the reply has no such list (None would say
            the same: a reply without the list cites nothing).
    """

    answer: str
    explanation: str
    parsed: bool
    used: tuple[int, ...] = ()


_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"?')


def _numbers(value: Any) -> tuple[int, ...]:
    """The distinct positive integers of a JSON list, in order (anything else skipped)."""
    if not isinstance(value, list):
        return ()
    seen = [v for v in value if isinstance(v, int) and not isinstance(v, bool) and v >= 1]
    return tuple(dict.fromkeys(seen))


def parse_reply(text: str) -> Reply:
    """Read a reply as :data:`ANSWER_SCHEMA`'s JSON; else salvage what it says.

    A cut-off JSON reply gives its ``"answer"`` field if that was written; any other text gives
    :func:`clean_answer` of it. Both count as not parsed, and name no passages.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("answer"), str):
        return Reply(_clean_line(data["answer"]), str(data.get("explanation") or "").strip(), True,
                     _numbers(data.get("used")))
    if match := _ANSWER_FIELD.search(text):
        try:
            said = json.loads(f'"{match.group(1)}"')
        except ValueError:
            said = match.group(1)
        return Reply(_clean_line(said), "", False)
    return Reply(clean_answer(text), "", False)


def parse_choice(text: str, candidates: Sequence[str]) -> tuple[int | None, bool]:
    """The 0-based index the selector's reply names and whether it was :func:`selector_schema`'s JSON.

    A reply that is not that JSON is read by :func:`parse_selection` (a number, or a candidate's text).
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("choice"), int):
        k = data["choice"]
        return (k - 1 if 1 <= k <= len(candidates) else None), True
    return parse_selection(text, candidates), False


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
