"""Nodes of ``candidate_scoring``: grid -> candidates -> rankings -> utility matrix per dataset.

Besides the matrices and their index, the stage records the settings its pool runners used
(``pool_settings``): later stages build their runners from that record, never from these parameters.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.records import Question
from ragfolio.core.retrieval.family import get_family, import_families
from ragfolio.core.retrieval.pool import CandidateSpec, count_by_family, expand_grid, resolve_grid
from ragfolio.core.retrieval.reranking.cross_encoder_folder import CrossEncoderFolder, TrainedCrossEncoder
from ragfolio.core.retrieval.reranking.cross_fitting import CrossFittingFolder, TrainedCrossFitting
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings
from ragfolio.core.retrieval.running.pool_runner import DEFAULT_PREFILTER_DEPTH
from ragfolio.core.scoring.distributed import CorpusPart, ScoringJob, score_in_process, score_on_cluster
from ragfolio.core.scoring.runners import PoolSettings, Score
from ragfolio.core.scoring.utility import score_targets
from ragfolio.core.scoring.utility_index import DatasetRows, UtilityIndex
from ragfolio.param_blocks import kwargs_of

logger = logging.getLogger(__name__)

# The trained cross-encoder as the catalog loads it (a folder), or as an in-memory catalog hands it on.
CrossEncoderInput = CrossEncoderFolder | TrainedCrossEncoder | None
# Its fold models (cross-fitting), likewise.
CrossEncoderFoldsInput = CrossFittingFolder | TrainedCrossFitting | None


class CrossEncoderParams(BaseModel):
    """``candidate_scoring.cross_encoder``: when to train the cross-encoder, and how."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    train: Literal["auto", "always", "never"] = "auto"  # auto: when the grid holds the cross_encoder family
    # Fold models that score the train questions (cross-fitting); 0: the full model scores them too (optimistic).
    folds: int = Field(5, ge=0)
    settings: Annotated[dict[str, Any], kwargs_of(CrossEncoderSettings, "candidate_scoring.cross_encoder.settings")] = (
        Field(default_factory=dict))  # CrossEncoderSettings' keywords

    @field_validator("folds")
    @classmethod
    def _folds(cls, folds: int) -> int:
        if folds == 1:
            raise ValueError("candidate_scoring.cross_encoder.folds=1: use 0 (no cross-fitting) or K >= 2 folds")
        return folds


class CandidateScoringParams(BaseModel):
    """``candidate_scoring`` parameters (conf/base/parameters_candidate_scoring.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_docs: int = Field(4, ge=1)
    prefilter_depth: int = Field(DEFAULT_PREFILTER_DEPTH, ge=1)
    score: Score = "support_recall"
    bm25_base: dict[str, Any] = Field(default_factory=dict)
    graph_max_degree: int = Field(50, ge=1)
    encoders: dict[str, dict[str, Any]]
    grid: str | dict[str, Any]  # a preset of params:candidate_grids, or a grid written out
    scheduler_address: str | None = None  # a Dask scheduler (tcp://host:8786); None scores in process
    query_block_size: int = Field(256, ge=1)  # queries per block (per task on a cluster), both paths
    family_modules: list[str] = Field(default_factory=list)  # modules registering the user's families
    cross_encoder: CrossEncoderParams = Field(default_factory=CrossEncoderParams)

    @field_validator("bm25_base")
    @classmethod
    def _bm25_base(cls, block: dict[str, Any]) -> dict[str, Any]:
        bm25 = get_family("bm25")
        known = {*bm25.params, *bm25.optional}
        if unknown := sorted(set(block) - known):
            raise ValueError(f"candidate_scoring.bm25_base: unknown parameter(s) {unknown}; allowed: {sorted(known)}")
        return block

    def pool_settings(
        self, cross_encoder: CrossEncoderInput = None, cross_encoder_folds: CrossEncoderFoldsInput = None
    ) -> PoolSettings:
        """The settings of the pool runners these parameters configure, with the trained
        cross-encoder's folder and its fold models' folder."""
        fields = {"num_docs", "prefilter_depth", "bm25_base", "graph_max_degree", "encoders", "score", "family_modules"}
        model = cross_encoder.model_path if cross_encoder is not None else None
        folds = cross_encoder_folds.folds_path if cross_encoder_folds is not None and model else None
        return PoolSettings.from_dict({**self.model_dump(include=fields), "cross_encoder": model,
                                       "cross_encoder_folds": folds})


def expand_candidates(params: dict[str, Any], grids: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The named candidates of the grid, as JSON records.

    Args:
        params: ``candidate_scoring`` parameters; ``grid`` names a preset of ``grids`` or is a grid.
        grids: Grid presets by name (``candidate_grids``, conf/base/parameters_candidate_grids.yml).
    """
    p = CandidateScoringParams(**params)
    import_families(p.family_modules)
    candidates = expand_grid(resolve_grid(p.grid, grids or {}))
    preset = p.grid if isinstance(p.grid, str) else "inline"
    logger.info("candidate pool (%s): %d candidates %s", preset, len(candidates), count_by_family(candidates))
    return [c.to_record() for c in candidates]


