"""Answering: reply cleaning and selection on hand-worked cases, the HTTP client against a real
loopback server, the embedded Gemma model in-process (transformers) and behind a real llama.cpp
server (the optional ``llama`` extra; skipped, with the reason, where it is not installed)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.prompts import answer_messages, clean_answer, parse_selection, selector_messages
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.llm.chat import (
    PLAIN_STOP,
    Completion,
    LLMRequestError,
    LLMUnavailableError,
    OpenAICompatibleClient,
)
from ragfolio.core.llm.embedded import LlamaCppBackend, TransformersBackend, embedded_model_path

PASSAGES = [
    ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."),
    ("Big Ben", "Big Ben is the nickname for the Great Bell of the clock at the Palace of Westminster in London."),
]


class ScriptedBackend:
    """A ChatBackend that replies with the given texts in order and records the prompts."""

    def __init__(self, *replies: str) -> None:
        self.replies, self.calls = list(replies), []

    def complete(self, messages, *, max_tokens, temperature=0.0) -> Completion:
        self.calls.append(messages)
        return Completion(self.replies.pop(0), 10, 2, 1.0)


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Paris", "Paris"),
        ("Answer: Paris.", "Paris"),
        ("The answer is Paris", "Paris"),
        ("**Paris**\nBecause the passage says so.", "Paris"),
        ("\n  Answer:\n\n\"Maria von Trapp\"", "Maria von Trapp"),
        ("- `1990`.", "1990"),
        ("A: U.S.", "U.S"),
        ("Answering machine", "Answering machine"),
        ("", ""),
    ],
)
def test_clean_answer(raw: str, clean: str) -> None:
    assert clean_answer(raw) == clean


@pytest.mark.parametrize(
    ("reply", "index"),
    [
        ("2", 1),
        ("[3]", 2),
        ("Answer 2", 1),
        ("candidate 3.", 2),
        ("london", 1),
        ("The Lyon.", 2),
        ("2. London", 1),
        ("2. Paris", 0),  # the text wins over a contradicting number
        ("It is London, England", 1),
        ("Berlin", None),
        ("5", None),
        ("", None),
    ],
)
def test_parse_selection(reply: str, index: int | None) -> None:
    assert parse_selection(reply, ["Paris", "London", "Lyon"]) == index


def test_parse_selection_prefers_text_and_longest_containment() -> None:
    assert parse_selection("2", ["1", "2"]) == 1  # a candidate equal to the reply beats numbering
    assert parse_selection("Maria von Trapp indeed", ["Trapp", "Maria von Trapp"]) == 1
    with pytest.raises(ValueError, match="at least one"):
        parse_selection("x", [])


def test_prompts_have_no_system_role_and_truncate_passages() -> None:
    long = [("T", " ".join(f"w{i}" for i in range(300)))]
    (msg,) = answer_messages("Q?", long, max_passage_words=5)
    assert msg["role"] == "user" and "[1] T: w0 w1 w2 w3 w4 ..." in msg["content"] and "w5" not in msg["content"]
    (closed,) = answer_messages("Q?", [])
    assert "Passages" not in closed["content"] and "Question: Q?" in closed["content"]
    (sel,) = selector_messages("Q?", ["a", "b"])
    assert sel["role"] == "user" and sel["content"].endswith("Question: Q?\nCandidate answers:\n1. a\n2. b\nAnswer:")


def test_select_no_call_for_one_or_equal_candidates() -> None:
    backend = ScriptedBackend()
    answerer = Answerer(backend)
    assert answerer.select("Q?", ["Paris"]).completion == Completion.none()
    same = answerer.select("Q?", ["the Paris", "paris.", "Paris"])
    assert (same.index, same.answer, same.fallback, same.completion.tokens) == (0, "the Paris", False, 0)
    assert answerer.select("Q?", ["", "London"]).index == 1  # an empty answer is never offered
    assert backend.calls == []


def test_select_parses_choice_and_counts_fallback() -> None:
    backend = ScriptedBackend("London", "I am not sure.")
    answerer = Answerer(backend, shuffle_candidates=False)
    chosen = answerer.select("Q?", ["Paris", "paris", "London"])
    assert (chosen.index, chosen.answer, chosen.fallback, chosen.completion.tokens) == (2, "London", False, 12)
    assert "1. Paris\n2. London\nAnswer:" in backend.calls[0][0]["content"]  # duplicates offered once
    assert (chosen.shown, chosen.position) == ((0, 2), 2)
    fallback = answerer.select("Q?", ["Paris", "London"])
    assert (fallback.index, fallback.answer, fallback.fallback, fallback.position) == (0, "Paris", True, None)


def test_selector_sees_a_seeded_random_order_and_reports_the_position_it_picked() -> None:
    """A selector that always names the first candidate shown picks every router position in turn."""
    candidates = ["Paris", "London", "Rome"]
    answerer = Answerer(ScriptedBackend(*["1"] * 60), seed=3)
    picks = [answerer.select(f"Question {i}?", candidates) for i in range(60)]
    assert all(p.position == 1 and p.index == p.shown[0] and not p.fallback for p in picks)
    assert {p.index for p in picks} == {0, 1, 2}  # the router's first is not always the one shown first
    assert all(sorted(p.shown) == [0, 1, 2] for p in picks)
    again = Answerer(ScriptedBackend("1"), seed=3).select("Question 7?", candidates)
    assert again.shown == picks[7].shown  # the same question and seed: the same order
    shown = answerer.backend.calls[0][0]["content"].rsplit("Candidate answers:\n", 1)[1]
    assert shown.startswith(f"1. {candidates[picks[0].shown[0]]}\n")


def test_selector_worked_examples_are_neutral_about_position() -> None:
    (msg,) = selector_messages("Q?", ["a", "b"])
    demos = msg["content"].split("Question: Q?")[0].split("Question: ")[1:]
    positions = []
    for demo in demos:
        options = [line.split(". ", 1)[1] for line in demo.splitlines() if line[:1].isdigit()]
        positions.append(options.index(demo.rsplit("Answer: ", 1)[1].strip()) + 1)
    assert sorted(positions) == [1, 2]


def test_make_backend_rejects_unknown_kind_and_keys(monkeypatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    client = make_backend({"kind": "openai", "model": "m", "api_key_env": "MY_KEY", "timeout_s": 5})
    assert isinstance(client, OpenAICompatibleClient) and client.api_key == "sk-test"
    assert client.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert isinstance(make_backend({"kind": "transformers", "n_ctx": 512}), TransformersBackend)  # lazy: no load
    assert isinstance(make_backend({"kind": "llama_cpp", "n_ctx": 512}), LlamaCppBackend)
    with pytest.raises(ValueError, match="'vllm'"):
        make_backend({"kind": "vllm"})
    with pytest.raises(ValueError, match="n_ctxx"):
        make_backend({"kind": "llama_cpp", "n_ctxx": 512})
    with pytest.raises(ValueError, match="model"):
        make_backend({"kind": "openai"})


def test_make_backend_reads_only_the_chosen_kinds_block() -> None:
    config = {
        "transformers": {"n_ctx": 512, "n_threads": 1},
        "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api": "completions"},
    }
    local = make_backend({"kind": "transformers", **config})
    assert isinstance(local, TransformersBackend) and local.n_ctx == 512 and local.n_threads == 1
    remote = make_backend({"kind": "openai", **config})
    assert isinstance(remote, OpenAICompatibleClient) and remote.url == "http://127.0.0.1:9/v1/completions"
    with pytest.raises(ValueError, match="n_ctxx"):
        make_backend({"kind": "transformers", "transformers": {"n_ctxx": 1}})


# --- OpenAICompatibleClient against a real loopback server ---------------------------------------


class _Script(BaseHTTPRequestHandler):
    responses: list[tuple[int, dict]] = []
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        status, payload = type(self).responses.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def scripted_server() -> Iterator[type[_Script]]:
    handler = type("Handler", (_Script,), {"responses": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def _ok(text: str) -> tuple[int, dict]:
    return 200, {"choices": [{"message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": 42, "completion_tokens": 3, "total_tokens": 45}}


def test_client_success_reads_usage(scripted_server) -> None:
    scripted_server.responses = [_ok("Paris")]
    client = OpenAICompatibleClient(scripted_server.url + "/", "tiny", api_key="sk-1")
    out = client.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.tokens) == ("Paris", 42, 3, 45)
    assert out.latency_ms > 0
    (req,) = scripted_server.seen
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-1"
    assert (req["model"], req["max_tokens"], req["temperature"]) == ("tiny", 8, 0.0)


def test_client_completions_api_sends_plain_prompt(scripted_server) -> None:
    scripted_server.responses = [(200, {"choices": [{"text": " Paris\n"}],
                                        "usage": {"prompt_tokens": 7, "completion_tokens": 2}})]
    client = OpenAICompatibleClient(scripted_server.url, "base", api="completions")
    out = client.complete([{"role": "user", "content": "Q: capital of France?\nAnswer:"}], max_tokens=4)
    assert (out.text, out.tokens) == (" Paris\n", 9)
    (req,) = scripted_server.seen
    assert req["path"] == "/v1/completions" and req["prompt"] == "Q: capital of France?\nAnswer:"
    assert req["stop"] == PLAIN_STOP and "messages" not in req


def test_client_retries_after_500(scripted_server) -> None:
    scripted_server.responses = [(500, {"error": "busy"}), (429, {"error": "slow down"}), _ok("ok")]
    client = OpenAICompatibleClient(scripted_server.url, "tiny", max_retries=2, backoff_s=0.01)
    assert client.complete([{"role": "user", "content": "hi"}], max_tokens=4).text == "ok"
    assert len(scripted_server.seen) == 3


def test_client_400_raises_without_retry(scripted_server) -> None:
    scripted_server.responses = [(400, {"error": "bad max_tokens"}), _ok("never")]
    client = OpenAICompatibleClient(scripted_server.url, "tiny", max_retries=3, backoff_s=0.01)
    with pytest.raises(LLMRequestError, match="HTTP 400.*bad max_tokens"):
        client.complete([{"role": "user", "content": "hi"}], max_tokens=4)
    assert len(scripted_server.seen) == 1


def test_client_unavailable_when_nothing_listens() -> None:
    port = _free_port()
    client = OpenAICompatibleClient(f"http://127.0.0.1:{port}/v1", "tiny", timeout_s=0.5, max_retries=1, backoff_s=0.01)
    with pytest.raises(LLMUnavailableError, match=f"127.0.0.1:{port}/v1/chat/completions failed after 2 tries"):
        client.complete([{"role": "user", "content": "hi"}], max_tokens=4)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the embedded Gemma-3-270M ------------------------------------------------------------------

QUESTION = "In which city is Big Ben?"  # not the prompts' worked example (the Eiffel Tower)


@pytest.fixture(scope="module")
def gemma() -> TransformersBackend:
    return TransformersBackend()


@pytest.mark.slow
def test_embedded_model_answers_from_passage(gemma) -> None:
    answer, completion = Answerer(gemma).answer(QUESTION, PASSAGES)
    assert "london" in answer.lower()
    assert completion.prompt_tokens > 40 and 0 < completion.completion_tokens <= 16
    again, _ = Answerer(gemma).answer(QUESTION, PASSAGES)
    assert again == answer  # greedy decoding is deterministic


@pytest.mark.slow
def test_embedded_model_refuses_a_prompt_longer_than_its_context(gemma) -> None:
    long = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(LLMRequestError, match="exceeds n_ctx=2048"):
        gemma.complete(long, max_tokens=4)


@pytest.mark.slow
def test_gguf_is_converted_once_per_file_and_transformers_version(gemma, monkeypatch, tmp_path) -> None:
    from ragfolio.core.llm.embedded import conversion_dir, converted_gguf

    gemma.complete([{"role": "user", "content": "Answer:"}], max_tokens=1)  # converted into the cache
    first = converted_gguf(embedded_model_path())
    assert first == conversion_dir(embedded_model_path()) and (first / "config.json").is_file()
    assert converted_gguf(embedded_model_path()) == first  # found again, not reconverted
    # No partial conversion of this process is left behind (the other test worker may be converting).
    assert not any(p.name.startswith(f".converting-{os.getpid()}-") for p in first.parent.iterdir())
    # An upgrade misses the old folder. Patched by name: the module transformers is now (the model's
    # load may have replaced the one imported before it in sys.modules).
    monkeypatch.setattr("transformers.__version__", "0.0.0-other")
    other = conversion_dir(embedded_model_path())
    assert other != first and other.name.endswith("transformers0.0.0-other") and not other.exists()
    other_file = tmp_path / "copy.gguf"
    other_file.write_bytes(b"not the same file")
    assert conversion_dir(other_file).name != first.name


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """``"<base_url>|<model id>"`` of a real ``llama_cpp.server`` on the embedded model."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the optional 'llama' extra) is not installed")
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", embedded_model_path(),
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    base = f"http://127.0.0.1:{port}/v1"
    with open(log_path, "wb") as log:  # a file, not a pipe: its verbose log would fill a pipe and block it
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield f"{base}|{_wait_ready(proc, base, log_path)}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_ready(proc: subprocess.Popen, base: str, log_path, timeout_s: float = 90.0) -> str:
    """Poll ``GET {base}/models`` until it answers; return the served model's id."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                return json.loads(resp.read())["data"][0]["id"]
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server at {base} not ready after {timeout_s} s: {log_path.read_text()[-2000:]}")
            time.sleep(0.25)


@pytest.mark.integration
def test_answer_over_http_from_llama_server(llama_server) -> None:
    base, model = llama_server.split("|", 1)
    # the embedded model is a base model: plain-text /completions, as LlamaCppBackend prompts it
    answerer = Answerer(make_backend({"kind": "openai", "base_url": base, "model": model, "api": "completions"}))
    answer, completion = answerer.answer(QUESTION, PASSAGES)
    assert "london" in answer.lower()
    assert completion.prompt_tokens > 40 and completion.completion_tokens > 0
