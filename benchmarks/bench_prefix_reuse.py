"""What reusing the prompt prefix saves the embedded reader, and that it replies the same.

For each of the first ``--questions`` HotpotQA questions of the bundled sample, the reader
(Qwen2.5-Coder-1.5B-Instruct on llama.cpp) answers three prompts in turn, as a question's systems
do: its first 4 passages (``single_best``), its first 8 (``single_best_wide``: the first 4 shared)
and passages 2-5 (another member's list). It does so once with ``reuse_prefix`` off and once on,
each in a fresh process, and prints the seconds per prompt kind and whether every reply is the same.

    .venv/bin/python benchmarks/bench_prefix_reuse.py --questions 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "01_raw" / "hotpotqa.jsonl"
KINDS = {"4 passages": slice(0, 4), "8 passages, the 4 first": slice(0, 8), "passages 2-5": slice(1, 5)}


def _worker(reuse: bool, questions: int) -> list[dict[str, list]]:
    from ragfolio.core.answering.answerer import Answerer
    from ragfolio.core.llm.native import LlamaCppBackend

    backend = LlamaCppBackend(reuse_prefix=reuse)
    answerer = Answerer(backend)
    answerer.answer("warm-up", [("warm-up", "warm-up")])
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:questions]]
    out = []
    for row in rows:
        passages = [(c["title"], c["text"]) for c in row["contexts"]]
        timed = {}
        for kind, part in KINDS.items():
            start = time.perf_counter()
            said = answerer.answer(row["question"], passages[part])
            timed[kind] = [time.perf_counter() - start, said.text, backend.reused_tokens if reuse else 0]
        out.append(timed)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--worker", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker == "on", args.questions)))
        return
    runs = {}
    for how in ("off", "on"):
        done = subprocess.run([sys.executable, __file__, "--worker", how, "--questions", str(args.questions)],
                              capture_output=True, text=True, check=True)
        runs[how] = json.loads(done.stdout.strip().splitlines()[-1])
    same = sum(a[k][1] == b[k][1] for a, b in zip(runs["off"], runs["on"], strict=True) for k in KINDS)
    print(f"replies the same with and without reuse: {same} of {len(runs['on']) * len(KINDS)}")
    print("| prompt | reuse off: mean s | reuse on: mean s | change | prompt tokens reused, mean |")
    print("|---|---|---|---|---|")
    for kind in KINDS:
        off = statistics.mean(r[kind][0] for r in runs["off"])
        on = statistics.mean(r[kind][0] for r in runs["on"])
        reused = statistics.mean(r[kind][2] for r in runs["on"])
        print(f"| {kind} | {off:.2f} | {on:.2f} | {on / off - 1:+.0%} | {reused:.0f} |")


if __name__ == "__main__":
    main()
