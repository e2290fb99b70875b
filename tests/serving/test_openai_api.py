"""The OpenAI-compatible API (``GET /v1/models``, ``POST /v1/chat/completions``) of the real service,
through ``RagfolioService.to_asgi()`` with the fake LLM, and once over HTTP from ``bentoml serve``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import FakeLLM, bentoml_serve, write_config
from fake_llm import rewrite_tokens
from tiny_bundle import MEMBERS, questions

from ragfolio.core.answering.answerer import Answerer, Selection
from ragfolio.core.llm.chat import Completion, LLMRequestError, LLMUnavailableError
from ragfolio.serving.answer_stream import iterate_in_thread
from ragfolio.serving.engine import ServingEngine
from ragfolio.serving.guard import INTERNAL_ERROR

K = len(MEMBERS)
CHAT = "/v1/chat/completions"
SECRET = "http://admin:hunter2@10.1.2.3:9200/v1"  # what an LLM error could quote
HISTORY = [("user", "An earlier question"), ("assistant", "An earlier answer")]


def chat(question: str, **extra: object) -> dict:
    """A chat request in the shape OpenAI's clients send, with history before the question (which
    the fake LLM's rewrite leaves as it is: test_chat_followups.py)."""
    return {"model": "ragfolio", "messages": [
        {"role": "system", "content": "You answer questions."},
        *({"role": role, "content": text} for role, text in HISTORY),
        {"role": "user", "content": question},
    ], **extra}


def events(text: str) -> list[str]:
    """The ``data:`` payloads of a server-sent-events body, in order; checks the framing."""
    assert text.endswith("\n\n"), text[-200:]
    blocks = text[:-2].split("\n\n")
    assert all(b.startswith("data: ") and "\n" not in b for b in blocks), blocks
    return [b[len("data: "):] for b in blocks]


