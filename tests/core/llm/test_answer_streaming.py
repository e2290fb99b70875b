"""Streaming an answer: the incremental reader of the reply's "answer" string, what of it is settled,
the answerer's stream, and streaming from any backend (the OpenAI client against a loopback server)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from local_http import serving

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.prompts import ANSWER_SCHEMA, answer_schema, parse_reply
from ragfolio.core.answering.reply_stream import AnswerField, answer_pieces, settled_answer
from ragfolio.core.llm.chat import Completion, LLMRequestError, LLMUnavailableError, OpenAICompatibleClient, TextStream
from ragfolio.core.llm.text_streams import stream_chat

PASSAGES = [("Big Ben", "Big Ben is the nickname for the Great Bell of the clock at Westminster in London.")]


def fed(reply: str, pieces: list[str]) -> tuple[AnswerField, list[str]]:
    field = AnswerField()
    return field, [field.feed(piece) for piece in pieces]


def splits(text: str, rng: random.Random, most: int = 4) -> list[str]:
    pieces, i = [], 0
    while i < len(text):
        j = i + rng.randint(1, most)
        pieces.append(text[i:j])
        i = j
    return pieces


def reply_stream(pieces: list[str], prompt_tokens: int = 10) -> TextStream:
    yield from pieces
    return Completion("".join(pieces), prompt_tokens, len(pieces), 1.0)


def drained(stream: TextStream) -> tuple[list[str], Completion]:
    """The non-empty pieces of ``stream`` and what it returns."""
    pieces = []
    while True:
        try:
            if piece := next(stream):
                pieces.append(piece)
        except StopIteration as end:
            return pieces, end.value


TRICKY = [
    '{"answer": "Paris", "explanation": "passage [1]"}',
    '{"answer": "The \\"Great\\" Gatsby", "explanation": "x"}',  # escaped quotes
    '{"answer": "Dvo\\u0159\\u00e1k \\ud83c\\udfb5 and \\ud83c alone", "explanation": "x"}',  # \\u escapes, a pair, a lone half
    '{"answer": "tab\\tslash\\/back\\\\slash\\nline", "explanation": "x"}',
    '{"answer": "Caf\u00e9 \u65e5\u672c \U0001f3b5", "explanation": "raw multi-byte text"}',
    ' \n{ "answer" :\t"spaced" , "explanation": "x"}',
    '{"answer": "Bob", "explanation": "the \\"answer\\": \\"Alice\\" is wrong"}',  # quotes in the explanation
]


@pytest.mark.parametrize("reply", TRICKY)
def test_the_answer_field_decodes_as_json_loads_whatever_the_pieces(reply) -> None:
    want = json.loads(reply)["answer"]
    rng = random.Random(0)
    for pieces in [[reply], list(reply)] + [splits(reply, rng) for _ in range(50)]:  # escapes split every way
        field, added = fed(reply, pieces)
        assert field.closed and not field.failed and "".join(added) == field.text == want, pieces


def test_the_answer_field_holds_an_escape_until_it_is_whole() -> None:
    field = AnswerField()
    assert field.feed('{"answer": "Dvo\\u01') == "Dvo" and field.escaped_at == 3
    assert field.feed("59") == "ř" and field.as_written == "Dvo"
    assert field.feed('\\') == "" and field.feed('"') == '"' and field.feed('"') == "" and field.closed


@pytest.mark.parametrize("reply", [
    '"Paris"', "Paris", '["answer"]', '{"explanation": "x", "answer": "y"}', '{"answers": "y"}',
    '{"answer": 5}', '{"answer": "a\\x"}', '{"answer": "a\\u12g4"}', '{"answer": "a\nb"}',
])
def test_any_other_reply_fails_the_field(reply) -> None:
    field, _ = fed(reply, list(reply))
    assert field.failed and not field.closed


@pytest.mark.parametrize(("answer", "settles"), [
    ("Washington, D.C.", "Washington, D.C"),  # the final period is never sent: cleaning drops it
    ("Louis the Junker", "Louis the Junker"),
    ("The Beatles", "The Beatles"),
    ('"quoted"', "quoted"),
    ("Answer: Paris", "Paris"),
    ("**Paris**", "Paris"),
    ("1990", "1990"),
])
def test_the_pieces_join_to_the_final_answer_and_never_take_back(answer, settles) -> None:
    reply = json.dumps({"answer": answer, "explanation": "x"})
    pieces, completion = drained(answer_pieces(reply_stream(list(reply))))
    assert "".join(pieces) == settles == parse_reply(reply).answer and completion.text == reply
    field = AnswerField()
    for char in reply[:reply.index('", "explanation"')]:  # the answer string, not yet closed
        field.feed(char)
        assert settles.startswith(settled_answer(field))


def test_what_is_settled_before_the_closing_quote() -> None:
    def settled(prefix: str) -> str:
        field = AnswerField()
        field.feed('{"answer": "' + prefix)
        return settled_answer(field)

    assert settled("Washington, D.") == "Washington, D"  # a period cleaning may drop is held back
    assert settled("Louis the ") == "Louis the"  # so is trailing whitespace
    assert [settled(p) for p in ("Th", "The ", "The B")] == ["", "", "The B"]  # "The answer is ..." may come
    assert settled("Answer is Paris and") == settled("A") == settled("the answer: x") == ""
    assert settled("- Paris") == settled('"Paris') == settled("  **Paris") == ""  # bullets, quotes, markdown
    assert settled("Big_Ben and more") == "Big"  # nothing past markdown cleaning may remove
    assert settled("Big \\\"Ben\\\" Tower") == "Big"  # nothing past an escape until the quote closes


def test_every_reply_streams_to_exactly_its_parsed_answer() -> None:
    """Random answers of the pieces cleaning acts on, cut anywhere (max_tokens), split anywhere."""
    rng = random.Random(7)
    atoms = ["The", "the", "answer", "Answer:", "is", "a", "A:", " ", ".", "..", '"', "“", "*", "**", "_", "__",
             "-", "#", "London", "D.C", "final", "short", "\u00e9", "\u65e5\u672c", "\n", "\u017f", "1990", "\\"]
    for _ in range(3000):
        answer = "".join(rng.choice(atoms) + rng.choice(["", " "]) for _ in range(rng.randint(1, 6)))
        reply = json.dumps({"answer": answer, "explanation": "e"}, ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.3:
            reply = reply[:rng.randint(1, len(reply))]
        pieces, _ = drained(answer_pieces(reply_stream(splits(reply, rng))))
        assert "".join(pieces) == parse_reply(reply).answer, reply


def test_a_reply_that_is_not_the_json_comes_whole_at_the_end() -> None:
    pieces, _ = drained(answer_pieces(reply_stream(["Answer: ", "Paris", ".\nBecause"])))
    assert pieces == ["Paris"]


def test_a_repeated_answer_key_is_an_error_not_a_wrong_answer() -> None:
    reply = '{"answer": "Paris", "explanation": "x", "answer": "Lyon"}'
    with pytest.raises(RuntimeError, match="'Lyon'"):
        drained(answer_pieces(reply_stream(list(reply))))


class StreamingScript:
    """A streaming backend that writes ``reply`` a character at a time and records how far it got."""

    def __init__(self, reply: str) -> None:
        self.reply, self.written = reply, 0

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        return Completion(self.reply, 10, len(self.reply), 1.0)

    def stream(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> TextStream:
        assert json_schema == answer_schema(1)  # one passage: "used" names 1 at most
        for written, char in enumerate(self.reply, 1):
            self.written = written
            yield char
        return Completion(self.reply, 10, len(self.reply), 1.0)


def test_the_answerer_streams_the_answer_before_the_reply_is_written() -> None:
    reply = '{"answer": "Big Ben, London.", "explanation": "passage [1] names the bell"}'
    backend = StreamingScript(reply)
    stream = Answerer(backend).answer_stream("Where is Big Ben?", PASSAGES)
    seen, empty = [], 0
    while True:
        try:
            piece = next(stream)
        except StopIteration as end:
            said = end.value
            break
        if piece:
            seen.append((piece, backend.written))
        else:
            empty += 1
    assert said == Answerer(backend).answer("Where is Big Ben?", PASSAGES)
    assert "".join(piece for piece, _ in seen) == said.text == "Big Ben, London"
    assert len(seen) > 2 and seen[0] == ("B", reply.index("Big") + 1)  # sent as soon as it was written
    assert all(at < reply.index('", "explanation"') + 1 for _, at in seen)  # all of it before the explanation
    assert len(seen) + empty == len(reply)  # one piece (maybe empty) per piece of the reply: a reader can stop anywhere


def test_any_backend_streams_its_whole_completion_as_one_piece() -> None:
    class Whole:
        def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
            return Completion('{"answer": "Paris", "explanation": "x"}', 7, 3, 1.0)

    pieces, completion = drained(stream_chat(Whole(), [{"role": "user", "content": "q"}], max_tokens=8))
    assert pieces == ['{"answer": "Paris", "explanation": "x"}'] and completion.tokens == 10
    said = Answerer(Whole()).answer_stream("q", [])
    assert drained(said)[0] == ["Paris"]


# --- OpenAICompatibleClient.stream against a loopback server ------------------------------------


class _SSE(BaseHTTPRequestHandler):
    """Replies to each POST with the next scripted ``(status, content type, body)``."""

    script: list[tuple[int, str, bytes]] = []
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        status, content_type, body = type(self).script.pop(0)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def sse(*events: dict | str) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


@pytest.fixture
def sse_server() -> Iterator[type[_SSE]]:
    with serving(type("Handler", (_SSE,), {"script": [], "seen": []})) as handler:
        yield handler


def test_the_client_streams_chat_and_completions_chunks(sse_server) -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    chat = sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
               *({"choices": [{"index": 0, "delta": {"content": p}}]} for p in ("Par", "is", " ✓")),
               {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, {"choices": [], "usage": usage},
               "[DONE]")
    text = sse(*({"choices": [{"index": 0, "text": p}]} for p in ("Lon", "don")), "[DONE]")  # no usage sent
    sse_server.script = [(200, "text/event-stream", chat), (200, "text/event-stream", text)]
    client = OpenAICompatibleClient(sse_server.url, "m")
    pieces, completion = drained(client.stream([{"role": "user", "content": "q"}], max_tokens=8,
                                               json_schema=ANSWER_SCHEMA))
    assert pieces == ["Par", "is", " ✓"] and (completion.text, completion.prompt_tokens, completion.tokens) == (
        "Paris ✓", 12, 15)
    plain = OpenAICompatibleClient(sse_server.url, "m", api="completions")
    pieces, completion = drained(plain.stream([{"role": "user", "content": "q"}], max_tokens=8))
    assert pieces == ["Lon", "don"] and (completion.prompt_tokens, completion.completion_tokens) == (0, 2)
    asked = sse_server.seen[0]
    assert asked["stream"] is True and asked["stream_options"] == {"include_usage": True}
    assert asked["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA


def test_the_client_reads_a_whole_reply_and_raises_on_failures(sse_server) -> None:
    whole = {"choices": [{"message": {"content": "Paris"}}], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}
    sse_server.script = [
        (200, "application/json", json.dumps(whole).encode()),  # a server that does not stream
        (200, "text/event-stream", sse({"choices": [{"index": 0, "delta": {"content": "Pa"}}]},
                                       {"error": {"message": "generation failed"}})),
        (400, "application/json", b'{"error": "bad"}'),
    ]
    client = OpenAICompatibleClient(sse_server.url, "m", max_retries=0)
    messages = [{"role": "user", "content": "q"}]
    assert drained(client.stream(messages, max_tokens=4))[0] == ["Paris"]
    broken = client.stream(messages, max_tokens=4)
    assert next(broken) == "Pa"
    with pytest.raises(LLMUnavailableError, match="mid-stream"):
        next(broken)
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        next(client.stream(messages, max_tokens=4))
    nobody = OpenAICompatibleClient("http://127.0.0.1:9/v1", "m", max_retries=0, timeout_s=1)
    with pytest.raises(LLMUnavailableError, match="failed after 1 tries"):
        next(nobody.stream(messages, max_tokens=4))
