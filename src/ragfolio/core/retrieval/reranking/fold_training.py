"""Training cross-fitting's fold models (:mod:`ragfolio.core.retrieval.reranking.cross_fitting`).

Apart from the folds' record, which pool runners (and so the service) read: they run no training,
so they import none of its code.
"""

from __future__ import annotations

import logging

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.reranking.cross_fitting import CrossFitting, TrainedCrossFitting
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings, DevSet, cached_fit
from ragfolio.core.retrieval.reranking.labelled_pairs import LabelledPairs

logger = logging.getLogger(__name__)


def fit_folds(
    cache: ArrayCache, pairs: LabelledPairs, dev: DevSet, settings: CrossEncoderSettings, k: int
) -> TrainedCrossFitting:
    """Fold models of the questions of ``pairs``: fold ``f``'s trained, as the full model is, on the
    pairs of every other fold (same settings and dev set), each cached like it
    (:func:`~ragfolio.core.retrieval.reranking.fine_tuning.cached_fit` with ``fold="f/k"``).

    Args:
        cache: The retrieval cache (the fold models' weights).
        pairs: The full model's training pairs.
        dev: Its early-stopping cases.
        settings: Its settings (``seed`` also seeds the folds).
        k: The number of folds (>= 2).
    """
    texts = dict(zip(pairs.question_ids, pairs.queries, strict=True))
    fitting = CrossFitting.of(texts, k, settings.seed)
    scorers, infos = [], []
    for fold in range(k):
        held_out = fitting.questions(fold)
        fold_pairs = pairs.without(held_out)
        scorer, report = cached_fit(cache, fold_pairs, dev, settings, fold=f"{fold}/{k}")
        trained_on = sorted(set(fold_pairs.question_ids))  # what it saw, as the full model's record says
        logger.info("cross-encoder fold %d/%d: trained on %d questions, scores %d", fold + 1, k, len(trained_on),
                    len(held_out))
        scorers.append(scorer)
        infos.append({"fold": fold, "k": k, "settings": settings.to_dict(), "report": report,
                      "train_question_ids": trained_on, "scored_question_ids": held_out})
    return TrainedCrossFitting(tuple(scorers), fitting, {"folds": infos})
