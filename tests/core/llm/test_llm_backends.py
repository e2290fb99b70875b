"""Answering: reply reading and selection on hand-worked cases, the HTTP client against a real
loopback server, the embedded readers on llama.cpp (cyllama) and Gemma on transformers."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from local_http import serving

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.prompts import (
    ANSWER_SCHEMA,
    answer_messages,
    answer_schema,
    clean_answer,
    parse_choice,
    parse_reply,
    parse_selection,
    selector_messages,
    selector_schema,
)
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.llm.chat import (
    PLAIN_STOP,
    Completion,
    LLMRequestError,
    LLMUnavailableError,
    Messages,
    OpenAICompatibleClient,
)
from ragfolio.core.llm.embedded import TransformersBackend, embedded_model_path
from ragfolio.core.llm.native import LlamaCppBackend

PASSAGES = [
    ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."),
    ("Big Ben", "Big Ben is the nickname for the Great Bell of the clock at the Palace of Westminster in London."),
]


class ScriptedBackend:
    """A ChatBackend that replies with the given texts in order and records the prompts."""

    def __init__(self, *replies: str) -> None:
        self.replies, self.calls, self.schemas = list(replies), [], []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        self.calls.append(messages)
        self.schemas.append(json_schema)
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


@pytest.mark.parametrize(
    ("raw", "answer", "explanation", "parsed"),
    [
        ('{"answer": "Paris", "explanation": "passage 1 says so"}', "Paris", "passage 1 says so", True),
        ('{ "answer": "The answer is Paris.", "explanation": "guess" }', "Paris", "guess", True),
        ('{"answer": "Maria von Trapp", "explanation": "the passage na', "Maria von Trapp", "", False),  # cut off
        ('{"answer": "Dvo\\u0159\\u00e1k", "expl', "Dvořák", "", False),  # JSON escapes read even when cut off
        ("Answer: London.", "London", "", False),  # a backend that wrote plain text
        ("", "", "", False),
    ],
)
def test_parse_reply(raw: str, answer: str, explanation: str, parsed: bool) -> None:
    reply = parse_reply(raw)
    assert (reply.answer, reply.explanation, reply.parsed) == (answer, explanation, parsed)


def test_parse_choice_reads_the_json_and_falls_back_to_text() -> None:
    assert parse_choice('{"choice": 2}', ["Paris", "London"]) == (1, True)
    assert parse_choice('{"choice": 3}', ["Paris", "London"]) == (None, True)  # out of range names none
    assert parse_choice("London", ["Paris", "London"]) == (1, False)
    assert parse_choice("no idea", ["Paris", "London"]) == (None, False)


def test_prompts_have_no_system_role_and_truncate_passages() -> None:
    long = [("T", " ".join(f"w{i}" for i in range(300)))]
    (msg,) = answer_messages("Q?", long, max_passage_words=5)
    assert msg["role"] == "user" and "[1] T: w0 w1 w2 w3 w4 ..." in msg["content"] and "w5" not in msg["content"]
    assert msg["content"].endswith("Question: Q?") and '"explanation"' in msg["content"]
    (closed,) = answer_messages("Q?", [])
    assert "Passages" not in closed["content"] and closed["content"].endswith("Question: Q?")
    (sel,) = selector_messages("Q?", [("a", "x says so"), ("b", "")])
    assert sel["role"] == "user"
    assert sel["content"].endswith("Question: Q?\nCandidates:\n1. a (explanation: x says so)\n2. b (explanation: none)")


def test_answer_asks_for_the_json_schema_and_reads_the_explanation() -> None:
    backend = ScriptedBackend('{"answer": "London", "explanation": "[2] Big Ben is in London"}', "London")
    answerer = Answerer(backend)
    said = answerer.answer("Q?", PASSAGES)
    assert (said.text, said.explanation, said.parsed) == ("London", "[2] Big Ben is in London", True)
    assert backend.schemas[0] == answer_schema(len(PASSAGES)) and said.completion.tokens == 12
    assert not answerer.answer("Q?", PASSAGES).parsed  # plain text is read, and counted as not parsed


def test_select_no_call_for_one_or_equal_candidates() -> None:
    backend = ScriptedBackend()
    answerer = Answerer(backend)
    assert answerer.select("Q?", ["Paris"]).completion == Completion.none()
    same = answerer.select("Q?", ["the Paris", "paris.", "Paris"])
    assert (same.index, same.answer, same.fallback, same.completion.tokens) == (0, "the Paris", False, 0)
    assert same.parsed is None
    assert answerer.select("Q?", ["", "London"]).index == 1  # an empty answer is never offered
    assert backend.calls == []


def test_select_parses_choice_and_counts_fallback() -> None:
    backend = ScriptedBackend('{"choice": 2}', "I am not sure.")
    answerer = Answerer(backend, shuffle_candidates=False)
    chosen = answerer.select("Q?", ["Paris", "paris", "London"], ["guess", "guess", "[1] says London"])
    assert (chosen.index, chosen.answer, chosen.fallback, chosen.completion.tokens) == (2, "London", False, 12)
    assert chosen.parsed is True and backend.schemas[0] == selector_schema(2)
    # duplicates offered once, each with its own explanation
    assert "1. Paris (explanation: guess)\n2. London (explanation: [1] says London)" in backend.calls[0][0]["content"]
    assert (chosen.shown, chosen.position) == ((0, 2), 2)
    fallback = answerer.select("Q?", ["Paris", "London"])
    assert (fallback.index, fallback.answer, fallback.fallback, fallback.position) == (0, "Paris", True, None)
    assert fallback.parsed is False
    with pytest.raises(ValueError, match="1 explanations for 2 candidates"):
        answerer.select("Q?", ["Paris", "London"], ["x"])


def test_selector_sees_a_seeded_random_order_and_reports_the_position_it_picked() -> None:
    """A selector that always names the first candidate shown picks every router position in turn."""
    candidates = ["Paris", "London", "Rome"]
    answerer = Answerer(ScriptedBackend(*['{"choice": 1}'] * 60), seed=3)
    picks = [answerer.select(f"Question {i}?", candidates) for i in range(60)]
    assert all(p.position == 1 and p.index == p.shown[0] and not p.fallback for p in picks)
    assert {p.index for p in picks} == {0, 1, 2}  # the router's first is not always the one shown first
    assert all(sorted(p.shown) == [0, 1, 2] for p in picks)
    again = Answerer(ScriptedBackend('{"choice": 1}'), seed=3).select("Question 7?", candidates)
    assert again.shown == picks[7].shown  # the same question and seed: the same order
    shown = answerer.backend.calls[0][0]["content"].rsplit("Candidates:\n", 1)[1]
    assert shown.startswith(f"1. {candidates[picks[0].shown[0]]} (explanation: none)\n")


def test_make_backend_rejects_unknown_kind_and_keys(monkeypatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    client = make_backend({"kind": "openai", "model": "m", "api_key_env": "MY_KEY", "timeout_s": 5})
    assert isinstance(client, OpenAICompatibleClient) and client.api_key == "sk-test"
    assert client.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert isinstance(make_backend({"kind": "transformers", "n_ctx": 512}), TransformersBackend)  # lazy: no load
    assert isinstance(make_backend({"kind": "llama_cpp", "n_ctx": 512}), LlamaCppBackend)
    with pytest.raises(ValueError, match="'qwen-9000' is not an embedded model"):
        make_backend({"kind": "llama_cpp", "model": "qwen-9000"})
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
    with serving(type("Handler", (_Script,), {"responses": [], "seen": []})) as handler:
        yield handler


def _ok(text: str) -> tuple[int, dict]:
    return 200, {"choices": [{"message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": 42, "completion_tokens": 3, "total_tokens": 45}}


def test_client_success_reads_usage(scripted_server) -> None:
    scripted_server.responses = [_ok("Paris"), _ok('{"choice": 1}')]
    client = OpenAICompatibleClient(scripted_server.url + "/", "tiny", api_key="sk-1")
    out = client.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.tokens) == ("Paris", 42, 3, 45)
    assert out.latency_ms > 0
    client.complete([{"role": "user", "content": "hi"}], max_tokens=8, json_schema=selector_schema(2))
    plain, constrained = scripted_server.seen
    assert plain["path"] == "/v1/chat/completions" and plain["auth"] == "Bearer sk-1"
    assert (plain["model"], plain["max_tokens"], plain["temperature"]) == ("tiny", 8, 0.0)
    assert "response_format" not in plain  # the schema travels as OpenAI's response_format
    assert constrained["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "reply", "strict": True, "schema": selector_schema(2)}}


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


# --- the embedded readers on llama.cpp, and Gemma on transformers -------------------------------

QUESTION = "In which city is Big Ben?"


@pytest.fixture(scope="module")
def gemma() -> TransformersBackend:
    return TransformersBackend()


@pytest.fixture(scope="module")
def small_reader() -> LlamaCppBackend:
    """The base Gemma-3-270M on llama.cpp: seconds a call, so the JSON constraint is tested often."""
    return LlamaCppBackend("gemma-3-270m", n_ctx=1024)


@pytest.mark.slow
def test_llama_cpp_replies_in_the_schema_even_from_a_base_model(small_reader) -> None:
    said = Answerer(small_reader).answer(QUESTION, PASSAGES)
    assert said.parsed, said.completion.text  # a base model writes the JSON because the grammar lets it write nothing else
    choice = small_reader.complete(selector_messages(QUESTION, [("Paris", "guess"), ("London", "[2]")]),
                                   max_tokens=12, json_schema=selector_schema(2))
    assert parse_choice(choice.text, ["Paris", "London"])[1]
    again = Answerer(small_reader).answer(QUESTION, PASSAGES)
    assert again.text == said.text  # greedy decoding is deterministic
    with pytest.raises(LLMRequestError, match="exceeds n_ctx=1024"):
        small_reader.complete([{"role": "user", "content": "word " * 3000}], max_tokens=4)


@pytest.mark.slow
def test_llama_cpp_streams_what_it_completes_and_cuts_at_stop_strings(small_reader) -> None:
    prompt = "Count: one, two, three, four, five, six, seven,"
    pieces = small_reader.stream_text(prompt, max_tokens=12)
    streamed = list(pieces)
    (whole,) = small_reader.generate([prompt], max_tokens=12)
    assert "".join(streamed) == whole.text and len(streamed) > 1 and pieces.counts[1] == whole.completion_tokens
    cut = small_reader.generate([prompt], max_tokens=12, stop=[","])[0].text
    assert "," not in cut and whole.text.startswith(cut)


@pytest.mark.slow
def test_llama_cpp_reads_every_prompt_afresh_unless_asked_to_reuse_its_prefix(small_reader) -> None:
    """By default a prompt's reply does not depend on the call before it. With ``reuse_prefix``
    a prompt that shares a prefix with the last call (the template and instructions; the first
    passages) reads only what differs, also after a stream left half read and for a prompt the
    cache holds whole, and still writes the schema."""
    more = [*PASSAGES, ("Eiffel Tower", "The Eiffel Tower is a tower in Paris, France.")]
    short, long, other = (answer_messages(QUESTION, PASSAGES), answer_messages(QUESTION, more),
                          answer_messages("Where is the Eiffel Tower?", more))

    def reply(backend: LlamaCppBackend, messages: Messages) -> Completion:
        return backend.complete(messages, max_tokens=24, json_schema=ANSWER_SCHEMA)

    reply(small_reader, short)
    after_short = reply(small_reader, long).text
    reply(small_reader, other)
    after_other = reply(small_reader, long).text
    assert after_short == after_other and small_reader.reused_tokens == 0

    reusing = LlamaCppBackend("gemma-3-270m", n_ctx=1024, reuse_prefix=True)
    reused, n_prompt = [], []
    for i, messages in enumerate([short, long, long, other]):
        if i == 2:  # a stream read for two pieces and dropped: the cache stays consistent with what it decoded
            pieces = iter(reusing.stream_text(reusing.prompt(messages), max_tokens=16))
            next(pieces), next(pieces)
            pieces.close()
        said = reply(reusing, messages)
        assert said.text.startswith("{") and '"answer"' in said.text, said.text  # the schema holds (24 tokens cut the rest)
        reused.append(reusing.reused_tokens)
        n_prompt.append(said.prompt_tokens)
    assert reused[0] == 0 and 0 < reused[1] < n_prompt[1]
    assert reused[2] == n_prompt[2] - 1 and 0 < reused[3] < n_prompt[3]


@pytest.mark.slow
def test_the_embedded_reader_reads(tmp_path) -> None:
    """Qwen2.5-Coder-1.5B-Instruct, assembled from its part wheels, answers from the passage and explains."""
    reader = make_backend({"kind": "llama_cpp"})
    assert isinstance(reader, LlamaCppBackend) and reader.model == "qwen2.5-coder-1.5b-instruct"
    said = Answerer(reader).answer(QUESTION, PASSAGES)
    assert said.parsed and said.text == "London", said.completion.text
    assert said.explanation and said.completion.prompt_tokens > 60


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
