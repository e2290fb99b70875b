"""Fusion of hand-made rankings against hand-computed scores."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.retrieval.ranking.fusion import reciprocal_rank_fusion, score_fusion
from ragfolio.core.retrieval.results import RetrievalResult


def result(ids: list[list[int]], scores: list[list[float]] | None = None) -> RetrievalResult:
    doc_ids = np.asarray(ids, dtype=np.int64)
    if scores is None:
        scores = [[-float(c) for c in range(doc_ids.shape[1])] for _ in ids]
    sc = np.asarray(scores, dtype=np.float32)
    return RetrievalResult(doc_ids, np.where(doc_ids >= 0, sc, -np.inf).astype(np.float32))


def test_rrf_sums_reciprocal_ranks() -> None:
    a = result([[0, 1, 2]])
    b = result([[2, 0, 3]])
    fused = reciprocal_rank_fusion([a, b], k=4, rrf_k=0.0)
    # 0: 1/1 + 1/2, 2: 1/3 + 1/1, 1: 1/2, 3: 1/3
    assert fused.doc_ids.tolist() == [[0, 2, 1, 3]]
    np.testing.assert_allclose(fused.scores[0], [1.5, 4 / 3, 0.5, 1 / 3], rtol=1e-6)


def test_rrf_default_offset_and_weights() -> None:
    a = result([[0, 1, 2]])
    b = result([[2, 0, 3]])
    fused = reciprocal_rank_fusion([a, b], k=2)
    np.testing.assert_allclose(fused.scores[0], [1 / 61 + 1 / 62, 1 / 63 + 1 / 61], rtol=1e-6)
    weighted = reciprocal_rank_fusion([a, b], k=4, rrf_k=0.0, weights=[1.0, 3.0])
    # 0: 1 + 3/2, 2: 1/3 + 3, 1: 1/2, 3: 3/3
    assert weighted.doc_ids.tolist() == [[2, 0, 3, 1]]
    np.testing.assert_allclose(weighted.scores[0], [10 / 3, 2.5, 1.0, 0.5], rtol=1e-6)


def test_rrf_ties_go_to_lowest_row_id_and_rows_are_independent() -> None:
    a = result([[5, 1], [7, 8]])
    b = result([[1, 5], [8, 7]])
    fused = reciprocal_rank_fusion([a, b], k=2)
    assert fused.doc_ids.tolist() == [[1, 5], [7, 8]]


def test_rrf_ignores_padding_and_pads_short_rows() -> None:
    a = result([[3, -1, -1], [-1, -1, -1]])
    b = result([[3, 4, -1], [-1, -1, -1]])
    fused = reciprocal_rank_fusion([a, b], k=3, rrf_k=0.0)
    assert fused.doc_ids.tolist() == [[3, 4, -1], [-1, -1, -1]]
    assert fused.doc_ids.dtype == np.int64 and fused.scores.dtype == np.float32
    np.testing.assert_allclose(fused.scores[0, :2], [2.0, 0.5])
    assert np.isneginf(fused.scores[0, 2]) and np.isneginf(fused.scores[1]).all()


def test_score_fusion_min_max_normalises_each_list() -> None:
    a = result([[0, 1, 2]], [[3.0, 2.0, 1.0]])  # -> 1, 0.5, 0
    b = result([[1, 3]], [[10.0, 0.0]])  # -> 1, 0
    fused = score_fusion([a, b], k=4, weights=[1.0, 1.0])
    # 1: 0.5 + 1, 0: 1, then 2 and 3 tie at 0 -> lowest id first
    assert fused.doc_ids.tolist() == [[1, 0, 2, 3]]
    np.testing.assert_allclose(fused.scores[0], [1.5, 1.0, 0.0, 0.0])
    weighted = score_fusion([a, b], k=2, weights=[2.0, 0.5])
    # 0: 2, 1: 1 + 0.5
    assert weighted.doc_ids.tolist() == [[0, 1]]
    np.testing.assert_allclose(weighted.scores[0], [2.0, 1.5])


def test_score_fusion_constant_list_normalises_to_one() -> None:
    a = result([[4, -1]], [[7.0, 0.0]])
    b = result([[5, 6]], [[-2.0, -2.0]])
    fused = score_fusion([a, b], k=3, weights=[1.0, 0.5])
    assert fused.doc_ids.tolist() == [[4, 5, 6]]
    np.testing.assert_allclose(fused.scores[0], [1.0, 0.5, 0.5])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0, "weights": [1.0, 1.0]}, "k=0"),
        ({"k": 2, "weights": [1.0]}, "one weight per result"),
        ({"k": 2, "weights": [1.0, -1.0]}, ">= 0"),
    ],
)
def test_fusion_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    a = result([[0, 1]])
    with pytest.raises(ValueError, match=message):
        score_fusion([a, a], **kwargs)
    with pytest.raises(ValueError, match=message):
        reciprocal_rank_fusion([a, a], **kwargs)


def test_fusion_rejects_mismatched_query_counts() -> None:
    with pytest.raises(ValueError, match="n_queries"):
        reciprocal_rank_fusion([result([[0]]), result([[0], [1]])], k=1)
