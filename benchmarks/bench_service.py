"""Load test of the HTTP service over loopback: /retrieve alone and at 16 in flight, /batch_retrieve
of 64 queries, /answer alone and at 4 in flight.

Starts ``bentoml serve`` from the repository root on a free 127.0.0.1 port with the default
settings (conf/base/serving.yml: the pipeline's bundle, batched retrieval, the embedded
Gemma-3-270M in its own supervised process) and measures its time to ready (process start to
``/readyz`` 200), or targets an already running service with ``--url`` (loopback addresses only).
Then, bounded in count and in time, one phase after another:

* ``--lone-requests`` (100) ``POST /retrieve``, one at a time (a lone query's latency);
* ``--retrieve-requests`` (500) ``POST /retrieve`` with ``--retrieve-concurrency`` (16) in flight
  (both at the bundle's default ``l``, or once per ``--retrieve-l``);
* ``--batch-requests`` (5) ``POST /batch_retrieve`` of ``--batch-size`` (64) queries, one at a time;
* ``--answer-lone-requests`` (5) ``POST /answer`` one at a time and ``--answer-requests`` (20) with
  ``--answer-concurrency`` (4) in flight.

The phases start once the LLM has answered a first ``/answer`` (its process loads the model after
the service is ready, and that load would compete with the first phase for the cores); the time
to that first answer is reported.

After the phases, with the service idle, the bundle's encoders run alone in the benchmark's own
process on batches of 16 and of 64 queries: their queries/s through both encoders is the floor of
the query path, and the report gives the share of it that ``/retrieve`` at 16 in flight reached.
``--bundle`` serves another bundle (a run's), ``--questions`` draws queries from its questions;
with no ``/answer`` phase (``--answer-lone-requests 0 --answer-requests 0``) the LLM is an
unreachable endpoint, so no LLM process loads and shares the cores.

Queries are the sample's questions (data/02_intermediate/questions.json, 300 of them) in a fixed
shuffled order, cycled, each phase from its own offset. Per-query parts are memoised per batch of
queries (the last 256 batches), and concurrent requests form batches of varying make-up, so these
miss as new queries would. A phase stops at ``--max-phase-s`` with the requests not sent counted
as not run. Reported per phase: throughput, p50/p95/p99 latency, errors (any non-200 or failed
connection), 5xx, and responses with ``degraded: true``; and the resident memory of each of the
service's processes at the end (``bentoml serve``'s, its worker's, the LLM server's).

Run from the repository root (client and server share the machine's cores)::

    .venv/bin/python benchmarks/bench_service.py --out docs/bench_service.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx
import numpy as np
from service_harness import (
    LOOPBACK,
    encoder_engines,
    encoder_rates,
    load_average,
    machine,
    memory,
    questions,
    serve,
    serving_config,
    wait_for_llm,
)


@dataclass
class Phase:
    """Outcome of one endpoint's load (``batch``: queries per request, 0 for single-query endpoints)."""

    endpoint: str
    requests: int
    concurrency: int
    batch: int = 0
    offset: int = 0
    l: int | None = None  # noqa: E741 - members per query asked for (None: the bundle's default_l)
    latencies_ms: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # 0: the connection failed
    degraded: int = 0
    wall_s: float = 0.0

    def row(self) -> str:
        done = len(self.statuses)
        errors = sum(s != 200 for s in self.statuses)
        server_errors = sum(s >= 500 for s in self.statuses)
        p50, p95, p99 = np.percentile(self.latencies_ms, [50, 95, 99]) if self.latencies_ms else (np.nan,) * 3
        name = f"`{self.endpoint}` ({self.batch} queries)" if self.batch else f"`{self.endpoint}`"
        name += "" if self.l is None else f" l = {self.l}"
        return (f"| {name} | {done}/{self.requests} | {self.concurrency} | {done / self.wall_s:.2f} | "
                f"{p50:.0f} | {p95:.0f} | {p99:.0f} | {errors} | {server_errors} | {self.degraded} |")

    def payload(self, i: int, queries: list[str]) -> dict:
        k = self.offset + i * max(self.batch, 1)
        if self.batch:
            return {"queries": [queries[(k + j) % len(queries)] for j in range(self.batch)]}
        return {"query": queries[k % len(queries)], **({} if self.l is None else {"l": self.l})}


