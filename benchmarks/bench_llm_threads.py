"""How many threads the embedded LLM should take: one 16-token completion, idle and on a busy machine.

For each thread count (``--threads``, default 1 and every usable core) a fresh process loads the
embedded Gemma-3-270M (transformers on torch) and times ``--calls`` completions of up to 16 tokens
of a short answer prompt, after one warm-up call. Each setting runs on an idle machine and beside
``--busy`` (2) background processes that spin on a core each, as the service's encoders or another
stage would. The processes are bounded: they stop when the measurement ends.

Run from the repository root::

    .venv/bin/python benchmarks/bench_llm_threads.py --out docs/results_serving/llm_threads.md
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROMPT = [{"role": "user", "content": "Passage: Jaws is a 1975 film directed by Steven Spielberg.\n"
                                      "Question: Who directed Jaws?\nAnswer in a few words."}]


def _spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def _worker(n_threads: int, calls: int) -> list[float]:
    from ragfolio.core.llm.embedded import TransformersBackend

    backend = TransformersBackend(n_threads=n_threads)
    backend.complete(PROMPT, max_tokens=16)  # load and warm up
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        backend.complete(PROMPT, max_tokens=16)
        times.append(time.perf_counter() - start)
    return times


def measure(n_threads: int, calls: int, busy: int, limit_s: float) -> list[float]:
    """Seconds per completion in a fresh process, beside ``busy`` spinning processes."""
    spinners = [multiprocessing.Process(target=_spin, args=(time.monotonic() + limit_s,)) for _ in range(busy)]
    for p in spinners:
        p.start()
    try:
        out = subprocess.run([sys.executable, __file__, "--worker", str(n_threads), "--calls", str(calls)],
                             capture_output=True, text=True, timeout=limit_s, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for p in spinners:
            p.terminate()
            p.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    usable = len(os.sched_getaffinity(0))
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, usable}))
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--busy", type=int, default=2, help="spinning background processes on the busy runs")
    parser.add_argument("--limit-s", type=float, default=600.0, help="longest a setting may take")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(_worker(args.worker, args.calls)))
        return 0
    from ragfolio.core.llm.embedded import default_threads

    rows = [f"One 16-token completion of the embedded Gemma-3-270M, {args.calls} calls per setting after a "
            f"warm-up; {usable} usable cores; default threads now: {default_threads()}.", "",
            "| threads | machine | median s | min s | max s |", "|---|---|---|---|---|"]
    for n in args.threads:
        for busy in (0, args.busy):
            times = measure(n, args.calls, busy, args.limit_s)
            label = "idle" if busy == 0 else f"{busy} busy processes"
            rows.append(f"| {n} | {label} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} |")
            print(rows[-1], flush=True)
    report = "\n".join(rows) + "\n"
    if args.out:
        args.out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
