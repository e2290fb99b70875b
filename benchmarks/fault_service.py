"""Faults under load: the LLM process killed during a load run, and a member forced to time out.

**(a) The LLM process killed.** Starts ``bentoml serve`` from the repository root on a free
loopback port with the default settings, waits for the LLM's first answer, then for
``--duration-s`` (180) sends ``/retrieve`` from ``--retrieve-clients`` (8) clients and ``/answer``
from ``--answer-clients`` (2), and at ``--kill-at-s`` (30) kills the LLM server process with
SIGKILL (found in ``bentoml serve``'s process tree with psutil, as a native crash would end it).
Reported per window (before the kill; down: from the kill to the first ``/answer`` 200 after it;
after): ``/retrieve`` requests, errors, 5xx and latency, ``/answer`` statuses; and the seconds
from the kill to the supervisor's new process and to that first 200 (the recovery).

**(b) A member forced to time out.** Starts the service again with ``fault_injection`` (the member
the router chose most often in (a), or ``--fault-member``, sleeps ``--fault-delay-s`` (2) per run)
and ``member_timeout_s`` = ``--member-timeout-s`` (1), and for ``--fault-duration-s`` (60) sends
``/retrieve`` from 8 clients, ``/batch_retrieve`` of 16 queries from one and ``/answer`` from one.
Reported: statuses (no 5xx), the responses with ``degraded: true``, and how many of the responses
routed to the member left it out.

Exits with status 1 when a check fails: an error on ``/retrieve`` in (a), no 503 on ``/answer``
while the LLM was down, no recovery, or in (b) a 5xx or a response routed to the member that kept it.
Run from the repository root::

    .venv/bin/python benchmarks/fault_service.py --out docs/results_serving/faults.md --json docs/results_serving/faults.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from service_harness import (
    Sample,
    cycle_queries,
    keep_sending,
    llm_server,
    load_average,
    machine,
    percentile,
    questions,
    serve,
    serving_config,
    wait_for_llm,
)


def window(samples: list[Sample], endpoint: str, start: float, end: float) -> dict[str, Any]:
    """Counts and latency of ``endpoint``'s requests sent in ``[start, end)`` seconds."""
    chosen = [s for s in samples if s.endpoint == endpoint and start <= s.t_s < end]
    latencies = [s.latency_ms for s in chosen]
    return {
        "requests": len(chosen), "statuses": dict(sorted(Counter(s.status for s in chosen).items())),
        "errors": sum(s.status != 200 for s in chosen), "5xx": sum(s.status >= 500 for s in chosen),
        "degraded": sum(s.degraded for s in chosen),
        "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1),
    }


def llm_state(pid: int) -> tuple[int | None, bool]:
    """The LLM server's pid (None: none runs) and whether its ``GET /health`` says ok (model loaded)."""
    proc = llm_server(pid)
    if proc is None:
        return None, False
    try:
        cmd = proc.cmdline()
        port = cmd[cmd.index("--port") + 1]
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0)
        return proc.pid, health.status_code == 200 and health.json().get("status") == "ok"
    except (ValueError, IndexError, httpx.HTTPError, psutil.Error):
        return proc.pid, False


async def watch_llm(pid: int, until: float, t0: float, seen: list[tuple[float, int | None, bool]]) -> None:
    """Record ``(seconds, LLM server pid, ready)`` whenever the LLM server process or its readiness changes."""
    last: tuple[int | None, bool] | None = None
    while time.perf_counter() < until:
        state = await asyncio.to_thread(llm_state, pid)
        if state != last:
            seen.append((round(time.perf_counter() - t0, 2), *state))
            last = state
        await asyncio.sleep(0.2)


async def kill_llm(pid: int, at: float) -> tuple[float, int]:
    """SIGKILL the LLM server at ``at`` (``time.perf_counter``); returns when and its pid."""
    await asyncio.sleep(max(0.0, at - time.perf_counter()))
    proc = llm_server(pid)
    if proc is None:
        raise RuntimeError("no LLM server process under bentoml serve to kill")
    proc.send_signal(signal.SIGKILL)
    return time.perf_counter(), proc.pid


