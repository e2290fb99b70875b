"""What the question writer is asked, and reading its replies.

One prompt per kind of question, each a single user message with the passage(s) first and the
task last, replying in JSON (``{"question": str, "answer": str}``) that llama.cpp enforces while
decoding (:data:`QUESTION_SCHEMA`):

* ``single``: a question one passage answers;
* ``bridge``: a question that needs both passages, the second reached through an entity of the
  first (HotpotQA's bridge questions, MuSiQue's two hops);
* ``comparison``: a question that compares the two passages' subjects on one property (HotpotQA's
  and 2WikiMultiHopQA's comparison questions).

The prompts ask for a question in the writer's own words, since a question that copies its
passage favours the lexical retrievers (:func:`~ragfolio.core.synthesis.checks.copied_share`
measures and caps it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ragfolio.core.answering.prompts import format_passages
from ragfolio.core.llm.chat import Messages

Kind = Literal["single", "bridge", "comparison"]
KINDS: Final[tuple[Kind, ...]] = ("single", "bridge", "comparison")
PASSAGES_PER_KIND: Final[dict[Kind, int]] = {"single": 1, "bridge": 2, "comparison": 2}
# The declared version of the prompts and their reading: part of every stored question's key, so a
# change here writes afresh instead of reusing questions written for other prompts (bump it).
PROMPT_VERSION: Final = 2

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "minLength": 8, "maxLength": 200},
                   "answer": {"type": "string", "minLength": 1, "maxLength": 60}},
    "required": ["question", "answer"],
    "additionalProperties": False,
}

_RULES = (
    'Reply in JSON with "question": one question a user might ask, in your own words (do not copy '
    "phrases from the passage{s}), naming its subject so that it has one answer without the passage{s}; "
    'and "answer": its short exact answer, as written in the passage{s} (a name, date, number, place '
    "or yes/no; a few words, not a sentence)."
)
_TASKS: Final[dict[Kind, str]] = {
    "single": "Write a question about one fact this passage states (not who or what its subject is).",
    "bridge": ("Write a question that needs both passages: it asks about something in passage [2], but names it "
               "only through a fact from passage [1], so passage [1] must be read first."),
    "comparison": ("Write a question that compares the subjects of passage [1] and passage [2] on one property "
                   "both passages state (which is older, larger, first, or do both share it)."),
}


def writer_messages(kind: Kind, passages: Sequence[tuple[str, str]], *, max_passage_words: int = 120) -> Messages:
    """The writer's prompt for a ``kind`` question from its ``(title, text)`` passages.

    Raises:
        ValueError: ``kind`` is unknown, or the number of passages is not the kind's.
    """
    if kind not in PASSAGES_PER_KIND:
        raise ValueError(f"kind={kind!r} must be one of {KINDS}")
    if len(passages) != PASSAGES_PER_KIND[kind]:
        raise ValueError(f"a {kind} question is written from {PASSAGES_PER_KIND[kind]} passage(s), got {len(passages)}")
    rules = _RULES.format(s="s" if len(passages) > 1 else "")
    content = (f"Passage{'s' if len(passages) > 1 else ''}:\n{format_passages(passages, max_passage_words)}\n\n"
               f"{_TASKS[kind]} {rules}")
    return [{"role": "user", "content": content}]


@dataclass(frozen=True)
class Written:
    """A question as the writer wrote it; empty fields when the reply was not the JSON asked for."""

    question: str
    answer: str

    @property
    def ok(self) -> bool:
        return bool(self.question and self.answer)


def parse_written(text: str) -> Written:
    """Read a writer reply as :data:`QUESTION_SCHEMA`'s JSON; anything else is an empty :class:`Written`."""
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        return Written("", "")
    if not isinstance(reply, dict):
        return Written("", "")
    question, answer = reply.get("question"), reply.get("answer")
    if not isinstance(question, str) or not isinstance(answer, str):
        return Written("", "")
    question = " ".join(question.split())
    return Written(question, " ".join(answer.split()))
