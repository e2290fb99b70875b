"""The service as an OpenAI-compatible model: request parsing and reply shapes of ``/v1/...``.

``GET /v1/models`` lists one model, :data:`MODEL_ID`; ``POST /v1/chat/completions`` takes
OpenAI's chat request and answers it with ``/answer`` (:meth:`ragfolio.serving.engine.ServingEngine.answer`):

- **The question** is the text of the last message whose ``role`` is ``user`` (a string, or the
  ``text`` parts of a list of content parts, joined by newlines); it is checked as ``/answer``'s
  ``query`` is (:class:`~ragfolio.serving.schemas.AnswerRequest`: not blank, at most
  ``max_query_chars``).
- **A follow-up**: the ``user`` and ``assistant`` messages before it are the conversation's earlier
  turns (:attr:`ChatRequest.turns`: their text parts; ``system`` and other roles, and messages after
  it, are not read). When there are any, the service first has the reader's LLM rewrite the last
  user message into a standalone question from them (one call,
  :func:`ragfolio.core.answering.conversation.standalone_question`; setting
  ``chat.rewrite_followups``), then retrieves for and answers that question. A rewrite that fails,
  times out (``chat.rewrite_timeout_s``) or is not the JSON asked for leaves the last user message
  as the question. ``usage`` counts the rewrite's call.
- **Accepted and not used**: ``model`` (any name; replies name :data:`MODEL_ID`), ``max_tokens``,
  ``max_completion_tokens`` and ``temperature`` (type- and range-checked; the reader's limits are
  the ``answerer`` settings and it decodes greedily). ``n`` must be 1. Any other field is ignored.
- **Extensions**: ``l`` (members to route to, 1..k, as in ``/answer``), ``filter`` (a metadata
  filter, as in ``/answer``: every member searches only the passages whose metadata match) and
  ``references`` (bool, default false: append the numbered references to the answer's text).
- **The reply**: ``choices[0].message.content`` is ``/answer``'s ``answer`` (then the references,
  when asked), ``finish_reason`` ``"stop"``, ``usage`` the tokens of every LLM call of the answer
  (the rewrite, readers and selector). Extensions: ``citations`` lists the passages the chosen answer
  was read from, as the reader named them (``/answer``'s ``citations``: in its order, each once),
  each ``{"index", "id", "title", "members"}`` (``members``: every routed member that retrieved
  it); ``retrieved`` lists, in the same shape, every passage the chosen reader was handed (the
  chosen member's, in its rank order); both empty when every member failed and the answer is
  closed-book. ``abstained`` and ``guess``: as ``/answer``'s (the content then says that the
  documents do not answer the question; the reader's answer is ``guess``). ``rewritten_question``
  is the standalone question that was retrieved for and answered, or null when the last user
  message was, as it is.
- **Streaming** (``stream: true``): server-sent events in OpenAI's chunk format
  (:func:`answer_events`): a chunk with the role, the content, a chunk with ``finish_reason``
  ``"stop"`` and the extensions (``citations``, ...), a usage chunk when
  ``stream_options.include_usage``, then ``data: [DONE]``. When one reader's answer is the answer (l = 1) the content comes as the reader
  writes it (:meth:`ragfolio.serving.engine.ServingEngine.answer_stream`); at l >= 2 it comes in
  word pieces once the selector has chosen. The pieces join to exactly the non-streamed content
  (references, when asked, come last). Nothing is sent before the reader's first token, so an error
  until then is still a status code; an error after it ends the stream with a chunk whose
  ``finish_reason`` is ``"error"`` and which carries OpenAI's ``error`` object, then ``[DONE]``.
  :func:`ragfolio.serving.answer_stream.iterate_in_thread` reads the engine's blocking stream in
  an answering thread, and stops it when the stream is closed (a client gone).
- **Errors** are OpenAI's shape, :func:`error_body`: ``{"error": {"message", "type", "param",
  "code"}}``, ``type`` ``invalid_request_error`` for a 4xx and ``server_error`` for a 5xx.

Nothing here imports BentoML; :mod:`ragfolio.serving.service` routes the requests here.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from ragfolio.core.answering.conversation import Rewrite, Turn
from ragfolio.serving.schemas import AnswerRequest, AnswerResponse, Count, Limits, check_query

MODEL_ID = "ragfolio"
OWNER = "ragfolio"
DONE = "data: [DONE]\n\n"

_TOLERANT = ConfigDict(extra="ignore", strict=True, frozen=True)  # OpenAI's other fields are ignored
_PIECES = re.compile(r"\S+\s*|\s+")  # word pieces whose concatenation is the text


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class OpenAIError(Exception):
    """A request that gets an error reply of OpenAI's shape (:func:`error_body`)."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)


