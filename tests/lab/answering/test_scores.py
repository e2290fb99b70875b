"""Stored answers are scored as read: exact match, F1 and the answer recall of the rows they used."""

from __future__ import annotations

import pytest

from ragfolio_lab.answering.scores import SCORES, score_all, scored


def test_a_stored_row_gets_its_scores_from_its_prediction_and_passage_rows() -> None:
    texts = ["Paris is the capital of France.", "Berlin is in Germany.", "The Seine flows through Paris."]
    row = {"id": "q", "system": "single_best", "prediction": "The Paris", "answers": ["paris", "Paris, France"],
           "doc_ids": [1, 2]}
    out = scored(row, texts)
    assert out["em"] == 1.0 and out["f1"] == 1.0 and out["answer_recall"] == 1.0
    assert {k: v for k, v in out.items() if k not in SCORES} == row  # the stored row is kept as it is
    miss = scored({**row, "prediction": "Lyon", "doc_ids": [1]}, texts)
    assert miss["em"] == 0.0 and miss["f1"] == 0.0 and miss["answer_recall"] == 0.0
    partial = scored({**row, "prediction": "Paris France capital", "answers": ["Paris, France"]}, texts)
    assert partial["em"] == 0.0 and partial["f1"] == pytest.approx(0.8)
    closed_book = score_all([{**row, "doc_ids": []}], texts)[0]
    assert closed_book["answer_recall"] == 0.0 and closed_book["em"] == 1.0


def test_stored_answers_are_scored_against_the_gold_of_now() -> None:
    texts = ["Paris is the capital of France."]
    row = {"id": "q", "system": "single_best", "prediction": "Paris", "answers": ["Paris"], "doc_ids": [0]}
    assert score_all([row], texts)[0]["em"] == 1.0
    regraded = score_all([row], texts, {"q": ["Lyon"]})[0]  # the gold was corrected since it was stored
    assert regraded["em"] == 0.0 and regraded["answer_recall"] == 0.0 and regraded["answers"] == ["Lyon"]
