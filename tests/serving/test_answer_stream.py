"""``POST /answer`` with ``"stream": true``: server-sent ``token`` events, then the whole response as
an ``answer`` event, through ``RagfolioService.to_asgi()`` with the fake LLM.

The tests that start a service of their own come first: the module-wide ``client`` must not be
open while another starts (conftest.asgi_app).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import FakeLLM, closed_port_url, service_client, write_config
from tiny_bundle import MEMBERS, questions

from ragfolio.core.answering.abstention import NO_ANSWER
from ragfolio.core.llm.chat import LLMUnavailableError
from ragfolio.serving.access import KEY_COOKIE
from ragfolio.serving.engine import ServingEngine
from ragfolio.serving.schemas import AnswerResponse

K = len(MEMBERS)
SECRET = "http://admin:hunter2@10.1.2.3:9200/v1"  # what an LLM error could quote
KEYS_ENV = "RAGFOLIO_TEST_STREAM_API_KEYS"
KEY = "stream-key-0123456789abcdef"
UNAVAILABLE = {"error": "the LLM is unavailable", "llm": "openai", "hint": "/retrieve still works"}


def sse(response) -> list[tuple[str, dict]]:
    """The ``(event, data)`` pairs of a streamed ``/answer``; checks the status and the framing."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("\n\n"), response.text[-200:]
    pairs = []
    for block in response.text[:-2].split("\n\n"):
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), block
        pairs.append((name[len("event: "):], json.loads(data[len("data: "):])))
    return pairs


def tokens_then_answer(events: list[tuple[str, dict]]) -> tuple[list[str], dict]:
    """The token texts and the final response of a stream that ended well."""
    *tokens, (last, final) = events
    assert last == "answer" and all(name == "token" for name, _ in tokens), events
    assert all(set(data) == {"text"} and data["text"] for _, data in tokens), tokens
    return [data["text"] for _, data in tokens], final


def test_an_llm_that_is_down_is_a_503_before_any_event(tiny_bundle, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, closed_port_url(), warm_up=False)
    with service_client(config) as client:
        for l in (1, 2):  # noqa: E741
            response = client.post("/answer", json={"query": questions()[0], "l": l, "stream": True})
            assert response.status_code == 503, response.text
            assert response.headers["content-type"].startswith("application/json")
            assert response.json() == {**UNAVAILABLE, "request_id": response.headers["x-request-id"]}


def test_with_api_keys_the_playgrounds_cookie_streams_the_answer(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, auth={"api_keys_env": KEYS_ENV})
    request = {"query": questions()[0], "l": 1, "stream": True}
    with service_client(config, **{KEYS_ENV: KEY}) as client:
        client.cookies.clear()
        assert client.post("/answer", json=request).status_code == 401
        assert client.get("/", params={"key": KEY}, follow_redirects=False).status_code == 303  # sets the cookie
        assert KEY_COOKIE in client.cookies
        texts, final = tokens_then_answer(sse(client.post("/answer", json=request)))
        assert "".join(texts) == final["answer"]
        client.cookies.clear()


def test_with_abstention_a_guess_is_set_aside_and_the_stream_waits_for_the_whole_reply(tiny_bundle, fake_llm_url,
                                                                                        tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, answerer={"abstain": "guess"})
    with service_client(config) as client:
        question = questions()[0]  # the fake reader answers "Maria von Trapp" from passage 1
        whole = client.post("/answer", json={"query": question, "l": 1}).json()
        assert whole["answer"] == "Maria von Trapp" and not whole["abstained"] and whole["guess"] is None
        assert [p["id"] for p in whole["citations"]] == [whole["members"][0]["passages"][0]["id"]]
        texts, final = tokens_then_answer(sse(client.post("/answer", json={"query": question, "l": 1, "stream": True})))
        assert texts == ["Maria von Trapp"] and final["answer"] == "Maria von Trapp"  # one piece, once read whole
        for l in (1, 2):  # noqa: E741
            unanswerable = f"{question} unanswerable"  # the fake reader guesses, naming no passage
            guessed = client.post("/answer", json={"query": unanswerable, "l": l}).json()
            assert guessed["abstained"] and guessed["answer"] == NO_ANSWER, guessed
            assert guessed["guess"] == "Brindlewood Analytics" and guessed["citations"] == []
            texts, final = tokens_then_answer(sse(client.post("/answer", json={"query": unanswerable, "l": l,
                                                                                "stream": True})))
            assert "".join(texts) == NO_ANSWER and final["guess"] == "Brindlewood Analytics"
            chat = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": unanswerable}],
                                                            "l": l}).json()
            assert chat["choices"][0]["message"]["content"] == NO_ANSWER and chat["abstained"]
            assert chat["guess"] == "Brindlewood Analytics" and chat["citations"] == [] and chat["retrieved"]


