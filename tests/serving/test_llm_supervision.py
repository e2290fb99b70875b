"""The service with its LLM in a supervised process: readiness and /retrieve never wait on it, a
killed LLM process turns /answer into a 503 while /retrieve serves, and the service recovers."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil
from conftest import service_client, tiny_llm_config, write_config
from tiny_bundle import questions

FAST = {"health_interval_s": 0.2, "unhealthy_after": 2, "backoff_s": 0.2}


def llm_servers() -> list[psutil.Process]:
    """The LLM server processes this test process started."""
    return [p for p in psutil.Process().children(recursive=True)
            if "ragfolio.core.llm.server" in " ".join(p.cmdline())]


def eventually(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_readiness_and_retrieval_do_not_wait_for_the_llm(tiny_bundle, tmp_path) -> None:
    """An LLM that never comes up (its model is missing): the service is ready and retrieves."""
    llm = {"kind": "transformers", "transformers": {"model_path": str(tmp_path / "no-model"), "chat_format": "plain"}}
    config = write_config(tmp_path / "serving.yml", tiny_bundle, "http://unused", llm=llm, llm_process=FAST)
    with service_client(config) as client:
        assert client.get("/readyz").status_code == 200
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200
        response = client.post("/answer", json={"query": questions()[0]})
        assert response.status_code == 503, response.text
        assert response.json()["error"] == "the LLM is unavailable" and "no-model" not in response.text
        assert client.get("/portfolio").json()["limits"]["llm_process"] == "subprocess"
    assert eventually(lambda: not llm_servers(), 10)


def test_a_killed_llm_process_gives_503_on_answer_while_retrieve_serves_and_recovers(
    tiny_bundle, tiny_llm, tmp_path
) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, "http://unused", llm=tiny_llm_config(tiny_llm),
                          llm_process=FAST)
    query = {"query": questions()[0]}
    with service_client(config) as client:
        assert eventually(lambda: client.post("/answer", json=query).status_code == 200, 120)
        (server,) = llm_servers()
        server.kill()
        server.wait(10)
        down = client.post("/answer", json=query)
        assert down.status_code == 503 and down.json()["hint"] == "/retrieve still works", down.text
        for q in questions()[:4]:
            assert client.post("/retrieve", json={"query": q}).status_code == 200
        assert eventually(lambda: client.post("/answer", json=query).status_code == 200, 120)
        (restarted,) = llm_servers()
        assert restarted.pid != server.pid
        assert 'ragfolio_llm_errors_total{error="unavailable"}' in client.get("/metrics").text
    assert eventually(lambda: not llm_servers(), 10)  # stopped with the service
