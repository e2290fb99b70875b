"""The guard every HTTP request passes first: a request id, a body-size limit, quiet error bodies.

:class:`RequestGuard` is a plain ASGI middleware that the service adds with BentoML's
``add_asgi_middleware``, so it runs before BentoML reads and parses the body:

- **Request id.** An incoming ``x-request-id`` of 1-64 characters from ``[A-Za-z0-9._:-]`` is
  kept, anything else is replaced by a fresh one (32 hex digits). The id is sent back as the
  ``x-request-id`` header of every response, is added as ``request_id`` to every error body, and
  is readable by the endpoints (:func:`current_request_id`), which log the detail of an error
  under it.
- **Body limit.** A body over ``max_body_bytes`` gets a 413 naming the limit, before anything
  parses it: at once when ``Content-Length`` says so, otherwise as soon as the bytes read pass
  the limit (a chunked body is read at most one chunk past it). The endpoint receives the body it
  would have received.
- **JSON bodies only.** A ``POST``, ``PUT`` or ``PATCH`` whose ``Content-Type`` is not
  ``application/json`` (BentoML would parse a form, or text as JSON), has a body but no
  ``Content-Type`` (BentoML would take it as JSON), or whose body is encoded (``Content-Encoding`` other than ``identity``, which
  BentoML ignores), gets a 415 that says which, unread.
- **Depth limit.** A JSON body that nests arrays and objects deeper than ``max_json_depth`` gets a
  400 naming the depth and the limit, before anything parses it (:mod:`ragfolio.serving.json_limits`):
  a parser reads nesting by recursion, and a deep enough body would end in a ``RecursionError``.
- **Quiet errors.** An error response (status >= 400) leaves as a JSON object with ``request_id``;
  a non-JSON error body becomes ``{"error": <the status's phrase>}``, and an exception no endpoint
  handled becomes a 500 ``{"error": "internal error", "request_id": ...}``, its traceback logged
  under the request id. Nothing of the exception reaches the client. A validation error's
  ``detail`` keeps each error's ``type``, ``loc`` and ``msg`` only (pydantic adds a documentation
  URL), and its title names the request model, not BentoML's ``...IODescriptor`` class. Under
  ``/v1/`` (the OpenAI-compatible API) an error whose ``error`` is a string takes OpenAI's shape,
  ``{"error": {"message", "type", "param", "code"}}`` (:func:`ragfolio.serving.openai_api.error_body`),
  so that a 413, 415, 404, 405 or 500 there reads as the API's own errors do.
- **Logs under the id.** A client error (4xx) is logged as one WARNING line, ``request <id>:
  <method> <path> answered <status>: <reason>`` (no traceback, nothing of the body); a 5xx as an
  ERROR line, its traceback logged where it was caught. :func:`install_request_logging` (called
  when the service starts) puts ``request <id>:`` into every line logged while a request is
  handled, BentoML's own included, and drops BentoML's ``Exception on <path> [<method>]``
  traceback of a request it answers with a 4xx (a validation error, a bad body).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from http import HTTPStatus
from typing import Any

import bentoml
from bentoml.exceptions import BentoMLException
from pydantic import ValidationError
from starlette.datastructures import Headers, MutableHeaders

from ragfolio.serving.config import ServingConfig
from ragfolio.serving.json_limits import json_depth
from ragfolio.serving.openai_api import error_body

logger = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-request-id"
INTERNAL_ERROR = "internal error; the server log has the detail under this request_id"
JSON_ONLY = "the request body must be JSON: Content-Type application/json"
NO_CONTENT_TYPE = "the request body must be JSON: send Content-Type: application/json (the request had no Content-Type)"
UNENCODED_ONLY = "the request body must not be compressed: Content-Encoding identity or none"
_WITH_BODY = ("POST", "PUT", "PATCH")
_DETAIL_KEYS = ("type", "loc", "msg")
OPENAI_PREFIX = "/v1/"

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_request_id: ContextVar[str | None] = ContextVar("ragfolio_request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request being handled (None outside a request)."""
    return _request_id.get()


def unsupported_body(method: str, headers: Headers) -> str | None:
    """Why a request's body is refused unread (a 415), or None: not JSON, or compressed."""
    if method not in _WITH_BODY:
        return None
    if "content-type" not in headers:  # refused when there is a body to read
        bodiless = headers.get("content-length", "").strip() in ("", "0") and "transfer-encoding" not in headers
        return None if bodiless else NO_CONTENT_TYPE
    media_type = headers["content-type"].split(";")[0].strip().lower()
    if media_type != "application/json":
        return JSON_ONLY
    if headers.get("content-encoding", "identity").strip().lower() not in ("identity", ""):
        return UNENCODED_ONLY
    return None


