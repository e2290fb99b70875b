"""A soak of the HTTP service: mixed traffic with a member fault for ``--minutes`` (10), memory sampled.

Starts ``bentoml serve`` from the repository root on a free loopback port with the default settings
plus a member fault (``fault_injection``: ``--fault-member``, default the member the router picks
most often for 128 probe questions, sleeps ``--fault-delay-s`` (2) per run, past
``member_timeout_s`` = ``--member-timeout-s`` (1)), waits for the LLM's first answer, then sends,
all at once, until the time is up:

* ``/retrieve`` from ``--retrieve-clients`` (4) clients, one request after another;
* ``/batch_retrieve`` of 16 queries from one client, 1 s apart;
* ``/answer`` from one client, one after another;
* bad input from one client, 0.2 s apart: the kinds of ``bad_inputs.py`` in turn.

Every ``--sample-s`` (5) seconds it sums the resident memory (RSS) of ``bentoml serve``'s process
tree: the server, its worker and the LLM server (psutil). Reported: the RSS at minute 1 and at the
end and its growth (target under 10%), the statuses per endpoint (target: no 5xx on
``/retrieve``), and whether every bad input got a 4xx without internals in its body. Writes the
figures as JSON (``--json``), a plot of RSS and throughput over time (``--plot``), and prints a
markdown summary. Exits with status 1 when a target is missed. Run from the repository root::

    .venv/bin/python benchmarks/soak_service.py --json docs/results_serving/soak.json --plot docs/img/soak_rss.png
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import shlex
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from bad_inputs import Case, Outcome, bad_cases, check, internal_strings, send_async
from service_harness import (
    Sample,
    cycle_queries,
    keep_sending,
    llm_server,
    load_average,
    machine,
    percentile,
    questions,
    rss_by_role,
    serve,
    serving_config,
    wait_for_llm,
)

MiB = 2**20


def most_routed_member(url: str, queries: list[str], n: int = 128) -> str:
    """The member the router sends most of ``queries[:n]`` to (as ``/batch_retrieve`` routes them)."""
    counts: Counter[str] = Counter()
    for start in range(0, n, 64):
        body = httpx.post(f"{url}/batch_retrieve", json={"queries": queries[start:start + 64]}, timeout=120).json()
        counts.update(m["name"] for r in body["results"] for m in r["members"])
    return counts.most_common(1)[0][0]


async def sample_memory(pid: int, until: float, t0: float, every_s: float, out: list[dict[str, Any]]) -> None:
    """Every ``every_s`` seconds: ``{"t_s", "total_mib", "by_role_mib", "llm_pid"}`` of the service's processes."""
    while time.perf_counter() < until:
        by_role = await asyncio.to_thread(rss_by_role, pid)
        llm = await asyncio.to_thread(llm_server, pid)
        out.append({"t_s": round(time.perf_counter() - t0, 1), "total_mib": round(sum(by_role.values()) / MiB, 1),
                    "by_role_mib": {k: round(v / MiB, 1) for k, v in by_role.items()},
                    "llm_pid": llm.pid if llm is not None else None})
        await asyncio.sleep(max(0.0, min(every_s, until - time.perf_counter())))


async def send_bad(client: httpx.AsyncClient, cases: list[Case], internals: list[str], until: float,
                   out: list[Outcome], pause_s: float) -> None:
    for case in itertools.cycle(cases):
        if time.perf_counter() >= until:
            return
        out.append(check(case, *(await send_async(client, case)), internals))
        await asyncio.sleep(pause_s)


