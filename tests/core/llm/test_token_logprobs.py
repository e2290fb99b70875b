"""Token logprobs through the LLM layer: llama.cpp records them (ragfolio.core.llm.logprobs), the LLM
server returns them in OpenAI's shapes when asked, and the OpenAI-compatible client reads them back."""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from local_http import send_json, serving

from ragfolio.core.answering.confidence import answer_confidence
from ragfolio.core.answering.prompts import ANSWER_SCHEMA, answer_messages
from ragfolio.core.llm.chat import Completion, Messages, OpenAICompatibleClient
from ragfolio.core.llm.logprobs import openai_logprobs, token_pieces
from ragfolio.core.llm.native import LlamaCppBackend
from ragfolio.core.llm.server import LLMServer

SCORED = (('{"answer":"', -0.01), ("Lon", -0.7), ("don", -0.05), ('"}', -0.002))
MESSAGES = [{"role": "user", "content": "In which city is Big Ben?"}]


def test_token_pieces_join_to_the_text_cut_at_a_stop_string() -> None:
    # "a\n" then "\n" then "b": the stop "\n\n" cut the text to "a"; an undecodable token repeats the end before it
    assert token_pieces("a", [2, 3], [-1.0, -2.0]) == (("a", -1.0), ("", -2.0))
    assert token_pieces("xé", [1, 1, 2], [-1.0, -2.0, -3.0]) == (("x", -1.0), ("", -2.0), ("é", -3.0))
    assert token_pieces("", [], []) == ()


def test_openai_shapes() -> None:
    chat = openai_logprobs(SCORED[:2], chat=True)
    assert chat == {"content": [{"token": '{"answer":"', "logprob": -0.01, "bytes": list(b'{"answer":"'),
                                 "top_logprobs": []}, {"token": "Lon", "logprob": -0.7, "bytes": list(b"Lon"),
                                                       "top_logprobs": []}]}
    legacy = openai_logprobs(SCORED, chat=False)
    assert legacy == {"tokens": [t for t, _ in SCORED], "token_logprobs": [s for _, s in SCORED],
                      "top_logprobs": None, "text_offset": [0, 11, 14, 17]}
    assert openai_logprobs(None, chat=True) is None


class _Model:
    """A LocalModel that replies ``SCORED``'s text, with its logprobs when ``scored``."""

    default_stop = None

    def __init__(self, scored: bool) -> None:
        self.scored = scored

    def load(self) -> None:
        pass

    def prompt(self, messages: Messages) -> str:
        return messages[-1]["content"]

    def complete(self, messages: Messages, **settings: Any) -> Completion:
        return self.generate([self.prompt(messages)], **settings)[0]

    def generate(self, prompts: Sequence[str], **settings: Any) -> list[Completion]:
        text = "".join(t for t, _ in SCORED)
        return [Completion(text, 7, len(SCORED), 1.0, SCORED if self.scored else None) for _ in prompts]


@pytest.fixture(params=[True, False], ids=["scored", "unscored"])
def llm_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, bool]]:
    """The LLM server of a :class:`_Model` over real HTTP: ``(base_url, whether it records logprobs)``."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(LLMServer(_Model(request.param), model_name="embedded").app(),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the LLM server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1", request.param
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_server_returns_logprobs_on_request_and_the_clients_read_them(llm_server) -> None:
    import httpx

    base, scored = llm_server
    expected = SCORED if scored else None
    for api in ("chat", "completions"):
        client = OpenAICompatibleClient(base, "embedded", api=api, max_retries=0)
        assert client.complete(MESSAGES, max_tokens=8).logprobs == expected
        streamed = client.stream(MESSAGES, max_tokens=8)
        pieces = []
        try:
            while True:
                pieces.append(next(streamed))
        except StopIteration as end:
            assert end.value.logprobs == expected and "".join(pieces) == end.value.text
        assert OpenAICompatibleClient(base, "embedded", api=api, logprobs=False).complete(
            MESSAGES, max_tokens=8).logprobs is None
    chat = httpx.post(f"{base}/chat/completions", json={"messages": MESSAGES, "logprobs": True}).json()
    assert chat["choices"][0]["logprobs"] == openai_logprobs(expected, chat=True)
    legacy = httpx.post(f"{base}/completions", json={"prompt": "Big Ben?", "logprobs": 0}).json()
    assert legacy["choices"][0]["logprobs"] == openai_logprobs(expected, chat=False)
    unasked = httpx.post(f"{base}/chat/completions", json={"messages": MESSAGES}).json()
    assert unasked["choices"][0]["logprobs"] is None


class _Reply(BaseHTTPRequestHandler):
    """Answers every POST with ``choice`` as its only choice, after recording the request's body."""

    choice: dict[str, Any] = {}
    seen: list[dict] = []

    def do_POST(self) -> None:
        type(self).seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        send_json(self, json.dumps({"choices": [type(self).choice],
                                    "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("logprobs", "read"), [
    (None, None),  # a server that ignores the flag
    ({"content": [{"token": "Par", "logprob": -0.5}, {"token": "is", "logprob": -0.25}]}, (("Par", -0.5), ("is", -0.25))),
    ({"content": [{"token": "Par"}]}, None),  # garbled: the text still counts
])
def test_the_client_asks_for_logprobs_and_reads_what_the_server_sends(logprobs, read) -> None:
    choice = {"message": {"role": "assistant", "content": "Paris"}, **({"logprobs": logprobs} if logprobs else {})}
    with serving(type("Handler", (_Reply,), {"choice": choice, "seen": []})) as handler:
        said = OpenAICompatibleClient(handler.url, "any").complete(MESSAGES, max_tokens=4)
        assert handler.seen[0]["logprobs"] is True
    assert (said.text, said.logprobs) == ("Paris", read)


@pytest.mark.slow
def test_llama_cpp_records_one_logprob_per_generated_token_and_keeps_its_greedy_text() -> None:
    """On Gemma-3-270M: logprobs <= 0, one per generated token, pieces joining to the text; the
    same greedy text with recording off; a stop string cuts the last piece."""
    messages = answer_messages("In which city is Big Ben?", [("Big Ben", "Big Ben is a bell in London.")])
    settings = {"max_tokens": 24, "json_schema": ANSWER_SCHEMA}
    scoring, plain = (LlamaCppBackend("gemma-3-270m", n_ctx=1024, logprobs=on) for on in (True, False))
    said = scoring.complete(messages, **settings)
    assert said.logprobs is not None and len(said.logprobs) == said.completion_tokens > 0
    assert all(score <= 0.0 and math.isfinite(score) for _, score in said.logprobs)
    assert "".join(piece for piece, _ in said.logprobs) == said.text
    confidence = answer_confidence(said)
    assert confidence is not None and confidence <= 0.0
    unscored = plain.complete(messages, **settings)
    assert unscored.text == said.text and unscored.logprobs is None
    cut = scoring.generate(["Count: one, two, three, four,"], max_tokens=12, stop=[","])[0]
    assert cut.logprobs is not None and "".join(p for p, _ in cut.logprobs) == cut.text
    assert len(cut.logprobs) == cut.completion_tokens


def test_llama_cpps_openmp_threads_sleep_unless_the_environment_says_otherwise(monkeypatch) -> None:
    import sys

    from ragfolio.core.llm import native

    monkeypatch.delitem(sys.modules, "cyllama", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    native._passive_openmp()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    native._passive_openmp()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
