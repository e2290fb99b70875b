"""A chat's follow-up reaches retrieval: ``POST /v1/chat/completions`` with earlier turns retrieves for and
answers the standalone question the LLM rewrote the last user message into (the fake LLM rewrites as
``FakeLLM.rewrites`` says), says so in ``rewritten_question``, counts the call in ``usage``, and keeps
the last message as it is when the rewrite fails (switched off, or timed out: test_service_settings.py)."""

from __future__ import annotations

import json

import pytest
from conftest import FakeLLM, write_config
from fake_llm import rewrite_tokens
from test_openai_api import CHAT, SECRET, streamed
from tiny_bundle import questions

from ragfolio.core.llm.chat import LLMUnavailableError
from ragfolio.serving import engine as engine_module
from ragfolio.serving.engine import ServingEngine

FOLLOW_UP = "And who else was there?"


def conversation(follow_up: str = FOLLOW_UP, **extra: object) -> dict:
    """Two turns: a first question and its answer, then ``follow_up``."""
    return {"model": "ragfolio", "messages": [
        {"role": "system", "content": "You answer questions."},
        {"role": "user", "content": questions()[0]},
        {"role": "assistant", "content": [{"type": "text", "text": "Maria von Trapp"}]},
        {"role": "user", "content": follow_up},
    ], **extra}


TURNS = [("user", questions()[0]), ("assistant", "Maria von Trapp")]


@pytest.fixture
def retrieved(monkeypatch) -> list[str]:
    """The queries the service retrieves for (``/answer``'s and the chat's), as they are routed."""
    queries: list[str] = []
    route_many = ServingEngine.route_many

    def spy(self, items):
        queries.extend(item.request.query for item in items)
        return route_many(self, items)

    monkeypatch.setattr(ServingEngine, "route_many", spy)
    return queries


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_is_retrieved_for_and_answered_as_its_rewrite(client, monkeypatch, retrieved, stream) -> None:
    standalone = questions()[2]
    monkeypatch.setitem(FakeLLM.rewrites, FOLLOW_UP, standalone)
    answered = client.post("/answer", json={"query": standalone, "l": 1}).json()
    asked, before = len(retrieved), len(FakeLLM.rewritten)
    response = client.post(CHAT, json=conversation(l=1, stream=stream, stream_options={"include_usage": True}))
    assert response.status_code == 200, response.text
    assert retrieved[asked:] == [standalone]  # the rewrite, not the follow-up, reached retrieval
    assert FakeLLM.rewritten[before:] == [FOLLOW_UP]  # one rewrite call
    if stream:
        chunks, content = streamed(response.text)
        stop, usage = chunks[-2], chunks[-1]["usage"]
        assert stop["choices"][0]["finish_reason"] == "stop" and stop["rewritten_question"] == standalone
    else:
        body = response.json()
        content, usage = body["choices"][0]["message"]["content"], body["usage"]
        assert body["rewritten_question"] == standalone
    assert content == answered["answer"]
    prompt, completion = rewrite_tokens(TURNS, FOLLOW_UP)
    assert usage["prompt_tokens"] == answered["tokens"]["prompt"] + prompt
    assert usage["total_tokens"] == answered["tokens"]["total"] + prompt + completion


def test_a_single_turn_request_makes_no_rewrite(client, retrieved) -> None:
    question, before = questions()[1], len(FakeLLM.rewritten)
    body = client.post(CHAT, json={"messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": question}]}).json()
    assert body["rewritten_question"] is None and retrieved == [question]
    assert len(FakeLLM.rewritten) == before
    answered = client.post("/answer", json={"query": question}).json()
    assert body["usage"]["total_tokens"] == answered["tokens"]["total"]


def test_a_failed_rewrite_answers_the_last_message_as_it_is(client, monkeypatch, retrieved, caplog) -> None:
    def down(*args: object, **kwargs: object) -> None:
        raise LLMUnavailableError(f"cannot reach {SECRET}")

    monkeypatch.setattr(engine_module, "standalone_question", down)
    answered = client.post("/answer", json={"query": FOLLOW_UP}).json()
    response = client.post(CHAT, json=conversation())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["rewritten_question"] is None and retrieved == [FOLLOW_UP, FOLLOW_UP]
    assert body["choices"][0]["message"]["content"] == answered["answer"]
    assert body["usage"]["total_tokens"] == answered["tokens"]["total"]
    assert "hunter2" not in response.text
    rid = response.headers["x-request-id"]
    assert any(rid in r.getMessage() and "not rewritten" in r.getMessage() for r in caplog.records), caplog.text


def test_a_reply_that_is_not_the_json_keeps_the_last_message(client, monkeypatch, retrieved) -> None:
    monkeypatch.setitem(FakeLLM.rewrites, FOLLOW_UP, "")  # {"question": ""}: no question
    body = client.post(CHAT, json=conversation()).json()
    assert body["rewritten_question"] is None and retrieved == [FOLLOW_UP]
    prompt, completion = rewrite_tokens(TURNS, FOLLOW_UP)
    answered = client.post("/answer", json={"query": FOLLOW_UP}).json()
    assert body["usage"]["total_tokens"] == answered["tokens"]["total"] + prompt + completion  # the call was made


def test_the_config_reads_the_chat_settings(tmp_path, tiny_bundle, fake_llm_url) -> None:
    from ragfolio.serving.config import load_config

    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url)
    assert load_config(config).chat.rewrite_followups is True
    off = load_config(config, env={"RAGFOLIO_CHAT__REWRITE_FOLLOWUPS": "false"})
    assert off.chat.rewrite_followups is False and json.loads(off.chat.model_dump_json())["rewrite_timeout_s"] == 30.0
