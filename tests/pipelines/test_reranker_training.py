"""candidate_scoring's cross-encoder step: skipped without the family, trained on train questions only,
cached, saved as a folder that the pool settings name and the ``cross_encoder`` candidates read."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cross_encoders import TINY, one_thread

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.reranking import fine_tuning
from ragfolio.core.retrieval.reranking.cross_encoder_folder import MANIFEST
from ragfolio.datasets import CrossEncoderDataset
from ragfolio.pipelines.candidate_scoring import reranker_training
from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, pool_settings, score_candidates
from ragfolio.pipelines.candidate_scoring.reranker_training import train_cross_encoder
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions

SETTINGS = {**TINY.to_dict(), "epochs": 1, "max_train_questions": 6, "dev_depth": 5}


@pytest.fixture
def prepared(tiny_dir):  # noqa: ANN201
    params = {"raw_dir": str(tiny_dir), "seed": 0, "test_fraction": 0.3, "dev_fraction": 0.3}
    questions = load_questions(params)
    return questions, build_corpora(questions, params)


def _params(grid: dict, train: str = "auto") -> dict:
    return {"num_docs": 2, "prefilter_depth": 8, "score": "support_recall", "encoders": {}, "grid": grid,
            "cross_encoder": {"train": train, "settings": SETTINGS}}


def test_without_the_family_nothing_is_trained_and_the_folder_says_why(prepared, tmp_path, monkeypatch) -> None:
    questions, corpora = prepared
    monkeypatch.setattr(reranker_training, "cached_fit", lambda *a: pytest.fail("trained"))
    params = _params({"bm25": {"k1": 1.2}})
    trained = train_cross_encoder(questions, corpora, expand_candidates(params), ArrayCache(tmp_path), params)
    assert trained.scorer is None and "lacks the family" in trained.info["reason"]
    dataset = CrossEncoderDataset(str(tmp_path / "ce"))
    dataset.save(trained)
    assert dataset.load().model_path is None and pool_settings(params, dataset.load()).cross_encoder is None
    assert trained.model_path is None  # an in-memory catalog hands on the record itself
    never = _params({"cross_encoder": {"prefilter": "bm25"}}, train="never")
    assert train_cross_encoder(questions, corpora, expand_candidates(never), ArrayCache(tmp_path), never).scorer is None


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
        trained = train_cross_encoder(questions, corpora, candidates, cache, params)
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
        again = train_cross_encoder(questions, corpora, candidates, cache, params)  # from the retrieval cache
        assert again.info["report"]["from_cache"]
        matrices, index = score_candidates(questions, corpora, candidates, cache, params, folder)
    assert [f for f in index.families] == ["bm25", "cross_encoder", "cross_encoder"]
    for U in matrices.values():
        assert U.shape[1] == 3 and np.isfinite(U).all()
    with pytest.raises(ValueError, match="PoolSettings.cross_encoder"):  # the family without a model
        score_candidates(questions, corpora, candidates, ArrayCache(tmp_path / "other"), params)