def streamed(text: str) -> tuple[list[dict], str]:
    """The chunks of a streamed reply (``[DONE]`` last, checked) and their content joined."""
    payloads = events(text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    return chunks, content


def openai_error(response: httpx.Response, status: int, param: str | None = None, code: str | None = None) -> dict:
    """The error object of an OpenAI-shaped error reply, with nothing internal in the body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "request_id"} and body["request_id"] == response.headers["x-request-id"], body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["type"] == ("invalid_request_error" if status < 500 else "server_error")
    assert isinstance(error["message"], str) and error["message"]
    assert (error["param"], error["code"]) == (param, code), error
    text = response.text.replace(body["request_id"], "")
    for internal in ("hunter2", "10.1.2.3", "Traceback", "Error:", "pydantic", "ragfolio.serving"):
        assert internal not in text, response.text
    return error


def test_models_lists_the_one_served_model(client, tiny_bundle) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    body = response.json()
    manifest = json.loads((tiny_bundle / "manifest.json").read_text())
    assert body["object"] == "list" and len(body["data"]) == 1
    model = body["data"][0]
    assert {k: model[k] for k in ("id", "object", "owned_by", "bundle", "version")} == {
        "id": "ragfolio", "object": "model", "owned_by": "ragfolio", "bundle": manifest["name"],
        "version": manifest["version"]}
    assert isinstance(model["created"], int) and model["created"] > 0


@pytest.mark.parametrize("l", [1, 2, K])
def test_a_chat_completion_is_the_answer_of_answer(client, l) -> None:  # noqa: E741
    question = questions()[2]  # at l >= 2 the members retrieve 4 passages, the chosen one 3 of them
    answered = client.post("/answer", json={"query": question, "l": l}).json()
    response = client.post(CHAT, json=chat(question, l=l))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == "ragfolio"
    assert body["id"] == f"chatcmpl-{response.headers['x-request-id']}" and isinstance(body["created"], int)
    [choice] = body["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": answered["answer"]}
    tokens, (prompt, completion) = answered["tokens"], rewrite_tokens(HISTORY, question)  # and the rewrite's call
    assert body["usage"] == {"prompt_tokens": tokens["prompt"] + prompt, "completion_tokens": tokens["completion"]
                             + completion, "total_tokens": tokens["total"] + prompt + completion}
    assert body["rewritten_question"] == question
    # citations: the passages the chosen answer was read from (the fake reader names its first), with every
    # routed member that retrieved each; retrieved: every passage the chosen reader was handed
    chosen = next(m for m in answered["members"] if m["name"] == answered["chosen_member"])
    assert [(c["index"], c["id"], c["title"]) for c in body["retrieved"]] == [
        (i, p["id"], p["title"]) for i, p in enumerate(chosen["passages"], 1)]
    assert [(c["index"], c["id"]) for c in body["citations"]] == [(1, chosen["passages"][0]["id"])]
    assert [p["id"] for p in answered["citations"]] == [chosen["passages"][0]["id"]]
    assert body["abstained"] is answered["abstained"] is False and body["guess"] is answered["guess"] is None
    merged = {p["id"]: p["members"] for p in answered["passages"]}
    assert all(c["members"] == merged[c["id"]] and chosen["name"] in c["members"]
               for c in body["citations"] + body["retrieved"])
    # the fake reader answers with the first passage's title: the answer came from citation 1
    assert choice["message"]["content"] == body["citations"][0]["title"]


def test_the_citations_are_the_chosen_members_passages(client, monkeypatch) -> None:
    def second(self, question, candidates, explanations=None):  # the selector picks the second-routed answer
        return Selection(1, candidates[1], False, Completion.none())

    monkeypatch.setattr(Answerer, "select", second)
    question = questions()[2]
    answered = client.post("/answer", json={"query": question, "l": 2}).json()
    body = client.post(CHAT, json=chat(question, l=2)).json()
    second_member = answered["members"][1]
    assert answered["chosen"] == 1 and answered["chosen_member"] == second_member["name"]
    assert body["choices"][0]["message"]["content"] == answered["answer"]
    assert [c["id"] for c in body["retrieved"]] == [p["id"] for p in second_member["passages"]]
    assert [c["id"] for c in body["citations"]] == [second_member["passages"][0]["id"]]


def test_the_question_is_the_last_user_message_as_text_or_parts(client) -> None:
    question = questions()[2]
    answer = client.post("/answer", json={"query": question}).json()["answer"]
    as_parts = {"messages": [{"role": "user", "content": questions()[0]},
                             {"role": "user", "content": [{"type": "text", "text": question}]},
                             {"role": "assistant", "content": None}]}
    for request in (chat(question), as_parts):
        body = client.post(CHAT, json=request).json()
        assert body["choices"][0]["message"]["content"] == answer, body


def test_other_openai_fields_are_accepted_and_ignored(client) -> None:
    question = questions()[0]
    plain = client.post(CHAT, json=chat(question)).json()["choices"][0]["message"]["content"]
    extra = {"model": "gpt-4o", "max_tokens": 5, "max_completion_tokens": 7, "temperature": 0.7, "top_p": 0.9,
             "n": 1, "user": "someone", "seed": 3, "stop": ["\n"], "presence_penalty": 0, "logit_bias": {},
             "response_format": {"type": "text"}, "tools": [], "metadata": {"a": "b"}}
    response = client.post(CHAT, json=chat(question, **extra))
    assert response.status_code == 200, response.text
    assert response.json()["model"] == "ragfolio" and response.json()["choices"][0]["message"]["content"] == plain


def test_references_are_appended_only_when_asked(client) -> None:
    question = questions()[0]
    plain = client.post(CHAT, json=chat(question)).json()
    cited = client.post(CHAT, json=chat(question, references=True)).json()
    answer = plain["choices"][0]["message"]["content"]
    assert "References" not in answer and plain["citations"] == cited["citations"] != []
    lines = [f"[{c['index']}] {c['title']} ({c['id']})" for c in cited["citations"]]
    assert cited["choices"][0]["message"]["content"] == answer + "\n\nReferences:\n" + "\n".join(lines)


@pytest.mark.parametrize(("l", "references"), [(1, False), (2, False), (2, True)])
def test_a_stream_is_the_same_content_in_openai_chunks(client, l, references) -> None:  # noqa: E741
    request = chat(questions()[3], l=l, references=references)
    whole = client.post(CHAT, json=request).json()
    response = client.post(CHAT, json={**request, "stream": True})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks, content = streamed(response.text)
    assert content == whole["choices"][0]["message"]["content"] and content
    assert len(chunks) >= 3 and len({c["id"] for c in chunks}) == 1
    assert chunks[0]["id"] == f"chatcmpl-{response.headers['x-request-id']}"
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "ragfolio" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    last = chunks[-1]
    assert last["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert last["citations"] == whole["citations"] and "usage" not in last


@pytest.mark.parametrize("references", [False, True])
def test_at_l1_the_answer_streams_as_the_reader_writes_it(client, references) -> None:
    request = chat(questions()[0], l=1, references=references)  # the fake reader answers "Maria von Trapp"
    whole = client.post(CHAT, json=request).json()["choices"][0]["message"]["content"]
    before = len(FakeLLM.streamed)
    chunks, content = streamed(client.post(CHAT, json={**request, "stream": True}).text)
    assert len(FakeLLM.streamed) == before + 1  # one reader call, streamed; no selector call
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert content == whole and whole.startswith("Maria von Trapp")
    # the reader's JSON arrives 3 characters at a time: the answer comes in such pieces, not in words
    assert pieces[:5] == ["Mar", "ia", " von", " Tr", "app"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["citations"]


def test_at_l2_nothing_streams_before_the_selector_has_chosen(client) -> None:
    before = len(FakeLLM.streamed)
    _, content = streamed(client.post(CHAT, json=chat(questions()[0], l=2, stream=True)).text)
    assert content and len(FakeLLM.streamed) == before


def test_a_failure_mid_stream_ends_it_with_an_error_chunk(client, monkeypatch, caplog) -> None:
    def cut(*args: object, **kwargs: object) -> Iterator[str]:
        yield "Maria"
        raise LLMUnavailableError(f"lost {SECRET} mid-answer")

    monkeypatch.setattr(ServingEngine, "answer_stream", cut)
    response = client.post(CHAT, json=chat(questions()[0], l=1, stream=True,
                                           stream_options={"include_usage": True}))
    assert response.status_code == 200 and "hunter2" not in response.text and "10.1.2.3" not in response.text
    chunks, content = streamed(response.text)
    assert content == "Maria" and len(chunks) == 3
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "error" and last["usage"] is None
    assert last["error"] == {"message": "the LLM is unavailable", "type": "server_error", "param": None,
                             "code": "llm_unavailable"}
    rid = response.headers["x-request-id"]
    assert any(rid in r.getMessage() and "hunter2" in r.getMessage() for r in caplog.records), caplog.text


def test_a_reader_gone_away_stops_the_answering_thread() -> None:
    """What a client disconnect does: closing the async side stops the thread at its next item."""
    produced: list[int] = []
    closed = threading.Event()

    def answer() -> Iterator[int]:
        try:
            for i in range(1000):
                time.sleep(0.01)
                produced.append(i)
                yield i
        finally:
            closed.set()

    async def read_three() -> list[int]:
        items = iterate_in_thread(answer(), pool)
        got = [await anext(items) for _ in range(3)]
        await items.aclose()
        return got

    with ThreadPoolExecutor(1) as pool:
        assert asyncio.run(read_three()) == [0, 1, 2]
        assert closed.wait(2)
    assert len(produced) <= 5


def test_a_stream_ends_with_the_usage_when_asked(client) -> None:
    request = chat(questions()[0], stream_options={"include_usage": True})
    whole = client.post(CHAT, json=request).json()
    chunks, content = streamed(client.post(CHAT, json={**request, "stream": True}).text)
    assert content == whole["choices"][0]["message"]["content"]
    assert [c["choices"] for c in chunks[-1:]] == [[]] and chunks[-1]["usage"] == whole["usage"]
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


BAD = [  # (request body, param, code, what the message says)
    ({"model": "ragfolio"}, "messages", "missing", "required"),
    ({"messages": []}, "messages", "too_short", "at least 1"),
    ({"messages": "hello"}, "messages", "list_type", "valid list"),
    ({"messages": [{"content": "q"}]}, "messages[0].role", "missing", "required"),
    ({"messages": [{"role": "system", "content": "You answer."}]}, "messages", "no_user_message", "no user message"),
    ({"messages": [{"role": "user", "content": ""}]}, "messages[0].content", "string_blank", "empty"),
    (chat(" \n\t "), "messages[3].content", "string_blank", "whitespace"),
    ({"messages": [{"role": "user", "content": None}]}, "messages[0].content", "string_blank", "empty"),
    (chat("x" * 2001), "messages[3].content", "string_too_long", "max_query_chars=2000"),
    (chat("x" * 100_001), "messages[3].content", "string_too_long", "100001 characters"),
    ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content", "content_type", "a string"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "messages[0].content", "unsupported_content", "text"),
    ({"messages": [{"role": "user", "content": [{"text": "q"}]}]}, "messages[0].content", "content_type", "type"),
    (chat("q", l=0), "l", "greater_than_equal", "greater than or equal to 1"),
    (chat("q", l=K + 1), "l", "less_than_equal", f"1..{K}"),
    (chat("q", l="2"), "l", "int_type", "valid integer"),
    (chat("q", l=1.5), "l", "int_type", "valid integer"),
    (chat("q", stream="yes"), "stream", "bool_type", "valid boolean"),
    (chat("q", references=1), "references", "bool_type", "valid boolean"),
    (chat("q", temperature="hot"), "temperature", "float_type", "valid number"),
    (chat("q", temperature=3), "temperature", "less_than_equal", "less than or equal to 2"),
    (chat("q", max_tokens=0), "max_tokens", "greater_than_equal", "greater than or equal to 1"),
    (chat("q", n=2), "n", "less_than_equal", "less than or equal to 1"),
    (chat("q", model=7), "model", "string_type", "valid string"),
    (chat("q", stream_options={"include_usage": "yes"}), "stream_options.include_usage", "bool_type", "boolean"),
]


@pytest.mark.parametrize(("payload", "param", "code", "says"), BAD)
def test_a_bad_chat_request_is_a_400_in_openai_shape(client, payload, param, code, says) -> None:
    for stream in (False, True):  # refused before anything streams
        response = client.post(CHAT, json={**payload, "stream": stream} if "stream" not in payload else payload)
        error = openai_error(response, 400, param, code)
        assert says in error["message"], error


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b'{"messages": [],}', b"\xff\xfe", b"[1, 2]", b'"hi"'])
def test_a_body_that_is_not_a_json_object_is_a_400_in_openai_shape(client, body) -> None:
    response = client.post(CHAT, content=body, headers={"Content-Type": "application/json"})
    error = openai_error(response, 400, None, "invalid_json")
    assert "JSON" in error["message"]


def test_the_guards_refusals_under_v1_are_in_openai_shape(client) -> None:
    assert "Method Not Allowed" in openai_error(client.get(CHAT), 405)["message"]
    assert "Not Found" in openai_error(client.post("/v1/nothing", json={}), 404)["message"]
    assert "JSON" in openai_error(client.post(CHAT, content=b"q", headers={"Content-Type": "text/plain"}), 415)["message"]
    big = json.dumps(chat("x" * 1_048_576)).encode()
    too_big = client.post(CHAT, content=big, headers={"Content-Type": "application/json"})
    assert "max_body_bytes=1048576" in openai_error(too_big, 413)["message"]
    # the other endpoints keep their own error shape
    assert client.get("/nothing").json()["error"] == "Not Found"


@pytest.mark.parametrize(("raised", "status", "code", "message"), [
    (LLMUnavailableError(f"cannot reach {SECRET}: Connection refused"), 503, "llm_unavailable", "the LLM is unavailable"),
    (LLMRequestError(f"HTTP 400 from {SECRET}: bad"), 502, "llm_rejected", "the LLM rejected the request"),
    (RuntimeError(f"cannot read the index at {SECRET}"), 500, "internal_error", INTERNAL_ERROR),
])
def test_a_failed_answer_is_its_status_in_openai_shape(client, monkeypatch, caplog, raised, status, code,
                                                       message) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise raised

    def fail_streaming(*args: object, **kwargs: object) -> Iterator[str]:
        raise raised
        yield ""  # a generator, raising when the answering thread reads it

    monkeypatch.setattr(ServingEngine, "answer", fail)
    monkeypatch.setattr(ServingEngine, "answer_stream", fail_streaming)
    for stream in (False, True):  # a stream has not started: the failure is still a status
        response = client.post(CHAT, json=chat(questions()[0], stream=stream))
        assert openai_error(response, status, None, code)["message"] == message
        rid = response.headers["x-request-id"]
        assert any(rid in r.getMessage() and "hunter2" in (r.getMessage() + (r.exc_text or ""))
                   for r in caplog.records), caplog.text  # the detail is in the log, under the id
    assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200


def test_the_official_openai_client(client) -> None:
    import openai  # the dev extra pins it

    sdk = openai.OpenAI(base_url=f"{client.base_url}/v1", api_key="unused", http_client=client, max_retries=0)
    question = questions()[1]
    answer = client.post("/answer", json={"query": question}).json()["answer"]
    assert [m.id for m in sdk.models.list()] == ["ragfolio"]
    reply = sdk.chat.completions.create(model="ragfolio", messages=[{"role": "user", "content": question}])
    assert reply.choices[0].message.content == answer and reply.usage.total_tokens > 0
    assert reply.model_extra["citations"][0]["title"] == answer
    pieces = sdk.chat.completions.create(model="ragfolio", messages=[{"role": "user", "content": question}],
                                         stream=True, extra_body={"l": 2})
    assert "".join(c.choices[0].delta.content or "" for c in pieces if c.choices) == answer
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model="ragfolio", messages=[{"role": "user", "content": " "}])
    assert refused.value.param == "messages[0].content" and refused.value.code == "string_blank"


@pytest.mark.slow
def test_a_stream_over_http_from_bentoml_serve(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, answerer={"abstain": "off"})  # streams by token
    question = questions()[0]
    with bentoml_serve(config, tmp_path) as url, httpx.Client(base_url=url, timeout=60) as http:
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["ragfolio"]
        whole = http.post(CHAT, json=chat(question)).json()
        lines = []
        with http.stream("POST", CHAT, json=chat(question, stream=True)) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            lines = list(response.iter_lines())
        chunks, content = streamed("".join(f"{line}\n" for line in lines))
        assert content == whole["choices"][0]["message"]["content"] == http.post(
            "/answer", json={"query": question}).json()["answer"]
        assert chunks[-1]["citations"] == whole["citations"]
        openai_error(http.post(CHAT, json={"messages": []}), 400, "messages", "too_short")
        # at l = 1 the answer reaches the client while the reader still writes its explanation
        arrived = []
        with http.stream("POST", CHAT, json=chat(f"{question} (drip)", l=1, stream=True)) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    choice = json.loads(line[6:])["choices"][0]
                    arrived.append((time.monotonic(), choice["delta"].get("content"), choice["finish_reason"]))
        answer_at = [at for at, content, _ in arrived if content]
        (done_at,) = [at for at, _, finish in arrived if finish == "stop"]
        assert len(answer_at) > 1 and done_at - answer_at[-1] > 0.3  # ~12 pieces of explanation, 0.05 s each
        # a client that goes away mid-answer: the service stops reading the reader, which sees it
        with http.stream("POST", CHAT, json=chat(f"{question} (drip, leaving)", l=1, stream=True)) as response:
            next(line for line in response.iter_lines() if '"content": "M' in line)
        deadline = time.monotonic() + 5
        while not any("leaving" in prompt for prompt in FakeLLM.cut) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("leaving" in prompt for prompt in FakeLLM.cut)
        # the official client over real HTTP: plain, streamed (chunks before the last), citations, a 4xx
        import openai

        sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
        plain = sdk.chat.completions.create(model="ragfolio", messages=[{"role": "user", "content": question}])
        assert plain.choices[0].message.content == whole["choices"][0]["message"]["content"]
        assert plain.model_extra["citations"] == whole["citations"]
        pieces = [c for c in sdk.chat.completions.create(
            model="ragfolio", messages=[{"role": "user", "content": question}], stream=True, extra_body={"l": 1})
            if c.choices]
        texts = [c.choices[0].delta.content for c in pieces if c.choices[0].delta.content]
        assert len(texts) > 1 and pieces[-1].choices[0].finish_reason == "stop"
        assert "".join(texts) == sdk.chat.completions.create(
            model="ragfolio", messages=[{"role": "user", "content": question}], extra_body={"l": 1}
        ).choices[0].message.content
        with pytest.raises(openai.BadRequestError):
            sdk.chat.completions.create(model="ragfolio", messages=[])
