"""The LLM contract: chat messages in, a :class:`Completion` out, and the OpenAI-compatible client.

A :class:`ChatBackend` turns chat messages into a :class:`Completion` (text, token counts,
latency); a :class:`StreamingBackend` also hands it out as it is generated (a :data:`TextStream`;
any backend's: :func:`ragfolio.core.llm.text_streams.stream_chat`). :class:`OpenAICompatibleClient`
speaks to any ``/v1/chat/completions`` or ``/v1/completions`` server (vLLM, llama.cpp server,
Ollama), whole or streamed; the in-process backends are in
:mod:`ragfolio.core.llm.embedded`. Base models (such as the embedded Gemma-3-270M) are prompted as
plain text (:data:`PLAIN`): the messages' contents joined, stopped at :data:`PLAIN_STOP`.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

TokenLogprobs = tuple[tuple[str, float], ...]
"""Each generated token's text and its log-probability, in order (see :attr:`Completion.logprobs`)."""

logger = logging.getLogger(__name__)

Messages = list[dict[str, str]]
JSONSchema = dict[str, Any]

# The embedded GGUF is the *pretrained* google/gemma-3-270m (no chat template, no instruction
# tuning): wrapped in any chat template it echoes the prompt, while as plain text ending in
# "Answer:" it continues with an answer. So it is prompted as plain text ("plain" mode).
PLAIN = "plain"
# Where a plain-text continuation has said its answer (a base model never stops on its own).
PLAIN_STOP = ["\n\n", "\nQuestion:", "\nAnswer:"]


def render_plain(messages: Messages) -> str:
    """The messages' contents as one plain-text prompt, for base models (roles are dropped)."""
    return "\n\n".join(m["content"] for m in messages)


@dataclass(frozen=True)
class Completion:
    """One chat completion.

    Attributes:
        text: The generated text, unprocessed.
        prompt_tokens: Tokens of the prompt, as counted by the backend.
        completion_tokens: Tokens generated.
        latency_ms: Wall time of the call in milliseconds, retries included.
        logprobs: Each generated token's text piece and its log-probability under the model,
            ``log softmax(logits)[token]`` (natural log) of the raw logits at that step, before
            any grammar, temperature or sampler; the pieces join to ``text`` (a token cut by a
            stop string keeps what ``text`` holds of it; one that ends inside a multi-byte
            character is ``""``, the token that completes it holds it). None: the backend or
            endpoint gave none.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    logprobs: TokenLogprobs | None = None

    @property
    def tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def total(cls, calls: Iterable[Completion]) -> Completion:
        """The token counts and latencies of several calls added up (text and logprobs left empty)."""
        calls = list(calls)
        return cls("", sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls),
                   sum(c.latency_ms for c in calls))

    @classmethod
    def none(cls) -> Completion:
        """The completion of a call that was not made: empty text, zero tokens and latency."""
        return cls("", 0, 0, 0.0)


TextStream = Generator[str, None, Completion]
"""A completion as it is generated: its text pieces (they join to its text), then, as the
generator's return value, the :class:`Completion` (``completion = yield from stream``)."""


class LLMUnavailableError(RuntimeError):
    """The endpoint could not be reached, or kept failing, after the last retry."""


class LLMRequestError(ValueError):
    """The endpoint rejected the request (a 4xx other than 429); retrying cannot help."""


class ChatBackend(Protocol):
    """Anything that completes chat messages."""

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> Completion:
        """Complete ``messages`` (``[{"role": ..., "content": ...}]``) with at most ``max_tokens``.

        ``json_schema``: the reply should be JSON of this schema. A backend that can constrain its
        decoding to it does (llama.cpp, OpenAI-compatible servers that honour ``response_format``);
        one that cannot still answers, and the caller's parser counts what is not JSON.
        """
        ...


