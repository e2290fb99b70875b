"""The newcomer's path with a living corpus, over HTTP on a real ``bentoml serve``: serve a bundle,
add a document, ask about it through chat, kill the server (SIGKILL), serve again, ask again."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from conftest import BENTOML, ROOT, serve_env, write_config
from tiny_bundle import write_tiny_bundle

from ragfolio.core.llm.process import free_port

pytestmark = pytest.mark.slow

DOC = {"id": "kb-7", "title": "Brindlewood dress code",
       "text": "Brindlewood Analytics has no dress code; staff wear what they like, Quillfeather said.",
       "metadata": {"source": "handbook"}}
CHAT = {"messages": [{"role": "user", "content": "What is the Brindlewood dress code?"}], "l": 1}


def _start(config: Path, home: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([BENTOML, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT,
                            env=serve_env(config, home), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(480):
        if proc.poll() is not None:
            pytest.fail(f"bentoml serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        subprocess.run(["sleep", "0.25"], check=True)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("bentoml serve not ready in 120 s")


def _cited(url: str) -> list[str]:
    reply = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=60)
    assert reply.status_code == 200, reply.text
    return [c["id"] for c in reply.json()["citations"]]


def test_add_a_document_ask_through_chat_kill_serve_again_ask_again(tmp_path, fake_llm_url) -> None:
    write_tiny_bundle(tmp_path / "bundle")
    config = write_config(tmp_path / "serving.yml", tmp_path / "bundle", fake_llm_url)
    proc, url = _start(config, tmp_path)
    try:
        assert DOC["id"] not in _cited(url)
        added = httpx.post(f"{url}/documents", json={"documents": [DOC]}, timeout=60)
        assert added.status_code == 200 and added.json()["added"] == [DOC["id"]]
        assert DOC["id"] in _cited(url)  # searchable by the next request
        filtered = httpx.post(f"{url}/retrieve", json={"query": CHAT["messages"][0]["content"],
                                                        "filter": {"source": "handbook"}}, timeout=60).json()
        assert [p["id"] for p in filtered["passages"]] == [DOC["id"]]  # the one passage that matches
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no shutdown hook runs: only the log keeps the document
        proc.wait()
    proc, url = _start(config, tmp_path)
    try:
        assert DOC["id"] in _cited(url)
        assert httpx.get(f"{url}/documents/{DOC['id']}", timeout=10).json()["metadata"] == DOC["metadata"]
        assert httpx.get(f"{url}/portfolio", timeout=10).json()["live"]["added"] == 1
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
