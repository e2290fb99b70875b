"""The writer's prompts per kind of question, and reading its replies."""

from __future__ import annotations

import json

import pytest

from ragfolio.core.synthesis.writer_prompts import (
    PASSAGES_PER_KIND,
    QUESTION_SCHEMA,
    Written,
    parse_written,
    writer_messages,
)

ONE = [("Harbour Works", "Harbour Works is a brick factory on the west quay of Norrvik, opened in 1996.")]
TWO = [*ONE, ("Norrvik", "Norrvik is a harbour town of 23,000 people.")]


def test_writer_messages_per_kind() -> None:
    (single,) = writer_messages("single", ONE)
    assert single["role"] == "user" and single["content"].startswith("Passage:\n")
    assert "Harbour Works" in single["content"] and "opened in 1996" in single["content"]
    assert "Write a question about one fact this passage states" in single["content"]
    assert "from the passage)" in single["content"]  # the rules in the singular
    for kind in ("bridge", "comparison"):
        (message,) = writer_messages(kind, TWO)
        content = message["content"]
        assert content.startswith("Passages:\n") and "[1] Harbour Works" in content and "[2] Norrvik" in content
        assert "passage [1]" in content and "passage [2]" in content and "from the passages)" in content
    assert writer_messages("bridge", TWO) != writer_messages("comparison", TWO)
    long = [("T", " ".join(f"w{i}" for i in range(500)))]
    assert "w9 " in writer_messages("single", long, max_passage_words=10)[0]["content"]
    assert "w11" not in writer_messages("single", long, max_passage_words=10)[0]["content"]


@pytest.mark.parametrize(("kind", "passages"), [("single", TWO), ("bridge", ONE), ("comparison", TWO * 2), ("single", [])])
def test_writer_messages_refuses_the_wrong_number_of_passages(kind, passages) -> None:
    with pytest.raises(ValueError, match=f"{PASSAGES_PER_KIND[kind]} passage"):
        writer_messages(kind, passages)


def test_writer_messages_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind='essay'"):
        writer_messages("essay", ONE)  # type: ignore[arg-type]


def test_parse_written_reads_the_json_asked_for_and_folds_whitespace() -> None:
    reply = json.dumps({"question": "  In which year did the\nquay's brick factory open? ", "answer": " 1996 "})
    assert parse_written(reply) == Written("In which year did the quay's brick factory open?", "1996")
    assert parse_written(reply).ok
    assert set(QUESTION_SCHEMA["required"]) == {"question", "answer"}


@pytest.mark.parametrize("reply", [
    "In which year did it open? 1996",  # not JSON
    '{"question": "In which year did it open?", "answer": "19',  # cut off
    '["In which year did it open?", "1996"]',  # not an object
    '{"question": "In which year did it open?", "answer": 1996}',  # a number, not a string
    '{"question": null, "answer": "1996"}',
    '{"question": "In which year did it open?"}',  # no answer
])
def test_parse_written_gives_an_empty_question_for_anything_else(reply: str) -> None:
    written = parse_written(reply)
    assert written == Written("", "") and not written.ok


def test_a_blank_field_is_not_ok() -> None:
    assert not parse_written('{"question": "   ", "answer": "1996"}').ok
