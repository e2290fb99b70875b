"""The service started with other settings or a bad bundle, through ``RagfolioService.to_asgi()``.

Kept apart from test_service.py, whose module-wide client must be closed before another starts
(the tests share one ASGI app, see conftest.asgi_app).
"""

from __future__ import annotations

import shutil

import pytest
from conftest import closed_port_url, service_client, write_config
from tiny_bundle import MEMBERS, questions

from ragfolio.core.artifacts import BundleIntegrityError

K = len(MEMBERS)


def test_member_timeout_and_request_timeout_come_from_config(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False)
    with service_client(config, RAGFOLIO_MEMBER_TIMEOUT_S="0.000001") as client:
        # A member may still finish within the microsecond; over a few queries some must not.
        bodies = [client.post("/retrieve", json={"query": q, "l": K}).json() for q in questions()[:4]]
        assert any(body["degraded"] for body in bodies)
        for body in bodies:
            timed_out = [m for m in body["members"] if not m["ok"]]
            assert body["reasons"] == [f"{m['name']}: timeout after 1e-06 s" for m in timed_out]
            assert all(m["passages"] == [] for m in timed_out)
            assert {p["id"] for p in body["passages"]} == {p["id"] for m in body["members"] for p in m["passages"]}
    with service_client(config, RAGFOLIO_REQUEST_TIMEOUT_S="0.000001") as client:
        response = client.post("/retrieve", json={"query": questions()[0]})
        assert response.status_code == 504 and "request_timeout_s" in response.json()["error"]


def test_answer_is_503_when_the_llm_is_down_and_retrieve_still_works(tiny_bundle, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, closed_port_url(), warm_up=False)
    with service_client(config) as client:
        response = client.post("/answer", json={"query": questions()[0]})
        assert response.status_code == 503
        assert "the LLM is unavailable" in response.json()["error"] and "Connection refused" in response.json()["error"]
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200
        assert client.get("/readyz").status_code == 200


def test_refuses_to_start_when_a_bundle_file_was_altered(tiny_bundle, fake_llm_url, tmp_path) -> None:
    altered = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, altered)
    with (altered / "corpus.jsonl").open("a") as handle:
        handle.write('{"id": "injected", "title": "x", "text": "y"}\n')
    config = write_config(tmp_path / "serving.yml", altered, fake_llm_url)
    with pytest.raises(BundleIntegrityError, match=r"corpus\.jsonl"):
        with service_client(config):
            pass


def test_refuses_to_start_without_a_bundle(fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tmp_path / "missing", fake_llm_url)
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        with service_client(config):
            pass
