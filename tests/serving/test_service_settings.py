"""The service started with other settings or a bad bundle, through ``RagfolioService.to_asgi()``.

Kept apart from test_service.py, whose module-wide client must be closed before another starts
(the tests share one ASGI app, see conftest.asgi_app).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import FakeLLM, closed_port_url, service_client, write_config
from local_http import send_json
from pydantic import ValidationError
from tiny_bundle import MEMBERS, questions

from ragfolio.core.bundle import BundleIntegrityError, save_served, verify_bundle
from ragfolio.serving.config import ServingConfig
from ragfolio.serving.engine import ServingEngine

K = len(MEMBERS)


class RejectingLLM(BaseHTTPRequestHandler):
    """Answers every request with a 400 whose body quotes a credential, as a real endpoint might."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        data = b'{"error": "invalid api key sk-live-SECRET42 for org acme-internal"}'
        send_json(self, data, 400)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def rejecting_llm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), RejectingLLM)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/internal-gateway/v1"
    finally:
        server.shutdown()


def test_member_timeout_and_request_timeout_come_from_config(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False)
    with service_client(config, RAGFOLIO_MEMBER_TIMEOUT_S="0.000001") as client:
        # A member may still finish within the microsecond; over a few queries some must not.
        bodies = [client.post("/retrieve", json={"query": q, "l": K}).json() for q in questions()[:4]]
        assert any(body["degraded"] for body in bodies)
        metrics = client.get("/metrics").text
        assert "ragfolio_member_timeouts_total{" in metrics and 'ragfolio_degraded_total{endpoint="/retrieve"}' in metrics
        for body in bodies:
            timed_out = [m for m in body["members"] if not m["ok"]]
            assert body["reasons"] == [f"{m['name']}: timeout after 1e-06 s" for m in timed_out]
            assert all(m["passages"] == [] for m in timed_out)
            assert {p["id"] for p in body["passages"]} == {p["id"] for m in body["members"] for p in m["passages"]}
    with service_client(config, RAGFOLIO_REQUEST_TIMEOUT_S="0.000001") as client:
        response = client.post("/retrieve", json={"query": questions()[0]})
        assert response.status_code == 504 and "request_timeout_s" in response.json()["error"]
        assert response.json()["request_id"] == response.headers["x-request-id"]
        assert 'ragfolio_request_timeouts_total{endpoint="/retrieve"}' in client.get("/metrics").text


def test_answer_is_503_when_the_llm_is_down_and_retrieve_still_works(tiny_bundle, tmp_path, caplog) -> None:
    url = closed_port_url()
    config = write_config(tmp_path / "serving.yml", tiny_bundle, url, warm_up=False)
    with service_client(config) as client:
        response = client.post("/answer", json={"query": questions()[0]})
        assert response.status_code == 503
        rid = response.headers["x-request-id"]
        assert response.json() == {"error": "the LLM is unavailable", "llm": "openai", "hint": "/retrieve still works",
                                   "request_id": rid}
        # the URL and the cause are in the log, under the request id, and nowhere in the body
        assert any(rid in r.getMessage() and url in r.getMessage() and "Connection refused" in r.getMessage()
                   for r in caplog.records), caplog.text
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200
        assert client.get("/readyz").status_code == 200
        assert 'ragfolio_llm_errors_total{error="unavailable"}' in client.get("/metrics").text


def test_answer_is_502_without_the_endpoints_url_or_reply_when_the_llm_rejects(tiny_bundle, tmp_path, caplog) -> None:
    with rejecting_llm() as url:
        config = write_config(tmp_path / "serving.yml", tiny_bundle, url, warm_up=False)
        with service_client(config) as client:
            response = client.post("/answer", json={"query": questions()[0]})
    assert response.status_code == 502
    rid = response.headers["x-request-id"]
    assert response.json() == {"error": "the LLM rejected the request", "llm": "openai", "request_id": rid}
    for internal in ("SECRET42", "acme", "internal-gateway", "127.0.0.1", "HTTP 400"):
        assert internal not in response.text
    assert any(rid in r.getMessage() and "SECRET42" in r.getMessage() for r in caplog.records), caplog.text


def test_max_body_bytes_comes_from_config_and_is_shown(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False, max_body_bytes=300)
    with service_client(config, RAGFOLIO_MAX_BATCH="2") as client:
        limits = client.get("/portfolio").json()["limits"]
        assert limits["max_body_bytes"] == 300 and limits["max_batch"] == 2
        fits = client.post("/retrieve", json={"query": "q" * 250})
        assert fits.status_code == 200, fits.text
        response = client.post("/retrieve", json={"query": "q" * 300})
        assert response.status_code == 413 and "the limit is max_body_bytes=300" in response.json()["error"]
        over = client.post("/batch_retrieve", json={"queries": ["a", "b", "c"]})
        assert over.status_code == 400 and "max_batch=2" in over.text