async def llm_killed(url: str, pid: int, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    samples: list[Sample] = []
    pids: list[tuple[float, int | None, bool]] = []
    t0 = time.perf_counter()
    until = t0 + args.duration_s
    limits = httpx.Limits(max_connections=args.retrieve_clients + args.answer_clients + 2)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        retrieve = [keep_sending(client, "/retrieve", cycle_queries(queries, 40 * i), until, t0, samples)
                    for i in range(args.retrieve_clients)]
        answer = [keep_sending(client, "/answer", cycle_queries(queries, 1000 + 7 * i), until, t0, samples,
                               pause_s=0.5) for i in range(args.answer_clients)]
        killer = asyncio.create_task(kill_llm(pid, t0 + args.kill_at_s))
        await asyncio.gather(*retrieve, *answer, watch_llm(pid, until, t0, pids))
        killed_at, killed_pid = await killer
    kill_s = killed_at - t0
    after_kill = sorted((s for s in samples if s.endpoint == "/answer" and s.t_s >= kill_s), key=lambda s: s.t_s)
    first_ok = next((s for s in after_kill if s.status == 200), None)
    recovered_s = first_ok.t_s + first_ok.latency_ms / 1000 if first_ok else None  # when its answer arrived
    back_s = first_ok.t_s if first_ok else args.duration_s  # requests sent from here on found the LLM back
    restarted = next((t for t, p, _ in pids if t >= kill_s and p is not None and p != killed_pid), None)
    ready = next((t for t, p, ok in pids if t >= kill_s and p != killed_pid and ok), None)
    return {
        "kill_at_s": round(kill_s, 2), "killed_pid": killed_pid, "llm_states": pids,
        "new_process_after_s": round(restarted - kill_s, 2) if restarted is not None else None,
        "new_process_ready_after_s": round(ready - kill_s, 2) if ready is not None else None,
        "recovered_after_s": round(recovered_s - kill_s, 2) if recovered_s is not None else None,
        "windows": {
            name: {ep: window(samples, ep, start, end) for ep in ("/retrieve", "/answer")}
            for name, start, end in (("before", 0.0, kill_s), ("down", kill_s, back_s),
                                     ("after", back_s, args.duration_s + 1e9))
        },
        "retrieve_total": window(samples, "/retrieve", 0.0, 1e9),
        "answer_total": window(samples, "/answer", 0.0, 1e9),
        "routed": Counter(m for s in samples if s.endpoint == "/retrieve" for m in s.routed).most_common(),
    }


async def member_timeout(url: str, queries: list[str], member: str, duration_s: float) -> dict[str, Any]:
    samples: list[Sample] = []
    t0 = time.perf_counter()
    until = t0 + duration_s
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=httpx.Limits(max_connections=12)) as client:
        await asyncio.gather(
            *(keep_sending(client, "/retrieve", cycle_queries(queries, 40 * i), until, t0, samples) for i in range(8)),
            keep_sending(client, "/batch_retrieve", cycle_queries(queries, 500, batch=16), until, t0, samples),
            keep_sending(client, "/answer", cycle_queries(queries, 900), until, t0, samples),
        )
    out: dict[str, Any] = {}
    for endpoint in ("/retrieve", "/batch_retrieve", "/answer"):
        chosen = [s for s in samples if s.endpoint == endpoint]
        routed = [s for s in chosen if member in s.routed]
        out[endpoint] = {**window(samples, endpoint, 0.0, 1e9),
                         "routed_to_member": len(routed),
                         "member_left_out": sum(member in s.left_out for s in routed),
                         "other_member_left_out": sum(any(m != member for m in s.left_out) for s in chosen)}
    return out


