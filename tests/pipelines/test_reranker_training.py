"""candidate_scoring's cross-encoder step: skipped without the family, trained on train questions only,
cached, saved as a folder that the pool settings name and the ``cross_encoder`` candidates read."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cross_encoders import TINY, Recording, one_thread

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.reranking import fine_tuning
from ragfolio.core.retrieval.reranking.cross_encoder_folder import MANIFEST, read_manifest
from ragfolio.core.retrieval.reranking.cross_fitting import CrossFittedCrossEncoder
from ragfolio.core.retrieval.running import cross_scores
from ragfolio.datasets.cross_encoders import CrossEncoderDataset, CrossEncoderFoldsDataset
from ragfolio.pipelines.candidate_scoring import reranker_training
from ragfolio.pipelines.candidate_scoring.nodes import (
    CandidateScoringParams,
    expand_candidates,
    pool_settings,
    score_candidates,
)
from ragfolio.pipelines.candidate_scoring.reranker_training import train_cross_encoder
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions

SETTINGS = {**TINY.to_dict(), "epochs": 1, "max_train_questions": 6, "dev_depth": 5}


@pytest.fixture
def prepared(tiny_dir):  # noqa: ANN201
    params = {"raw_dir": str(tiny_dir), "seed": 0, "test_fraction": 0.3, "dev_fraction": 0.3}
    questions = load_questions(params)
    return questions, build_corpora(questions, params)


def _params(grid: dict, train: str = "auto", folds: int = 0) -> dict:
    return {"num_docs": 2, "prefilter_depth": 8, "score": "support_recall", "encoders": {}, "grid": grid,
            "cross_encoder": {"train": train, "folds": folds, "settings": SETTINGS}}


def _params_model(**cross_encoder) -> CandidateScoringParams:  # noqa: ANN003
    return CandidateScoringParams(**{**_params({}), "cross_encoder": cross_encoder})


def test_without_the_family_nothing_is_trained_and_the_folder_says_why(prepared, tmp_path, monkeypatch) -> None:
    questions, corpora = prepared
    monkeypatch.setattr(reranker_training, "cached_fit", lambda *a: pytest.fail("trained"))
    params = _params({"bm25": {"k1": 1.2}}, folds=5)
    trained, folds = train_cross_encoder(questions, corpora, expand_candidates(params), ArrayCache(tmp_path), params)
    assert trained.scorer is None and "lacks the family" in trained.info["reason"]
    assert not folds.scorers and "lacks the family" in folds.info["reason"]
    dataset, folds_dataset = CrossEncoderDataset(str(tmp_path / "ce")), CrossEncoderFoldsDataset(str(tmp_path / "folds"))
    dataset.save(trained)
    folds_dataset.save(folds)
    settings = pool_settings(params, dataset.load(), folds_dataset.load())
    assert dataset.load().model_path is None and settings.cross_encoder is settings.cross_encoder_folds is None
    assert trained.model_path is None and folds.folds_path is None  # an in-memory catalog hands on the records
    never = _params({"cross_encoder": {"prefilter": "bm25"}}, train="never")
    assert train_cross_encoder(questions, corpora, expand_candidates(never), ArrayCache(tmp_path), never)[0].scorer is None
    with pytest.raises(ValueError, match="folds=1"):
        _params_model(folds=1)


@pytest.mark.slow
def test_trained_on_train_questions_only_cached_and_read_by_the_candidates(prepared, tmp_path, monkeypatch) -> None:
    questions, corpora = prepared
    splits = {q["id"]: q["split"] for q in questions}
    assert {"train", "dev", "test"} <= set(splits.values())
    seen = []

    def spy(cache, pairs, dev, settings):  # noqa: ANN001, ANN202
        seen.append((set(pairs.question_ids), {qid for cases, _ in dev for qid in cases.question_ids}))
        return fit(cache, pairs, dev, settings)

    fit = reranker_training.cached_fit
    monkeypatch.setattr(reranker_training, "cached_fit", spy)
    params = _params({"bm25": {"k1": 1.2}, "cross_encoder": {"prefilter": "bm25", "depth": [3, 6]}})
    candidates, cache = expand_candidates(params), ArrayCache(tmp_path / "cache")
    with one_thread():
        trained, _ = train_cross_encoder(questions, corpora, candidates, cache, params)
    (trained_ids, dev_ids), = seen
    assert trained_ids and {splits[qid] for qid in trained_ids} == {"train"}  # no dev or test question
    assert dev_ids and {splits[qid] for qid in dev_ids} == {"dev"}
    assert set(trained.info["train_question_ids"]) == trained_ids and len(trained_ids) <= 6
    assert trained.info["dev_quality"][0]["base"] == "bm25" and "mrr" in trained.info["dev_quality"][0]["reranked"]

    dataset = CrossEncoderDataset(str(tmp_path / "ce"))
    dataset.save(trained)
    folder = dataset.load()
    manifest = json.loads((tmp_path / "ce" / MANIFEST).read_text())
    assert folder.model_path == str(tmp_path / "ce") and manifest["training"]["settings"]["epochs"] == 1
    assert pool_settings(params, folder).cross_encoder == folder.path

    monkeypatch.setattr(fine_tuning, "fit_cross_encoder", lambda *a: pytest.fail("trained again"))
    with one_thread():
        again, _ = train_cross_encoder(questions, corpora, candidates, cache, params)  # from the retrieval cache
        assert again.info["report"]["from_cache"]
        matrices, index = score_candidates(questions, corpora, candidates, cache, params, pool_settings(params, folder))
    assert [f for f in index.families] == ["bm25", "cross_encoder", "cross_encoder"]
    for U in matrices.values():
        assert U.shape[1] == 3 and np.isfinite(U).all()
    with pytest.raises(ValueError, match="PoolSettings.cross_encoder"):  # the family without a model
        score_candidates(questions, corpora, candidates, ArrayCache(tmp_path / "other"), params)


@pytest.mark.slow
def test_cross_fitted_no_train_question_is_scored_by_a_model_that_trained_on_it(prepared, tmp_path, monkeypatch) -> None:
    questions, corpora = prepared
    params = _params({"bm25": {"k1": 1.2}, "cross_encoder": {"prefilter": "bm25", "depth": 4}}, folds=2)
    candidates, cache = expand_candidates(params), ArrayCache(tmp_path / "cache")
    with one_thread():
        trained, folds = train_cross_encoder(questions, corpora, candidates, cache, params)
    full_dataset, folds_dataset = CrossEncoderDataset(str(tmp_path / "ce")), CrossEncoderFoldsDataset(str(tmp_path / "folds"))
    full_dataset.save(trained)
    folds_dataset.save(folds)
    settings = pool_settings(params, full_dataset.load(), folds_dataset.load())
    assert settings.cross_encoder_folds == str(tmp_path / "folds") and settings.served().cross_encoder_folds is None
    models = CrossFittedCrossEncoder.read(settings.cross_encoder, settings.cross_encoder_folds)
    fitting = models.fitting
    assert fitting.k == 2 and set(fitting.fold_of) == set(trained.info["train_question_ids"])
    trained_on = {folder: set(read_manifest(folder)["training"]["train_question_ids"]) for folder in models.models}
    for qid, text in fitting.texts.items():  # the record: each train question's model did not train on it
        assert qid in trained_on[models.full] and qid not in trained_on[models.model_for(text)]

    recording = Recording(cross_scores.load_cross_encoder)
    monkeypatch.setattr(cross_scores, "load_cross_encoder", recording)
    with one_thread():
        settings = pool_settings(params, full_dataset.load(), folds_dataset.load())
        matrices, index = score_candidates(questions, corpora, candidates, cache, params, settings)
    text_of = {q["id"]: q["question"] for q in questions}
    scored = recording.scored
    assert set(scored) == set(models.models)
    for folder, texts in scored.items():  # end to end: no question scored by a model that trained on its text
        assert not texts & {text_of[qid] for qid in trained_on[folder]}
    rows = [(qid, split) for d in index.datasets.values() for qid, split in zip(d.ids, d.split, strict=True)]
    assert {text_of[qid] for qid, split in rows if split != "train"} <= scored[models.full]  # dev and test: the full model
    assert set().union(*(scored[f] for f in models.folds)) == set(fitting.texts.values())
    assert all(np.isfinite(U).all() for U in matrices.values())
