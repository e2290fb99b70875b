"""A real ``bentoml serve`` on a free loopback port: readiness, every endpoint over HTTP, a slow
request that does not hold up the others, a member timeout, and a refused start."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from conftest import BENTOML, ROOT, bentoml_serve, free_port, serve_env, write_config
from tiny_bundle import MEMBERS, questions

pytestmark = pytest.mark.slow

K = len(MEMBERS)


@pytest.fixture(scope="module")
def server(tiny_bundle, fake_llm_url, tmp_path_factory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("bentoml_home")
    config = write_config(home / "serving.yml", tiny_bundle, fake_llm_url)
    with bentoml_serve(config, home) as url:
        yield url


def test_every_endpoint_over_http(server) -> None:
    query = questions()[0]
    with httpx.Client(base_url=server, timeout=30) as http:
        assert http.get("/healthz").status_code == 200 and http.get("/readyz").status_code == 200
        portfolio = http.get("/portfolio").json()
        assert portfolio["k"] == K and len(portfolio["version"]) == 12
        retrieved = http.post("/retrieve", json={"query": query, "l": 2, "num_docs": 4}).json()
        assert len(retrieved["members"]) == 2 and all(len(m["passages"]) == 4 for m in retrieved["members"])
        batch = http.post("/batch_retrieve", json={"queries": questions()[:2]}).json()
        assert [r["query"] for r in batch["results"]] == questions()[:2]
        answered = http.post("/answer", json={"query": query}).json()
        assert answered["answer"] and answered["tokens"]["total"] > 0
        bad = http.post("/retrieve", json={"query": "q", "l": K + 1})
        assert bad.status_code == 400 and bad.json()["detail"][0]["loc"] == ["l"]
        malformed = http.post("/retrieve", content=b"{", headers={"Content-Type": "application/json"})
        assert malformed.status_code == 400
        assert malformed.json()["request_id"] == malformed.headers["x-request-id"]
        big = b'{"query": "' + b"x" * 1_048_576 + b'"}'
        too_big = http.post("/retrieve", content=big, headers={"Content-Type": "application/json"})
        assert too_big.status_code == 413 and "max_body_bytes=1048576" in too_big.json()["error"]
        chunked = http.post("/retrieve", content=iter([big[:600_000], big[600_000:]]),
                            headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413 and "content-length" not in chunked.request.headers
        assert http.post("/retrieve", json={"query": query}, headers={"x-request-id": "abc-1"}).headers[
            "x-request-id"] == "abc-1"
        metrics = http.get("/metrics").text
        assert 'bentoml_service_request_total{endpoint="/retrieve"' in metrics
        for name in ("ragfolio_member_latency_seconds_bucket{", "ragfolio_router_choices_total{",
                     'ragfolio_batch_size_count{endpoint="/batch_retrieve"}'):
            assert name in metrics, name


def test_python_client(server) -> None:
    import bentoml

    with bentoml.SyncHTTPClient(server) as client:
        result = client.retrieve(query=questions()[1], l=1)
        assert len(result["members"]) == 1
        batch = client.batch_retrieve(queries=questions()[:2], num_docs=2)
        assert [len(r["members"][0]["passages"]) for r in batch["results"]] == [2, 2]
        reply = client.answer(query=questions()[1])
        assert reply["answer"] == reply["candidates"][reply["chosen"]]["answer"]


def test_a_slow_answer_does_not_hold_up_retrieval(server) -> None:
    """The fake LLM takes 1.5 s per call on a question containing "slow"; /retrieve meanwhile answers."""
    slow: dict[str, float] = {}

    def ask() -> None:
        start = time.perf_counter()
        httpx.post(f"{server}/answer", json={"query": "a slow question about the von Trapp family"}, timeout=60)
        slow["s"] = time.perf_counter() - start

    thread = threading.Thread(target=ask)
    thread.start()
    time.sleep(0.3)
    times = []
    for query in questions()[:4]:
        start = time.perf_counter()
        assert httpx.post(f"{server}/retrieve", json={"query": query}, timeout=30).status_code == 200
        times.append(time.perf_counter() - start)
    retrieved_while_answering = "s" not in slow
    thread.join()
    assert slow["s"] >= 1.5 and retrieved_while_answering, (slow, times)


def test_member_timeout_is_reported_as_degraded(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False)
    with bentoml_serve(config, tmp_path, RAGFOLIO_MEMBER_TIMEOUT_S="0.000001") as url:
        bodies = [httpx.post(f"{url}/retrieve", json={"query": q, "l": K}, timeout=30).json() for q in questions()[:4]]
    degraded = [b for b in bodies if b["degraded"]]
    assert degraded, bodies
    assert all(r.endswith("timeout after 1e-06 s") for b in degraded for r in b["reasons"])


def test_serve_refuses_to_start_on_an_altered_bundle(tiny_bundle, fake_llm_url, tmp_path) -> None:
    import shutil

    altered = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, altered)
    (altered / "router" / "router.json").write_text((altered / "router" / "router.json").read_text() + " ")
    config = write_config(tmp_path / "serving.yml", altered, fake_llm_url)
    done = subprocess.run([BENTOML, "serve", "--host", "127.0.0.1", "--port", str(free_port())], cwd=ROOT,
                          env=serve_env(config, tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f"{altered / 'router' / 'router.json'} does not match its recorded sha256 checksum" in done.stderr + done.stdout
