"""The service through ``RagfolioService.to_asgi()``: every endpoint and every bad input."""

from __future__ import annotations

import json

import pytest
from tiny_bundle import FIXTURES, MEMBERS, questions

from ragfolio.core.data import build_corpus
from ragfolio.core.loading import load_folder
from ragfolio.core.pool_runner import PoolRunner

K = len(MEMBERS)


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
        assert set(member["passages"][0]) == {"id", "title", "text", "score"}
    merged = body["passages"]
    returned = {p["id"] for m in body["members"] for p in m["passages"]}
    assert {p["id"] for p in merged} == returned and len(merged) == len(returned)
    assert merged[0]["id"] == body["members"][0]["passages"][0]["id"]  # rank-1 of the top member first
    assert set(body["latency_ms"]) == {"route", "shared", "members", "total"}


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
    assert set(body["latency_ms"]) == {"route", "retrieve", "answer", "select", "total"}
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
]


@pytest.mark.parametrize(("route", "payload", "field", "says"), BAD_REQUESTS)
def test_bad_requests_get_a_400_naming_the_field_and_limit(client, route, payload, field, says) -> None:
    response = client.post(route, json=payload)
    assert response.status_code == 400, response.text
    errors = response.json()["detail"]
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


def test_failing_member_is_left_out_and_reported(client, monkeypatch) -> None:
    original = PoolRunner._compute

    def compute(self, candidate, queries):
        if candidate.family == "graph":
            raise RuntimeError("graph store offline")
        return original(self, candidate, queries)

    monkeypatch.setattr(PoolRunner, "_compute", compute)
    body = client.post("/retrieve", json={"query": questions()[2], "l": K}).json()
    assert body["degraded"] is True
    graph = next(m for m in body["members"] if m["family"] == "graph")
    assert graph["ok"] is False and graph["passages"] == [] and "graph store offline" in graph["error"]
    assert body["reasons"] == [f"{graph['name']}: RuntimeError: graph store offline"]
    assert all(m["ok"] and m["passages"] for m in body["members"] if m["family"] != "graph")
    answered = client.post("/answer", json={"query": questions()[2], "l": K}).json()
    assert answered["degraded"] is True and graph["name"] not in [c["member"] for c in answered["candidates"]]
