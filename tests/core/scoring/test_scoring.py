import numpy as np
import pytest

from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.scoring.utility import answer_recall_matrix, support_recall_matrix


def _result(rows: list[list[int]]) -> RetrievalResult:
    ids = np.array(rows, dtype=np.int64)
    return RetrievalResult(ids, np.where(ids >= 0, 1.0, -np.inf).astype(np.float32))


def test_support_recall_matrix_hand_worked() -> None:
    a = _result([[0, 1, 2, 3], [4, 5, -1, -1]])
    b = _result([[5, 6, 7, 0], [1, 2, 3, 4]])
    gold = [[0, 1], [4, 5, 6]]
    U = support_recall_matrix([a, b], gold)
    # q0: a finds 0 and 1 -> 2/min(4,2) = 1; b finds 0 -> 1/2.
    # q1: a returns 2 of 4 passages, both gold -> 2/min(4,3) = 2/3 (a short list earns no bonus:
    # the denominator is the list length asked for); b finds 4 -> 1/min(4,3) = 1/3.
    np.testing.assert_allclose(U, [[1.0, 0.5], [2 / 3, 1 / 3]], rtol=1e-6)
    assert U.dtype == np.float32


def test_support_recall_matrix_rejects_missing_gold() -> None:
    with pytest.raises(ValueError, match="no gold"):
        support_recall_matrix([_result([[0, 1]])], [[]])


def test_answer_recall_matrix() -> None:
    texts = ["Paris is in France.", "Berlin.", "The capital is Paris"]
    U = answer_recall_matrix([_result([[0, 1]]), _result([[1, -1]])], texts, [["paris"]])
    np.testing.assert_array_equal(U, [[1.0, 0.0]])