def test_at_l1_the_readers_tokens_arrive_before_the_answer_and_join_to_it(client) -> None:
    question = questions()[0]  # the fake reader answers "Maria von Trapp"
    whole = client.post("/answer", json={"query": question, "l": 1})
    assert whole.status_code == 200 and whole.headers["content-type"].startswith("application/json")
    before = len(FakeLLM.streamed)
    texts, final = tokens_then_answer(sse(client.post("/answer", json={"query": question, "l": 1, "stream": True})))
    assert len(FakeLLM.streamed) == before + 1  # the reader's call was streamed
    # the reader's JSON arrives 3 characters at a time: the answer comes in such pieces
    assert len(texts) > 1 and texts[:3] == ["Mar", "ia", " von"], texts
    assert "".join(texts) == final["answer"] == whole.json()["answer"] == "Maria von Trapp"
    response = AnswerResponse.model_validate(final)  # the object the non-streamed call returns
    expected = AnswerResponse.model_validate(whole.json())
    timings = {"latency_ms", "tokens", "batch_size", "members"}  # all but the timings are the same
    assert response.model_dump(exclude=timings) == expected.model_dump(exclude=timings)
    assert [m.model_dump(exclude={"latency_ms"}) for m in response.members] == [
        m.model_dump(exclude={"latency_ms"}) for m in expected.members]
    assert response.tokens.total > 0 and set(response.latency_ms) >= {"route", "retrieve", "answer", "total"}


@pytest.mark.parametrize("l", [2, K])
def test_at_l2_the_tokens_are_the_selected_answer(client, l) -> None:  # noqa: E741
    question = questions()[2]
    whole = client.post("/answer", json={"query": question, "l": l}).json()
    before = len(FakeLLM.streamed)
    texts, final = tokens_then_answer(sse(client.post("/answer", json={"query": question, "l": l, "stream": True})))
    assert len(FakeLLM.streamed) == before  # no reader streams: the answer exists once the selector has chosen
    response = AnswerResponse.model_validate(final)
    assert texts == [response.answer] == [whole["answer"]]
    assert len(response.candidates) == l and response.chosen == whole["chosen"]
    assert response.chosen_member == whole["chosen_member"]


BAD = [
    ({"query": "  "}, "query", "whitespace"),
    ({"query": "q", "l": K + 1}, "l", f"1..{K}"),
    ({"query": "q", "num_docs": 2}, "num_docs", "not permitted"),
]


@pytest.mark.parametrize(("payload", "field", "says"), BAD)
def test_a_bad_request_is_the_400_json_of_answer(client, payload, field, says) -> None:
    plain = client.post("/answer", json=payload)
    response = client.post("/answer", json={**payload, "stream": True})
    assert response.status_code == plain.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["detail"] == plain.json()["detail"]
    assert any(field in map(str, e["loc"]) and says in e["msg"] for e in body["detail"]), body


def test_stream_must_be_a_boolean(client) -> None:
    response = client.post("/answer", json={"query": "q", "stream": "yes"})
    assert response.status_code == 400 and response.headers["content-type"].startswith("application/json")
    assert any(e["loc"] == ["stream"] and "valid boolean" in e["msg"] for e in response.json()["detail"])


def test_a_failure_before_the_first_token_is_its_status(client, monkeypatch) -> None:
    def fail_streaming(*args: object, **kwargs: object) -> Iterator[str]:
        raise LLMUnavailableError(f"cannot reach {SECRET}")
        yield ""  # a generator, raising when the answering thread reads it

    monkeypatch.setattr(ServingEngine, "answer_stream", fail_streaming)
    response = client.post("/answer", json={"query": questions()[0], "l": 1, "stream": True})
    assert response.status_code == 503 and "event:" not in response.text
    assert response.json() == {**UNAVAILABLE, "request_id": response.headers["x-request-id"]}


def test_a_failure_mid_stream_ends_it_with_an_error_event(client, monkeypatch, caplog) -> None:
    def cut(*args: object, **kwargs: object) -> Iterator[str]:
        yield "Maria"
        raise LLMUnavailableError(f"lost {SECRET} mid-answer")

    monkeypatch.setattr(ServingEngine, "answer_stream", cut)
    response = client.post("/answer", json={"query": questions()[0], "l": 1, "stream": True})
    rid = response.headers["x-request-id"]
    assert sse(response) == [("token", {"text": "Maria"}),
                             ("error", {**UNAVAILABLE, "status": 503, "request_id": rid})]
    assert "hunter2" not in response.text and "10.1.2.3" not in response.text
    assert any(rid in r.getMessage() and "hunter2" in r.getMessage() for r in caplog.records), caplog.text
