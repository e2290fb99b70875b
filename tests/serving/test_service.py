"""The service through ``RagfolioService.to_asgi()``: every endpoint and every bad input."""

from __future__ import annotations

import json
import re

import pytest
from tiny_bundle import FIXTURES, MEMBERS, questions

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.serving.engine import MEMBER_FAILED, ServingEngine
from ragfolio.serving.guard import INTERNAL_ERROR

K = len(MEMBERS)
SECRET = "http://admin:hunter2@10.1.2.3:9200/passages"  # what an index server's error could quote


def assert_quiet(response) -> dict:
    """The error body: a JSON object with the response's request id and nothing of SECRET."""
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"], (body, response.headers)
    text = response.text.replace(body["request_id"], "")  # a random hex id may spell "9200"
    for internal in ("hunter2", "10.1.2.3", "9200", "Traceback", "RuntimeError"):
        assert internal not in text, response.text
    return body


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` in /metrics' ``text``."""
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if match and match[1] == name:
            found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match[2] or ""))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(match[3])
    return total


def test_probes_and_metrics(client) -> None:
    assert client.get("/readyz").status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.get("/livez").status_code == 200
    client.post("/retrieve", json={"query": questions()[0]})
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")


def test_retrieve_returns_routed_members_passages_and_merged_list(client) -> None:
    response = client.post("/retrieve", json={"query": questions()[0]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["l"] == 2 and body["num_docs"] == 3 and body["degraded"] is False and body["reasons"] == []
    assert len(body["members"]) == 2 and len({m["name"] for m in body["members"]}) == 2
    for member in body["members"]:
        assert member["ok"] and isinstance(member["router_score"], float) and member["latency_ms"] >= 0
        assert len(member["passages"]) == 3
        assert set(member["passages"][0]) == {"id", "title", "text", "score", "metadata"}
    merged = body["passages"]
    returned = {p["id"] for m in body["members"] for p in m["passages"]}
    assert {p["id"] for p in merged} == returned and len(merged) == len(returned)
    assert merged[0]["id"] == body["members"][0]["passages"][0]["id"]  # rank-1 of the top member first
    assert set(body["latency_ms"]) == {"route", "shared", "members", "total", "stage.features", "stage.predict"}
    assert body["batch_size"] >= 1


def test_retrieve_with_l_and_num_docs(client) -> None:
    body = client.post("/retrieve", json={"query": questions()[1], "l": K, "num_docs": 6}).json()
    assert body["l"] == K and body["num_docs"] == 6
    assert [len(m["passages"]) for m in body["members"]] == [6] * K
    default = client.post("/retrieve", json={"query": questions()[1], "l": K}).json()
    for deep, shallow in zip(body["members"], default["members"], strict=True):  # bm25 rankings are prefixes
        if deep["family"] == "bm25":
            assert [p["id"] for p in deep["passages"][:3]] == [p["id"] for p in shallow["passages"]]


def test_batch_retrieve_answers_each_query_in_order(client) -> None:
    queries = questions()[:3]
    response = client.post("/batch_retrieve", json={"queries": queries, "l": 1})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["query"] for r in body["results"]] == queries
    assert all(len(r["members"]) == 1 for r in body["results"]) and body["degraded"] is False


def test_answer_returns_candidates_choice_passages_latency_and_tokens(client) -> None:
    response = client.post("/answer", json={"query": questions()[0], "l": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [c["member"] for c in body["candidates"]] == [m["name"] for m in body["members"]]
    # The fake LLM answers with the first passage's title and the selector replies "2".
    for candidate, member in zip(body["candidates"], body["members"], strict=True):
        assert candidate["answer"] == member["passages"][0]["title"]
    assert body["answer"] == body["candidates"][body["chosen"]]["answer"]
    assert body["chosen_member"] == body["candidates"][body["chosen"]]["member"]
    assert set(body["latency_ms"]) == {"route", "retrieve", "answer", "select", "total", "stage.features",
                                       "stage.predict"}
    tokens = body["tokens"]
    assert tokens["total"] == tokens["prompt"] + tokens["completion"] > 0
    assert {f"answer:{m['name']}" for m in body["members"]} <= set(tokens["calls"])


def test_portfolio_describes_the_bundle(client, tiny_bundle) -> None:
    response = client.get("/portfolio")
    assert response.status_code == 200
    body = response.json()
    manifest = json.loads((tiny_bundle / "manifest.json").read_text())
    assert body["version"] == manifest["version"] and body["checksum"] == manifest["checksum"]
    assert [m["name"] for m in body["members"]] == [m["name"] for m in manifest["members"]]
    assert [m["family"] for m in body["members"]] == [family for family, _ in MEMBERS]
    assert body["selection"] == manifest["selection"] and body["k"] == K and body["default_l"] == 2
    # the served corpus, named as the manifest (and the pipeline's reports) name it
    assert body["corpus_fingerprint"] == manifest["corpus"]["fingerprint"] == build_corpus(load_folder(FIXTURES)).fingerprint
    assert body["n_passages"] == manifest["corpus"]["n_passages"]
    assert {"max_query_chars": 2000, "max_batch": 64, "max_body_bytes": 1_048_576}.items() <= body["limits"].items()


BAD_REQUESTS = [
    ("/retrieve", {"query": ""}, "query", "empty"),
    ("/retrieve", {"query": " \n\t "}, "query", "whitespace"),
    ("/retrieve", {"query": "x" * 2001}, "query", "max_query_chars=2000"),
    ("/retrieve", {"query": "q", "l": 0}, "l", "greater than or equal to 1"),
    ("/retrieve", {"query": "q", "l": K + 1}, "l", f"1..{K}"),
    ("/retrieve", {"query": "q", "l": "2"}, "l", "valid integer"),
    ("/retrieve", {"query": "q", "l": 1.5}, "l", "valid integer"),
    ("/retrieve", {"query": 42}, "query", "valid string"),
    ("/retrieve", {"l": 1}, "query", "required"),
    ("/retrieve", {"query": "q", "num_docs": 0}, "num_docs", "greater than or equal to 1"),
    ("/retrieve", {"query": "q", "num_docs": 11}, "num_docs", "max_num_docs"),
    ("/retrieve", {"query": "q", "path": "/etc/passwd"}, "path", "not permitted"),
    ("/answer", {"query": "  "}, "query", "whitespace"),
    ("/answer", {"query": "q", "l": K + 1}, "l", f"1..{K}"),
    ("/answer", {"query": "q", "num_docs": 2}, "num_docs", "not permitted"),
    ("/batch_retrieve", {"queries": []}, "queries", "at least 1"),
    ("/batch_retrieve", {"queries": ["q"] * 65}, "queries", "max_batch=64"),
    ("/batch_retrieve", {"queries": ["q", ""]}, "queries", "queries[1]"),
    ("/batch_retrieve", {"queries": "q"}, "queries", "valid array"),
    ("/batch_retrieve", {"queries": ["q", "x" * 2001]}, "queries", "queries[1] has 2001 characters"),
    # the schemas' own max_length (the ceilings the settings may not exceed), checked as BentoML parses
    ("/retrieve", {"query": "x" * 100_001}, "query", "at most 100000 characters"),
    ("/batch_retrieve", {"queries": ["q"] * 1025}, "queries", "at most 1024 items"),
]


@pytest.mark.parametrize(("route", "payload", "field", "says"), BAD_REQUESTS)
def test_bad_requests_get_a_400_naming_the_field_and_limit(client, route, payload, field, says) -> None:
    response = client.post(route, json=payload)
    assert response.status_code == 400, response.text
    errors = assert_quiet(response)["detail"]
    assert any(field in map(str, e["loc"]) and says in e["msg"] for e in errors), errors


@pytest.mark.parametrize("body", [b"{", b"not json", b'{"query": "q",}', b"[1, 2]"])
def test_malformed_json_gets_a_400(client, body) -> None:
    response = client.post("/retrieve", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["detail"]


def test_wrong_method_and_unknown_route(client) -> None:
    assert client.get("/retrieve").status_code == 405
    assert client.post("/portfolio").status_code == 405
    assert client.get("/nothing").status_code == 404
    for response in (client.get("/retrieve"), client.get("/nothing")):
        assert assert_quiet(response)["error"] in ("Method Not Allowed", "Not Found")


def test_failing_member_is_left_out_and_reported_without_its_exception(client, monkeypatch, caplog) -> None:
    original = PoolRunner._compute

    def compute(self, candidate, queries):
        if candidate.family == "graph":
            raise RuntimeError(f"graph store offline at {SECRET}")
        return original(self, candidate, queries)

    monkeypatch.setattr(PoolRunner, "_compute", compute)
    response = client.post("/retrieve", json={"query": questions()[2], "l": K})
    body = response.json()
    assert body["degraded"] is True and "hunter2" not in response.text and "offline" not in response.text
    graph = next(m for m in body["members"] if m["family"] == "graph")
    assert graph["ok"] is False and graph["passages"] == [] and graph["error"] == MEMBER_FAILED
    assert body["reasons"] == [f"{graph['name']}: {MEMBER_FAILED}"]
    assert all(m["ok"] and m["passages"] for m in body["members"] if m["family"] != "graph")
    # the log has the detail, under the id the response carries
    rid = response.headers["x-request-id"]
    assert any(rid in r.getMessage() and "hunter2" in r.getMessage() for r in caplog.records), caplog.text
    answered = client.post("/answer", json={"query": questions()[2], "l": K})
    assert answered.json()["degraded"] is True and "hunter2" not in answered.text
    assert graph["name"] not in [c["member"] for c in answered.json()["candidates"]]


@pytest.mark.parametrize("route", ["/retrieve", "/batch_retrieve", "/answer", "/portfolio"])
def test_an_unexpected_exception_is_a_500_with_only_a_request_id(client, monkeypatch, caplog, route) -> None:
    def fail(*args, **kwargs):
        raise RuntimeError(f"cannot read the index at {SECRET}")

    for method in ("retrieve_many", "answer", "portfolio"):
        monkeypatch.setattr(ServingEngine, method, fail)
    if route == "/portfolio":
        response = client.get(route)
    else:
        payload = {"queries": ["q"]} if route == "/batch_retrieve" else {"query": "q"}
        response = client.post(route, json=payload)
    assert response.status_code == 500, response.text
    assert assert_quiet(response) == {"error": INTERNAL_ERROR, "request_id": response.headers["x-request-id"]}
    logged = [r for r in caplog.records if response.headers["x-request-id"] in r.getMessage() and r.exc_text]
    assert logged and "hunter2" in logged[0].exc_text, caplog.text


def test_request_id_is_kept_when_sane_and_replaced_when_not(client) -> None:
    ok = client.post("/retrieve", json={"query": questions()[0]}, headers={"x-request-id": "client-42.a:b"})
    assert ok.status_code == 200 and ok.headers["x-request-id"] == "client-42.a:b"
    for bad in ("x" * 65, "a b", "<script>", ""):
        response = client.post("/retrieve", json={"query": ""}, headers={"x-request-id": bad})
        assert response.status_code == 400
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"]), response.headers
        assert response.json()["request_id"] == response.headers["x-request-id"]


def test_a_body_over_max_body_bytes_is_a_413_naming_the_limit(client) -> None:
    big = json.dumps({"query": "x" * 1_048_576}).encode()
    response = client.post("/retrieve", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "max_body_bytes=1048576" in assert_quiet(response)["error"]
    # no Content-Length (chunked): counted as it is read
    chunked = client.post("/batch_retrieve", content=(big[i:i + 65536] for i in range(0, len(big), 65536)),
                          headers={"Content-Type": "application/json"})
    assert "content-length" not in chunked.request.headers
    assert chunked.status_code == 413 and "max_body_bytes=1048576" in chunked.json()["error"]
    fits = json.dumps({"queries": ["y" * 2000] * 64}).encode()  # the largest batch of ASCII queries
    assert client.post("/batch_retrieve", content=fits, headers={"Content-Type": "application/json"}).status_code == 200


def test_metrics_count_members_routing_degradation_and_batch_sizes(client, monkeypatch) -> None:
    before = client.get("/metrics").text
    body = client.post("/retrieve", json={"query": questions()[0], "l": K}).json()
    client.post("/batch_retrieve", json={"queries": questions()[:3], "l": 1})
    text = client.get("/metrics").text
    for member in body["members"]:
        name = member["name"]
        assert metric(text, "ragfolio_router_choices_total", member=name) >= 1 + metric(
            before, "ragfolio_router_choices_total", member=name)
        assert metric(text, "ragfolio_member_latency_seconds_count", member=name) >= 1 + metric(
            before, "ragfolio_member_latency_seconds_count", member=name)
    assert metric(text, "ragfolio_batch_size_count", endpoint="/batch_retrieve") == 1 + metric(
        before, "ragfolio_batch_size_count", endpoint="/batch_retrieve")
    assert metric(text, "ragfolio_batch_size_sum", endpoint="/batch_retrieve") == 3 + metric(
        before, "ragfolio_batch_size_sum", endpoint="/batch_retrieve")

    original = PoolRunner._compute

    def compute(self, candidate, queries):
        if candidate.family == "graph":
            raise RuntimeError("offline")
        return original(self, candidate, queries)

    monkeypatch.setattr(PoolRunner, "_compute", compute)
    failed = client.post("/retrieve", json={"query": questions()[1], "l": K}).json()
    graph = next(m["name"] for m in failed["members"] if m["family"] == "graph")
    after = client.get("/metrics").text
    assert metric(after, "ragfolio_member_failures_total", member=graph) == 1 + metric(
        text, "ragfolio_member_failures_total", member=graph)
    assert metric(after, "ragfolio_degraded_total", endpoint="/retrieve") == 1 + metric(
        text, "ragfolio_degraded_total", endpoint="/retrieve")

