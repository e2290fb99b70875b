"""Benchmark in-process BM25: ragfolio's ``BM25Retriever`` (bm25s) against ``rank_bm25``.

Both engines get the same corpus, the same tokens (ragfolio's ``tokenize``: lower-cased words,
English stopwords removed) and the same ``k1`` and ``b``, so the comparison is of the engines, not
of tokenisers. Per corpus it reports index time, queries per second (all questions, one batch
for bm25s, one ``get_scores`` + ``argpartition`` per query for rank_bm25; median of
``--repeats``, rank_bm25 once when slower than ``--slow-seconds``) and the agreement of the
top-4 lists: mean ``|top4_bm25s & top4_rank_bm25| / 4`` over queries with a non-empty result.

Corpora: ``sample`` = every dataset's passages in ``data/03_primary/corpora.json`` with the
questions of ``data/02_intermediate/questions.json``; ``shared`` = the pooled contexts of every
``*.jsonl`` in ``--shared`` (``/work/shared/data``) with all their questions, when present.

Run from the repository root::

    .venv/bin/python benchmarks/bench_bm25.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever, tokenize
from ragfolio.core.retrieval.running.pool_runner import passage_texts

K = 4


def sample_corpus(root: Path) -> tuple[list[str], list[str]]:
    corpora = json.loads((root / "data/03_primary/corpora.json").read_text())
    seen: dict[str, str] = {}
    for passages in corpora["corpora"].values():  # ragfolio.core.data.corpora.Corpora.to_json
        for p in passages:
            seen.setdefault(p["id"], f"{p['title']}. {p['text']}")
    questions = json.loads((root / "data/02_intermediate/questions.json").read_text())
    return list(seen.values()), [q["question"] for q in questions]


def shared_corpus(folder: Path) -> tuple[list[str], list[str]]:
    questions = load_folder(folder)
    corpus = build_corpus(questions)
    return passage_texts(corpus.titles, corpus.texts), [q.question for q in questions]


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def rank_bm25_top(engine: Any, query_tokens: list[list[str]], k: int) -> list[list[int]]:
    top = []
    for tokens in query_tokens:
        scores = engine.get_scores(tokens)
        idx = np.argpartition(-scores, k)[:k]
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        top.append([int(i) for i in idx if scores[i] > 0])
    return top


def bench_corpus(name: str, texts: list[str], queries: list[str], k1: float, b: float,
                 repeats: int, slow_seconds: float) -> dict[str, object]:
    from rank_bm25 import BM25Okapi

    tokens = tokenize(texts)
    query_tokens = tokenize(queries)
    out: dict[str, object] = {"corpus": name, "passages": len(texts), "queries": len(queries)}
    rows: dict[str, dict[str, float]] = {}
    tops: dict[str, list[list[int]]] = {}
    for method in ("lucene", "robertson"):
        label = f"ragfolio BM25Retriever (bm25s, {method})"
        index_s, retriever = timed(
            lambda m=method: BM25Retriever(k1=k1, b=b, method=m).index(texts, tokens=tokens),
            repeats)
        query_s, result = timed(lambda r=retriever: r.retrieve(queries, K), repeats)
        tops[method] = [[int(i) for i in row if i >= 0] for row in result.doc_ids]
        rows[label] = {"index_s": index_s, "query_s": query_s}
    index_s, engine = timed(lambda: BM25Okapi(tokens, k1=k1, b=b), repeats)
    start = time.perf_counter()
    tops["rank_bm25"] = rank_bm25_top(engine, query_tokens, K)
    query_s = time.perf_counter() - start
    if query_s < slow_seconds and repeats > 1:
        query_s, _ = timed(lambda: rank_bm25_top(engine, query_tokens, K), repeats)
    rows["rank_bm25 BM25Okapi"] = {"index_s": index_s, "query_s": query_s}
    for row in rows.values():
        row["qps"] = len(queries) / row["query_s"]
    out["rows"] = rows
    for method in ("lucene", "robertson"):
        pairs = [(a, c) for a, c in zip(tops[method], tops["rank_bm25"], strict=True) if a or c]
        out[f"overlap_{method}"] = float(np.mean([len(set(a) & set(c)) / K for a, c in pairs]))
        out[f"identical_{method}"] = float(np.mean([a == c for a, c in pairs]))
    return out


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--shared", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--k1", type=float, default=1.5, help="rank_bm25's default")
    parser.add_argument("--b", type=float, default=0.75)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slow-seconds", type=float, default=10.0,
                        help="rank_bm25 query runs longer than this are not repeated")
    parser.add_argument("--out", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    import rank_bm25  # noqa: F401  (fail early with the missing package's name)

    corpora = {"sample (data/03_primary/corpora.json)": sample_corpus(args.root)}
    if args.shared.is_dir():
        corpora[f"shared ({args.shared})"] = shared_corpus(args.shared)
    results = []
    for name, (texts, queries) in corpora.items():
        print(f"{name}: {len(texts)} passages, {len(queries)} queries", file=sys.stderr)
        results.append(bench_corpus(name, texts, queries, args.k1, args.b, args.repeats,
                                    args.slow_seconds))
    lines = [
        f"| corpus | passages | queries | engine | index (s) | queries/s | top-{K} overlap "
        "with rank_bm25 | identical top-4 lists |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        for label, row in r["rows"].items():  # type: ignore[attr-defined]
            method = next((m for m in ("lucene", "robertson") if m in label), None)
            overlap = "-" if method is None else f"{r[f'overlap_{method}']:.3f}"
            same = "-" if method is None else f"{r[f'identical_{method}']:.3f}"
            lines.append(f"| {r['corpus']} | {r['passages']:,} | {r['queries']:,} | {label} "
                         f"| {row['index_s']:.3f} | {row['qps']:,.0f} | {overlap} | {same} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.write_text(report)
    return report


if __name__ == "__main__":
    main()