async def soak(url: str, pid: int, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    portfolio = httpx.get(f"{url}/portfolio", timeout=30).json()
    cases = bad_cases(portfolio["limits"], portfolio["k"])
    internals = internal_strings(pid)
    samples: list[Sample] = []
    bad: list[Outcome] = []
    memory: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    until = t0 + 60 * args.minutes
    limits = httpx.Limits(max_connections=args.retrieve_clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        await asyncio.gather(
            *(keep_sending(client, "/retrieve", cycle_queries(queries, 40 * i), until, t0, samples)
              for i in range(args.retrieve_clients)),
            keep_sending(client, "/batch_retrieve", cycle_queries(queries, 500, batch=16), until, t0, samples,
                         pause_s=1.0),
            keep_sending(client, "/answer", cycle_queries(queries, 900), until, t0, samples),
            send_bad(client, cases, internals, until, bad, pause_s=0.2),
            sample_memory(pid, until, t0, args.sample_s, memory),
        )
    return {"samples": samples, "bad": bad, "memory": memory, "kinds": len({c.kind for c in cases})}


def summarise(run: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    samples: list[Sample] = run["samples"]
    memory: list[dict[str, Any]] = run["memory"]
    bad: list[Outcome] = run["bad"]
    minute1 = min(memory, key=lambda m: abs(m["t_s"] - 60))
    last = memory[-1]
    growth = 100 * (last["total_mib"] - minute1["total_mib"]) / minute1["total_mib"]
    endpoints: dict[str, Any] = {}
    for endpoint in ("/retrieve", "/batch_retrieve", "/answer"):
        chosen = [s for s in samples if s.endpoint == endpoint]
        latencies = [s.latency_ms for s in chosen]
        endpoints[endpoint] = {
            "requests": len(chosen), "statuses": dict(sorted(Counter(s.status for s in chosen).items())),
            "5xx": sum(s.status >= 500 for s in chosen), "failed_connections": sum(s.status == 0 for s in chosen),
            "degraded": sum(s.degraded for s in chosen),
            "per_30s": [sum(30 * b <= s.t_s < 30 * (b + 1) for s in chosen) for b in range(math.ceil(2 * args.minutes))],
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1),
        }
    failed_bad = [o for o in bad if not o.ok]
    bad_summary = {
        "requests": len(bad), "kinds": run["kinds"],
        "statuses": dict(sorted(Counter(o.status for o in bad).items())),
        "not_4xx": sum(not 400 <= o.status < 500 for o in bad), "failed_checks": len(failed_bad),
        "failures": sorted({f"{o.case.kind} on {o.case.endpoint}: {'; '.join(o.problems)}" for o in failed_bad}),
    }
    llm_pids = [m["llm_pid"] for m in memory]
    targets = {
        "rss_growth_under_10pct": growth < 10.0,
        "no_5xx_on_retrieve": endpoints["/retrieve"]["5xx"] == 0 and endpoints["/retrieve"]["failed_connections"] == 0,
        "every_bad_input_4xx_and_quiet": not failed_bad,
    }
    return {
        "rss_mib": {"minute_1": minute1["total_mib"], "minute_1_at_s": minute1["t_s"], "end": last["total_mib"],
                    "end_at_s": last["t_s"], "growth_pct": round(growth, 2),
                    "max": max(m["total_mib"] for m in memory), "minute_1_by_role": minute1["by_role_mib"],
                    "end_by_role": last["by_role_mib"]},
        "llm_restarts": len({p for p in llm_pids if p is not None}) - 1,
        "endpoints": endpoints, "bad_input": bad_summary, "targets": targets,
    }


def plot(memory: list[dict[str, Any]], endpoints: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    minutes = [m["t_s"] / 60 for m in memory]
    top.plot(minutes, [m["total_mib"] for m in memory], label="total", color="black", linewidth=2)
    for role in sorted({r for m in memory for r in m["by_role_mib"]}):
        top.plot(minutes, [m["by_role_mib"].get(role, 0.0) for m in memory], label=role)
    top.axvline(1, color="grey", linestyle=":", linewidth=1)
    top.set_ylabel("resident memory (MiB)")
    top.set_ylim(bottom=0)
    top.legend(loc="center right", fontsize=8)
    top.set_title(title, fontsize=10)
    for endpoint, figures in endpoints.items():
        counts = figures["per_30s"]
        bottom.plot([(b + 0.5) / 2 for b in range(len(counts))], [c / 30 for c in counts], marker=".", label=endpoint)
    bottom.set_xlabel("minutes into the soak")
    bottom.set_ylabel("requests/s (30 s bins)")
    bottom.set_ylim(bottom=0)
    bottom.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    rss, bad = s["rss_mib"], s["bad_input"]
    rows = [f"| `{ep}` | {f['requests']} | {', '.join(f'{n} x {c}' for c, n in f['statuses'].items())} | {f['5xx']} | "
            f"{f['degraded']} | {f['p50_ms']:.0f} | {f['p99_ms']:.0f} |" for ep, f in s["endpoints"].items()]
    return "\n".join([
        f"Command: `{result['command']}`; {result['minutes']} minutes, fault: member `{result['fault']['member']}` "
        f"sleeps {result['fault']['delay_s']} s per run, member_timeout_s {result['member_timeout_s']}.", "",
        f"- RSS of the service's processes: {rss['minute_1']:.0f} MiB at minute 1 ({rss['minute_1_at_s']:.0f} s), "
        f"{rss['end']:.0f} MiB at the end ({rss['end_at_s']:.0f} s): **{rss['growth_pct']:+.1f}%** (max "
        f"{rss['max']:.0f} MiB; LLM restarts: {s['llm_restarts']}).",
        f"- By process at minute 1: {rss['minute_1_by_role']}; at the end: {rss['end_by_role']}.",
        f"- Bad input: {bad['requests']} requests of {bad['kinds']} kinds, statuses {bad['statuses']}; "
        f"{bad['not_4xx']} not a 4xx, {bad['failed_checks']} failed a check.",
        f"- Targets: {s['targets']}.", "",
        "| endpoint | requests | statuses | 5xx | degraded | p50 (ms) | p99 (ms) |", "|---|---|---|---|---|---|---|",
        *rows, "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds between memory samples")
    parser.add_argument("--retrieve-clients", type=int, default=4)
    parser.add_argument("--fault-member", help="default: the member routed to most often")
    parser.add_argument("--fault-delay-s", type=float, default=2.0)
    parser.add_argument("--member-timeout-s", type=float, default=1.0)
    parser.add_argument("--llm-timeout-s", type=float, default=600.0)
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)
    parser.add_argument("--json", type=Path, help="write the figures and samples as JSON here")
    parser.add_argument("--plot", type=Path, help="write a PNG of RSS and throughput over time here")
    args = parser.parse_args()
    queries = questions()
    member = args.fault_member
    if member is None:
        with serve(args.ready_timeout_s) as probe:
            member = most_routed_member(probe.url, queries)
    load_before = load_average()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        fault = {"member": member, "delay_s": args.fault_delay_s}
        config = serving_config(tmp / "serving.yml", member_timeout_s=args.member_timeout_s, fault_injection=fault)
        served = stack.enter_context(serve(args.ready_timeout_s, env={"RAGFOLIO_SERVING_CONFIG": str(config)}))
        llm_s = wait_for_llm(served.url, queries[-1], args.llm_timeout_s)
        print(f"ready after {served.ready_s:.1f} s, LLM after {llm_s:.1f} s; soaking {args.minutes} min", flush=True)
        run = asyncio.run(soak(served.url, served.pid, queries, args))
        procs = {p.pid: " ".join(p.cmdline()[:3]) for p in psutil.Process(served.pid).children(recursive=True)}
    summary = summarise(run, args)
    result = {
        "command": f"python {shlex.join(sys.argv)}", "machine": machine(), "load_average_before": load_before,
        "load_average_after": load_average(), "minutes": args.minutes, "fault": fault,
        "member_timeout_s": args.member_timeout_s, "retrieve_clients": args.retrieve_clients,
        "ready_s": round(served.ready_s, 1), "llm_first_answer_s": round(llm_s, 1), "processes": procs,
        "summary": summary, "memory_samples": run["memory"],
    }
    text = markdown(result)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        plot(run["memory"], summary["endpoints"], args.plot,
             f"Soak: {args.minutes:g} min of mixed traffic, member fault on; RSS {summary['rss_mib']['growth_pct']:+.1f}% "
             "from minute 1")
    sys.exit(0 if all(summary["targets"].values()) else 1)


if __name__ == "__main__":
    main()
