"""Node of ``candidate_scoring`` that trains the cross-encoder the ``cross_encoder`` family scores with.

It runs before the candidates are scored: when ``cross_encoder.train`` is ``always``, or ``auto``
(the default) and the grid holds the family. Its pairs are the **train** questions' (question,
passage, is_supporting) pairs with hard negatives from the first stage; its early stopping reads the
dev questions; test questions are not read. With ``cross_encoder.folds`` K >= 2 (the default, 5)
it also trains K fold models (:func:`ragfolio.core.retrieval.reranking.fold_training.fit_folds`), each
on the train questions outside its fold, which score their fold's questions in every later stage
(cross-fitting: train rows are not scored by a model that saw them). The weights are cached in the
retrieval cache by content (:func:`ragfolio.core.retrieval.reranking.fine_tuning.cached_fit`), so a
rerun loads them.
"""

from __future__ import annotations

import logging
from typing import Any

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.retrieval.reranking.cross_encoder_folder import TrainedCrossEncoder
from ragfolio.core.retrieval.reranking.cross_fitting import TrainedCrossFitting
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings, DevSet, cached_fit
from ragfolio.core.retrieval.reranking.fold_training import fit_folds
from ragfolio.core.retrieval.reranking.labelled_pairs import (
    TRAIN_SPLIT,
    LabelledPairs,
    labelled_pairs,
    rerank_cases,
    split_questions,
)
from ragfolio.core.retrieval.reranking.rerank_quality import rerank_quality
from ragfolio.core.scoring.runners import CorpusRunners
from ragfolio.pipelines.candidate_scoring.nodes import CandidateScoringParams

logger = logging.getLogger(__name__)

FAMILY = "cross_encoder"


def train_cross_encoder(
    questions: list[dict[str, Any]],
    corpora: Corpora,
    candidates: list[dict[str, Any]],
    cache: ArrayCache,
    params: dict[str, Any],
) -> tuple[TrainedCrossEncoder, TrainedCrossFitting]:
    """The trained cross-encoder (``cross_encoder``, a folder) and its fold models
    (``cross_encoder_folds``, a folder), or records of why none were trained.

    Args:
        questions: ``data_prep``'s question records (with ``split``).
        corpora: The run's corpora; each question's first stage ranks the corpus its dataset retrieves from.
        candidates: The expanded grid (does it hold the ``cross_encoder`` family?).
        cache: The retrieval cache: the first stages, and the trained weights.
        params: ``candidate_scoring`` parameters (``cross_encoder.train``, ``.folds``, ``.settings``).
    """
    p = CandidateScoringParams(**params)
    in_grid = any(c["family"] == FAMILY for c in candidates)
    if p.cross_encoder.train == "never" or (p.cross_encoder.train == "auto" and not in_grid):
        reason = f"cross_encoder.train={p.cross_encoder.train}, and the grid {'holds' if in_grid else 'lacks'} the family"
        logger.info("cross-encoder: not trained (%s)", reason)
        return TrainedCrossEncoder(None, {"reason": reason}), TrainedCrossFitting(info={"reason": reason})
    settings = CrossEncoderSettings(**p.cross_encoder.settings)
    pairs, dev = training_data(questions, corpora, CorpusRunners(corpora, cache, p.pool_settings()), settings)
    logger.info("cross-encoder: %d pairs (%d supporting) of %d train questions; early stopping on %d dev questions",
                len(pairs), int(sum(pairs.labels)), len(set(pairs.question_ids)), sum(len(c) for c, _ in dev))
    scorer, report = cached_fit(cache, pairs, dev, settings)
    info = {"settings": settings.to_dict(), "report": report, "dev_quality": _dev_quality(scorer, dev, settings),
            "train_question_ids": sorted(set(pairs.question_ids))}
    k = p.cross_encoder.folds
    if k:
        folds = fit_folds(cache, pairs, dev, settings, k)
    else:
        logger.warning("cross-encoder: folds=0, so the full model scores its own train questions (optimistic train rows)")
        folds = TrainedCrossFitting(info={"reason": "candidate_scoring.cross_encoder.folds=0"})
    return TrainedCrossEncoder(scorer, info), folds


def training_data(
    questions: list[dict[str, Any]], corpora: Corpora, runners: CorpusRunners, settings: CrossEncoderSettings
) -> tuple[LabelledPairs, DevSet]:
    """The train questions' labelled pairs and the dev questions' rerank cases, corpus by corpus.

    Train questions (at most ``settings.max_train_questions``, a seeded draw) pair their supporting
    passages with ``settings.negatives`` hard negatives from ``settings.negative_bases``; each dev
    question's case is the first negative base's top ``settings.dev_depth`` passages. Each
    question's first stage ranks the corpus its dataset retrieves from.
    """
    train = split_questions(questions, TRAIN_SPLIT, limit=settings.max_train_questions, seed=settings.seed)
    dev_questions = split_questions(questions, "dev")
    parts, dev = [], []
    for name in dict.fromkeys(corpora.name_for(q.dataset) for q in train + dev_questions):
        corpus, runner = corpora.corpora[name], runners.get(name)
        mine = [q for q in train if corpora.name_for(q.dataset) == name]
        if mine:
            stages = [runner.base(base, [q.question for q in mine]).doc_ids for base in settings.negative_bases]
            parts.append(labelled_pairs(mine, corpus, runner.passage_texts, stages, settings.negatives))
        mine = [q for q in dev_questions if corpora.name_for(q.dataset) == name]
        if mine:
            first = runner.base(settings.negative_bases[0], [q.question for q in mine]).doc_ids[:, : settings.dev_depth]
            dev.append((rerank_cases(mine, corpus, first), runner.passage_texts))
    return LabelledPairs.concat(parts), dev


def _dev_quality(scorer: Any, dev: DevSet, settings: CrossEncoderSettings) -> list[dict[str, Any]]:
    """Recall@4 and MRR on dev, reranked against the first negative base, one entry per corpus."""
    return [{"base": settings.negative_bases[0],
             **rerank_quality(cases, scorer.score_rows(cases.queries, texts, cases.doc_ids))}
            for cases, texts in dev]
