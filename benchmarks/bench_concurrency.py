"""Latency of answering one query with l portfolio members: alone, one after another, concurrently.

On one dataset of the bundled sample (``data/01_raw``), with the encoders and pool settings of
conf/base/parameters_candidate_scoring.yml, this warms the corpus parts (passage embeddings,
indexes, graph), then for each of ``--n-queries`` questions measures, with the runner's query
parts forgotten before every measurement (so query embeddings and bases are recomputed as for a
new query):

* each member alone: ``PortfolioExecutor.run(q, [j], concurrent=False)``, shared parts included;
* the members one after another: ``run(q, members, concurrent=False)``;
* the members concurrently: ``run(q, members, concurrent=True)`` (shared parts in parallel too).

By default the query is first embedded with every encoder, as routing does (the router reads
the query embeddings, and the members then reuse them): the member timings then measure what runs
after routing. ``--no-route-first`` leaves query encoding inside the members' shared parts.

The order of the measurements rotates from query to query so background load spreads evenly.
Measurements run with the disk cache disabled, as online; ``--cache`` only serves the corpus
passage embeddings during warm-up (the pipeline's cache by default, content-addressed).

Run from the repository root::

    .venv/bin/python benchmarks/bench_concurrency.py --dataset hotpotqa --n-queries 30 \\
        --out docs/bench_concurrency.md
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.pool import expand_grid, resolve_grid
from ragfolio.core.retrieval.running.member_executor import PortfolioExecutor
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MEMBERS = [
    "graph(seeds=hybrid:minilm,n_seeds=2,hops=1,rank=ppr,damping=0.85)",
    "two_hop(first=bm25,append=title,second=dense:minilm,merge=interleave)",
    "mmr(prefilter=hybrid:e5,encoder=e5,lambda=0.7)",
]


def machine(load_at_start: str) -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor() or "unknown",
    )
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    return (f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {model}; OMP_NUM_THREADS={threads}; "
            f"1/5/15-min load average {load_at_start} at the start, {load_average()} at the end")


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def stats(ms: list[float]) -> tuple[float, float]:
    return float(np.mean(ms)), float(np.percentile(ms, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--members", nargs="+", default=DEFAULT_MEMBERS, help="candidate names of the grid")
    parser.add_argument("--n-queries", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=60.0, help="member deadline in seconds")
    parser.add_argument("--cache", default="data/04_feature/retrieval_cache",
                        help="ArrayCache holding the corpus passage embeddings ('' to encode them afresh)")
    parser.add_argument("--route-first", action=argparse.BooleanOptionalAction, default=True,
                        help="embed the query with every encoder before the members run, as routing does")
    parser.add_argument("--out", default="docs/bench_concurrency.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    load_at_start = load_average()

    params = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())["candidate_scoring"]
    grids = yaml.safe_load((ROOT / "conf/base/parameters_candidate_grids.yml").read_text())["candidate_grids"]
    by_name = {c.name: c for c in expand_grid(resolve_grid(params["grid"], grids))}
    unknown = [name for name in args.members if name not in by_name]
    if unknown:
        raise SystemExit(f"--members not in the default grid: {unknown}")
    members = [by_name[name] for name in args.members]
    questions = sorted((q for q in load_folder(ROOT / "data/01_raw") if q.dataset == args.dataset), key=lambda q: q.id)
    if len(questions) < args.n_queries + 1:
        raise SystemExit(f"--dataset {args.dataset} has {len(questions)} questions, need {args.n_queries + 1}")
    corpus = build_corpus(questions)  # as data_prep builds it, so the cache keys match
    runner = PoolRunner(
        corpus.titles, corpus.texts, params["encoders"], ArrayCache(ROOT / (args.cache or "unused"), bool(args.cache)),
        num_docs=params["num_docs"], prefilter_depth=params["prefilter_depth"], bm25_params=params["bm25_base"],
        graph_max_degree=params["graph_max_degree"],
    )
    start = time.perf_counter()
    for encoder in params["encoders"]:
        runner.passage_embeddings(encoder)
    runner.cache = ArrayCache(ROOT / "unused", enabled=False)  # nothing per query goes to disk
    queries = [q.question for q in questions]
    warm, queries = queries[-1], queries[: args.n_queries]
    everyone = list(range(len(members)))
    times: dict[str, list[float]] = {m.name: [] for m in members} | {"sequential": [], "concurrent": []}
    routing_ms: list[float] = []
    shared: dict[str, list[float]] = {"sequential": [], "concurrent": []}
    failures: list[str] = []
    with PortfolioExecutor(runner, members, timeout_s=args.timeout) as executor:
        for concurrent in (False, True):  # loads models, builds indexes and the graph, starts threads
            executor.run(warm, everyone, concurrent=concurrent)
        print(f"{args.dataset}: {len(corpus)} passages, warm-up {time.perf_counter() - start:.1f} s", flush=True)
        jobs = [(m.name, [j], False) for j, m in enumerate(members)]
        jobs += [("sequential", everyone, False), ("concurrent", everyone, True)]
        for i, query in enumerate(queries):
            for label, chosen, concurrent in jobs[i % len(jobs):] + jobs[: i % len(jobs)]:
                runner.forget_queries()
                if args.route_first:
                    t0 = time.perf_counter()
                    for encoder in params["encoders"]:
                        runner.query_embeddings(encoder, [query])
                    routing_ms.append(1000 * (time.perf_counter() - t0))
                result = executor.run(query, chosen, concurrent=concurrent)
                times[label].append(result.latency_ms)
                if label in shared:
                    shared[label].append(result.shared_ms)
                failures += [f"{label}: {reason}" for reason in result.reasons]

    slowest = max((m.name for m in members), key=lambda name: np.mean(times[name]))
    per_query = np.array(times["concurrent"]) / np.max([times[m.name] for m in members], axis=0)
    ratio = np.mean(times["concurrent"]) / np.mean(times[slowest])
    lines = ["| run | mean ms | p95 ms | shared parts, mean ms |", "|---|---:|---:|---:|"]
    for label, ms in times.items():
        name = f"{label} alone" if label in args.members else f"all {len(members)}, {label}"
        part = f"{np.mean(shared[label]):.1f}" if label in shared else ""
        lines.append(f"| {name} | {stats(ms)[0]:.1f} | {stats(ms)[1]:.1f} | {part} |")
    summary = [
        f"concurrent / slowest single member (`{slowest}`, means): **{ratio:.2f}** (target <= 1.3); "
        f"per query: mean {per_query.mean():.2f}, p95 {np.percentile(per_query, 95):.2f}",
        f"sequential / concurrent (means): {np.mean(times['sequential']) / np.mean(times['concurrent']):.2f}",
        f"member failures: {len(failures)}" + (f" ({failures[:3]})" if failures else ""),
    ]
    if routing_ms:
        summary.append(f"query embedding with every encoder before the members (routing), not in the rows above: "
                       f"mean {np.mean(routing_ms):.1f} ms, p95 {np.percentile(routing_ms, 95):.1f} ms")
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "benchmarks/bench_concurrency.py", *sys.argv[1:]])
    report = "\n".join([
        f"# Concurrent portfolio members: {args.dataset}, l = {len(members)}, {len(queries)} queries",
        "", f"Command: `{command}`", "", f"Machine: {machine(load_at_start)}; Python {platform.python_version()}", "",
        *lines, "", *[f"- {line}" for line in summary], "",
    ])
    print(report)
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)


if __name__ == "__main__":
    main()
