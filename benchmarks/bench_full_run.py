"""Time the whole ``portfolio`` pipeline on a data folder, then a rerun that changes only ``k_max``.

Runs ``kedro run`` in a scratch copy of the project (so the repository's data/ is untouched), with a
fresh retrieval cache, and reports wall time and peak RSS of each run plus the test table.

    .venv/bin/python benchmarks/bench_full_run.py --raw-dir ../shared/data --out docs/bench_full_run.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def run(project: Path, params: str) -> tuple[float, float, str]:
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
    kedro = Path(sys.executable).with_name("kedro")
    start = time.perf_counter()
    out = subprocess.run([str(kedro), "run", "--pipelines=portfolio", f"--params={params}"], cwd=project, env=env,
                         capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode:
        sys.exit(f"kedro run failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return seconds, peak_gib, out.stdout + out.stderr


def table(metrics: dict, ks: tuple[int, ...] = (1, 3, 5)) -> str:
    head = "| dataset | n test | " + " | ".join(f"greedy@{k} | avg@{k}" for k in ks) + " | single best | oracle |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for key, entry in metrics["datasets"].items():
        t = entry["test"]
        cells = " | ".join(f"{t['greedy_at_k'][k - 1]:.3f} | {t['top_by_average_at_k'][k - 1]:.3f}" for k in ks)
        lines.append(f"| {key} | {t['n']} | {cells} | {t['single_best']:.3f} | {t['oracle_all']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--params", default="", help="extra kedro --params, e.g. candidate_scoring.num_docs=2")
    parser.add_argument("--workdir", type=Path, help="keep the scratch project (and its cache) here")
    args = parser.parse_args()
    raw = args.raw_dir.resolve()
    extra = f",{args.params}" if args.params else ""
    with tempfile.TemporaryDirectory(prefix="ragfolio-bench-") as tmp:
        project = args.workdir.resolve() if args.workdir else Path(tmp)
        warm = (project / "data/04_feature/retrieval_cache").exists()
        shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"), dirs_exist_ok=True)
        (project / "conf" / "local").mkdir(exist_ok=True)
        shutil.copy(ROOT / "pyproject.toml", project)
        (project / "src").mkdir(exist_ok=True)  # kedro wants source_dir; the package itself is installed
        first_s, first_mem, log = run(project, f"data_prep.raw_dir={raw}{extra}")
        rerun_s, _, _ = run(project, f"data_prep.raw_dir={raw},portfolio_selection.k_max=10{extra}")
        metrics = json.loads((project / "data/08_reporting/portfolio_metrics.json").read_text())
        corpora = json.loads((project / "data/03_primary/corpora.json").read_text())  # Corpora.to_json
        n_passages = {name: len(records) for name, records in corpora["corpora"].items()}
    k5 = {key: e["test"]["greedy_at_k"][4] - e["test"]["top_by_average_at_k"][4] for key, e in metrics["datasets"].items()}
    report = "\n".join([
        f"Command: `.venv/bin/python benchmarks/bench_full_run.py --raw-dir {args.raw_dir}"
        + (f" --params {args.params}`" if args.params else "`"),
        f"Machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, Python {platform.python_version()}",
        "",
        f"- candidates: {metrics['n_candidates']} {metrics['candidates_by_family']}",
        f"- corpus passages per corpus ({corpora['mode']}): {n_passages} (total {sum(n_passages.values())})",
        f"- first run ({'warm' if warm else 'empty'} retrieval cache): {first_s / 60:.1f} min, peak RSS {first_mem:.1f} GiB",
        f"- rerun after changing only k_max: {rerun_s:.0f} s",
        "",
        f"Test {metrics['score']}, {metrics['num_docs']} passages per candidate:",
        "",
        table(metrics),
        "",
        "greedy@5 - top-by-average@5 on test: " + ", ".join(f"{k} {v:+.3f}" for k, v in k5.items())
        + f"; mean of the datasets {np.mean([v for k, v in k5.items() if k != 'all']):+.3f}",
        "headroom (oracle - top-by-average@5) on test: "
        + ", ".join(f"{k} {e['test']['oracle_all'] - e['test']['top_by_average_at_k'][4]:.3f}" for k, e in metrics["datasets"].items()),
    ])
    print(report)
    if args.out:
        args.out.write_text(report + "\n")


if __name__ == "__main__":
    main()
