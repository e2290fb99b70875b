"""What the service benchmarks share: start ``bentoml serve``, the questions, the service's processes.

Used by ``bench_service.py`` (load), ``bad_inputs.py`` (malformed requests), ``fuzz_service.py``
(schemathesis from the OpenAPI document), ``fault_service.py`` (an LLM killed under load, a member
forced to time out) and ``soak_service.py`` (10 minutes of mixed traffic). Run those from the repository root; this module is imported, not run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import numpy as np
import psutil
import yaml

from ragfolio.core.llm.process import free_port

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
LLM_SERVER_MODULE = "ragfolio.core.llm.server"  # the LLM process runs `python -m ragfolio.core.llm.server`


def questions(path: Path | None = None) -> list[str]:
    """The questions of ``path`` (default: the sample's, data/02_intermediate/questions.json) in a
    fixed shuffled order."""
    path = path or ROOT / "data" / "02_intermediate" / "questions.json"
    if path.is_file():
        texts = [q["question"] for q in json.loads(path.read_text())]
    else:  # a fresh clone before `kedro run`: the test fixtures' questions
        texts = [json.loads(line)["question"] for f in sorted((ROOT / "tests/fixtures/tiny").glob("*.jsonl"))
                 for line in f.read_text().splitlines() if line.strip()]
    random.Random(0).shuffle(texts)
    return texts


def encoder_specs(bundle: Path, query_engine: str | None = None) -> dict[str, dict[str, Any]]:
    """The encoders of ``bundle``'s manifest (a bundle folder, or packaging's pointer to one), with
    ``query_engine`` set as the service sets it."""
    from ragfolio.core.bundle import resolve_bundle
    from ragfolio.core.retrieval.encoders.kinds import with_query_engine

    specs = json.loads((resolve_bundle(bundle) / "manifest.json").read_text())["scoring"]["encoders"]
    return with_query_engine(specs, query_engine) if query_engine else specs


def encoder_engines(bundle: Path, query_engine: str | None = None) -> dict[str, str]:
    """What encodes each encoder's queries (``torch`` where the spec does not say)."""
    return {name: str(spec.get("query_engine", "torch")) for name, spec in encoder_specs(bundle, query_engine).items()}


def encoder_rates(bundle: Path, queries: list[str], batch: int, n: int = 320,
                  query_engine: str | None = None) -> dict[str, float]:
    """Queries/s of each encoder of ``bundle`` alone, in this process, on ``n`` of ``queries`` in
    batches of ``batch``, and ``together``: one query through every encoder in turn (what the
    service's query path must at least do per query)."""
    from ragfolio.core.retrieval.encoders.kinds import make_encoder

    n = min(n, len(queries))
    rates = {}
    for name, spec in encoder_specs(bundle, query_engine).items():
        encoder = make_encoder({**spec, "show_progress": False})
        encoder.encode_queries(queries[:8])  # the model loads outside the timing
        start = time.perf_counter()
        for at in range(0, n, batch):
            encoder.encode_queries(queries[at : at + batch])
        rates[name] = n / (time.perf_counter() - start)
    rates["together"] = 1 / sum(1 / rate for rate in rates.values())
    return rates


@dataclass(frozen=True)
class Served:
    """A running ``bentoml serve``: its URL, seconds to ready, pid and log file."""

    url: str
    ready_s: float
    pid: int
    log: Path


def serving_config(path: Path, **overrides: Any) -> Path:
    """Write conf/base/serving.yml with ``overrides`` of its ``serving`` keys to ``path``; returns it."""
    raw = yaml.safe_load((ROOT / "conf/base/serving.yml").read_text())
    raw["serving"].update(overrides)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@contextlib.contextmanager
def serve(timeout_s: float, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``bentoml serve`` from the repository root on a free loopback port, with ``env`` added to the
    environment (e.g. ``RAGFOLIO_SERVING_CONFIG``); yields once ``/readyz`` is 200, then stops it."""
    port = free_port()
    home = tempfile.mkdtemp(prefix="bentoml_home_")
    full_env = {**os.environ, "BENTOML_HOME": home, "BENTOML_DO_NOT_TRACK": "true", "DO_NOT_TRACK": "1",
                **(env or {})}
    log = Path(home) / "serve.log"
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("bentoml")), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"bentoml serve exited with {proc.returncode}; see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if time.perf_counter() - start > timeout_s:
                raise RuntimeError(f"not ready after {timeout_s} s; see {log}")
            time.sleep(0.1)
        yield Served(url, time.perf_counter() - start, proc.pid, log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # its own process group: the server, its worker, the LLM
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def tiny_service(timeout_s: float) -> Iterator[Served]:
    """``bentoml serve`` on the service tests' tiny bundle (``tests/serving/tiny_bundle.py``: BM25
    members, no model files) with their fake OpenAI-compatible LLM answering (``tests/serving/fake_llm.py``),
    the other settings conf/base/serving.yml's: the service's code paths in seconds, with no pipeline run."""
    sys.path.insert(0, str(ROOT / "tests" / "serving"))
    from fake_llm import FakeLLM
    from tiny_bundle import write_tiny_bundle

    llm = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    threading.Thread(target=llm.serve_forever, name="fake-llm", daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="ragfolio_tiny_") as tmp:
        write_tiny_bundle(Path(tmp) / "bundle")
        openai = {"base_url": f"http://127.0.0.1:{llm.server_address[1]}/v1", "model": "fake", "api": "completions",
                  "timeout_s": 10, "max_retries": 0}
        config = serving_config(Path(tmp) / "serving.yml", bundle=str(Path(tmp) / "bundle"),
                                llm={"kind": "openai", "openai": openai})
        try:
            with serve(timeout_s, {"RAGFOLIO_SERVING_CONFIG": str(config)}) as served:
                yield served
        finally:
            llm.shutdown()


def wait_for_llm(url: str, query: str, timeout_s: float) -> float:
    """Seconds until ``/answer`` first answers 200 (the LLM process loads after the service is ready)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.post(f"{url}/answer", json={"query": query}, timeout=timeout_s).status_code == 200:
                return time.perf_counter() - start
        time.sleep(1.0)
    raise RuntimeError(f"/answer did not answer 200 within {timeout_s} s")


