"""The LLM server's ``stream: true`` (ragfolio.core.llm.server) on the small reader, Gemma-3-270M on
llama.cpp: the chunks join to the non-streamed completion, JSON of the schema asked for."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from ragfolio.core.answering.prompts import ANSWER_SCHEMA, answer_messages, parse_reply
from ragfolio.core.answering.reply_stream import AnswerField
from ragfolio.core.llm.chat import PLAIN_STOP, response_format
from ragfolio.core.llm.native import LlamaCppBackend
from ragfolio.core.llm.server import LLMServer

PASSAGES = [("Big Ben", "Big Ben is the nickname for the Great Bell of the clock at Westminster in London.")]
QUESTION = "In which city is Big Ben?"


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    from starlette.testclient import TestClient

    llm = LLMServer(LlamaCppBackend("gemma-3-270m", n_ctx=1024), model_name="embedded")
    with TestClient(llm.app()) as client:
        deadline = time.monotonic() + 120
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, "the small reader did not load"
            time.sleep(0.1)
        yield client


def chunks(text: str) -> list[dict]:
    """The chunks of an SSE body, checked to end with ``[DONE]``."""
    events = [block.removeprefix("data: ") for block in text.strip().split("\n\n")]
    assert events[-1] == "[DONE]", events[-3:]
    return [json.loads(event) for event in events[:-1]]


@pytest.mark.slow
def test_chat_streams_the_json_answer_it_completes(server) -> None:
    request = {"messages": answer_messages(QUESTION, PASSAGES), "max_tokens": 24,
               "response_format": response_format(ANSWER_SCHEMA)}
    whole = server.post("/v1/chat/completions", json=request).json()
    response = server.post("/v1/chat/completions", json={**request, "stream": True,
                                                           "stream_options": {"include_usage": True}})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    streamed = chunks(response.text)
    assert streamed[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "embedded" for c in streamed)
    contents = [c["choices"][0]["delta"]["content"] for c in streamed[1:-2]]
    content = "".join(contents)
    assert len(contents) > 1 and content == whole["choices"][0]["message"]["content"]
    field = AnswerField()
    field.feed(content)
    assert field.closed and field.text == parse_reply(content).answer  # the grammar held while streaming
    assert streamed[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert streamed[-1]["choices"] == [] and streamed[-1]["usage"] == whole["usage"]


@pytest.mark.slow
def test_completions_stream_text_cut_at_stop_strings_and_a_long_prompt_is_still_a_400(server) -> None:
    request = {"prompt": "Question: name three colours.\nAnswer:", "max_tokens": 12, "stop": PLAIN_STOP}
    whole = server.post("/v1/completions", json=request).json()
    streamed = chunks(server.post("/v1/completions", json={**request, "stream": True}).text)
    assert all(c["object"] == "text_completion" for c in streamed) and "usage" not in streamed[-1]
    assert "".join(c["choices"][0]["text"] for c in streamed) == whole["choices"][0]["text"]
    assert streamed[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    too_long = server.post("/v1/completions", json={"prompt": "word " * 2000, "max_tokens": 4, "stream": True})
    assert too_long.status_code == 400 and "n_ctx=1024" in too_long.json()["error"]["message"]
    assert server.get("/health").json()["calls"] >= 3


@pytest.mark.slow
def test_max_completion_tokens_is_the_limit_langchain_openai_sends(server) -> None:
    request = {"messages": [{"role": "user", "content": "Count from one to fifty in words."}]}
    cut = server.post("/v1/chat/completions", json={**request, "max_completion_tokens": 5}).json()
    longer = server.post("/v1/chat/completions", json={**request, "max_tokens": 5, "max_completion_tokens": 12}).json()
    assert cut["usage"]["completion_tokens"] == 5 and cut["choices"][0]["finish_reason"] == "length"
    assert longer["usage"]["completion_tokens"] == 12  # the newer name wins over max_tokens


@pytest.mark.slow
def test_logprobs_come_on_request_one_per_generated_token_also_in_the_stream(server) -> None:
    request = {"messages": answer_messages(QUESTION, PASSAGES), "max_tokens": 24, "logprobs": True,
               "response_format": response_format(ANSWER_SCHEMA)}
    whole = server.post("/v1/chat/completions", json=request).json()
    choice = whole["choices"][0]
    scored = choice["logprobs"]["content"]
    assert len(scored) == whole["usage"]["completion_tokens"] and all(t["logprob"] <= 0 for t in scored)
    assert "".join(t["token"] for t in scored) == choice["message"]["content"]
    streamed = chunks(server.post("/v1/chat/completions", json={**request, "stream": True}).text)
    assert streamed[-1]["choices"][0]["logprobs"] == choice["logprobs"]  # all in the last chunk
    legacy = server.post("/v1/completions", json={"prompt": "The capital of France is", "max_tokens": 4,
                                                  "logprobs": 1}).json()["choices"][0]
    assert "".join(legacy["logprobs"]["tokens"]) == legacy["text"] and len(legacy["logprobs"]["token_logprobs"]) == 4