@pytest.mark.parametrize(("field", "value"), [("max_query_chars", 100_001), ("max_batch", 1025),
                                              ("max_body_bytes", 2**26 + 1), ("max_body_bytes", 0)])
def test_limits_past_the_schemas_ceilings_are_refused(field, value) -> None:
    with pytest.raises(ValidationError, match=field):
        ServingConfig(**{field: value})


def test_query_engine_is_a_choice_of_two_and_the_service_starts_with_it(tiny_bundle, fake_llm_url, tmp_path) -> None:
    with pytest.raises(ValidationError, match="query_engine"):
        ServingConfig(query_engine="tensorrt")
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, query_engine="onnxruntime")
    with service_client(config) as client:  # the tiny bundle's counting encoders have no engine: left as they are
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200


def test_refuses_to_start_when_a_bundle_file_was_altered(tiny_bundle, fake_llm_url, tmp_path) -> None:
    altered = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, altered)
    with (altered / "corpus.jsonl").open("a") as handle:
        handle.write('{"id": "injected", "title": "x", "text": "y"}\n')
    config = write_config(tmp_path / "serving.yml", altered, fake_llm_url)
    with pytest.raises(BundleIntegrityError, match=r"corpus\.jsonl"):
        with service_client(config):
            pass


@pytest.mark.parametrize("named", ["served.json", "."])
def test_serves_the_bundle_packagings_pointer_names(tiny_bundle, fake_llm_url, tmp_path, named) -> None:
    """``serving.bundle`` may name packaging's pointer (or its folder) instead of a bundle folder."""
    models = tmp_path / "06_models"
    shutil.copytree(tiny_bundle, models / "bundles" / "tiny")
    (models / "bundles" / "other").mkdir()  # not a bundle: loading it would fail
    save_served(models / "served.json", models / "bundles" / "tiny", "tiny")
    config = write_config(tmp_path / "serving.yml", models / named, fake_llm_url, warm_up=False)
    with service_client(config) as client:
        assert client.get("/portfolio").json()["checksum"] == verify_bundle(tiny_bundle)["checksum"]
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200


def test_refuses_to_start_without_a_bundle(fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tmp_path / "missing", fake_llm_url)
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        with service_client(config):
            pass


def test_a_follow_ups_rewrite_can_be_switched_off_or_time_out(tiny_bundle, fake_llm_url, tmp_path, monkeypatch,
                                                              caplog) -> None:
    """``chat.rewrite_followups: false``: no rewrite call; past ``chat.rewrite_timeout_s``: the last
    message as it is. Either way the follow-up itself is retrieved for (test_chat_followups.py)."""
    from ragfolio.serving import engine as engine_module

    follow_up = "And who else was there?"
    chat = {"messages": [{"role": "user", "content": questions()[0]}, {"role": "assistant", "content": "Maria"},
                         {"role": "user", "content": follow_up}]}
    retrieved, route_many = [], ServingEngine.route_many
    monkeypatch.setattr(ServingEngine, "route_many", lambda self, items: retrieved.extend(
        item.request.query for item in items) or route_many(self, items))
    monkeypatch.setitem(FakeLLM.rewrites, follow_up, questions()[2])
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, chat={"rewrite_timeout_s": 0.2})
    before = len(FakeLLM.rewritten)
    with service_client(config, RAGFOLIO_CHAT__REWRITE_FOLLOWUPS="false") as client:
        body = client.post("/v1/chat/completions", json=chat).json()
    assert body["rewritten_question"] is None and retrieved == [follow_up] and len(FakeLLM.rewritten) == before
    release, standalone_question = threading.Event(), engine_module.standalone_question

    def hung(*args: object, **kwargs: object) -> object:
        release.wait(5)
        return standalone_question(*args, **kwargs)

    monkeypatch.setattr(engine_module, "standalone_question", hung)
    try:
        with service_client(config) as client:
            response = client.post("/v1/chat/completions", json=chat)
    finally:
        release.set()
    assert response.status_code == 200 and response.json()["rewritten_question"] is None
    assert retrieved == [follow_up, follow_up]
    assert any("rewrite_timeout_s=0.2" in r.getMessage() for r in caplog.records), caplog.text
