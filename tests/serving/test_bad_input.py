"""Bad input the service refuses with a 4xx that names no internals (benchmarks/bad_inputs.py sends
more kinds to a real ``bentoml serve``): bodies that are not JSON, compressed bodies, and the
validation detail BentoML builds (which named its own classes and pydantic's documentation URL)."""

from __future__ import annotations

import gzip
import json

import pytest
from tiny_bundle import questions

from ragfolio.serving.guard import JSON_ONLY, UNENCODED_ONLY


@pytest.mark.parametrize("route", ["/retrieve", "/batch_retrieve", "/answer"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/vnd.bentoml+pickle"])
def test_a_body_that_is_not_json_is_a_415(client, route, content_type) -> None:
    """BentoML parses a form as the request model and text as JSON; neither reaches an endpoint."""
    field = "queries" if route == "/batch_retrieve" else "query"
    response = client.post(route, content=f"{field}=who", headers={"Content-Type": content_type})
    assert response.status_code == 415, response.text
    assert response.json() == {"error": JSON_ONLY, "request_id": response.headers["x-request-id"]}


def test_a_compressed_body_is_a_415_and_json_with_a_charset_is_accepted(client) -> None:
    body = json.dumps({"query": questions()[0]}).encode()
    for encoded in (body, gzip.compress(body)):  # BentoML would read either as plain JSON
        response = client.post("/retrieve", content=encoded,
                               headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
        assert response.status_code == 415 and response.json()["error"] == UNENCODED_ONLY, response.text
    ok = client.post("/retrieve", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(("route", "payload"), [
    ("/retrieve", {"query": 42}),
    ("/retrieve", {"query": "q", "l": 0}),
    ("/batch_retrieve", {"queries": []}),
    ("/answer", {"query": "q", "dataset": "x"}),
    ("/retrieve", "not an object"),
])
def test_validation_errors_name_the_request_model_and_no_url(client, route, payload) -> None:
    response = client.post(route, json=payload)
    assert response.status_code == 400, response.text
    body = response.json()
    assert "IODescriptor" not in response.text and "http" not in response.text, response.text
    assert body["error"].endswith(("RetrieveRequest", "BatchRetrieveRequest", "AnswerRequest")), body
    assert all(set(error) == {"type", "loc", "msg"} for error in body["detail"]), body


def test_bodies_the_json_parser_refuses_are_a_400(client) -> None:
    for body in (b'{"query": "caf\xe9"}', b'{"query": "\\ud800"}'):
        response = client.post("/retrieve", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400 and response.json()["detail"][0]["type"] == "json_invalid", response.text


def _nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def _deep_bodies(route: str) -> dict[str, bytes]:
    """Bodies nesting 5,000 lists: as the endpoint's main field, and inside a field it ignores or refuses."""
    if route == "/v1/chat/completions":
        messages = b'[{"role": "user", "content": "Who wrote Faust?"}]'
        return {"in a field": b'{"messages": ' + _nested(5_000) + b"}",
                "in an ignored field": b'{"messages": ' + messages + b', "tools": ' + _nested(5_000) + b"}"}
    field = b'"queries": ["q"]' if route == "/batch_retrieve" else b'"query": "q"'
    return {"in a field": b"{" + field + b', "l": ' + _nested(5_000) + b"}",
            "in an unknown field": b"{" + field + b', "extra": ' + _nested(5_000) + b"}"}


@pytest.mark.parametrize("route", ["/retrieve", "/batch_retrieve", "/answer", "/v1/chat/completions"])
def test_deeply_nested_json_is_a_400_before_any_parser_reads_it(client, route, caplog) -> None:
    """Python's json raised RecursionError on 5,000 nested lists: /v1/chat/completions answered 500
    with a traceback in the log. The guard measures the depth first, on every path."""
    for where, body in _deep_bodies(route).items():
        response = client.post(route, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, (where, response.status_code, response.text)
        error = response.json()["error"]
        message = error["message"] if route.startswith("/v1/") else error  # OpenAI's error shape under /v1/
        assert message == "the JSON body nests 5001 levels deep; the limit is max_json_depth=32", (where, error)
        if route.startswith("/v1/"):
            assert error["type"] == "invalid_request_error", error
    assert not [r for r in caplog.records if r.exc_info], "no traceback is logged"
    ok = client.post(route, content=b"{" + (b'"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]'
                                            if route.startswith("/v1/") else
                                            b'"queries": ["q"]' if route == "/batch_retrieve" else b'"query": "q"') + b"}",
                     headers={"Content-Type": "application/json"})
    assert ok.status_code == 200, ok.text  # a body at depth 4 (a chat request's content parts) is read


@pytest.mark.parametrize("route", ["/retrieve", "/batch_retrieve", "/answer", "/v1/chat/completions"])
def test_a_body_without_a_content_type_is_a_415(client, route) -> None:
    """BentoML parsed a POST without a Content-Type as JSON; it is refused unread, saying why."""
    body = b'{"messages": [{"role": "user", "content": "q"}]}' if route.startswith("/v1/") else b'{"query": "q"}'
    response = client.post(route, content=body)
    assert "content-type" not in response.request.headers
    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert (error["message"] if route.startswith("/v1/") else error) == (
        "the request body must be JSON: send Content-Type: application/json (the request had no Content-Type)")