# --- requests -------------------------------------------------------------------------------------
class ContentPart(BaseModel):
    """One part of a message's content; only ``{"type": "text", "text": ...}`` is read."""

    model_config = _TOLERANT

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = _TOLERANT

    role: str
    content: str | list[ContentPart] | None = None

    @field_validator("content", mode="plain")
    @classmethod
    def _content(cls, value: Any) -> str | list[ContentPart] | None:
        # One error at "content", rather than one per member of the union.
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and all(
            isinstance(part, dict) and isinstance(part.get("type"), str) and isinstance(part.get("text"), str | None)
            for part in value
        ):
            return [ContentPart(type=part["type"], text=part.get("text")) for part in value]
        raise PydanticCustomError(
            "content_type", "content must be a string, a list of content parts (each with a string type) or null")


class StreamOptions(BaseModel):
    model_config = _TOLERANT

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions`` (the fields read or checked; see the module docstring)."""

    model_config = _TOLERANT

    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Count | None = None
    max_completion_tokens: Count | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    n: Count = Field(1, le=1, description="Choices to return: only 1.")
    l: Count | None = Field(None, description="Extension: members to route to, 1..k.")  # noqa: E741
    references: bool = Field(False, description="Extension: append numbered references to the content.")
    filter: dict[str, Any] | None = Field(None, description="Extension: a metadata filter, as in /answer.")


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat request.

    Attributes:
        options: The request's fields.
        answer: ``/answer``'s request for its question: the last user message, or the standalone
            question it was rewritten into (:meth:`rewritten`).
        turns: The user and assistant messages before the last user message, in order, as
            ``(role, text)`` (text parts only; those without text left out).
        rewrite: The last user message's rewrite; None: none was tried.
    """

    options: ChatCompletionRequest
    answer: AnswerRequest
    turns: tuple[Turn, ...] = ()
    rewrite: Rewrite | None = None

    def rewritten(self, rewrite: Rewrite) -> ChatRequest:
        """This request asking ``rewrite.question`` (checked by whoever rewrote it)."""
        return replace(self, answer=self.answer.model_copy(update={"query": rewrite.question}), rewrite=rewrite)


def parse_chat_request(body: bytes, limits: Limits) -> ChatRequest:
    """The request in ``body``, checked against OpenAI's shape and ``/answer``'s rules.

    Raises:
        OpenAIError: A 400 naming the offending field (``param``, e.g. ``messages[2].content``)
            and the rule (``code``: pydantic's error type, or ``invalid_json``, ``no_user_message``).
    """
    try:
        data = json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        raise OpenAIError(400, "the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(data, dict):
        raise OpenAIError(400, "the request body must be a JSON object", code="invalid_json")
    try:
        options = ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc) from None
    i, question = _question(options.messages)
    param = f"messages[{i}].content"
    try:  # /answer's rule for its query, in words that name the message
        check_query(question, limits, param)
    except PydanticCustomError as exc:
        raise OpenAIError(400, exc.message(), param=param, code=exc.type) from None
    try:
        answer = AnswerRequest.model_validate({"query": question, "l": options.l, "filter": options.filter},
                                              context={"limits": limits})
    except ValidationError as exc:
        raise _invalid(exc, {"query": param}) from None
    turns = tuple((m.role, text) for m in options.messages[:i] if m.role in ("user", "assistant") and (text := _text(m)))
    return ChatRequest(options, answer, turns)


