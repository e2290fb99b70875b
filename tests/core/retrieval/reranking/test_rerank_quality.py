"""Recall@k and MRR of a reranking, by hand-worked cases, and the report's paired intervals."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.retrieval.reranking.labelled_pairs import RerankCases
from ragfolio.core.retrieval.reranking.rerank_quality import ranking_metrics, rerank_quality, reranked_rows


def test_reranked_rows_sort_by_score_with_padding_last_and_ties_in_order() -> None:
    doc_ids = np.array([[5, 6, 7, -1], [1, 2, 3, 4]])
    scores = np.array([[0.1, 0.9, 0.5, 9.0], [0.2, 0.2, 0.7, 0.1]])
    np.testing.assert_array_equal(reranked_rows(doc_ids, scores), [[6, 7, 5, -1], [3, 1, 2, 4]])


def test_recall_and_reciprocal_rank_by_hand() -> None:
    rows = np.array([[9, 1, 2, 8, 7], [3, 4, 5, 6, 0], [0, 0, 0, 0, 0]])
    gold = [frozenset({1, 7}), frozenset({6}), frozenset()]
    recall, rr = ranking_metrics(rows, gold, k=2)
    np.testing.assert_allclose(recall, [0.5, 0.0, 0.0])  # |{1}| / min(2, 2); 6 is 4th; no gold
    np.testing.assert_allclose(rr, [1 / 2, 1 / 4, 0.0])
    with pytest.raises(ValueError, match="k=0"):
        ranking_metrics(rows, gold, k=0)


def test_report_compares_reranked_with_first_stage_paired() -> None:
    doc_ids = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    cases = RerankCases(("a", "b", "c"), ("qa", "qb", "qc"), doc_ids, (frozenset({3}), frozenset({4}), frozenset({8})))
    scores = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=float)  # gold first everywhere
    report = rerank_quality(cases, scores, k=1)
    assert report["n"] == 3 and report["depth"] == 3 and report["k"] == 1
    assert report["first_stage"]["recall@1"]["estimate"] == pytest.approx(1 / 3)
    assert report["reranked"]["mrr"]["estimate"] == 1.0
    assert report["difference"]["mrr"]["estimate"] == pytest.approx(1 - (1 / 3 + 1 + 1 / 2) / 3)
    assert report["difference"]["mrr"]["low"] <= report["difference"]["mrr"]["estimate"]
    with pytest.raises(ValueError, match="must match"):
        rerank_quality(cases, scores[:, :2])
