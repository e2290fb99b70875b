"""The LLM in its own process: the OpenAI-compatible server (ragfolio.core.llm.server) and its
supervisor (ragfolio.core.llm.process), on a tiny random model; one slow test on the embedded reader."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import tiny_llm_config

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.prompts import answer_messages, answer_schema, parse_reply
from ragfolio.core.llm.backend_config import EMBEDDED_LLM
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.llm.chat import PLAIN_STOP, LLMRequestError, LLMUnavailableError, OpenAICompatibleClient
from ragfolio.core.llm.process import LLMProcess, ProcessBackend

FAST = {"health_interval_s": 0.2, "health_timeout_s": 1.0, "unhealthy_after": 2, "backoff_s": 0.2}
QUESTION = "Who was the father of Hermann II, Landgrave of Hesse?"
PASSAGES = [("Hermann II, Landgrave of Hesse", "Hermann II of Hesse was the son of Louis the Junker.")]


def started(process: LLMProcess, timeout_s: float = 120.0) -> LLMProcess:
    process.start()
    assert process.wait_ready(timeout_s), "the LLM process did not become ready"
    return process


@pytest.fixture(scope="module")
def llm(tiny_llm) -> Iterator[LLMProcess]:
    process = started(LLMProcess(tiny_llm_config(tiny_llm), max_batch=8, max_wait_ms=50, **FAST))
    yield process
    process.stop()


def health(process: LLMProcess) -> dict:
    return httpx.get(f"http://127.0.0.1:{process.port}/health", timeout=5).json()


def test_the_server_answers_openai_completions_and_chat(llm) -> None:
    base = llm.base_url
    assert health(llm)["status"] == "ok" and httpx.get(f"{base}/models").json()["data"][0]["id"] == "embedded"
    body = httpx.post(f"{base}/completions", json={"prompt": "Question: who?\nAnswer:", "max_tokens": 5,
                                                   "stop": PLAIN_STOP}).json()
    assert body["object"] == "text_completion" and isinstance(body["choices"][0]["text"], str)
    assert body["usage"]["prompt_tokens"] > 0 and 1 <= body["usage"]["completion_tokens"] <= 5
    chat = httpx.post(f"{base}/chat/completions", json={"messages": [{"role": "user", "content": "Hello"}],
                                                        "max_tokens": 3}).json()
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"
    # the service's own client, both ways it can call
    for api in ("completions", "chat"):
        completion = OpenAICompatibleClient(base, "embedded", api=api, max_retries=0).complete(
            answer_messages(QUESTION, PASSAGES), max_tokens=4)
        assert completion.prompt_tokens > 0 and completion.completion_tokens <= 4


def test_bad_calls_are_refused_with_a_400(llm) -> None:
    base = llm.base_url
    for payload in ({"prompt": 5}, {"prompt": "x", "max_tokens": 0}, {"messages": []}):
        route = "/chat/completions" if "messages" in payload else "/completions"
        assert httpx.post(f"{base}{route}", json=payload).status_code == 400, payload
    too_long = httpx.post(f"{base}/completions", json={"prompt": "word " * 5000, "max_tokens": 4})
    assert too_long.status_code == 400 and "n_ctx=4096" in too_long.json()["error"]["message"]
    with pytest.raises(LLMRequestError):
        OpenAICompatibleClient(base, "embedded", api="completions").complete(
            [{"role": "user", "content": "word " * 5000}], max_tokens=4)


def test_concurrent_calls_are_generated_in_batches_with_the_texts_of_single_calls(llm) -> None:
    client = OpenAICompatibleClient(llm.base_url, "embedded", api="completions", max_retries=0)
    prompts = [answer_messages(f"{QUESTION} ({i})", PASSAGES) for i in range(8)]
    alone = [client.complete(p, max_tokens=6).text for p in prompts]
    before = health(llm)
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda p: client.complete(p, max_tokens=6).text, prompts))
    after = health(llm)
    assert together == alone
    calls, batches = after["calls"] - before["calls"], after["batches"] - before["batches"]
    assert calls == 8 and batches < 8, (calls, batches)


def test_the_process_backend_streams_what_it_completes(llm, tiny_llm) -> None:
    backend = ProcessBackend(llm, api="completions", timeout_s=30)
    messages = answer_messages(QUESTION, PASSAGES)
    whole = backend.complete(messages, max_tokens=6)
    stream = backend.stream(messages, max_tokens=6)
    pieces = list(iter(lambda: next(stream, None), None))  # transformers has no stream_text: one piece
    assert "".join(pieces) == whole.text  # greedy: the same text, whole or streamed
    with pytest.raises(LLMUnavailableError, match="not ready"):  # at once, before any request
        ProcessBackend(LLMProcess(tiny_llm_config(tiny_llm)), api="completions").stream(messages, max_tokens=2)


def test_a_killed_process_fails_calls_fast_and_is_restarted(tiny_llm) -> None:
    process = started(LLMProcess(tiny_llm_config(tiny_llm), **FAST))
    try:
        backend = ProcessBackend(process, api="completions", timeout_s=10)
        assert backend.complete(answer_messages(QUESTION, PASSAGES), max_tokens=2).prompt_tokens > 0
        first = process.pid
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while process.ready and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(LLMUnavailableError):
            backend.complete(answer_messages(QUESTION, PASSAGES), max_tokens=2)
        assert process.wait_ready(120) and process.pid not in (None, first) and process.starts == 2
        assert backend.complete(answer_messages(QUESTION, PASSAGES), max_tokens=2).prompt_tokens > 0
    finally:
        process.stop()
    assert process.pid is None


def test_a_hung_process_is_killed_and_restarted(tiny_llm) -> None:
    process = started(LLMProcess(tiny_llm_config(tiny_llm), **FAST))
    try:
        first = process.pid
        os.kill(first, signal.SIGSTOP)  # alive but answering nothing, as a hang in native code
        deadline = time.monotonic() + 60
        while process.starts < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process.starts == 2 and process.wait_ready(120) and process.pid != first
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # the hung one was killed (and reaped)
    finally:
        process.stop()


def test_only_in_process_kinds_run_as_a_process() -> None:
    with pytest.raises(ValueError, match="in-process kinds"):
        LLMProcess({"kind": "openai", "model": "m"})


@pytest.mark.slow  # loads the embedded reader twice, in a server process and here (about 30 s)
def test_the_embedded_reader_answers_through_its_server_as_it_does_in_process() -> None:
    messages = answer_messages(QUESTION, PASSAGES)
    schema = answer_schema(len(PASSAGES))  # what the answerer asks for
    expected = make_backend(EMBEDDED_LLM).complete(messages, max_tokens=48, json_schema=schema)
    assert parse_reply(expected.text).parsed and "louis" in parse_reply(expected.text).answer.lower()
    process = started(LLMProcess(EMBEDDED_LLM), timeout_s=600)
    try:
        completion = ProcessBackend(process, api="chat", timeout_s=300).complete(
            messages, max_tokens=48, json_schema=schema)  # the schema travels as response_format
        assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == (
            expected.text, expected.prompt_tokens, expected.completion_tokens)
        # streamed (llama.cpp's pieces through the server's server-sent events): the same answer
        backend = ProcessBackend(process, api="chat", timeout_s=300)
        answerer = Answerer(backend, max_answer_tokens=48)
        stream = answerer.answer_stream(QUESTION, PASSAGES)
        pieces = []
        while True:
            try:
                pieces.append(next(stream))
            except StopIteration as end:
                said = end.value
                break
        whole = answerer.answer(QUESTION, PASSAGES)
        assert (said.text, said.explanation, said.parsed) == (whole.text, whole.explanation, whole.parsed)
        assert "".join(pieces) == said.text and said.completion.text == expected.text
        assert len([p for p in pieces if p]) > 1, pieces
    finally:
        process.stop()
