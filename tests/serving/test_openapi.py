"""``/docs.json`` lists every endpoint with the limits the service enforces, and the service holds to it:
schemathesis, fuzzing a real ``bentoml serve`` from the document, finds no server error and no
response that breaks its schema."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import bentoml_serve, write_config

from ragfolio.serving.routes import portfolio_app
from ragfolio.serving.schemas import NOT_BLANK

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
BENTOML_APIS = {"/retrieve", "/batch_retrieve", "/answer"}
REQUIRED_CHECKS = ("not_a_server_error", "response_schema_conformance", "status_code_conformance",
                   "content_type_conformance")


@pytest.fixture(scope="module")
def document(client) -> dict:
    response = client.get("/docs.json")
    assert response.status_code == 200, response.text
    return response.json()


def test_every_endpoint_is_in_the_document(document) -> None:
    """BentoML's own document listed its APIs only: no /portfolio, no /v1/, so no fuzzer reached them."""
    mounted = {route.path.replace(":path}", "}") for route in portfolio_app.routes} - {"/docs.json"}
    assert mounted == {"/portfolio", "/v1/models", "/v1/chat/completions", "/", "/documents", "/documents/{pid}"}
    assert BENTOML_APIS | mounted <= set(document["paths"]), sorted(document["paths"])
    assert document["openapi"] == "3.1.0"
    chat = document["paths"]["/v1/chat/completions"]["post"]
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert chat["responses"]["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/OpenAIError"}


def _body(document: dict, path: str) -> dict:
    return document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]


def test_the_request_schemas_carry_the_limits_in_force(document, client) -> None:
    """The limits the service enforces (the tiny bundle's k = 3, max_num_docs 10, max_query_chars
    2,000, max_batch 64) are in the schemas a client is generated from, not only the ceilings."""
    limits, k = client.get("/portfolio").json()["limits"], client.get("/portfolio").json()["k"]
    assert (k, limits["max_num_docs"], limits["max_query_chars"], limits["max_batch"]) == (3, 10, 2000, 64)
    for path in BENTOML_APIS:
        fields = _body(document, path)["properties"]
        assert fields["l"]["anyOf"][0] == {"minimum": 1, "maximum": 3, "type": "integer"}, path
        if path != "/answer":
            assert fields["num_docs"]["anyOf"][0] == {"minimum": 1, "maximum": 10, "type": "integer"}, path
        query = fields["queries"]["items"] if path == "/batch_retrieve" else fields["query"]
        assert (query["maxLength"], query["pattern"]) == (2000, NOT_BLANK), path
    assert _body(document, "/batch_retrieve")["properties"]["queries"]["maxItems"] == 64
    chat = _body(document, "/v1/chat/completions")
    assert chat["properties"]["l"]["anyOf"][0]["maximum"] == 3
    user = chat["properties"]["messages"]["contains"]
    assert user["properties"]["content"]["anyOf"][0] == {"type": "string", "maxLength": 2000, "pattern": NOT_BLANK}


def test_the_not_blank_pattern_is_the_services_rule() -> None:
    """A query is blank when ``str.strip()`` leaves nothing: the schema's pattern matches any other."""
    import re

    pattern = re.compile(NOT_BLANK)
    for code in range(0x3100):  # every character str.isspace() knows is below U+3100
        assert bool(pattern.search(chr(code))) is not chr(code).isspace(), hex(code)


def test_with_api_keys_every_protected_operation_says_so() -> None:
    from ragfolio.serving.openapi import openapi_document
    from ragfolio.serving.schemas import Limits
    from ragfolio.serving.service import RagfolioService

    document = openapi_document(RagfolioService.openapi_spec.asdict(), Limits(3, 2000, 64, 10), keys=True)
    assert document["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    for path in (*BENTOML_APIS, "/portfolio", "/v1/models", "/v1/chat/completions", "/documents", "/documents/{pid}"):
        operation = next(iter(document["paths"][path].values()))
        assert operation["security"] == [{"bearer": []}] and "401" in operation["responses"], path
    assert "security" not in document["paths"]["/"]["get"]


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_and_no_response_off_its_schema(tiny_bundle, fake_llm_url, tmp_path) -> None:
    """A bounded run (about a minute): every operation of /docs.json, /v1/ included, positive and
    negative cases (examples, boundary values, then random ones), with the fake LLM answering.
    benchmarks/fuzz_service.py runs the longer one and every check."""
    bundle = shutil.copytree(tiny_bundle, tmp_path / "bundle")  # the fuzzer adds documents: to a copy of its own
    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url)
    with bentoml_serve(config, tmp_path) as url:
        done = subprocess.run(
            [SCHEMATHESIS, "run", f"{url}/docs.json", "--checks", ",".join(REQUIRED_CHECKS), "--max-examples", "40",
             "--max-time", "75", "--phases", "examples,coverage,fuzzing", "--workers", "1", "--seed", "46",
             "--report", "json", "--report-json-path", str(tmp_path / "report.json"), "--request-timeout", "30"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    output = done.stdout[-6000:] + done.stderr[-2000:]
    assert report["operations"]["tested"] == report["operations"]["total"] >= 14, output
    assert report["failures"] == [] and report["errors"] == [] and done.returncode == 0, output
    assert report["test_cases"]["generated"] >= 200, report["test_cases"]


def test_a_count_without_a_fraction_is_an_integer_as_json_schema_has_it(client) -> None:
    """JSON Schema's ``integer`` holds 2.0; strict pydantic refused it (schemathesis: a schema-valid
    request rejected). 2.5, "2" and true are still refused."""
    question = "Who was the father of Hermann II?"
    taken = client.post("/retrieve", json={"query": question, "l": 2.0, "num_docs": 3.0})
    assert taken.status_code == 200 and (taken.json()["l"], taken.json()["num_docs"]) == (2, 3), taken.text
    chat = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": question}], "l": 1.0,
                                                      "n": 1.0, "max_tokens": 5.0})
    assert chat.status_code == 200, chat.text
    for bad in (2.5, "2", True):
        assert client.post("/retrieve", json={"query": question, "l": bad}).status_code == 400, bad


def _events(text: str) -> list[dict]:
    """Server-sent events as a client reads them: ``event`` (default ``message``) and ``data``."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append({"event": fields.get("event", "message"), "data": fields["data"]})
    return events


def test_streamed_events_are_what_the_document_says(client, document) -> None:
    import jsonschema_rs

    question = "Who was the father of Hermann II?"
    for path, body in (("/answer", {"query": question, "stream": True}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": question}], "stream": True})):
        schema = document["paths"][path]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
        response = client.post(path, json=body)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = _events(response.text)
        validator = jsonschema_rs.validator_for(schema)
        assert len(events) >= 2 and all(validator.is_valid(event) for event in events), (path, events[:3])