async def run_phase(url: str, phase: Phase, queries: list[str], max_s: float) -> Phase:
    """Send ``phase.requests`` requests with ``phase.concurrency`` in flight, stopping at ``max_s``."""
    pending = iter(range(phase.requests))
    start = time.perf_counter()

    async def worker(client: httpx.AsyncClient) -> None:
        for i in pending:
            if time.perf_counter() - start > max_s:
                return
            sent = time.perf_counter()
            try:
                response = await client.post(phase.endpoint, json=phase.payload(i, queries))
                status = response.status_code
                if status == 200 and response.json().get("degraded"):
                    phase.degraded += 1
            except httpx.HTTPError:
                status = 0
            phase.latencies_ms.append(1000 * (time.perf_counter() - sent))
            phase.statuses.append(status)

    limits = httpx.Limits(max_connections=phase.concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=max_s, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(phase.concurrency)))
    phase.wall_s = time.perf_counter() - start
    return phase


def report(phases: list[Phase], ready_s: float | None, url: str, portfolio: dict, loads: tuple[str, str],
           extra: list[str]) -> str:
    command = "python " + shlex.join(sys.argv)
    ready = f"{ready_s:.1f} s (process start to `/readyz` 200, warm-up included)" if ready_s is not None else (
        "not measured (`--url` targeted a running service)")
    lines = [
        "# Service load benchmark", "",
        f"Command: `{command}` (from the repository root).", "",
        f"- Machine: {machine()}; client and server share it. Load average (1/5/15 min) before: {loads[0]}; "
        f"after: {loads[1]}.",
        f"- Service: `bentoml serve` at {url}, one worker; bundle `{portfolio.get('name')}` version "
        f"`{portfolio.get('version')}` (k={portfolio.get('k')}, default l={portfolio.get('default_l')}, "
        f"num_docs={portfolio.get('num_docs')}, {portfolio.get('n_passages')} passages); LLM "
        f"`{portfolio.get('limits', {}).get('llm')}` ({portfolio.get('limits', {}).get('llm_process')}); batching "
        f"`{portfolio.get('limits', {}).get('batching')}`.",
        f"- Time to ready: {ready}.", *extra, "",
        "| endpoint | done/asked | concurrency | throughput (req/s) | p50 (ms) | p95 (ms) | p99 (ms) | errors | 5xx | degraded |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[p.row() for p in phases], "",
        "Errors count every response other than 200 and every failed connection; degraded counts 200 responses in "
        "which a member failed or timed out. Latency is per request, from send to the full response.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running service (loopback only); default: start `bentoml serve`")
    parser.add_argument("--lone-requests", type=int, default=100)
    parser.add_argument("--retrieve-requests", type=int, default=500)
    parser.add_argument("--retrieve-concurrency", type=int, default=16)
    parser.add_argument("--batch-requests", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--answer-lone-requests", type=int, default=5)
    parser.add_argument("--answer-requests", type=int, default=20)
    parser.add_argument("--answer-concurrency", type=int, default=4)
    parser.add_argument("--retrieve-l", type=int, nargs="+", default=[None],
                        help="the l of the /retrieve requests, one phase pair each (default: the bundle's default_l)")
    parser.add_argument("--answer-l", type=int, nargs="+", default=[None],
                        help="the l of the /answer requests, one phase pair each (default: the bundle's default_l)")
    parser.add_argument("--llm-timeout-s", type=float, default=600.0, help="longest wait for the LLM to answer")
    parser.add_argument("--max-phase-s", type=float, default=900.0, help="stop sending after this many seconds")
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)
    parser.add_argument("--bundle", type=Path, help="serve this bundle (default: conf/base/serving.yml's)")
    parser.add_argument("--questions", type=Path, help="questions.json to draw queries from (default: the sample's)")
    parser.add_argument("--query-engine", choices=["torch", "onnxruntime"],
                        help="serving.query_engine for the service and the encoders' own rates (default: the bundle's)")
    parser.add_argument("--out", type=Path, help="write the markdown report here (and print it)")
    args = parser.parse_args()
    if args.url and urlparse(args.url).hostname not in LOOPBACK:
        parser.error(f"--url {args.url}: only loopback addresses ({sorted(LOOPBACK)}) are benchmarked")

    queries = questions(args.questions)
    loads = [load_average()]
    extra: list[str] = []
    with contextlib.ExitStack() as stack:
        pid: int | None = None
        if args.url:
            url, ready_s = args.url.rstrip("/"), None
        else:
            env, overrides = {}, {}
            if args.bundle:
                overrides["bundle"] = str(args.bundle.resolve())
            if args.query_engine:
                overrides["query_engine"] = args.query_engine
            if not (args.answer_lone_requests or args.answer_requests):  # retrieval only: no LLM process
                overrides["llm"] = {"kind": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "none"}}
            if overrides:
                config = serving_config(Path(tempfile.mkdtemp()) / "serving.yml", **overrides)
                env["RAGFOLIO_SERVING_CONFIG"] = str(config)
            served = stack.enter_context(serve(args.ready_timeout_s, env))
            url, ready_s, pid = served.url, served.ready_s, served.pid
            print(f"ready after {ready_s:.1f} s at {url}", flush=True)
        portfolio = httpx.get(f"{url}/portfolio", timeout=30).json()
        answers = bool(args.answer_lone_requests or args.answer_requests)
        if answers:  # the LLM process loads its model after the service is ready: measure without that
            waited = wait_for_llm(url, queries[-1], args.llm_timeout_s)
            extra.append(f"- The LLM first answered {waited:.1f} s after the service was ready (its process loads "
                         "the model meanwhile); the phases started then.")
        retrieval = [phase for l in args.retrieve_l for phase in (  # noqa: E741
            Phase("/retrieve", args.lone_requests, 1, offset=0, l=l),
            Phase("/retrieve", args.retrieve_requests, args.retrieve_concurrency, offset=100, l=l))]
        retrieval.append(Phase("/batch_retrieve", args.batch_requests, 1, batch=args.batch_size, offset=7))
        answering = [phase for l in args.answer_l for phase in (  # noqa: E741
            Phase("/answer", args.answer_lone_requests, 1, offset=11, l=l),
            Phase("/answer", args.answer_requests, args.answer_concurrency, offset=23, l=l))]
        phases = []
        for phase in retrieval:
            phases.append(asyncio.run(run_phase(url, phase, queries, args.max_phase_s)))
            print(phase.row(), flush=True)
        if answers:
            for phase in answering:
                phases.append(asyncio.run(run_phase(url, phase, queries, args.max_phase_s)))
                print(phase.row(), flush=True)
        extra.append(f"- Resident memory at the end: {memory(pid)}.")
        bundle_dir = args.bundle or Path("data/06_models/served.json")
        rates = {batch: encoder_rates(bundle_dir, queries[200:], batch, query_engine=args.query_engine)
                 for batch in (args.retrieve_concurrency, 64)}
        extra.append(f"- Query engine: {args.query_engine or 'as the bundle says'} "
                     f"({', '.join(f'{n}: {e}' for n, e in encoder_engines(bundle_dir, args.query_engine).items())}).")
        busy = phases[1]
        service_rate = len(busy.statuses) / busy.wall_s if busy.wall_s else float("nan")
        for batch, rate in rates.items():
            each = ", ".join(f"{name} {value:.0f}" for name, value in rate.items() if name != "together")
            extra.append(f"- The encoders alone, in the client's process after the phases (service idle), batches of "
                         f"{batch}: {rate['together']:.1f} queries/s through both ({each}); `/retrieve` at "
                         f"{args.retrieve_concurrency} in flight reached {100 * service_rate / rate['together']:.0f}% of it.")
    loads.append(load_average())
    text = report(phases, ready_s, url, portfolio, (loads[0], loads[1]), extra)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
