"""Fixtures of the service tests: a tiny bundle, a fake OpenAI-compatible LLM (:mod:`fake_llm`), service
clients and ``bentoml serve`` on a free port."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml
from fake_llm import FakeLLM
from tiny_bundle import write_tiny_bundle

from ragfolio.core.llm.process import free_port

ROOT = Path(__file__).resolve().parents[2]
BENTOML = str(Path(sys.executable).with_name("bentoml"))


@pytest.fixture(scope="session", autouse=True)
def prometheus_dir() -> None:
    """BentoML's /metrics reads per-process files from ``PROMETHEUS_MULTIPROC_DIR`` (``bentoml serve``
    sets it itself); tests/conftest.py sets it for the whole session, before prometheus_client loads."""
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR"), "tests/conftest.py sets PROMETHEUS_MULTIPROC_DIR"


@pytest.fixture(scope="session")
def fake_llm_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "bundle"
    write_tiny_bundle(path)
    return path


def serve_env(config: Path, home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "RAGFOLIO_SERVING_CONFIG": str(config), "BENTOML_HOME": str(home),
            "BENTOML_DO_NOT_TRACK": "true", "DO_NOT_TRACK": "1", **extra}


@contextlib.contextmanager
def bentoml_serve(config: Path, home: Path, timeout_s: float = 120.0, **env: str) -> Iterator[str]:
    """``bentoml serve`` from the project root; yields its URL once /readyz answers 200, then stops it."""
    port = free_port()
    log = home / f"serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [BENTOML, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT,
            env=serve_env(config, home, **env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"bentoml serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"bentoml serve not ready after {timeout_s} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # its own process group: the server and its workers
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def closed_port_url() -> str:
    """An OpenAI base URL on a loopback port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}/v1"


def write_config(path: Path, bundle: Path, llm_url: str, **overrides: object) -> Path:
    """A serving.yml for ``bundle`` answering with the OpenAI-compatible endpoint ``llm_url``."""
    serving = {
        "bundle": str(bundle), "max_num_docs": 10, "warm_up": True,
        "llm": {"kind": "openai", "openai": {"base_url": llm_url, "model": "fake", "api": "completions",
                                             "timeout_s": 10, "max_retries": 0}},
        **overrides,
    }
    path.write_text(yaml.safe_dump({"serving": serving}))
    return path


@functools.cache
def asgi_app() -> object:
    """``RagfolioService.to_asgi()``, built once: a second app would register its Prometheus
    metrics again. Each TestClient start runs the lifespan, which makes a new service instance
    that reads the settings then."""
    from ragfolio.serving.service import RagfolioService

    return RagfolioService.to_asgi()


@contextlib.contextmanager
def service_client(config: Path, **env: str) -> Iterator[object]:
    """A starlette TestClient on the service with the settings in ``config`` and ``env``."""
    from starlette.testclient import TestClient

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGFOLIO_SERVING_CONFIG", str(config))
        for name, value in env.items():
            mp.setenv(name, value)
        with TestClient(asgi_app()) as client:
            yield client


@pytest.fixture(scope="module")
def client(tiny_bundle: Path, fake_llm_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    # abstention off: a stream then sends the answer as the reader writes it (tests/serving/test_abstention.py
    # serves with it on)
    config = write_config(tmp_path_factory.mktemp("conf") / "serving.yml", tiny_bundle, fake_llm_url,
                          answerer={"abstain": "off"})
    with service_client(config) as c:
        yield c


@pytest.fixture(scope="session")
def tiny_llm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random causal LM folder (see tiny_llm.py)."""
    from tiny_llm import write_tiny_llm

    return write_tiny_llm(tmp_path_factory.mktemp("llm") / "tiny-llm")


def tiny_llm_config(model: Path) -> dict:
    """``llm`` settings serving the tiny model in process (plain prompts, as the embedded model)."""
    return {"kind": "transformers", "transformers": {"model_path": str(model), "chat_format": "plain",
                                                     "n_ctx": 4096, "n_threads": 1}}
