"""A chat's follow-up made standalone: the last user message rewritten from the earlier turns.

A follow-up ("and where was he born?") names nothing a retriever can find: what it is about is in
the earlier turns. :func:`standalone_question` asks the reader's LLM, in one short call, to rewrite
it as a question that stands alone (pronouns and references resolved from the conversation), so
that retrieval and the answer use that question; a request without earlier turns makes no call.
The prompt (:func:`rewrite_messages`) shows only the last ``max_turns`` turns, each cut to
``max_turn_words`` words (an assistant's turn can be long; the rewrite needs what it was about,
not its detail), so its cost is bounded whatever the conversation's length. The reply is JSON of
:data:`REWRITE_SCHEMA`, which a backend that can constrain its decoding enforces; a reply that is
not that JSON (a cut-off reply, a backend that cannot constrain its output) or whose question is
empty leaves the question as it was (:func:`parse_rewrite`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragfolio.core.llm.chat import ChatBackend, Completion, Messages

logger = logging.getLogger(__name__)

Turn = tuple[str, str]
"""One earlier message of a conversation: ``(role, text)``, the role ``"user"`` or ``"assistant"``."""

ROLES = {"user": "User", "assistant": "Assistant"}  # a turn's role as the prompt names it
MAX_TURNS = 6
MAX_TURN_WORDS = 60

REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "minLength": 1, "maxLength": 300}},
    "required": ["question"],
    "additionalProperties": False,
}
_RULES = (
    "Rewrite the follow-up as a standalone question: replace pronouns and references (he, she, it, they, "
    "that film) with the names they stand for in the conversation. Keep it short and keep its meaning; if it "
    'already stands alone, repeat it. Reply in JSON with "question": the standalone question.'
)


def _truncate(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def rewrite_messages(
    turns: Sequence[Turn], question: str, *, max_turns: int = MAX_TURNS, max_turn_words: int = MAX_TURN_WORDS
) -> Messages:
    """The prompt asking for ``question`` (the follow-up) rewritten as a standalone question.

    One user message (no ``system`` role: some chat templates reject it): the rules, the last
    ``max_turns`` of ``turns`` as ``User: ...`` / ``Assistant: ...`` lines, each cut to its first
    ``max_turn_words`` words, then ``Follow-up: <question>``; the reply is :data:`REWRITE_SCHEMA`'s JSON.

    Raises:
        ValueError: ``max_turns`` or ``max_turn_words`` is below 1, or a turn's role is neither
            ``user`` nor ``assistant`` (named with its position).
    """
    if max_turns < 1 or max_turn_words < 1:
        raise ValueError(f"max_turns={max_turns} and max_turn_words={max_turn_words} must be >= 1")
    for i, (role, _) in enumerate(turns):
        if role not in ROLES:
            raise ValueError(f"turns[{i}] has role {role!r}; a turn's role is 'user' or 'assistant'")
    shown = "\n".join(f"{ROLES[role]}: {_truncate(text, max_turn_words)}" for role, text in turns[-max_turns:])
    content = f"{_RULES}\n\nConversation:\n{shown}\n\nFollow-up: {question}"
    return [{"role": "user", "content": content}]


def _read(text: str) -> str | None:
    """The question of a reply of :data:`REWRITE_SCHEMA` (whitespace collapsed); None for any other reply."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    said = data.get("question") if isinstance(data, dict) else None
    if not isinstance(said, str):
        return None
    return " ".join(said.split()) or None


def parse_rewrite(text: str, fallback: str) -> str:
    """The standalone question of the reply ``text``; ``fallback`` (the follow-up as it was) when
    the reply is not :data:`REWRITE_SCHEMA`'s JSON or its question is empty."""
    question = _read(text)
    return fallback if question is None else question


@dataclass(frozen=True)
class Rewrite:
    """The question a conversation's last user message asks.

    Attributes:
        question: What to retrieve for and answer: the rewrite, or the follow-up as it was.
        rewritten: Whether ``question`` is the LLM's rewrite (False: no call was made, or its reply
            was not the JSON asked for).
        completion: The call; :meth:`Completion.none <ragfolio.core.llm.chat.Completion.none>` when
            none was made.
    """

    question: str
    rewritten: bool
    completion: Completion

    @classmethod
    def kept(cls, question: str) -> Rewrite:
        """``question`` as it is, without a call."""
        return cls(question, False, Completion.none())


def standalone_question(
    backend: ChatBackend, turns: Sequence[Turn], question: str, *, max_tokens: int = 48,
    max_turns: int = MAX_TURNS, max_turn_words: int = MAX_TURN_WORDS,
) -> Rewrite:
    """``question`` rewritten by ``backend`` as a standalone question from the earlier ``turns``.

    Turns whose text is blank are left out; with none left (a single-turn request) no call is made
    and the question is kept. Otherwise one call (:func:`rewrite_messages`, at most ``max_tokens``
    generated) whose reply is read by :func:`parse_rewrite`.

    Raises:
        ValueError: As :func:`rewrite_messages`.
        Exception: What ``backend.complete`` raises (e.g. :class:`~ragfolio.core.llm.chat.LLMUnavailableError`);
            a caller that can answer without the rewrite keeps the question (:meth:`Rewrite.kept`).
    """
    turns = [(role, text) for role, text in turns if text.strip()]
    if not turns:
        return Rewrite.kept(question)
    messages = rewrite_messages(turns, question, max_turns=max_turns, max_turn_words=max_turn_words)
    completion = backend.complete(messages, max_tokens=max_tokens, json_schema=REWRITE_SCHEMA)
    said = _read(completion.text)
    if said is None:
        logger.debug("rewrite reply %r is not the JSON asked for; the follow-up is kept", completion.text)
        return Rewrite(question, False, completion)
    return Rewrite(said, True, completion)