@runtime_checkable
class StreamingBackend(Protocol):
    """A :class:`ChatBackend` that can also hand out its completion as it is generated."""

    def stream(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> TextStream:
        """:meth:`ChatBackend.complete`'s completion, piece by piece."""
        ...


@runtime_checkable
class LocalModel(Protocol):
    """A model in this process that the LLM server (:mod:`ragfolio.core.llm.server`) can run."""

    @property
    def default_stop(self) -> list[str] | None:
        """Stop strings of chat calls (plain-text prompts), or None."""
        ...

    def load(self) -> None:
        """Load the model now."""
        ...

    def prompt(self, messages: Messages) -> str | None:
        """The text prompt of ``messages``; None when only :meth:`complete` can answer them."""
        ...

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> Completion:
        """As :meth:`ChatBackend.complete`."""
        ...

    def generate(
        self, prompts: Sequence[str], *, max_tokens: int, temperature: float = 0.0, stop: Sequence[str] | None = None,
        json_schema: JSONSchema | None = None,
    ) -> list[Completion]:
        """Continue each text prompt."""
        ...


def check_max_tokens(max_tokens: int) -> None:
    """Raise ``ValueError`` unless ``max_tokens >= 1``."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} must be >= 1")


class OpenAICompatibleClient:
    """Client of an OpenAI-compatible ``/chat/completions`` (or ``/completions``) endpoint.

    Connection errors, timeouts, 5xx and 429 are retried ``max_retries`` times, sleeping
    ``backoff_s * 2**attempt`` seconds before retry ``attempt + 1``. Uses the standard library
    (``urllib``), so it adds no dependency; proxies follow the usual environment variables.

    Args:
        base_url: The API root including the version, e.g. ``http://127.0.0.1:8000/v1``.
        model: The model name sent with every request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` when given.
        timeout_s: Per-request timeout in seconds.
        max_retries: Retries after the first try, ``>= 0``.
        backoff_s: Base of the exponential backoff in seconds, ``>= 0``.
        api: ``"chat"`` posts the messages to ``/chat/completions``; ``"completions"`` posts
            :func:`render_plain` of them to ``/completions`` with :data:`PLAIN_STOP`, for base
            models such as Gemma-3-270M behind a llama.cpp server.
        logprobs: Ask for each generated token's log-probability (``"logprobs": true``; for
            ``/completions``, ``"logprobs": 1``) and read them into :attr:`Completion.logprobs`
            (None from a server that sends none). False: a server that rejects the field.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        api: str = "chat",
        logprobs: bool = True,
    ) -> None:
        if api not in ("chat", "completions"):
            raise ValueError(f"api={api!r} must be 'chat' or 'completions'")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={base_url!r} must start with http:// or https://")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise ValueError(
                f"timeout_s={timeout_s} must be > 0, max_retries={max_retries} and backoff_s={backoff_s} >= 0"
            )
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.api, self.logprobs = api, logprobs

    @property
    def url(self) -> str:
        return f"{self.base_url}/{'chat/completions' if self.api == 'chat' else 'completions'}"

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> Completion:
        """POST the messages (``json_schema`` as ``response_format``); see the class docstring for retries.

        Raises:
            LLMUnavailableError: Unreachable, timed out, 5xx or 429 on every try (says the URL and cause).
            LLMRequestError: A 4xx other than 429, raised at once.
        """
        body = self._body(messages, max_tokens, temperature, json_schema)
        start = time.perf_counter()
        cause = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(self._request(body), timeout=self.timeout_s) as response:
                    payload = json.loads(response.read())
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
                cause = self._cause(err)
            else:
                return parse_openai(payload, self.url, (time.perf_counter() - start) * 1000.0)
            logger.warning("%s try %d/%d failed: %s", self.url, attempt + 1, self.max_retries + 1, cause)
        raise LLMUnavailableError(f"{self.url} failed after {self.max_retries + 1} tries; last cause: {cause}")

    def stream(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> TextStream:
        """:meth:`complete` with ``stream: true``: the text pieces of the server's server-sent events
        as they arrive, then the :class:`Completion`.

        Tries are retried as :meth:`complete`'s until the response starts; once it has, a broken
        connection, a read timeout or an ``error`` event is :class:`LLMUnavailableError`. A server
        that replies with a whole completion (JSON) instead gives its text as one piece. The token
        counts are the server's usage chunk (``stream_options.include_usage``); a server that sends
        none is counted 0 prompt tokens and one completion token per piece. The logprobs are those
        the chunks carry, joined (None: none did).

        Raises:
            LLMUnavailableError, LLMRequestError: As :meth:`complete`, when the first piece is read.
        """
        body = {**self._body(messages, max_tokens, temperature, json_schema), "stream": True,
                "stream_options": {"include_usage": True}}
        start = time.perf_counter()
        with self._open(body) as response:
            if "text/event-stream" not in response.headers.get("Content-Type", ""):
                completion = parse_openai(json.loads(response.read()), self.url, (time.perf_counter() - start) * 1000.0)
                if completion.text:
                    yield completion.text
                return completion
            said: list[str] = []
            usage: dict[str, Any] = {}
            logprobs: list[tuple[str, float]] | None = None
            try:
                for data in _sse_data(response):
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        raise LLMUnavailableError(f"{self.url} failed mid-stream: {str(chunk['error'])[:300]}")
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or []:
                        if (scored := _logprobs(choice, self.url)) is not None:
                            logprobs = logprobs if logprobs is not None else []
                            logprobs.extend(scored)
                        piece = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
                        if piece:
                            said.append(piece)
                            yield piece
            except (OSError, http.client.HTTPException, ValueError) as err:  # cut off, timed out, garbled
                raise LLMUnavailableError(f"{self.url}: the stream broke off: {type(err).__name__}: {err}") from err
        latency_ms = (time.perf_counter() - start) * 1000.0
        return Completion("".join(said), int(usage.get("prompt_tokens", 0)),
                          int(usage.get("completion_tokens", len(said))), latency_ms,
                          None if logprobs is None else tuple(logprobs))

    def _body(self, messages: Messages, max_tokens: int, temperature: float,
              json_schema: JSONSchema | None) -> dict[str, Any]:
        check_max_tokens(max_tokens)
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": temperature}
        if self.api == "chat":
            body["messages"] = messages
        else:
            body.update(prompt=render_plain(messages), stop=PLAIN_STOP)
        if self.logprobs:  # the legacy API's count of alternatives per token: 1, as 0 reads as none to some servers
            body["logprobs"] = True if self.api == "chat" else 1
        if json_schema is not None:
            body["response_format"] = response_format(json_schema)
        return body

    def _request(self, body: dict[str, Any]) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")

    def _cause(self, err: Exception) -> str:
        """Why a try failed, to retry; a 4xx other than 429 raises :class:`LLMRequestError` instead."""
        if isinstance(err, urllib.error.HTTPError):
            detail = err.read()[:300].decode(errors="replace")
            if err.code != 429 and err.code < 500:
                raise LLMRequestError(f"{self.url} rejected the request: HTTP {err.code}: {detail}") from err
            return f"HTTP {err.code}: {detail}"
        return f"{type(err).__name__}: {getattr(err, 'reason', err)}"

    def _open(self, body: dict[str, Any]) -> http.client.HTTPResponse:
        """The response to ``body``, its status and headers read (retried as :meth:`complete`)."""
        cause = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response: http.client.HTTPResponse = urllib.request.urlopen(self._request(body), timeout=self.timeout_s)
                return response
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
                cause = self._cause(err)
            logger.warning("%s try %d/%d failed: %s", self.url, attempt + 1, self.max_retries + 1, cause)
        raise LLMUnavailableError(f"{self.url} failed after {self.max_retries + 1} tries; last cause: {cause}")


def _sse_data(lines: Iterable[bytes]) -> Iterator[str]:
    """The ``data:`` fields of a server-sent-events stream, one per line as OpenAI's servers send them."""
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            yield line[6:] if line.startswith("data: ") else line[5:]


def response_format(json_schema: JSONSchema) -> dict[str, Any]:
    """OpenAI's ``response_format`` asking for JSON of ``json_schema`` (llama.cpp's server and vLLM read it too)."""
    return {"type": "json_schema", "json_schema": {"name": "reply", "strict": True, "schema": json_schema}}


def schema_of(response_format: Any) -> JSONSchema | None:
    """The JSON schema a ``response_format`` asks for (None: none, or not of that shape)."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else None
    return None


def parse_openai(payload: Any, url: str, latency_ms: float) -> Completion:
    """A :class:`Completion` from an OpenAI chat-completion or completion response body."""
    try:
        choice = payload["choices"][0]
        text = (choice["message"]["content"] if "message" in choice else choice["text"]) or ""
        usage = payload["usage"]
        return Completion(text, int(usage["prompt_tokens"]), int(usage["completion_tokens"]), latency_ms,
                          _logprobs(choice, url))
    except (KeyError, IndexError, TypeError) as err:
        raise LLMRequestError(f"{url} returned no choices/usage ({err!r}): {str(payload)[:300]}") from err


def _logprobs(choice: dict[str, Any], url: str) -> TokenLogprobs | None:
    """The token logprobs of an OpenAI choice (or stream chunk choice): the chat API's
    ``logprobs.content`` (``[{"token", "logprob"}]``) or the completions API's ``logprobs.tokens``
    and ``token_logprobs``; None when it has none, or they are garbled (logged: the text still counts)."""
    said = choice.get("logprobs")
    if not isinstance(said, dict):
        return None
    try:
        if isinstance(said.get("content"), list):
            return tuple((str(t["token"]), float(t["logprob"])) for t in said["content"])
        if isinstance(said.get("tokens"), list):
            return tuple((str(t), float(lp)) for t, lp in zip(said["tokens"], said["token_logprobs"], strict=True))
    except (KeyError, TypeError, ValueError) as err:
        logger.warning("%s sent logprobs this client cannot read (%r): %s", url, err, str(said)[:200])
    return None
