"""``RequestGuard`` on its own, around small ASGI apps: what the app receives and what leaves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ragfolio.serving.guard import INTERNAL_ERROR, RequestGuard


def call(guard: RequestGuard, chunks: list[bytes], headers: list[tuple[bytes, bytes]] | None = None) -> list[dict]:
    """Send ``chunks`` as one request's body through ``guard``; the messages it sent back."""
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/x", "headers": headers or []}
    asyncio.run(guard(scope, receive, send))
    return sent


def reply(status: int, body: bytes, content_type: bytes = b"application/json"):
    async def app(scope, receive, send) -> None:
        app.received = (await receive())["body"]  # type: ignore[attr-defined]
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]})
        await send({"type": "http.response.body", "body": body})

    return app


def test_a_chunked_body_over_the_limit_is_refused_unread_by_the_app() -> None:
    app = reply(200, b"{}")
    sent = call(RequestGuard(app, lambda: 10), [b"12345", b"67890", b"1"])
    assert sent[0]["status"] == 413 and not hasattr(app, "received")
    assert json.loads(sent[1]["body"])["error"] == "the request body is larger than max_body_bytes=10"


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    sent = call(RequestGuard(reply(200, b"{}"), lambda: 10), [b"x" * 11], [(b"content-length", b"11")])
    assert sent[0]["status"] == 413 and "has 11 bytes; the limit is max_body_bytes=10" in sent[1]["body"].decode()


def test_the_app_gets_the_body_whole_and_the_response_gets_the_id() -> None:
    app = reply(200, b'{"ok": true}')
    sent = call(RequestGuard(app, lambda: 10), [b"12345", b"67890"], [(b"x-request-id", b"abc")])
    assert app.received == b"1234567890"  # type: ignore[attr-defined]
    assert (b"x-request-id", b"abc") in sent[0]["headers"] and sent[1]["body"] == b'{"ok": true}'


def test_a_non_json_5xx_becomes_the_generic_message() -> None:
    sent = call(RequestGuard(reply(500, b"Traceback: secret", b"text/plain"), lambda: 10), [b""])
    body = json.loads(sent[1]["body"])
    assert set(body) == {"error", "request_id"} and body["error"] == INTERNAL_ERROR
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(sent[1]["body"])).encode()


def test_an_exception_is_logged_under_the_id_and_not_shown(caplog) -> None:
    async def app(scope, receive, send) -> None:
        raise RuntimeError("password=hunter2")

    sent = call(RequestGuard(app, lambda: 10), [b""], [(b"x-request-id", b"req-1")])
    assert sent[0]["status"] == 500 and b"hunter2" not in sent[1]["body"]
    assert json.loads(sent[1]["body"]) == {"error": INTERNAL_ERROR, "request_id": "req-1"}
    (record,) = [r for r in caplog.records if r.exc_info]
    assert "req-1" in record.getMessage() and "hunter2" in str(record.exc_info[1])
