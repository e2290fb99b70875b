"""The million-passage rig: what a bundle costs to build, hold, load and query at 35k, 10^5 and 10^6 passages.

Takes a pipeline's bundle (the full run's: the union corpus of the benchmark data, 35,230 passages)
and, for each ``--sizes`` N, builds a bundle over that corpus plus synthetic filler passages up to N,
with the same members, router and settings, then serves it with ``bentoml serve`` and loads it.

**Filler passages** are real text recombined from the corpus: filler ``i`` takes the first half of
the sentences of one seeded-random corpus passage and the second half of another's, under the
first one's title with `` (filler i)`` appended (so no two passages share a title). **Their
embeddings are a stand-in**: encoding 10^6 passages with both encoders would take about a day on 2
cores (the real rates are measured on ``--encode-sample`` filler passages and reported), so each
filler's vector is the L2-normalised sum of its two source passages' real vectors; the report
gives the stand-in's cosine to the real vector on that sample. BM25, the passage graph and the
FAISS indexes are built for real over all N passages, by the same code as the pipeline
(:func:`ragfolio.core.system.bundle_indexes.with_indexes`); ``dense.index_type: auto`` builds HNSW above
100,000 passages.

Measured per size:

* **build**: the indexes' build (``with_indexes``), writing the bundle, its size on disk;
* **service**: ``bentoml serve`` from process start to ``/readyz`` 200 (the checksums of every
  file verified, the bundle memory-mapped, the warm-up query run), the worker's resident memory
  (anonymous and file-backed) after ready and after the load, ``/retrieve`` one at a time
  (``--lone``) and with 16 in flight (``--concurrent``); the LLM is an unreachable endpoint, so no
  LLM process runs and shares the cores (retrieval does not touch it);
* **dense recall**: where the bundle's dense indexes are HNSW, top-4 support recall of each
  encoder's dense ranking with HNSW and with exact search over the same N vectors, on
  ``--questions`` (the run's questions with supporting passages, a seeded sample), with the
  paired-bootstrap 95% interval of HNSW minus exact.

Run from the repository root, machine otherwise idle (client and server share the cores)::

    .venv/bin/python benchmarks/bench_million.py --bundle <run>/06_models/served.json \\
        --questions <run>/02_intermediate/questions.json --out docs/bench_million.md
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
from bench_service import Phase, run_phase
from service_harness import load_average, machine, serve, service_processes, serving_config

from ragfolio.core.bundle import PortfolioBundle, load_bundle, resolve_bundle, save_bundle
from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import Question
from ragfolio.core.metrics import support_recall
from ragfolio.core.retrieval.encoders.kinds import make_encoder
from ragfolio.core.retrieval.encoders.vectors import l2_normalise
from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever
from ragfolio.core.retrieval.running.pool_runner import passage_texts
from ragfolio.core.stats import paired_difference
from ragfolio.core.system.bundle_indexes import with_indexes

EF_SWEEP = (64, 128, 256, 512)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# An endpoint nothing listens on: the service starts no LLM process; /retrieve never calls it.
NO_LLM = {"kind": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "none"}}


def filler_passages(corpus: Corpus, n: int, seed: int = 0) -> tuple[list[dict[str, str]], np.ndarray]:
    """``n`` filler records and the ``(n, 2)`` corpus rows each was recombined from (see the module docstring)."""
    rng = np.random.default_rng(seed)
    sources = rng.integers(0, len(corpus), size=(n, 2))
    records = []
    for i, (a, b) in enumerate(sources):
        first, second = SENTENCE_END.split(corpus.texts[a]), SENTENCE_END.split(corpus.texts[b])
        text = " ".join(first[: (len(first) + 1) // 2] + second[len(second) // 2 :])
        records.append({"id": f"filler-{i}", "title": f"{corpus.titles[a]} (filler {i})", "text": text})
    return records, sources


def with_stand_ins(embeddings: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """``embeddings`` followed by one vector per filler: its two source passages' real vectors
    summed and L2-normalised (written in blocks into one array: bounded temporaries)."""
    n = len(embeddings)
    out = np.empty((n + len(sources), embeddings.shape[1]), dtype=np.float32)
    out[:n] = embeddings
    for start in range(0, len(sources), 100_000):
        block = sources[start : start + 100_000]
        out[n + start : n + start + len(block)] = l2_normalise(embeddings[block[:, 0]] + embeddings[block[:, 1]])
    return out


def grown_bundle(base: PortfolioBundle, n_total: int, encode_sample: int) -> tuple[PortfolioBundle, dict[str, Any]]:
    """``base`` with filler passages up to ``n_total``; and what the stand-in vectors are worth."""
    n_filler = n_total - len(base.corpus)
    records, sources = filler_passages(base.corpus, n_filler)
    corpus = Corpus.from_records([*base.corpus.to_records(), *records])
    sample = min(encode_sample, n_filler)
    texts = passage_texts([r["title"] for r in records[:sample]], [r["text"] for r in records[:sample]])
    del records  # the corpus holds them now
    embeddings, notes = {}, {}
    for name, emb in base.embeddings.items():
        embeddings[name] = with_stand_ins(np.asarray(emb, dtype=np.float32), sources)
        if sample:
            encoder = make_encoder({**base.scoring.encoders[name], "show_progress": False})
            encoder.encode_passages(texts[:8])  # load the model outside the timing
            start = time.perf_counter()
            real = encoder.encode_passages(texts)
            rate = sample / (time.perf_counter() - start)
            cosine = (real * embeddings[name][len(base.corpus) : len(base.corpus) + sample]).sum(axis=1)
            notes[name] = {"passages_per_s": rate, "hours_for_filler": n_filler / rate / 3600,
                           "stand_in_cosine_mean": float(cosine.mean()), "stand_in_cosine_p10": float(np.percentile(cosine, 10))}
    grown = dataclasses.replace(base, corpus=corpus, embeddings=embeddings, indexes=[], manifest={})
    return grown, notes


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def worker_memory(pid: int) -> dict[str, float]:
    """Resident MiB of the service's processes: all, the worker's anonymous and file-backed parts."""
    out = {"rss_total": 0.0, "worker_anon": 0.0, "worker_file": 0.0}
    for proc in service_processes(pid):
        try:
            out["rss_total"] += proc.memory_info().rss / 2**20
            if "worker" in " ".join(proc.cmdline()) or "_bentoml_impl" in " ".join(proc.cmdline()):
                status = Path(f"/proc/{proc.pid}/status").read_text()
                for key, field in (("RssAnon", "worker_anon"), ("RssFile", "worker_file")):
                    out[field] += int(re.search(rf"{key}:\s+(\d+)", status).group(1)) / 1024
        except (psutil.Error, OSError, AttributeError):
            continue
    return out


def measure_service(bundle_dir: Path, queries: list[str], lone: int, concurrent: int, work: Path,
                    query_engine: str | None = None) -> dict[str, Any]:
    config = serving_config(work / "serving.yml", bundle=str(bundle_dir.resolve()), llm=NO_LLM, query_engine=query_engine)
    with serve(timeout_s=900, env={"RAGFOLIO_SERVING_CONFIG": str(config)}) as served:
        memory_ready = worker_memory(served.pid)
        lone_phase = asyncio.run(run_phase(served.url, Phase("/retrieve", lone, 1), queries, 600))
        busy = asyncio.run(run_phase(served.url, Phase("/retrieve", concurrent, 16, offset=lone), queries, 600))
        memory_after = worker_memory(served.pid)
        portfolio = httpx.get(f"{served.url}/portfolio", timeout=30).json()
    return {"ready_s": served.ready_s, "memory_ready": memory_ready, "memory_after": memory_after,
            "lone": lone_phase, "busy": busy, "n_passages": portfolio.get("n_passages")}


def dense_recall(bundle: PortfolioBundle, questions: list[Question], k: int = 4) -> dict[str, Any]:
    """Per dense index of ``bundle``: top-k support recall with HNSW (the bundle's, or one built here
    with the same settings where the bundle's is flat) and with exact search over the same vectors."""
    rows = bundle.corpus.row_of()
    gold = [[rows[g] for g in q.gold_passage_ids() if g in rows] for q in questions]
    out = {}
    for index in bundle.indexes:
        if index.kind != "dense":
            continue
        name = index.key["encoder"]
        encoder = make_encoder({**bundle.scoring.encoders[name], "show_progress": False})
        query_emb = encoder.encode_queries([q.question for q in questions])
        vectors = np.asarray(bundle.embeddings[name])
        exact = DenseRetriever(index_type="flat").index(vectors)
        start = time.perf_counter()
        hnsw = index.index if index.key["index_type"] == "hnsw" else DenseRetriever(index_type="hnsw").index(vectors)
        built_s = None if hnsw is index.index else time.perf_counter() - start
        found = {"exact": exact.retrieve_embedded(query_emb, k).doc_ids,
                 "hnsw": hnsw.retrieve_embedded(query_emb, k).doc_ids}
        recall = {how: np.array([support_recall(r.tolist(), g, k) for r, g in zip(ids, gold, strict=True)])
                  for how, ids in found.items()}
        timing = {}
        for how, retriever in (("exact", exact), ("hnsw", hnsw)):
            start = time.perf_counter()
            for row in query_emb[:100]:
                retriever.retrieve_embedded(row[None, :], k)
            timing[how] = 10 * (time.perf_counter() - start)  # ms a lone query (100 of them)
        sweep = {}
        for ef in EF_SWEEP:  # what a larger efSearch buys (the index's own setting is restored after)
            hnsw._index.hnsw.efSearch = ef
            ids = hnsw.retrieve_embedded(query_emb, k).doc_ids
            hits = np.array([support_recall(r.tolist(), g, k) for r, g in zip(ids, gold, strict=True)])
            start = time.perf_counter()
            for row in query_emb[:100]:
                hnsw.retrieve_embedded(row[None, :], k)
            sweep[ef] = (paired_difference(hits, recall["exact"]), 10 * (time.perf_counter() - start))
        hnsw._index.hnsw.efSearch = hnsw.hnsw_ef_search
        out[name] = {"exact": float(recall["exact"].mean()), "hnsw": float(recall["hnsw"].mean()),
                     "diff": paired_difference(recall["hnsw"], recall["exact"]), "n": len(questions),
                     "in_bundle": index.key["index_type"], "hnsw_built_s": built_s, "ms": timing, "sweep": sweep}
    return out


def sample_questions(path: Path, n: int) -> list[Question]:
    rows = [Question.from_record(r) for r in json.loads(path.read_text())]
    rows = [q for q in rows if q.gold_passage_ids()]
    picks = np.random.default_rng(0).choice(len(rows), size=min(n, len(rows)), replace=False)
    return [rows[i] for i in sorted(picks)]


def run_size(base: PortfolioBundle, n: int, args: argparse.Namespace, questions: list[Question]) -> dict[str, Any]:
    work = args.work / f"n{n}"
    filler_s = build_s = save_s = float("nan")
    notes: dict[str, Any] = {}
    if not (args.reuse and (work / "bundle" / "manifest.json").is_file()):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        start = time.perf_counter()
        grown, notes = (base, {}) if n <= len(base.corpus) else grown_bundle(base, n, args.encode_sample)
        filler_s = time.perf_counter() - start
        start = time.perf_counter()
        indexed = with_indexes(grown)
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        save_bundle(indexed, work / "bundle")
        save_s = time.perf_counter() - start
        del grown, indexed
    sizes = {part: folder_bytes(work / "bundle" / part) for part in ("embeddings", "indexes")}
    sizes["all"] = folder_bytes(work / "bundle")
    start = time.perf_counter()
    loaded = load_bundle(work / "bundle")  # as the service does: verify every checksum, map the arrays
    load_s = time.perf_counter() - start
    recall = dense_recall(loaded, questions)
    texts = [q.question for q in questions]
    service = measure_service(work / "bundle", texts, args.lone, args.concurrent, work, args.query_engine)
    kinds = [f"{i.kind} {json.dumps(i.key)}" for i in loaded.indexes]
    result = {"n": len(loaded.corpus), "filler_s": filler_s, "build_s": build_s, "save_s": save_s, "load_s": load_s,
              "sizes": sizes, "notes": notes, "recall": recall, "service": service, "indexes": kinds}
    if not args.keep:
        shutil.rmtree(work / "bundle")
    print(json.dumps({k: v for k, v in result.items() if k != "service"}, default=str), flush=True)
    return result


def report(results: list[dict[str, Any]], args: argparse.Namespace, loads: tuple[str, str], base: PortfolioBundle) -> str:
    gib = 2**30
    lines = [
        "# A million passages: build, size, start-up, memory and latency of a bundle", "",
        f"Command: `python {shlex.join(sys.argv)}` (from the repository root).", "",
        f"- Machine: {machine()}; client and server share it. Load average (1/5/15 min) before: {loads[0]}; "
        f"after: {loads[1]}.",
        f"- Base bundle: `{base.name}` (k={base.k}, router `{base.router.name}`, default l={base.default_l}, "
        f"{len(base.corpus):,} passages), members {', '.join(m.name for m in base.members)}.",
        "- Filler passages and their stand-in vectors: see the module docstring of `benchmarks/bench_million.py`.",
        f"- Query engine: {args.query_engine or 'as the bundle says'}. Worker RSS is read after the load phases.",
        "",
        "| passages | build indexes (s) | write bundle (s) | on disk (GiB): all / embeddings / indexes | "
        "load + verify in process (s) | service ready (s) | worker RSS, MiB (anon + file) | "
        "`/retrieve` lone p50 / p95 (ms) | at 16 in flight: req/s, p99 (ms) | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s, m = r["service"], r["service"]["memory_after"]
        lone, busy = s["lone"], s["busy"]
        p50, p95 = np.percentile(lone.latencies_ms, [50, 95])
        p99 = np.percentile(busy.latencies_ms, 99)
        errors = sum(x != 200 for x in lone.statuses + busy.statuses)
        z = r["sizes"]
        lines.append(
            f"| {r['n']:,} | {r['build_s']:.0f} | {r['save_s']:.0f} | {z['all'] / gib:.2f} / {z['embeddings'] / gib:.2f} / "
            f"{z['indexes'] / gib:.2f} | {r['load_s']:.1f} | {s['ready_s']:.1f} | {m['worker_anon'] + m['worker_file']:.0f} "
            f"({m['worker_anon']:.0f} + {m['worker_file']:.0f}); all processes {m['rss_total']:.0f} | {p50:.0f} / {p95:.0f} | "
            f"{len(busy.statuses) / busy.wall_s:.1f}, {p99:.0f} | {errors} |")
    lines += ["", "Indexes each bundle holds:", ""]
    lines += [f"- {r['n']:,}: " + "; ".join(r["indexes"]) for r in results]
    lines += ["", "Dense top-4 support recall, HNSW (M=32, efConstruction 40, efSearch 256) against exact search "
              "over the same vectors, and a lone query's search time (the index alone, one thread of the rig):", "",
              "| passages | encoder | in the bundle | questions | exact | HNSW | HNSW - exact [95%] | exact ms | HNSW ms |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for name, v in r["recall"].items():
            d = v["diff"]
            lines.append(f"| {r['n']:,} | {name} | {v['in_bundle']} | {v['n']} | {v['exact']:.3f} | {v['hnsw']:.3f} | "
                         f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}] | {v['ms']['exact']:.1f} | {v['ms']['hnsw']:.2f} |")
    lines += ["", "HNSW's efSearch (the shipped setting: 256) against exact search: recall difference [95%], ms a lone query:",
              "", "| passages | encoder | " + " | ".join(f"efSearch {ef}" for ef in EF_SWEEP) + " |",
              "|---|---|" + "---|" * len(EF_SWEEP)]
    for r in results:
        for name, v in r["recall"].items():
            cells = [f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}], {ms:.2f} ms" for d, ms in v["sweep"].values()]
            lines.append(f"| {r['n']:,} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "The stand-in vectors of the filler passages, against the encoders' real vectors of the same text:", "",
              "| passages | encoder | real encoding (passages/s) | hours to encode the filler for real | "
              "stand-in cosine to real: mean, 10th percentile |", "|---|---|---|---|---|"]
    for r in results:
        for name, v in r["notes"].items():
            lines.append(f"| {r['n']:,} | {name} | {v['passages_per_s']:.0f} | {v['hours_for_filler']:.1f} | "
                         f"{v['stand_in_cosine_mean']:.3f}, {v['stand_in_cosine_p10']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, default=Path("data/06_models/served.json"))
    parser.add_argument("--questions", type=Path, default=Path("data/02_intermediate/questions.json"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 100_000, 1_000_000],
                        help="corpus sizes; 0 (or any size up to the base's): the base corpus alone")
    parser.add_argument("--n-questions", type=int, default=600)
    parser.add_argument("--encode-sample", type=int, default=512)
    parser.add_argument("--lone", type=int, default=100)
    parser.add_argument("--query-engine", choices=["torch", "onnxruntime"], help="serving.query_engine (default: the bundle's)")
    parser.add_argument("--concurrent", type=int, default=400)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragfolio_rig"))
    parser.add_argument("--keep", action="store_true", help="keep each size's bundle")
    parser.add_argument("--reuse", action="store_true",
                        help="measure a size's bundle kept by an earlier --keep run instead of building it")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    loads = [load_average()]
    base = load_bundle(resolve_bundle(args.bundle), verify=False)
    questions = sample_questions(args.questions, args.n_questions)
    results = [run_size(base, n, args, questions) for n in args.sizes]
    loads.append(load_average())
    text = report(results, args, (loads[0], loads[1]), base)
    print(text)
    if args.out:
        args.out.write_text(text)
    subprocess.run(["df", "-h", str(args.work)], check=False)


if __name__ == "__main__":
    main()