def request_id_from(headers: Headers) -> str:
    """The incoming ``x-request-id`` if it is sane (1-64 of ``[A-Za-z0-9._:-]``), else a new one."""
    incoming = headers.get(REQUEST_ID_HEADER, "")
    return incoming if _SANE_ID.fullmatch(incoming) else uuid.uuid4().hex


class _TooLarge(Exception):
    """The body passed the limit while it was read."""


def service_setting(name: str) -> Callable[[], int]:
    """A function that returns the running service's setting ``name`` (its default while the
    service is not instantiated yet): the guard's limits, read per request."""

    def read() -> int:
        try:
            return int(getattr(bentoml.get_current_service().config, name))
        except BentoMLException:  # not instantiated yet
            return int(ServingConfig.model_fields[name].default)

    return read


class RequestGuard:
    """ASGI middleware: request ids, the body limits and quiet error bodies (module docstring).

    Args:
        app: The ASGI app it guards.
        max_body_bytes: Returns the largest body accepted, in bytes; asked once per request, so
            the limit can come from settings read after the app was built.
        max_json_depth: Returns the deepest nesting of a JSON body accepted (asked likewise);
            None: the running service's ``max_json_depth``.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: Callable[[], int],
                 max_json_depth: Callable[[], int] | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth or service_setting("max_json_depth")

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        rid = request_id_from(headers)
        token = _request_id.set(rid)
        where = f"{scope.get('method', '')} {scope.get('path', '')}"
        response = _ResponseGuard(send, rid, where, rewrite=scope.get("method") != "HEAD",
                                  openai=str(scope.get("path", "")).startswith(OPENAI_PREFIX))
        try:
            if (refusal := unsupported_body(scope.get("method", ""), headers)) is not None:
                await response.send_error(415, refusal)
                return
            limit = self.max_body_bytes()
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                await response.send_error(413, f"the request body has {int(declared)} bytes; "
                                               f"the limit is max_body_bytes={limit}")
                return
            try:
                body_receive = await _read_body(receive, limit)
            except _TooLarge:
                await response.send_error(413, f"the request body is larger than max_body_bytes={limit}")
                return
            if (too_deep := self._too_deep(scope.get("method", ""), body_receive)) is not None:
                await response.send_error(400, too_deep)
                return
            await self.app(scope, body_receive, response.send)
        except Exception:  # the last line of defence: log it all, tell the client nothing of it
            logger.exception("request %s: %s failed", rid, where)
            if not response.started:
                await response.send_error(500, INTERNAL_ERROR)
        finally:
            _request_id.reset(token)

    def _too_deep(self, method: str, body_receive: _BodyReceive) -> str | None:
        """Why a JSON body is refused for its nesting (a 400), or None."""
        body, limit = body_receive.body, self.max_json_depth()
        if method not in _WITH_BODY or body.count(b"[") + body.count(b"{") <= limit:  # cannot nest deeper
            return None
        if (depth := json_depth(body)) <= limit:
            return None
        return f"the JSON body nests {depth} levels deep; the limit is max_json_depth={limit}"


class _BodyReceive:
    """The ``receive`` the app gets: the whole body as one message, then what the client sends next."""

    def __init__(self, first: Message, receive: Receive) -> None:
        self.body: bytes = first.get("body", b"") if first["type"] == "http.request" else b""
        self._pending, self._receive = [first], receive

    async def __call__(self) -> Message:
        return self._pending.pop() if self._pending else await self._receive()


async def _read_body(receive: Receive, limit: int) -> _BodyReceive:
    """Read the whole body (at most ``limit`` bytes, else :class:`_TooLarge`); a ``receive`` that
    hands it on as one message, then passes on what the client sends next (a disconnect)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: hand that on
            first: Message = message
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            break
    return _BodyReceive(first, receive)


class _ResponseGuard:
    """The ``send`` the app gets: adds the request id header; error bodies get ``request_id``."""

    def __init__(self, send: Send, rid: str, where: str, rewrite: bool, openai: bool = False) -> None:
        self._send = send
        self.rid = rid
        self.where = where
        self.rewrite = rewrite
        self.openai = openai
        self.started = False
        self._start: Message | None = None  # an error response's start, held until its body is read
        self._body: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            MutableHeaders(scope=message)[REQUEST_ID_HEADER] = self.rid
            if message["status"] >= 400 and self.rewrite:
                self._start = message
                return
        elif message["type"] == "http.response.body" and self._start is not None:
            self._body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            start, self._start = self._start, None
            await self._send_error(start, _error_payload(start, b"".join(self._body)))
            return
        await self._send(message)

    async def send_error(self, status: int, text: str) -> None:
        """A JSON error response ``{"error": text, "request_id": ...}`` from the guard itself."""
        self.started = True
        await self._send_error({"type": "http.response.start", "status": status, "headers": []}, {"error": text})

    async def _send_error(self, start: Message, payload: dict[str, Any]) -> None:
        status = start["status"]
        if self.openai and isinstance(payload.get("error"), str):
            payload = {**error_body(status, payload["error"]), **{k: v for k, v in payload.items() if k != "error"}}
        payload["request_id"] = self.rid
        data = json.dumps(payload).encode()
        headers = MutableHeaders(scope=start)
        headers["content-type"] = "application/json"
        headers["content-length"] = str(len(data))
        headers[REQUEST_ID_HEADER] = self.rid
        log = logger.error if status >= 500 else logger.warning
        log("request %s: %s answered %d: %s", self.rid, self.where, status, _reason(payload))
        await self._send(start)
        await self._send({"type": "http.response.body", "body": data, "more_body": False})


