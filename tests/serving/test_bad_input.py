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
    for body in (b'{"query": "caf\xe9"}', b'{"query": "\\ud800"}', b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
        response = client.post("/retrieve", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400 and response.json()["detail"][0]["type"] == "json_invalid", response.text
