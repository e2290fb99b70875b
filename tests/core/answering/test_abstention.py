"""Abstention and citations: the reader's "used" passages and its guesses, from reply to RAGAnswer."""

from __future__ import annotations

import json

import pytest
from fake_encoders import tiny_runner  # noqa: F401 - the fixtures' module
from routed_portfolio import routed_portfolio

from ragfolio.core.answering.abstention import NO_ANSWER, is_guess, unsupported
from ragfolio.core.answering.adaptive_rag import AdaptiveRAG
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.prompts import answer_schema, parse_reply
from ragfolio.core.llm.chat import Completion
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem

PASSAGES = [("Big Ben", "Big Ben is the bell of the clock at Westminster."), ("Paris", "Paris is in France.")]


class JsonReader:
    """Replies ``reply`` to every reader prompt, records the schemas asked for."""

    def __init__(self, reply: dict) -> None:
        self.reply, self.schemas = json.dumps(reply), []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        self.schemas.append(json_schema)
        return Completion(self.reply, 50, 12, 5.0)


@pytest.mark.parametrize(("explanation", "guess"), [("guess", True), ("Guess.", True), ("guessing from memory", True),
                                                    ("evidence", False), ("", False), ("educated guess", False)])
def test_a_guess_is_the_explanations_first_word(explanation: str, guess: bool) -> None:
    assert is_guess(explanation) is guess


def test_each_rule_reads_its_signal() -> None:
    assert not unsupported("off", "guess", (), 4)
    assert unsupported("guess", "guess", (0,), 4) and not unsupported("guess", "evidence", (), 4)
    assert unsupported("no_passage", "evidence", (), 4) and not unsupported("no_passage", "guess", (1,), 4)
    assert not unsupported("no_passage", "evidence", (), 0)  # closed-book has no passage to name
    assert unsupported("guess_or_no_passage", "guess", (1,), 4) and unsupported("guess_or_no_passage", "evidence", (), 4)
    # the confidence threshold beside any rule but off; an unknown confidence is judged by the rule alone
    assert unsupported("confidence", "evidence", (1,), 4, confidence=-2.0, min_confidence=-1.0)
    assert not unsupported("confidence", "guess", (), 4, confidence=-0.5, min_confidence=-1.0)
    assert unsupported("guess", "evidence", (1,), 4, confidence=-2.0, min_confidence=-1.0)
    assert not unsupported("guess", "evidence", (1,), 4, confidence=None, min_confidence=-1.0)
    assert not unsupported("off", "guess", (), 4, confidence=-9.0, min_confidence=-1.0)
    with pytest.raises(ValueError, match="abstain='sometimes'"):
        unsupported("sometimes", "", (), 0)
    with pytest.raises(ValueError, match="abstain="):
        Answerer(JsonReader({}), abstain="sometimes")


def test_the_schema_names_only_the_passages_shown() -> None:
    schema = answer_schema(3)
    assert list(schema["properties"]) == ["answer", "explanation", "used"]  # the answer first: a stream sends it
    assert schema["properties"]["used"]["items"]["enum"] == [1, 2, 3] and schema["properties"]["used"]["maxItems"] == 3
    assert "used" not in answer_schema(0)["properties"]


def test_used_is_read_in_order_once_and_only_as_positive_integers() -> None:
    reply = parse_reply('{"answer": "London", "used": [2, 1, 2, 0, -1, true, "3", 4], "explanation": "evidence"}')
    assert reply.used == (2, 1, 4) and reply.parsed
    assert parse_reply('{"answer": "London", "explanation": "evidence"}').used == ()
    assert parse_reply('{"answer": "London", "used": [1').used == ()  # cut off: salvaged, cites nothing


def test_the_answerer_maps_used_to_positions_and_applies_its_rule() -> None:
    reader = JsonReader({"answer": "Westminster", "used": [2, 1, 7], "explanation": "guess"})
    said = Answerer(reader).answer("Where is Big Ben?", PASSAGES)
    assert said.used == (1, 0) and said.unsupported  # 7 was never shown: dropped
    assert reader.schemas[0] == answer_schema(2)
    assert not Answerer(reader, abstain="off").answer("Where is Big Ben?", PASSAGES).unsupported


def test_the_answers_confidence_comes_from_the_same_call_and_can_abstain() -> None:
    reply = '{"answer":"Paris","used":[2],"explanation":"evidence"}'
    pieces = [('{"answer":"', -0.01), ("Par", -0.5), ("is", -1.5), ('","used":[2],"explanation":"evidence"}', -0.1)]

    class Scored(JsonReader):
        def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
            return Completion(reply, 50, 4, 5.0, logprobs=tuple(pieces))

    said = Answerer(Scored({})).answer("Where?", PASSAGES)
    assert said.confidence == pytest.approx(-1.0) and not said.unsupported  # (-0.5 - 1.5) / 2
    assert Answerer(Scored({}), min_confidence=-0.8).answer("Where?", PASSAGES).unsupported
    assert Answerer(JsonReader({"answer": "x", "explanation": "evidence"})).answer("Where?", PASSAGES).confidence is None


@pytest.fixture
def routed_parts(tiny_dir, monkeypatch, small_grid):
    return routed_portfolio(tiny_dir, monkeypatch, small_grid)


def test_rag_abstains_with_the_guess_aside_and_cites_the_rows_used(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    system = RoutedSystem(runner, members, router, hasher, ["minilm"])
    guessed = AdaptiveRAG(system, Answerer(JsonReader({"answer": "Lyon", "used": [], "explanation": "guess"})))
    result = guessed.answer(RetrievalRequest(queries[0], 1, system.depth))
    assert result.abstained and result.answer == NO_ANSWER and result.guess == "Lyon" and result.cited == []
    assert result.candidates[result.chosen][1] == "Lyon"  # the candidate is the reader's answer

    cited = AdaptiveRAG(system, Answerer(JsonReader({"answer": "Paris", "used": [3, 1, 3], "explanation": "evidence"})))
    result = cited.answer(RetrievalRequest(queries[0], 1, system.depth))
    rows = result.retrieval.results.ok_runs[0].doc_ids
    assert not result.abstained and result.guess is None and result.answer == "Paris"
    assert result.cited == [rows[2], rows[0]]

    off = AdaptiveRAG(system, Answerer(JsonReader({"answer": "Lyon", "used": [], "explanation": "guess"}), abstain="off"))
    assert off.answer(RetrievalRequest(queries[0], 1, system.depth)).answer == "Lyon"


def test_an_unquoted_off_read_as_false_is_off() -> None:
    from ragfolio.serving.answering_config import AnswererConfig
    from ragfolio.serving.config import env_overrides

    assert Answerer(JsonReader({}), abstain=False).abstain == "off"  # type: ignore[arg-type]
    overrides = env_overrides({"RAGFOLIO_ANSWERER__ABSTAIN": "off"})  # YAML 1.1: false
    assert AnswererConfig(**overrides["answerer"]).abstain == "off"
    with pytest.raises(ValueError, match="abstain=True"):
        AnswererConfig(abstain=True)