def _text(message: ChatMessage) -> str:
    """An earlier message's text: its string, or its text parts joined by newlines (other parts left out)."""
    if isinstance(message.content, list):
        return "\n".join(part.text for part in message.content if part.type == "text" and part.text)
    return message.content or ""


def _question(messages: Sequence[ChatMessage]) -> tuple[int, str]:
    """``(index, text)`` of the last user message."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role != "user":
            continue
        if isinstance(message.content, list):
            if any(part.type != "text" or part.text is None for part in message.content):
                raise OpenAIError(400, "only text content parts are read", param=f"messages[{i}].content",
                                  code="unsupported_content")
            return i, "\n".join(part.text or "" for part in message.content)
        return i, message.content or ""
    raise OpenAIError(400, "messages holds no user message (the last user message is the question)",
                      param="messages", code="no_user_message")


def _invalid(exc: ValidationError, rename: dict[str, str] | None = None) -> OpenAIError:
    """The 400 of a validation error: ``param`` and ``code`` of its first error, every message."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    params = [_param(e["loc"], rename or {}) for e in errors]
    message = "; ".join(f"{param or 'body'}: {e['msg']}" for param, e in zip(params, errors, strict=True))
    return OpenAIError(400, message, param=params[0], code=str(errors[0]["type"]))


def _param(loc: Sequence[int | str], rename: dict[str, str]) -> str | None:
    """A pydantic ``loc`` as OpenAI's ``param``: ``("messages", 0, "content")`` -> ``messages[0].content``."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            name = rename.get(part, part)
            parts.append(f".{name}" if parts else name)
    return "".join(parts) or None


# --- replies --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChatReply:
    """One answer in OpenAI's terms; shaped by :func:`completion_body` or :func:`answer_events`."""

    id: str
    created: int
    model: str
    fingerprint: str
    content: str
    usage: dict[str, int]
    citations: list[dict[str, Any]]
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    abstained: bool = False
    guess: str | None = None
    rewritten_question: str | None = None

    @property
    def extensions(self) -> dict[str, Any]:
        """The fields beside OpenAI's: ``citations``, ``retrieved``, ``abstained``, ``guess``, ``rewritten_question``."""
        return {"citations": self.citations, "retrieved": self.retrieved, "abstained": self.abstained,
                "guess": self.guess, "rewritten_question": self.rewritten_question}


def citations(answer: AnswerResponse, *, used: bool = True) -> list[dict[str, Any]]:
    """The passages the chosen answer was read from (``used``; False: every passage its reader was
    handed), ``[{"index", "id", "title", "members"}]``, ``index`` counting from 1."""
    chosen = next((m for m in answer.members if m.ok and m.name == answer.chosen_member), None)
    if chosen is None:  # closed-book: every member failed
        return []
    retrieved_by = {p.id: p.members for p in answer.passages}
    passages = answer.citations if used else chosen.passages
    return [{"index": i, "id": p.id, "title": p.title, "members": retrieved_by.get(p.id, [chosen.name])}
            for i, p in enumerate(passages, 1)]


def chat_reply(answer: AnswerResponse, options: ChatCompletionRequest, *, reply_id: str, created: int,
               fingerprint: str, rewrite: Rewrite | None = None) -> ChatReply:
    """The reply to a chat request that ``/answer`` answered with ``answer`` (the question: the
    rewrite's when ``rewrite.rewritten``; its call is among ``answer``'s tokens)."""
    cited = citations(answer)
    content = answer.answer
    if options.references and cited:
        content += "\n\nReferences:\n" + "\n".join(f"[{c['index']}] {c['title']} ({c['id']})" for c in cited)
    tokens = answer.tokens
    usage = {"prompt_tokens": tokens.prompt, "completion_tokens": tokens.completion, "total_tokens": tokens.total}
    rewritten = rewrite.question if rewrite is not None and rewrite.rewritten else None
    return ChatReply(reply_id, created, MODEL_ID, fingerprint, content, usage, cited,
                     citations(answer, used=False), answer.abstained, answer.guess, rewritten)