def _error_payload(start: Message, body: bytes) -> dict[str, Any]:
    """The app's JSON error object; for any other body (a traceback page, a proxy's text) only the
    status's phrase, or the generic message of a 5xx."""
    status = start["status"]
    if Headers(scope=start).get("content-type", "").startswith("application/json"):
        if (payload := _json_object(body)) is not None:
            return _quiet_validation(payload)
    return {"error": INTERNAL_ERROR if status >= 500 else _phrase(status)}


def _quiet_validation(payload: dict[str, Any]) -> dict[str, Any]:
    """A validation error (BentoML's ``{"error": "<n> validation error for <model>", "detail": [...]}``)
    with only ``type``, ``loc`` and ``msg`` of each error and the request model's own name."""
    detail = payload.get("detail")
    if not isinstance(detail, list):
        return payload
    error = payload.get("error")
    return {
        **payload,
        "error": re.sub(r"(\w)IODescriptor\b", r"\1", error) if isinstance(error, str) else error,
        "detail": [{k: e[k] for k in _DETAIL_KEYS if k in e} if isinstance(e, dict) else e for e in detail],
    }


def _json_object(body: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object (BentoML's ``[{"error": ...}]`` unwrapped), or None."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    return payload if isinstance(payload, dict) else None


def _reason(payload: dict[str, Any], limit: int = 300) -> str:
    """An error body's message (OpenAI's ``error.message`` too) and a validation error's ``loc: msg``
    pairs, at most ``limit`` characters: what the client was told, never the request's body."""
    error = payload.get("error")
    text = str(error.get("message") if isinstance(error, dict) else error)
    if isinstance(detail := payload.get("detail"), list):
        pairs = [(".".join(map(str, e.get("loc") or ())), e.get("msg")) for e in detail if isinstance(e, dict)]
        text += f" ({'; '.join(f'{loc}: {msg}' if loc else str(msg) for loc, msg in pairs)})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


# --- the request id in the log ------------------------------------------------------------------
BENTOML_ERROR_LOGGER = "bentoml._internal.server.http_app"  # BentoML's "Exception on <path> [<method>]"


def _tag(record: logging.LogRecord) -> None:
    """Prefix ``request <id>: `` to a record logged while a request is handled, unless its message
    names the id already; once per record (``record.ragfolio_request_id`` marks it)."""
    rid = current_request_id()
    if rid is None or getattr(record, "ragfolio_request_id", None) is not None:
        return
    record.ragfolio_request_id = rid
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a malformed record is the handler's to report, not the filter's
        return
    if rid not in message:
        record.msg, record.args = f"request {rid}: {message}", None


class RequestIdFilter(logging.Filter):
    """A handler filter: every line logged while a request is handled names its id (:func:`_tag`).

    The id is a context variable, so lines logged from worker threads (which do not inherit it)
    name it only when their message does.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        _tag(record)
        return True


class ClientErrorLogFilter(logging.Filter):
    """On BentoML's error logger: drops the traceback record of an exception BentoML answers with a
    4xx (a pydantic ``ValidationError``, a ``BentoMLException`` below 500: the guard logs the
    response as one line) and puts the request id into the others (a 5xx keeps its traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ValidationError) or (isinstance(exc, BentoMLException) and exc.error_code < 500):
            return False
        _tag(record)
        return True


def install_request_logging() -> None:
    """Add :class:`RequestIdFilter` to the handlers of the root and ``bentoml`` loggers (those that
    ``bentoml serve`` configured) and :class:`ClientErrorLogFilter` to BentoML's error logger; each
    at most once, so that a service started again in the same process adds nothing."""
    error_logger = logging.getLogger(BENTOML_ERROR_LOGGER)
    if not any(isinstance(f, ClientErrorLogFilter) for f in error_logger.filters):
        error_logger.addFilter(ClientErrorLogFilter())
    for name in (None, "bentoml"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
                handler.addFilter(RequestIdFilter())
