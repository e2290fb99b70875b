"""Corpus-encoding throughput of the configured encoders on real passages of the bundled sample.

    .venv/bin/python benchmarks/bench_encoders.py --n 300

Encoding the corpus is most of a first run's time, so this is what sizes ``max_words`` and
``max_seq_length`` in conf/base/parameters_candidate_scoring.yml.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import yaml

from ragfolio.core.data import build_corpus
from ragfolio.core.encoders import make_encoder
from ragfolio.core.loading import load_folder
from ragfolio.core.pool_runner import passage_texts

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="passages to encode")
    args = parser.parse_args()
    params = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())["candidate_scoring"]
    corpus = build_corpus(load_folder(ROOT / "data/01_raw"))
    texts = passage_texts(corpus.titles, corpus.texts)[: args.n]
    print(f"{len(texts)} passages of data/01_raw, {os.cpu_count()} cores")
    print("| encoder | config | ms per passage | passages/s | 10,304 passages (shared data) |")
    print("|---|---|---:|---:|---:|")
    for name, spec in params["encoders"].items():
        encoder = make_encoder({**spec, "show_progress": False})
        encoder.encode_passages(texts[:8])  # load the model outside the timing
        start = time.perf_counter()
        encoder.encode_passages(texts)
        per = (time.perf_counter() - start) / len(texts)
        config = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "kind")
        print(f"| {name} ({spec['kind']}) | {config} | {1000 * per:.1f} | {1 / per:.1f} | {10304 * per / 60:.1f} min |")


if __name__ == "__main__":
    main()