def fmt_window(w: dict[str, Any]) -> str:
    statuses = ", ".join(f"{n} x {s}" for s, n in w["statuses"].items()) or "none"
    return f"{w['requests']} ({statuses}); p50 {w['p50_ms']:.0f} ms, p99 {w['p99_ms']:.0f} ms"


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    a, b = result["llm_killed"], result["member_timeout"]
    lines = [
        "# Faults under load", "",
        f"Command: `python {shlex.join(sys.argv)}` (from the repository root).", "",
        f"- Machine: {machine()}; client and server share it. Load average before: {result['load_before']}; "
        f"after: {result['load_after']}.",
        f"- Service: `bentoml serve`, default settings (conf/base/serving.yml), bundle `{result['bundle']}`.", "",
        "## (a) The LLM process killed during a load run", "",
        f"{args.retrieve_clients} clients sending `/retrieve` and {args.answer_clients} sending `/answer` (0.5 s "
        f"apart) for {args.duration_s:.0f} s, after the LLM's first answer ({result['llm_first_answer_s']:.1f} s "
        f"after ready); the LLM server (pid {a['killed_pid']}) killed with SIGKILL at {a['kill_at_s']:.1f} s.", "",
        f"- The supervisor's new LLM process was running {a['new_process_after_s']} s after the kill and ready "
        f"(its `/health` ok: model loaded) {a['new_process_ready_after_s']} s after it; the first `/answer` sent "
        f"after that got a 200, which arrived {a['recovered_after_s']} s after the kill (the answer itself "
        "takes long while 8 clients keep both cores busy with retrieval).",
        "", "| window | `/retrieve`: requests (statuses); latency | `/answer`: requests (statuses); latency |",
        "|---|---|---|",
        *[f"| {name} | {fmt_window(w['/retrieve'])} | {fmt_window(w['/answer'])} |" for name, w in a["windows"].items()],
        "", "Windows by the time a request was sent: before the kill; down (from the kill to the sending of the "
        "first `/answer` that got a 200); after.", "",
        f"`/retrieve` over the whole run: {a['retrieve_total']['requests']} requests, {a['retrieve_total']['errors']} "
        f"errors, {a['retrieve_total']['5xx']} 5xx.", "",
        "## (b) A member forced to time out", "",
        f"`fault_injection: {{member: {result['fault_member']}, delay_s: {args.fault_delay_s}}}` and "
        f"`member_timeout_s: {args.member_timeout_s}`; 8 clients on `/retrieve`, one on `/batch_retrieve` (16 "
        f"queries), one on `/answer`, for {args.fault_duration_s:.0f} s.", "",
        "| endpoint | requests (statuses) | 5xx | degraded | routed to the member | member left out | "
        "another member left out | p50 | p99 |",
        "|---|---|---|---|---|---|---|---|---|",
        *[f"| `{ep}` | {w['requests']} ({', '.join(f'{n} x {s}' for s, n in w['statuses'].items())}) | {w['5xx']} | "
          f"{w['degraded']} | {w['routed_to_member']} | {w['member_left_out']} | {w['other_member_left_out']} | "
          f"{w['p50_ms']:.0f} ms | {w['p99_ms']:.0f} ms |" for ep, w in b.items()],
        "", "Checks: " + ("all passed." if not result["failures"] else "; ".join(result["failures"])), "",
    ]
    return "\n".join(lines)


def checks(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    failures = []
    if a["retrieve_total"]["errors"]:
        failures.append(f"(a) /retrieve had {a['retrieve_total']['errors']} errors")
    if not a["windows"]["down"]["/answer"]["statuses"].get(503):
        failures.append("(a) no /answer 503 while the LLM was down")
    if a["recovered_after_s"] is None:
        failures.append("(a) /answer did not recover")
    for endpoint, w in b.items():
        if w["5xx"]:
            failures.append(f"(b) {endpoint} had {w['5xx']} 5xx")
        if w["member_left_out"] < w["routed_to_member"]:
            failures.append(f"(b) {endpoint}: {w['routed_to_member'] - w['member_left_out']} responses kept the member")
    if not b["/retrieve"]["degraded"]:
        failures.append("(b) no degraded /retrieve response")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration-s", type=float, default=180.0, help="(a): the load run")
    parser.add_argument("--kill-at-s", type=float, default=30.0, help="(a): when the LLM process is killed")
    parser.add_argument("--retrieve-clients", type=int, default=8)
    parser.add_argument("--answer-clients", type=int, default=2)
    parser.add_argument("--fault-member", help="(b): default: the member routed to most often in (a)")
    parser.add_argument("--fault-delay-s", type=float, default=2.0)
    parser.add_argument("--member-timeout-s", type=float, default=1.0)
    parser.add_argument("--fault-duration-s", type=float, default=60.0)
    parser.add_argument("--llm-timeout-s", type=float, default=600.0)
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)
    parser.add_argument("--out", type=Path, help="write the markdown report here (and print it)")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    queries = questions()
    result: dict[str, Any] = {"load_before": load_average()}
    with serve(args.ready_timeout_s) as served:
        result["bundle"] = httpx.get(f"{served.url}/portfolio", timeout=30).json()["name"]
        result["llm_first_answer_s"] = wait_for_llm(served.url, queries[-1], args.llm_timeout_s)
        print(f"(a) ready after {served.ready_s:.1f} s, LLM after {result['llm_first_answer_s']:.1f} s", flush=True)
        a = asyncio.run(llm_killed(served.url, served.pid, queries, args))
    print(json.dumps(a, indent=1), flush=True)
    member = args.fault_member or a["routed"][0][0]
    result["fault_member"] = member
    with tempfile.TemporaryDirectory() as tmp:
        config = serving_config(Path(tmp) / "serving.yml", member_timeout_s=args.member_timeout_s,
                                fault_injection={"member": member, "delay_s": args.fault_delay_s})
        with serve(args.ready_timeout_s, env={"RAGFOLIO_SERVING_CONFIG": str(config)}) as served:
            wait_for_llm(served.url, queries[-1], args.llm_timeout_s)
            b = asyncio.run(member_timeout(served.url, queries, member, args.fault_duration_s))
    result["load_after"] = load_average()
    result.update(llm_killed=a, member_timeout=b, failures=checks(a, b),
                  command=f"python {shlex.join(sys.argv)}")
    text = report(result, args)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
