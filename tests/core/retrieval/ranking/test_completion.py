"""Full result lists: short rows completed deterministically, and the one check of the contract."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.retrieval.ranking.completion import check_full, complete_rows, short_rows
from ragfolio.core.retrieval.results import RetrievalResult


def result(ids: list[list[int]], scores: list[list[float]] | None = None) -> RetrievalResult:
    doc_ids = np.array(ids, dtype=np.int64)
    if scores is None:
        scores = [[float(len(row) - j) if d >= 0 else -np.inf for j, d in enumerate(row)] for row in ids]
    return RetrievalResult(doc_ids, np.array(scores, dtype=np.float32))


def test_short_rows_take_the_first_fallback_then_the_next_then_corpus_order() -> None:
    got = result([[3, -1, -1, -1], [0, 1, 2, 4], [-1, -1, -1, -1]], [[0.9, -np.inf, -np.inf, -np.inf],
                                                                      [4, 3, 2, 1], [-np.inf] * 4])
    first = result([[3, 5, -1, -1], [9, 9, 9, 9], [-1, -1, -1, -1]])   # short itself
    second = result([[5, 7, 3, 8], [9, 9, 9, 9], [6, -1, -1, -1]])
    done = complete_rows(got, [lambda: first, lambda: second], n_passages=10)
    np.testing.assert_array_equal(done.doc_ids, [[3, 5, 7, 8], [0, 1, 2, 4], [6, 0, 1, 2]])
    np.testing.assert_allclose(done.scores[0], [0.9, 0.9, 0.9, 0.9])  # completed slots repeat the floor
    np.testing.assert_allclose(done.scores[1], [4, 3, 2, 1])           # a full row is untouched
    np.testing.assert_allclose(done.scores[2], [0, 0, 0, 0])           # no finite score: 0
    check_full(done, 3, 4, "toy")


def test_full_results_are_returned_as_they_are_and_fallbacks_never_built() -> None:
    full = result([[0, 1], [1, 0]])

    def boom() -> RetrievalResult:
        raise AssertionError("a fallback was built for a full result")

    assert complete_rows(full, [boom], n_passages=2) is full


def test_a_corpus_smaller_than_k_is_refused() -> None:
    with pytest.raises(ValueError, match="fewer than k=3"):
        complete_rows(result([[0, -1, -1]]), [], n_passages=2)


def test_check_full_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"toy: 1 of 2 rows hold fewer than 2"):
        check_full(result([[0, 1], [2, -1]]), 2, 2, "toy")
    with pytest.raises(ValueError, match="repeat a passage, e.g. row 1"):
        check_full(result([[0, 1], [2, 2]]), 2, 2, "toy")
    with pytest.raises(ValueError, match=r"shape \(2, 2\) != \(2, 3\)"):
        check_full(result([[0, 1], [2, 3]]), 2, 3, "toy")
    assert short_rows(result([[0, -1], [1, 2]])) == 1
