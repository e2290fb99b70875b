"""A follow-up made standalone: one call with earlier turns, none without, the question kept on a bad reply."""

from __future__ import annotations

import json

import pytest

from ragfolio.core.answering.conversation import (
    REWRITE_SCHEMA,
    Rewrite,
    parse_rewrite,
    rewrite_messages,
    standalone_question,
)
from ragfolio.core.llm.chat import Completion, LLMUnavailableError

TURNS = [("user", "Tell me about Barack Obama."),
         ("assistant", "Barack Obama was the 44th president of the United States.")]
FOLLOW_UP = "And where was he born?"


class ScriptedBackend:
    """Replies with ``reply`` to every call and keeps each call's prompt and settings."""

    def __init__(self, reply: str) -> None:
        self.reply, self.calls = reply, []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "json_schema": json_schema})
        return Completion(self.reply, 40, 9, 3.0)


def test_a_single_turn_request_makes_no_call() -> None:
    backend = ScriptedBackend(json.dumps({"question": "never asked"}))
    for turns in ([], [("user", "  "), ("assistant", "")]):  # blank turns are no turns
        assert standalone_question(backend, turns, FOLLOW_UP) == Rewrite(FOLLOW_UP, False, Completion.none())
    assert backend.calls == []


def test_a_follow_up_makes_exactly_one_call_and_asks_the_rewrite() -> None:
    backend = ScriptedBackend(json.dumps({"question": "  Where was Barack\nObama born? "}))
    rewrite = standalone_question(backend, TURNS, FOLLOW_UP, max_tokens=32)
    assert rewrite == Rewrite("Where was Barack Obama born?", True, Completion(backend.reply, 40, 9, 3.0))
    [call] = backend.calls
    assert call["max_tokens"] == 32 and call["json_schema"] == REWRITE_SCHEMA
    assert call["messages"] == rewrite_messages(TURNS, FOLLOW_UP)


@pytest.mark.parametrize("reply", [
    "Where was Barack Obama born?",              # not JSON
    '{"question": "Where was Barack Obama',      # cut off by max_tokens
    '{"question": "   "}', '{"question": 3}', '{"answer": "Honolulu"}', "[]", "",
])
def test_a_reply_that_is_not_the_json_keeps_the_question(reply) -> None:
    backend = ScriptedBackend(reply)
    rewrite = standalone_question(backend, TURNS, FOLLOW_UP)
    assert (rewrite.question, rewrite.rewritten, rewrite.completion.text) == (FOLLOW_UP, False, reply)
    assert len(backend.calls) == 1 and parse_rewrite(reply, FOLLOW_UP) == FOLLOW_UP


def test_parse_rewrite_reads_the_question() -> None:
    assert parse_rewrite('{"question": "Where was Obama born?"}', "x") == "Where was Obama born?"


def test_the_backends_error_is_the_callers() -> None:
    class Down:
        def complete(self, messages, **kwargs) -> Completion:
            raise LLMUnavailableError("down")

    with pytest.raises(LLMUnavailableError):
        standalone_question(Down(), TURNS, FOLLOW_UP)


def test_the_prompt_keeps_the_last_turns_each_cut() -> None:
    turns = [("user", f"question {i}") if i % 2 == 0 else ("assistant", "word " * 200) for i in range(10)]
    [message] = rewrite_messages(turns, FOLLOW_UP, max_turns=3, max_turn_words=5)
    content = message["content"]
    assert message["role"] == "user" and content.endswith(f"\n\nFollow-up: {FOLLOW_UP}")
    shown = content.split("Conversation:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert shown == ["Assistant: word word word word word ...", "User: question 8",
                     "Assistant: word word word word word ..."]
    assert '"question"' in content and "standalone" in content


def test_bad_settings_and_roles_are_named() -> None:
    with pytest.raises(ValueError, match="max_turns=0"):
        rewrite_messages(TURNS, FOLLOW_UP, max_turns=0)
    with pytest.raises(ValueError, match=r"turns\[1\] has role 'system'"):
        rewrite_messages([("user", "a"), ("system", "b")], FOLLOW_UP)
