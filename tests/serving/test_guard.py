"""``RequestGuard`` on its own, around small ASGI apps: what the app receives and what leaves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ragfolio.serving.guard import INTERNAL_ERROR, NO_CONTENT_TYPE, RequestGuard
from ragfolio.serving.json_limits import json_depth


def call(guard: RequestGuard, chunks: list[bytes], headers: list[tuple[bytes, bytes]] | None = None,
         content_type: bytes | None = b"application/json") -> list[dict]:
    """Send ``chunks`` as one request's body (of ``content_type``) through ``guard``; the messages it sent back."""
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [*(headers or []), *([(b"content-type", content_type)] if content_type is not None else [])]
    scope = {"type": "http", "method": "POST", "path": "/x", "headers": headers}
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


def test_a_body_nesting_past_the_limit_is_refused_unread_by_the_app() -> None:
    app = reply(200, b"{}")
    deep = b'{"a": [[{"b": "[[[[[[[["}]]]}'  # 4 deep: the brackets inside the string do not count
    assert json_depth(deep) == 4
    call(RequestGuard(app, lambda: 100, lambda: 4), [deep])
    assert app.received == deep  # type: ignore[attr-defined]
    app = reply(200, b"{}")
    sent = call(RequestGuard(app, lambda: 100, lambda: 3), [deep[:20], deep[20:]])
    assert sent[0]["status"] == 400 and not hasattr(app, "received")
    assert json.loads(sent[1]["body"])["error"] == "the JSON body nests 4 levels deep; the limit is max_json_depth=3"


def test_json_depth_counts_open_arrays_and_objects_outside_strings() -> None:
    assert [json_depth(b) for b in (b"", b"7", b'"[{"', b"[]", b'{"q": "x"}', b'[[1], [[2]]]', b'["\\"]', b'["\\""]]]')] == [
        0, 0, 0, 1, 1, 3, 1, 1]
    assert json_depth(b"[" * 3_000_000) == 3_000_000  # past one chunk of the scan


def test_a_post_without_a_content_type_is_a_415_unread() -> None:
    app = reply(200, b"{}")
    sent = call(RequestGuard(app, lambda: 100), [b"{}"], [(b"content-length", b"2")], content_type=None)
    assert sent[0]["status"] == 415 and not hasattr(app, "received")
    assert json.loads(sent[1]["body"])["error"] == NO_CONTENT_TYPE
