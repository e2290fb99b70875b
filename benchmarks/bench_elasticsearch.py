"""Benchmark the Elasticsearch BM25 backend against in-process BM25 (bm25s) on one corpus.

Indexes the pooled passages of a folder of question JSONL files (``tests/fixtures/tiny`` by
default) into the cluster at ``ELASTICSEARCH_URL`` (credentials as in
docs/cluster_elasticsearch.md), runs every question through both backends with the same ``k1``,
``b`` and stopwords, and prints index time, queries per second (median of ``--repeats``) and the
mean top-``k`` rank overlap ``|A & B| / max(|A|, |B|)``.

Run from the repository root::

    ELASTICSEARCH_URL=http://localhost:9200 .venv/bin/python benchmarks/bench_elasticsearch.py data/01_raw

Without ``ELASTICSEARCH_URL`` it says so and exits with status 2. The index stays in the cluster
(re-running reuses it); ``--delete`` removes it at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever
from ragfolio.core.retrieval.indexes.elasticsearch_requests import rank_overlap
from ragfolio.core.retrieval.indexes.elasticsearch_settings import ElasticsearchSettings
from ragfolio.core.retrieval.running.pool_runner import passage_texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="tests/fixtures/tiny", type=Path, help="folder of question JSONL")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--k1", type=float, default=1.2)
    parser.add_argument("--b", type=float, default=0.75)
    parser.add_argument("--stopwords", choices=["english", "none"], default="english")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--delete", action="store_true", help="delete the index afterwards")
    args = parser.parse_args()
    if not os.environ.get("ELASTICSEARCH_URL"):
        print("ELASTICSEARCH_URL is not set: start Elasticsearch 8/9 and export ELASTICSEARCH_URL=http://host:9200 "
              "(see docs/cluster_elasticsearch.md); nothing was run.", file=sys.stderr)
        return 2

    questions = load_folder(args.folder)
    corpus = build_corpus(questions)
    texts, queries = passage_texts(corpus.titles, corpus.texts), [q.question for q in questions]
    params = {"k1": args.k1, "b": args.b, "stopwords": args.stopwords}
    print(f"{args.folder}: {len(texts)} passages, {len(queries)} queries, {params}")

    start = time.perf_counter()
    inprocess = BM25Retriever(**params).index(texts)
    t_inprocess = time.perf_counter() - start
    start = time.perf_counter()
    cluster = ElasticsearchBM25Retriever(ElasticsearchSettings.resolve(), **params).index(texts, list(corpus.ids))
    t_cluster = time.perf_counter() - start
    print(f"index  in-process {t_inprocess:8.2f} s   elasticsearch {t_cluster:8.2f} s   ({cluster.index_name_})")

    def qps(retriever: BM25Retriever | ElasticsearchBM25Retriever) -> float:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            retriever.retrieve(queries, args.k)
            times.append(time.perf_counter() - start)
        return len(queries) / statistics.median(times)

    print(f"qps    in-process {qps(inprocess):8.1f}     elasticsearch {qps(cluster):8.1f}")
    overlap = rank_overlap(cluster.retrieve(queries, args.k), inprocess.retrieve(queries, args.k), args.k)
    print(f"overlap@{args.k}: mean {overlap.mean():.3f}, identical top-{args.k} sets {(overlap == 1).mean():.1%}")
    if args.delete:
        cluster.client.indices.delete(index=cluster.index_name_)
    return 0


if __name__ == "__main__":
    sys.exit(main())
