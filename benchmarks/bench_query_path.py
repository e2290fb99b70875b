"""The query path's first measurement (issue 26): E5 query encoding in fp32 and torch int8, alone and batched.

For every question of a run with contexts, encodes the query with the served E5 (``e5_torch``) as
it is today (fp32) and with its linear layers dynamically quantised to int8
(:func:`torch.ao.quantization.quantize_dynamic`, queries only: the passages keep their fp32
embeddings from the bundle), then retrieves the top ``k`` passages by inner product over the
bundle's passage embeddings. Prints, per setting: ms per lone query (batch 1, the service's lone
request), queries/s in batches of 64, the smallest cosine between its query embeddings and fp32's,
support recall@k, and its paired difference from fp32 with a 95% bootstrap interval.

    .venv/bin/python benchmarks/bench_query_path.py --bundle data/06_models/bundle \\
        --questions data/02_intermediate/questions.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from report_tables import interval_text

from ragfolio.core.bundle import load_bundle
from ragfolio.core.data.records import Question
from ragfolio.core.metrics import support_recall
from ragfolio.core.retrieval.encoders.e5_torch import E5TorchEncoder
from ragfolio.core.stats import mean_intervals, paired_differences

ROOT = Path(__file__).resolve().parents[1]


def int8(encoder: E5TorchEncoder) -> E5TorchEncoder:
    """``encoder`` with its model's linear layers dynamically quantised to int8 (a copy)."""
    quantised = E5TorchEncoder(max_words=encoder.max_words, batch_size=encoder.batch_size, show_progress=False)
    tokenizer, model = encoder._load()
    quantised._loaded = tokenizer, torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return quantised


def timed(encoder: E5TorchEncoder, texts: list[str], batch: int) -> tuple[np.ndarray, float]:
    """Embeddings of ``texts`` encoded ``batch`` at a time, and the seconds it took (after one warm-up)."""
    encoder.batch_size = batch
    encoder.encode_queries(texts[:batch])
    start = time.perf_counter()
    parts = [encoder.encode_queries(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    return np.concatenate(parts), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "data/06_models/bundle")
    parser.add_argument("--questions", type=Path, default=ROOT / "data/02_intermediate/questions.json")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_bundle(args.bundle)
    row_of = bundle.corpus.row_of()
    questions = [Question.from_record(r, source="questions") for r in json.loads(args.questions.read_text())]
    questions = [q for q in questions if q.has_contexts and all(g in row_of for g in q.gold_passage_ids())]
    texts = [q.question for q in questions]
    gold = [[row_of[g] for g in q.gold_passage_ids()] for q in questions]
    passages = bundle.embeddings["e5"]
    options: dict[str, Any] = bundle.scoring["encoders"]["e5"]
    base = E5TorchEncoder(max_words=options.get("max_words", 48), show_progress=False)
    settings = {"fp32": base, "int8 (queries)": int8(base)}
    recalls, rows, reference = {}, [], None
    for name, encoder in settings.items():
        emb, batched_s = timed(encoder, texts, 64)
        _, lone_s = timed(encoder, texts, 1)
        reference = emb if reference is None else reference
        top = np.argsort(-(emb @ passages.T), axis=1, kind="stable")[:, : args.k]
        recalls[name] = np.array([support_recall(t.tolist(), g, args.k) for t, g in zip(top, gold, strict=True)])
        rows.append((name, 1000 * lone_s / len(texts), len(texts) / batched_s, float((emb * reference).sum(1).min())))
    print(f"{len(texts)} questions, {len(passages)} passages, torch threads {args.threads}\n")
    print(f"| setting | ms / lone query | queries/s, batches of 64 | min cosine to fp32 | recall@{args.k} [95%] "
          f"| minus fp32 [95%] |\n|---|---|---|---|---|---|")
    for name, lone_ms, qps, cosine in rows:
        mean = mean_intervals(recalls[name][:, None])[0].to_dict()
        diff = paired_differences(recalls[name][:, None], recalls["fp32"][:, None])[0].to_dict()
        print(f"| {name} | {lone_ms:.1f} | {qps:.0f} | {cosine:.4f} | {interval_text(mean).replace('+', '')} "
              f"| {interval_text(diff)} |")


if __name__ == "__main__":
    main()