def completion_body(reply: ChatReply) -> dict[str, Any]:
    """The ``chat.completion`` object of a non-streaming reply."""
    return {
        "id": reply.id, "object": "chat.completion", "created": reply.created, "model": reply.model,
        "system_fingerprint": reply.fingerprint,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": reply.usage, **reply.extensions,
    }


@dataclass(frozen=True)
class ChunkHead:
    """What every chunk of one streamed reply repeats: its id, creation time and fingerprint."""

    id: str
    created: int
    fingerprint: str

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        """One ``chat.completion.chunk`` event."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return _event({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": MODEL_ID,
                       "system_fingerprint": self.fingerprint, "choices": [choice], **extra})


async def answer_events(
    head: ChunkHead, answer: AsyncGenerator[str | AnswerResponse, None], options: ChatCompletionRequest,
    failure: Callable[[Exception], tuple[int, str, str | None]], rewrite: Rewrite | None = None,
) -> AsyncGenerator[str, None]:
    """Server-sent events of an answer as it is written: the role; a content chunk per piece of
    ``answer`` (text pieces, then the :class:`AnswerResponse`); the rest of :func:`chat_reply`'s
    content in word pieces (all of it at l >= 2; the references); ``finish_reason`` ``"stop"``
    with ``citations`` and ``rewritten_question`` (of ``rewrite``); the usage if asked; ``[DONE]``.

    An exception from ``answer`` ends the stream with a chunk whose ``finish_reason`` is
    ``"error"``, carrying the error object of ``failure(exc)`` (``(status, message, code)``).
    ``answer`` is closed when this ends or is closed (a client gone).
    """
    include_usage = options.stream_options is not None and options.stream_options.include_usage
    usage: dict[str, Any] = {"usage": None} if include_usage else {}  # OpenAI: null until the usage chunk
    yield head.chunk({"role": "assistant", "content": ""}, **usage)
    sent = ""
    try:
        async for item in answer:
            if isinstance(item, str):
                if item:  # an empty piece: the reader wrote what is not yet (or not) the answer
                    sent += item
                    yield head.chunk({"content": item}, **usage)
                continue
            reply = chat_reply(item, options, reply_id=head.id, created=head.created, fingerprint=head.fingerprint,
                               rewrite=rewrite)
            if not reply.content.startswith(sent):
                raise RuntimeError(f"streamed {sent!r}, but the reply's content is {reply.content!r}")
            for piece in _PIECES.findall(reply.content[len(sent):]):
                yield head.chunk({"content": piece}, **usage)
            yield head.chunk({}, "stop", **reply.extensions, **usage)
            if include_usage:
                yield _event({"id": head.id, "object": "chat.completion.chunk", "created": head.created,
                              "model": MODEL_ID, "system_fingerprint": head.fingerprint, "choices": [],
                              "usage": reply.usage})
            yield DONE
            return
        raise RuntimeError("the answer ended without a response")
    except Exception as exc:  # a stream cannot change its status: it says so, then ends
        status, message, code = failure(exc)
        yield head.chunk({}, "error", error=error_body(status, message, code=code)["error"], **usage)
        yield DONE
    finally:
        await answer.aclose()


def _event(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body)}\n\n"


def models_body(created: int, bundle: str, version: str) -> dict[str, Any]:
    """``GET /v1/models``: the one model, :data:`MODEL_ID` (with the bundle's name and version)."""
    return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": created, "owned_by": OWNER,
                                        "bundle": bundle, "version": version}]}
