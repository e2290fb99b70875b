"""What each query block of the paper router costs a query: E5, MiniLM, all-mpnet-base-v2, Gemma-3-270M.

    .venv/bin/python benchmarks/bench_paper_encoders.py --queries 128

The first ``--queries`` questions of ``--data`` (the bundled sample by default, taken in turn from
each file) are encoded by each block's encoder in its own batches (32 texts), once to load and warm
it, then timed (:func:`ragfolio_lab.routers.paper_encoders.time_blocks`); ``--repeats`` timed passes
give the median. The pool's encoders are configured as in conf/base/parameters_candidate_scoring.yml;
``mpnet`` is skipped (said so) when its optional packages are missing. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path

import torch
import yaml

from ragfolio.core.data.loading import load_folder
from ragfolio.core.retrieval.encoders.kinds import Encoder, make_encoder
from ragfolio_lab.routers.paper_encoders import (
    PAPER_ENCODERS,
    check_installed,
    make_block_encoder,
    time_blocks,
)

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "01_raw")
    parser.add_argument("--queries", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blocks", nargs="+", default=["e5", "minilm", *PAPER_ENCODERS])
    args = parser.parse_args()
    by_dataset: dict[str, list[str]] = {}
    for q in load_folder(args.data):
        by_dataset.setdefault(q.dataset, []).append(q.question)
    mixed = [t for group in itertools.zip_longest(*by_dataset.values()) for t in group if t is not None]
    texts = mixed[: args.queries]
    config = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())
    pool = config["candidate_scoring"]["encoders"]
    encoders: dict[str, Encoder] = {}
    for name in args.blocks:
        if name in PAPER_ENCODERS:
            try:
                check_installed([name])
            except ImportError as err:
                print(f"skipped {name}: {err}")
                continue
            encoders[name] = make_block_encoder(name)
        else:
            encoders[name] = make_encoder({**pool[name], "show_progress": False})
    runs = [time_blocks(encoders, texts) for _ in range(args.repeats)]
    print(f"{len(texts)} questions, batches of 32, torch threads {torch.get_num_threads()}, "
          f"median of {args.repeats} timed passes\n")
    print("| block | encoder | dim | ms / query |")
    print("|---|---|---|---|")
    for name in encoders:
        ms = statistics.median(run[name]["ms_per_query"] for run in runs)
        source = "Gemma-3-270M mean-pooled" if name == "gemma" else pool.get(name, {}).get("model", name)
        if name == "mpnet":
            source = "all-mpnet-base-v2"
        print(f"| {name} | {source} | {runs[0][name]['dim']} | {ms:.2f} |")


if __name__ == "__main__":
    main()
