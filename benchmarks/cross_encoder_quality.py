"""The cross-encoder's own quality: recall@4 and MRR of the gold passages, reranked vs the first stage.

For each first stage (``--bases``) and split (dev, test), the first stage's top ``--depth`` passages
of every question are reranked by the trained cross-encoder, and both orders are scored against the
supporting passages (:func:`ragfolio.core.retrieval.reranking.rerank_quality.rerank_quality`: means
with 95% bootstrap intervals and the paired difference reranked − first stage). ``--fusions``: the
order by the cross-encoder alone (``none``) and/or fused with the first stage's (``rrf``), as the
``cross_encoder`` family ranks with each (:func:`ragfolio.core.retrieval.families.cross_encoder.rerank`). The model is the
run's (``<data-root>/06_models/cross_encoder``); when that folder holds none, it is trained first
as ``candidate_scoring`` trains it (``cross_encoder.train: always``; train questions only) and saved
there. Inputs are a run's data_prep outputs; first stages come from its retrieval cache.

Run from the repository root after ``kedro run --pipelines=data_prep`` (or ``make run``)::

    .venv/bin/python benchmarks/cross_encoder_quality.py [--data-root data] [--bases bm25 dense:minilm] [--depth 20] \
        [--fusions none rrf]

It prints one line per split and base and writes ``<data-root>/08_reporting/cross_encoder_quality.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import yaml

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.retrieval.families.cross_encoder import rerank
from ragfolio.core.retrieval.reranking.cross_encoder_folder import load_cross_encoder
from ragfolio.core.retrieval.reranking.labelled_pairs import rerank_cases, split_questions
from ragfolio.core.retrieval.reranking.rerank_quality import rerank_quality
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.scoring.runners import CorpusRunners
from ragfolio.core.stats import interval_text
from ragfolio.datasets.cross_encoders import CrossEncoderDataset
from ragfolio.pipelines.candidate_scoring.nodes import pool_settings
from ragfolio.pipelines.candidate_scoring.reranker_training import train_cross_encoder


def order_scores(first: RetrievalResult, scores: npt.NDArray[np.float32], fusion: str) -> npt.NDArray[np.float64]:
    """``(n, depth)`` scores of ``first``'s rows that sort them as :func:`rerank` with ``fusion`` does."""
    ranked = rerank(first, scores, first.k, fusion).doc_ids
    position = {(i, int(d)): j for i, row in enumerate(ranked) for j, d in enumerate(row) if d >= 0}
    return np.array([[-position.get((i, int(d)), first.k) for d in row] for i, row in enumerate(first.doc_ids)],
                    dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--params", type=Path, default=Path("conf/base/parameters_candidate_scoring.yml"))
    parser.add_argument("--bases", nargs="+", default=["bm25", "dense:minilm"])
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--fusions", nargs="+", choices=["none", "rrf"], default=["none"])
    args = parser.parse_args()
    params = yaml.safe_load(args.params.read_text())["candidate_scoring"]
    params = {**params, "cross_encoder": {**params.get("cross_encoder", {}), "train": "always"}}
    root = args.data_root
    records = json.loads((root / "02_intermediate/questions.json").read_text())
    corpora = Corpora.from_dict(json.loads((root / "03_primary/corpora.json").read_text()))
    cache = ArrayCache(root / "04_feature/retrieval_cache")
    dataset = CrossEncoderDataset(str(root / "06_models/cross_encoder"))
    if not dataset.exists() or dataset.load().model_path is None:
        start = time.perf_counter()
        dataset.save(train_cross_encoder(records, corpora, [], cache, params))
        print(f"trained in {time.perf_counter() - start:.0f} s into {root / '06_models/cross_encoder'}")
    folder = dataset.load()
    scorer = load_cross_encoder(folder.path)
    runners = CorpusRunners(corpora, cache, pool_settings(params, folder))
    report: dict[str, dict[str, list[dict]]] = {}
    for split in ("dev", "test"):
        questions = split_questions(records, split)
        for base in args.bases:
            entries = report.setdefault(split, {}).setdefault(base, [])
            for name in dict.fromkeys(corpora.name_for(q.dataset) for q in questions):
                mine = [q for q in questions if corpora.name_for(q.dataset) == name]
                runner = runners.get(name)
                ranking = runner.base(base, [q.question for q in mine])
                first = RetrievalResult(ranking.doc_ids[:, : args.depth], ranking.scores[:, : args.depth])
                cases = rerank_cases(mine, corpora.corpora[name], first.doc_ids)
                scores = scorer.score_rows(cases.queries, runner.passage_texts, first.doc_ids)
                for fusion in args.fusions:
                    quality = rerank_quality(cases, order_scores(first, scores, fusion), k=args.k)
                    entries.append({"corpus": name, "fusion": fusion, **quality})
                    recall = f"recall@{args.k}"
                    print(f"{split:4s} {base:13s} {name:10s} {fusion:4s} n={quality['n']:4d}  {recall} "
                          f"{quality['first_stage'][recall]['estimate']:.3f} -> {quality['reranked'][recall]['estimate']:.3f} "
                          f"(diff {interval_text(quality['difference'][recall])})  MRR "
                          f"{quality['first_stage']['mrr']['estimate']:.3f} -> {quality['reranked']['mrr']['estimate']:.3f} "
                          f"(diff {interval_text(quality['difference']['mrr'])})", flush=True)
    out = root / "08_reporting/cross_encoder_quality.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((Path(folder.path) / "ragfolio_cross_encoder.json").read_text())
    out.write_text(json.dumps({"depth": args.depth, "k": args.k, "model": manifest["digest"][:12],
                               "training": {k: v for k, v in manifest["training"].items() if k != "train_question_ids"},
                               "quality": report}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
