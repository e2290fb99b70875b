"""Cross-fitting: deterministic disjoint folds, fold models that never train on the questions they
score, the full model for every other question, and a folder that says where each model is."""

from __future__ import annotations

import random

import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.reranking import fold_training
from ragfolio.core.retrieval.reranking.cross_fitting import (
    CrossFittedCrossEncoder,
    CrossFitting,
    CrossFittingFolder,
    TrainedCrossFitting,
    assign_folds,
)
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings, training_key
from ragfolio.core.retrieval.reranking.fold_training import fit_folds
from ragfolio.core.retrieval.reranking.labelled_pairs import LabelledPairs

TEXTS = {f"q{i:02d}": f"question number {i}?" for i in range(23)}


def test_folds_are_deterministic_disjoint_balanced_and_cover_every_question() -> None:
    folds = assign_folds(TEXTS, 5, seed=0)
    assert set(folds) == set(TEXTS) and set(folds.values()) == set(range(5))  # each question in exactly one fold
    sizes = sorted(list(folds.values()).count(k) for k in range(5))
    assert sizes == [4, 4, 5, 5, 5]
    shuffled = list(TEXTS.items())
    random.Random(1).shuffle(shuffled)
    assert assign_folds(dict(shuffled), 5, seed=0) == folds  # by id, not by the order they come in
    assert assign_folds(TEXTS, 5, seed=1) != folds  # the seed draws them


def test_questions_sharing_a_text_share_a_fold_and_too_few_questions_are_refused() -> None:
    texts = {**TEXTS, "dup": TEXTS["q07"]}
    folds = assign_folds(texts, 4)
    assert folds["dup"] == folds["q07"]
    with pytest.raises(ValueError, match="folds=1 >= 2"):
        assign_folds(TEXTS, 1)
    with pytest.raises(ValueError, match="at least as many distinct questions"):
        assign_folds({"a": "x", "b": "x", "c": "y"}, 3)


def test_the_record_gives_a_cross_fitted_question_its_fold_model_and_any_other_the_full_model() -> None:
    fitting = CrossFitting.of(TEXTS, 3)
    models = CrossFittedCrossEncoder("full", ("f0", "f1", "f2"), fitting)
    for qid, text in TEXTS.items():
        assert models.model_for(text) == f"f{fitting.fold_of[qid]}"
    assert models.model_for("a test question?") == "full"
    assert CrossFittedCrossEncoder("full").model_for(TEXTS["q00"]) == "full"  # no cross-fitting
    assert CrossFitting.from_dict(fitting.to_dict()) == fitting
    with pytest.raises(ValueError, match="2 fold models for 3 folds"):
        CrossFittedCrossEncoder("full", ("f0", "f1"), fitting)


def _pairs() -> LabelledPairs:
    rows = [(qid, text, f"passage {i} of {qid}", float(i == 0)) for qid, text in TEXTS.items() for i in range(3)]
    return LabelledPairs(*(tuple(column) for column in zip(*rows, strict=True)))


def test_a_fold_model_never_trains_on_a_question_it_scores(monkeypatch, tmp_path) -> None:
    trained: list[tuple[set[str], str | None]] = []

    def fake_fit(cache, pairs, dev, settings, fold=None):  # noqa: ANN001, ANN202
        trained.append((set(pairs.question_ids), fold))
        return object(), {"pairs": len(pairs)}

    monkeypatch.setattr(fold_training, "cached_fit", fake_fit)
    pairs = _pairs()
    result = fit_folds(ArrayCache(tmp_path), pairs, [], CrossEncoderSettings(seed=3), 4)
    fitting = result.fitting
    assert fitting is not None and fitting.k == 4 and fitting.seed == 3 and len(result.scorers) == 4
    assert [fold for _, fold in trained] == ["0/4", "1/4", "2/4", "3/4"]
    models = CrossFittedCrossEncoder("full", ("fold_0", "fold_1", "fold_2", "fold_3"), fitting)
    for qid, text in TEXTS.items():  # the model that scores each train question did not train on it
        fold = int(models.model_for(text).removeprefix("fold_"))
        assert qid not in trained[fold][0] and qid not in result.info["folds"][fold]["train_question_ids"]
        assert qid in result.info["folds"][fold]["scored_question_ids"]
    for (seen, _), info in zip(trained, result.info["folds"], strict=True):  # and trained on every other
        assert seen == set(TEXTS) - set(info["scored_question_ids"]) == set(info["train_question_ids"])


def test_a_fold_models_training_key_names_its_fold() -> None:
    pairs, settings = _pairs(), CrossEncoderSettings()
    full = training_key(pairs, [], settings)
    assert "fold" not in full  # the full model's key is what it was: its cached weights still load
    assert training_key(pairs, [], settings, fold="1/5") == {**full, "fold": "1/5"}


def test_a_folder_without_fold_models_says_why_and_names_none(tmp_path) -> None:
    TrainedCrossFitting(info={"reason": "folds=0"}).save(tmp_path / "folds")
    folder = CrossFittingFolder.read(tmp_path / "folds")
    assert folder.k == 0 and folder.folds_path is None
    assert CrossFittedCrossEncoder.read("full", folder.path) == CrossFittedCrossEncoder("full")
    assert TrainedCrossFitting().folds_path is None
    with pytest.raises(FileNotFoundError, match="no cross-fitted cross-encoder"):
        CrossFittingFolder.read(tmp_path / "missing")