def pool_settings(
    params: dict[str, Any], cross_encoder: CrossEncoderInput = None, cross_encoder_folds: CrossEncoderFoldsInput = None
) -> PoolSettings:
    """The settings :func:`score_candidates` runs its pool runners with (``pool_settings``, a record)."""
    return CandidateScoringParams(**params).pool_settings(cross_encoder, cross_encoder_folds)


def _scoreable_questions(questions: list[dict[str, Any]], dataset: str) -> tuple[list[Question], list[str]]:
    """The dataset's questions that have gold passages, and their splits, in utility-matrix row order: by id.

    Support recall is undefined without gold passages, so such questions are left out (and logged).
    Rows are in id order, not split order, so a dataset's query blocks (and the rankings cached by
    their queries) are the same whichever split each question is in: a run that makes every
    labelled question test (data_prep.questions: synthetic) reuses a labelled run's rankings.
    """
    records = sorted((r for r in questions if r["dataset"] == dataset), key=lambda r: str(r["id"]))
    kept = [(Question.from_record(r, source="questions"), r["split"]) for r in records]
    kept = [(q, split) for q, split in kept if q.gold_passage_ids()]
    if len(kept) < len(records):
        logger.warning("%s: %d question(s) without supporting passages left out", dataset, len(records) - len(kept))
    return [q for q, _ in kept], [split for _, split in kept]


def score_candidates(
    questions: list[dict[str, Any]],
    corpora: Corpora,
    candidates: list[dict[str, Any]],
    cache: ArrayCache,
    params: dict[str, Any],
    pool_settings: PoolSettings | None = None,
) -> tuple[dict[str, np.ndarray], UtilityIndex]:
    """Run every candidate over the corpus each dataset retrieves from and score it per question.

    Datasets that share a corpus (``data_prep.corpus: union``) share one runner. Queries go in
    blocks of ``query_block_size``; with ``scheduler_address`` set, one Dask task per block
    (:func:`ragfolio.core.scoring.distributed.score_on_cluster`), else one after another here. Both give the
    same float32 matrices.

    Args:
        corpora: ``data_prep``'s corpora (:meth:`ragfolio.core.data.corpora.Corpora.to_json`).
        pool_settings: The settings the runners run with (:func:`pool_settings`, the record later
            stages build theirs from): with the folder of the cross-encoder
            :func:`~ragfolio.pipelines.candidate_scoring.reranker_training.train_cross_encoder` wrote (the
            ``cross_encoder`` family's model) and of its fold models (the train questions it trained on
            are scored by the fold model that did not: cross-fitting). None: ``params``' without them.

    Returns:
        ``{dataset: U}`` with ``U`` of shape ``(n_questions, n_candidates)`` float32, and an index
        naming U's columns (candidates), rows (question id, split and type per dataset) and the
        corpus scored over (:meth:`~ragfolio.core.data.corpora.Corpora.describe`).
    """
    p = CandidateScoringParams(**params)
    specs = [CandidateSpec.from_record(c) for c in candidates]
    parts = {name: CorpusPart.of(corpus) for name, corpus in corpora.corpora.items()}
    jobs, rows = [], {}
    for dataset in corpora.datasets:
        corpus = corpora.corpus_for(dataset)
        qs, splits = _scoreable_questions(questions, dataset)
        targets = score_targets(p.score, qs, corpus)
        jobs.append(ScoringJob(dataset, parts[corpora.name_for(dataset)], tuple(q.question for q in qs), targets))
        rows[dataset] = DatasetRows(tuple(q.id for q in qs), tuple(splits), tuple(q.type or "unknown" for q in qs))
    start, config = time.perf_counter(), (pool_settings or p.pool_settings()).runner_config(cache)
    if p.scheduler_address:
        matrices = score_on_cluster(jobs, specs, config, p.score, p.query_block_size, p.scheduler_address)
    else:
        matrices = score_in_process(jobs, specs, config, p.score, p.query_block_size)
    for dataset, utility in matrices.items():
        logger.info("%s: utility matrix %s, mean %s %.3f", dataset, utility.shape, p.score,
                    float(utility.mean()) if utility.size else float("nan"))
    logger.info("utility matrices in %.1f s (%s)", time.perf_counter() - start, p.scheduler_address or "in process")
    index = UtilityIndex(
        score=p.score, num_docs=p.num_docs, candidates=tuple(s.name for s in specs),
        families=tuple(s.family for s in specs), corpus=corpora.describe(), datasets=rows,
    )
    return matrices, index

