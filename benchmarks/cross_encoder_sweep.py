"""Choose the cross-encoder's training settings on dev: a sweep over head, learning rate and train questions.

Each setting trains the cross-encoder exactly as ``candidate_scoring`` does (train questions only,
early stopping on dev; :func:`ragfolio.pipelines.candidate_scoring.reranker_training.train_cross_encoder`)
and is judged by the dev questions' MRR and recall@4 of the first stage's top ``dev_depth``
passages reranked, pooled over corpora, with the paired difference from the first stage. Test
questions are not read: measure the chosen setting on test with ``cross_encoder_quality.py``. The
trained weights are cached in the run's retrieval cache by their settings, so the chosen setting
is not trained again there.

Run from the repository root after ``kedro run --pipelines=data_prep`` on the data to sweep::

    .venv/bin/python benchmarks/cross_encoder_sweep.py [--data-root data] [--poolings mean cls] \
        [--learning-rates 5e-5 2e-4] [--train-questions 0 400] [--epochs 2]

It prints one line per setting and writes ``<data-root>/08_reporting/cross_encoder_sweep.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import time
from pathlib import Path

import yaml

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.pipelines.candidate_scoring.reranker_training import train_cross_encoder


def pooled(dev_quality: list[dict], section: str, metric: str) -> float:
    """The question-weighted mean of ``metric`` over the corpora's dev quality entries."""
    entries = [q for q in dev_quality if q["n"]]
    return sum(q["n"] * q[section][metric]["estimate"] for q in entries) / sum(q["n"] for q in entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--params", type=Path, default=Path("conf/base/parameters_candidate_scoring.yml"))
    parser.add_argument("--poolings", nargs="+", choices=["mean", "cls"], default=["mean"],
                        help="the head: on the mean of the token states, or BERT's on [CLS]")
    parser.add_argument("--learning-rates", nargs="+", type=float, default=[5e-5])
    parser.add_argument("--train-questions", nargs="+", type=int, default=[0],
                        help="max_train_questions values (0: all train questions)")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")  # the dev MRR of each epoch
    params = yaml.safe_load(args.params.read_text())["candidate_scoring"]
    root = args.data_root
    records = json.loads((root / "02_intermediate/questions.json").read_text())
    corpora = Corpora.from_dict(json.loads((root / "03_primary/corpora.json").read_text()))
    cache = ArrayCache(root / "04_feature/retrieval_cache")
    rows = []
    for pooling, lr, n_train in itertools.product(args.poolings, args.learning_rates, args.train_questions):
        settings = {**params["cross_encoder"]["settings"], "pooling": pooling, "learning_rate": lr,
                    "epochs": args.epochs, "max_train_questions": n_train or None}
        run_params = {**params, "cross_encoder": {"train": "always", "settings": settings}}
        start = time.perf_counter()
        trained = train_cross_encoder(records, corpora, [], cache, run_params)
        report = trained.info["report"]
        recall = "recall@4"  # the node's dev quality: the pool's num_docs
        dev_quality = trained.info["dev_quality"]
        rows.append({"pooling": pooling, "learning_rate": lr, "max_train_questions": n_train or None, "pairs": report["pairs"],
                     "dev_mrr_by_epoch": report["dev_mrr_by_epoch"], "epoch_kept": report["epoch_kept"],
                     "train_seconds": report["seconds"], "from_cache": report.get("from_cache", False),
                     "dev_quality": dev_quality,
                     "dev_recall": [pooled(dev_quality, "first_stage", recall), pooled(dev_quality, "reranked", recall)],
                     "seconds": round(time.perf_counter() - start, 1)})
        print(f"{pooling} head, lr {lr:g}, train questions {n_train or 'all'}: {report['pairs']} pairs, dev MRR by epoch "
              f"{[round(m, 3) for m in report['dev_mrr_by_epoch']]} (kept epoch {report['epoch_kept']}), "
              f"dev {recall} {rows[-1]['dev_recall'][0]:.3f} -> {rows[-1]['dev_recall'][1]:.3f}, "
              f"{report['seconds']:.0f} s training", flush=True)
    best = max(rows, key=lambda r: max(r["dev_mrr_by_epoch"] or [-1.0]))
    print(f"best on dev MRR: {best['pooling']} head, lr {best['learning_rate']:g}, train questions {best['max_train_questions'] or 'all'}")
    out = root / "08_reporting/cross_encoder_sweep.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"epochs": args.epochs, "rows": rows, "best": best}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
