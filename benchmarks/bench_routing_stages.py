"""What batched routing costs per stage, for every servable router, on the pipeline's bundle.

For each router of ``data/06_models`` (``routers``, and ``retrieval_routers/<kind>``: the
``--portfolio`` one, default ``all``) served over the bundle's
members and corpus, this routes and retrieves batches of the sample's questions
(:meth:`ragfolio.core.system.routed_system.RoutedSystem.retrieve_batch`) and reports, per batch size
(``--batch-sizes``, default 1, 16, 64), the time per query of each stage of the routing
(``features``, ``predict``; ``first_stage`` and, post-retrieval, ``members``: the k members over
the batch), of the routed members' run after routing, and of the whole call. Query caches are
cleared before every batch (each batch is new queries, as a service sees them); the corpus parts
are built once, before timing. In process, no HTTP. It also checks that the batch's picks equal
the picks of each query routed alone.

Run from the repository root after ``make run``::

    .venv/bin/python benchmarks/bench_routing_stages.py --out docs/bench_routing_stages.md
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from pathlib import Path

import numpy as np
from service_harness import load_average, machine, questions

from ragfolio.core.bundle import load_bundle, resolve_bundle
from ragfolio.core.routing.registry import load_router
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"learned": "routers", "pre_retrieval": "retrieval_routers/pre_retrieval",
           "post_retrieval": "retrieval_routers/post_retrieval"}
STAGES = ("members", "first_stage", "features", "predict")


def measure(system: RoutedSystem, texts: list[str], size: int, l: int, batches: int) -> dict[str, float]:  # noqa: E741
    """Mean ms per query of each stage over ``batches`` batches of ``size`` new queries."""
    totals = dict.fromkeys((*STAGES, "routed_members", "total"), 0.0)
    n = 0
    for b in range(batches):
        batch = texts[(b * size) % len(texts):][:size]
        system.runner.forget_queries()
        start = time.perf_counter()
        routed = system.retrieve_batch([RetrievalRequest(q, l, system.depth) for q in batch])
        totals["total"] += 1000 * (time.perf_counter() - start)
        for stage in STAGES:
            totals[stage] += routed[0].stages_ms.get(stage, 0.0)
        if "members" not in routed[0].stages_ms:  # the routed members ran after routing
            totals["routed_members"] += routed[0].results.latency_ms
        n += len(batch)
    return {name: value / n for name, value in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=ROOT / "data" / "06_models")
    parser.add_argument("--portfolio", default="all")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--queries", type=int, default=128, help="queries routed per batch size")
    parser.add_argument("--l", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bundle = load_bundle(resolve_bundle(args.models), verify=True)  # the served one: 06_models/served.json
    texts = questions()
    lines = ["# Batched routing, time per query of each stage (`benchmarks/bench_routing_stages.py`)", "",
             f"Bundle `{bundle.name}` (k = {bundle.k}, {len(bundle.corpus)} passages, serves `{bundle.router.name}`), "
             f"l = {args.l}; {machine()}; load average before: {load_average()}.", "",
             "| router | batch | members (post: all k) | first stage | features | predict | routed members | "
             "total / query | picks = alone |", "|---|---|---|---|---|---|---|---|---|"]
    for name, folder in FOLDERS.items():
        path = args.models / folder / args.portfolio
        if not path.is_dir():
            continue
        system = RoutedSystem.from_bundle(dataclasses.replace(bundle, router=load_router(path)), timeout_s=60.0)
        system.warm_up()  # corpus parts, encoders
        check = texts[:16]
        system.runner.forget_queries()
        same = [r.members for r in system.retrieve_batch([RetrievalRequest(q, args.l, system.depth) for q in check])] == [
            system.retrieve(RetrievalRequest(q, args.l, system.depth)).members for q in check]
        for size in args.batch_sizes:
            m = measure(system, texts, size, args.l, max(1, args.queries // size))
            lines.append(f"| {name} | {size} | " + " | ".join(f"{m[s]:.2f}" for s in (*STAGES, "routed_members", "total"))
                         + f" | {'yes' if same else 'NO'} |")
        system.close()
    lines += ["", "Milliseconds per query (a batch's stage time divided by its queries); `members` is the k "
              "members' run before a post-retrieval router routes (shared parts, i.e. encoding and first-stage "
              "rankings, included), `first stage` the first-stage rankings the retrieval routers read (after "
              "the members ran: cached), `routed members` the l routed members' run after routing "
              "(learned, pre-retrieval). Load average after: " + load_average() + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
