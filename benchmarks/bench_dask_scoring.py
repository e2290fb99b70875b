"""Time candidate scoring in process against a Dask ``LocalCluster``, each on a cold cache.

Loads a raw data folder with the data_prep nodes, then runs the ``score_candidates`` node twice
with the project's candidate_scoring parameters: once in process and once with
``scheduler_address`` pointing at a local cluster (processes, one thread each). Each run gets its
own empty retrieval cache, so corpus encoding is included in both. Reports wall times, the
speed-up, whether the matrices are bit-identical, and the machine's load before and after.

    .venv/bin/python benchmarks/bench_dask_scoring.py --workers 2 --out docs/bench_dask.md
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.scoring.distributed import encoders_used
from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, score_candidates
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions

ROOT = Path(__file__).resolve().parents[1]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def subset(candidates: list[dict], n: int | None, encoders: list[str] | None) -> list[dict]:
    """Candidates using only ``encoders`` (all: None), then every ``len / n``-th, so families keep their share."""
    if encoders is not None:
        candidates = [c for c in candidates if set(encoders_used([CandidateSpec.from_record(c)])) <= set(encoders)]
    if not n or n >= len(candidates):
        return candidates
    step = len(candidates) / n
    return [candidates[int(i * step)] for i in range(n)]


def encode_corpora(corpora: dict, params: dict, cache_dir: str) -> None:
    """Passage embeddings of every corpus and encoder into ``cache_dir`` (the --warm-corpus start)."""
    from ragfolio.core.data.passages import Corpus
    from ragfolio.pipelines.candidate_scoring.nodes import CandidateScoringParams

    settings = CandidateScoringParams(**params).pool_settings()
    for records in corpora["corpora"].values():  # ragfolio.core.data.corpora.Corpora.to_json
        runner = settings.runner(Corpus.from_records(records), ArrayCache(cache_dir))
        for encoder in settings.encoders:
            runner.passage_embeddings(encoder)


def timed_score(questions: list, corpora: dict, candidates: list, params: dict, warm: str | None = None) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="ragfolio-cache-") as cache_dir:
        if warm is not None:  # start from the corpus embeddings only; every query-side part is computed
            shutil.copytree(Path(warm) / "passage_embeddings", Path(cache_dir) / "passage_embeddings")
        start = time.perf_counter()
        matrices, _ = score_candidates(questions, corpora, candidates, ArrayCache(cache_dir), params)
        return time.perf_counter() - start, matrices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw-dir", type=Path, default=ROOT / "data" / "01_raw")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--block-size", type=int, default=50, help="query_block_size of both runs")
    parser.add_argument("--max-candidates", type=int, help="score an evenly spread subset of the pool")
    parser.add_argument("--encoders", nargs="+", help="keep only these encoders and the candidates using no other")
    parser.add_argument("--warm-corpus", action="store_true",
                        help="both runs start with the corpus embeddings cached (queries, bases and candidates cold)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from distributed import LocalCluster

    conf = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())["candidate_scoring"]
    prep = yaml.safe_load((ROOT / "conf/base/parameters_data_prep.yml").read_text())["data_prep"]
    questions = load_questions({**prep, "raw_dir": str(args.raw_dir)})
    corpora = build_corpora(questions, {**prep, "raw_dir": str(args.raw_dir)})
    params = {**conf, "query_block_size": args.block_size, "scheduler_address": None}
    grids = yaml.safe_load((ROOT / "conf/base/parameters_candidate_grids.yml").read_text())["candidate_grids"]
    pool = expand_candidates(params, grids)
    candidates = subset(pool, args.max_candidates, args.encoders)
    if args.encoders:
        params["encoders"] = {name: spec for name, spec in conf["encoders"].items() if name in args.encoders}
    n_passages = {name: len(records) for name, records in corpora["corpora"].items()}
    load_before = uptime()

    warm = tempfile.mkdtemp(prefix="ragfolio-warm-") if args.warm_corpus else None
    if warm is not None:
        project_cache = ROOT / "data/04_feature/retrieval_cache/passage_embeddings"
        if project_cache.is_dir():  # reuse the project's embeddings: same corpus and encoders, same keys
            shutil.copytree(project_cache, Path(warm) / "passage_embeddings")
        encode_corpora(corpora, params, warm)
    local_s, local = timed_score(questions, corpora, candidates, params, warm)
    start = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        cluster_start_s = time.perf_counter() - start
        dask_s, remote = timed_score(
            questions, corpora, candidates, {**params, "scheduler_address": cluster.scheduler_address}, warm
        )
    load_after = uptime()

    identical = list(local) == list(remote) and all(local[d].tobytes() == remote[d].tobytes() for d in local)
    differing = {d: int((local[d] != remote[d]).sum()) for d in local if local[d].shape == remote[d].shape}
    n_queries = sum(m.shape[0] for m in local.values())
    n_blocks = sum(-(-m.shape[0] // args.block_size) for m in local.values())
    command = ".venv/bin/python benchmarks/bench_dask_scoring.py " + " ".join(sys.argv[1:])
    lines = [
        "# Candidate scoring: in process vs a Dask LocalCluster",
        "",
        f"Command: `{command}`",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, shared with other jobs",
        f"Load before: `{load_before}`",
        f"Load after: `{load_after}`",
        "",
        f"- candidates: {len(candidates)} of the {len(pool)} in the default pool"
        + ("" if len(candidates) == len(pool) else " (a subset: `--encoders` / `--max-candidates`)"),
        f"- encoders: {sorted(params['encoders'])}",
        f"- queries: {n_queries} in {n_blocks} blocks of <= {args.block_size}; passages per dataset: {n_passages}",
        "- both runs start with the corpus embeddings cached; query encoding, bases and every candidate are computed"
        if warm else "- both runs start from an empty retrieval cache (corpus and query encoding included)",
        f"- cluster: {args.workers} worker processes x 1 thread; starting it took {cluster_start_s:.1f} s (not in the time below)",
        "",
        "| run | wall time | speed-up |",
        "|---|---:|---:|",
        f"| in process (`scheduler_address: null`) | {local_s:.1f} s | 1.00x |",
        f"| LocalCluster, {args.workers} workers | {dask_s:.1f} s | {local_s / dask_s:.2f}x |",
        "",
        f"Matrices bit-identical: **{identical}**" + ("" if identical else f" (differing cells per dataset: {differing})"),
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