def role(proc: psutil.Process) -> str:
    """What a process of the service is: ``bentoml serve``, its worker, or the LLM server."""
    cmd = " ".join(proc.cmdline())
    return ("LLM server" if LLM_SERVER_MODULE in cmd else "worker" if "worker" in cmd or "_bentoml_impl" in cmd
            else "bentoml serve" if "bentoml" in cmd else proc.name())


def service_processes(pid: int) -> list[psutil.Process]:
    """``bentoml serve`` (``pid``) and all its descendants (worker, LLM server)."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def rss_by_role(pid: int) -> dict[str, int]:
    """Resident bytes of each of the service's processes, keyed by role (summed per role)."""
    out: dict[str, int] = {}
    for proc in service_processes(pid):
        with contextlib.suppress(psutil.Error):
            name = role(proc)
            out[name] = out.get(name, 0) + proc.memory_info().rss
    return out


def llm_server(pid: int) -> psutil.Process | None:
    """The LLM server process under ``bentoml serve`` (``pid``), if one runs."""
    for proc in service_processes(pid):
        with contextlib.suppress(psutil.Error):
            if LLM_SERVER_MODULE in " ".join(proc.cmdline()):
                return proc
    return None


def memory(pid: int | None) -> str:
    """Resident memory of a process and its descendants, one entry per process."""
    if pid is None:
        return "not measured (`--url`)"
    return ", ".join(f"{name} {rss / 2**20:.0f} MiB" for name, rss in rss_by_role(pid).items())


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@dataclass(frozen=True)
class Sample:
    """One request's outcome: sent ``t_s`` seconds into the run; status 0: the connection failed.

    ``routed`` and ``left_out`` name the members a 200 routed to and the ones it left out (failed
    or timed out), over all queries of a batch.
    """

    t_s: float
    endpoint: str
    status: int
    latency_ms: float
    degraded: bool = False
    routed: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()
    kind: str = ""


def _members(body: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    results = body.get("results", [body])
    members = [m for r in results if isinstance(r, dict) for m in r.get("members", [])]
    routed = tuple(dict.fromkeys(m["name"] for m in members))
    return routed, tuple(dict.fromkeys(m["name"] for m in members if not m["ok"]))


async def send_json(client: httpx.AsyncClient, endpoint: str, payload: Any, t0: float) -> Sample:
    """POST ``payload`` as JSON to ``endpoint``; the outcome, timed from ``t0`` (``time.perf_counter``)."""
    sent = time.perf_counter()
    try:
        response = await client.post(endpoint, json=payload)
        status = response.status_code
        body = response.json() if status == 200 else {}
    except (httpx.HTTPError, ValueError):
        status, body = 0, {}
    routed, left_out = _members(body) if isinstance(body, dict) else ((), ())
    return Sample(sent - t0, endpoint, status, 1000 * (time.perf_counter() - sent),
                  bool(body.get("degraded")) if isinstance(body, dict) else False, routed, left_out)


async def keep_sending(client: httpx.AsyncClient, endpoint: str, payloads: Iterator[Any], until: float, t0: float,
                       out: list[Sample], pause_s: float = 0.0) -> None:
    """Send ``payloads`` to ``endpoint`` one after another until ``until`` (``time.perf_counter``)."""
    while time.perf_counter() < until:
        out.append(await send_json(client, endpoint, next(payloads), t0))
        if pause_s:
            await asyncio.sleep(pause_s)


def cycle_queries(queries: list[str], offset: int = 0, batch: int = 0) -> Iterator[dict[str, Any]]:
    """``{"query": ...}`` (or ``{"queries": [...]}`` of ``batch``) over ``queries``, cycled from ``offset``."""
    i = offset
    while True:
        if batch:
            yield {"queries": [queries[(i + j) % len(queries)] for j in range(batch)]}
            i += batch
        else:
            yield {"query": queries[i % len(queries)]}
            i += 1


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nan when empty)."""
    return float(np.percentile(values, q)) if values else float("nan")


def service_parser(description: str) -> argparse.ArgumentParser:
    """The options of a script that sends requests to a service: ``--url`` (a running one, loopback
    only) or ``--tiny`` (the service tests' tiny bundle with a fake LLM), ``--ready-timeout-s``, ``--out``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", help="a running service (loopback only); default: start `bentoml serve`")
    parser.add_argument("--tiny", action="store_true",
                        help="serve the service tests' tiny bundle with a fake LLM (no pipeline run needed)")
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)
    parser.add_argument("--out", type=Path, help="write the markdown report here (and print it)")
    return parser


def service_args(parser: argparse.ArgumentParser, what: str) -> argparse.Namespace:
    """``parser``'s arguments, refusing a ``--url`` off loopback (``what``: what the script does to it)."""
    args = parser.parse_args()
    if args.url and urlparse(args.url).hostname not in LOOPBACK:
        parser.error(f"--url {args.url}: only loopback addresses ({sorted(LOOPBACK)}) are {what}")
    return args


def served_target(args: argparse.Namespace) -> str:
    """What the script ran against, for its report."""
    return ("a running service" if args.url else
            "`bentoml serve` on the service tests' tiny bundle with a fake LLM" if args.tiny else
            "`bentoml serve` with the default settings and bundle")
