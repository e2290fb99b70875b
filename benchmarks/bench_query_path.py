"""The query path (issue 26): each served encoder's queries in torch fp32, torch int8 and ONNX Runtime.

For every question of a run with contexts (or a seeded sample, ``--n-questions``), encodes the query
with each encoder of the bundle as torch runs it (fp32), with E5's linear layers dynamically
quantised to int8 (:func:`torch.ao.quantization.quantize_dynamic`), and with the same weights
exported to ONNX and run by ONNX Runtime (``query_engine: onnxruntime``,
:mod:`ragfolio.core.retrieval.encoders.onnx_queries`); queries only: the passages keep the bundle's
fp32 embeddings. Retrieves the top ``k`` passages by inner product over them. Prints, per encoder and
setting: ms per lone query (batch 1, the service's lone request), queries/s in batches of 16 and 64,
the smallest cosine between its query embeddings and torch fp32's, support recall@k, and its paired
difference from torch fp32 with a 95% bootstrap interval.

    .venv/bin/python benchmarks/bench_query_path.py --bundle data/06_models/served.json \\
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

from ragfolio.core.bundle import load_bundle, resolve_bundle
from ragfolio.core.data.records import Question
from ragfolio.core.metrics import support_recall
from ragfolio.core.retrieval.encoders.e5_torch import E5TorchEncoder
from ragfolio.core.retrieval.encoders.kinds import make_encoder, with_query_engine
from ragfolio.core.stats import interval_text, mean_intervals, paired_differences

ROOT = Path(__file__).resolve().parents[1]


def int8(encoder: E5TorchEncoder) -> E5TorchEncoder:
    """``encoder`` with its model's linear layers dynamically quantised to int8 (a copy)."""
    quantised = E5TorchEncoder(max_words=encoder.max_words, batch_size=encoder.batch_size, show_progress=False)
    tokenizer, model = encoder._load()
    quantised._loaded = tokenizer, torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return quantised


def timed(encoder: Any, texts: list[str], batch: int) -> tuple[np.ndarray, float]:
    """Embeddings of ``texts`` encoded ``batch`` at a time, and the seconds it took (after one warm-up)."""
    encoder.batch_size = batch
    encoder.encode_queries(texts[:batch])
    start = time.perf_counter()
    parts = [encoder.encode_queries(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    return np.concatenate(parts), time.perf_counter() - start


def settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The settings measured for one encoder: torch fp32 first (the reference), then the others."""
    engines = {engine: with_query_engine({"x": {**spec, "show_progress": False}}, engine)["x"]
               for engine in ("torch", "onnxruntime")}
    out: dict[str, Any] = {"torch fp32": make_encoder(engines["torch"])}
    if spec["kind"] == "e5_torch":
        out["torch int8"] = int8(out["torch fp32"])
    out["onnxruntime fp32"] = make_encoder(engines["onnxruntime"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "data/06_models/served.json")
    parser.add_argument("--questions", type=Path, default=ROOT / "data/02_intermediate/questions.json")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--n-questions", type=int, default=0, help="a seeded sample of this many questions (0: all)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_bundle(resolve_bundle(args.bundle))
    row_of = bundle.corpus.row_of()
    questions = [Question.from_record(r, source="questions") for r in json.loads(args.questions.read_text())]
    questions = [q for q in questions if q.has_contexts and all(g in row_of for g in q.gold_passage_ids())]
    if 0 < args.n_questions < len(questions):
        picks = np.random.default_rng(0).choice(len(questions), size=args.n_questions, replace=False)
        questions = [questions[i] for i in sorted(picks)]
    texts = [q.question for q in questions]
    gold = [[row_of[g] for g in q.gold_passage_ids()] for q in questions]
    print(f"{len(texts)} questions, {len(bundle.corpus)} passages, torch threads {args.threads}\n")
    print(f"| encoder | setting | ms / lone query | queries/s, batches of 16 | of 64 | min cosine to torch fp32 "
          f"| recall@{args.k} [95%] | minus torch fp32 [95%] |\n|---|---|---|---|---|---|---|---|", flush=True)
    for name, spec in bundle.scoring.encoders.items():
        passages = np.asarray(bundle.embeddings[name])
        reference, reference_hits = None, None
        for label, encoder in settings(spec).items():
            emb, batched_s = timed(encoder, texts, 64)
            _, sixteen_s = timed(encoder, texts, 16)
            _, lone_s = timed(encoder, texts, 1)
            reference = emb if reference is None else reference
            top = np.argsort(-(emb @ passages.T), axis=1, kind="stable")[:, : args.k]
            hits = np.array([support_recall(t.tolist(), g, args.k) for t, g in zip(top, gold, strict=True)])
            reference_hits = hits if reference_hits is None else reference_hits
            mean = mean_intervals(hits[:, None])[0].to_dict()
            diff = paired_differences(hits[:, None], reference_hits[:, None])[0].to_dict()
            print(f"| {name} | {label} | {1000 * lone_s / len(texts):.1f} | {len(texts) / sixteen_s:.0f} | "
                  f"{len(texts) / batched_s:.0f} | {float((emb * reference).sum(1).min()):.7f} | "
                  f"{interval_text(mean).replace('+', '')} | {interval_text(diff)} |", flush=True)


if __name__ == "__main__":
    main()
