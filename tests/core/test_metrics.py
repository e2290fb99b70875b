import numpy as np
import pytest

from ragfolio.core.metrics import answer_recall, exact_match, f1_score, normalize_answer, support_recall
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.scoring.utility import support_recall_matrix


def test_normalize_answer_squad_rules() -> None:
    assert normalize_answer("The  Battle of Guam!") == "battle of guam"
    assert normalize_answer("An apple, a pear") == "apple pear"


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        (["a", "b", "c", "d"], ["a", "b"], 1.0),  # both gold found among 4: 2 / min(4, 2)
        (["a", "x", "y", "z"], ["a", "b"], 0.5),
        (["x", "y", "z", "w"], ["a", "b"], 0.0),
        (["a", "b", "x", "y"], ["a", "b", "c", "d"], 0.5),  # 2 / min(4, 4)
        (["a"], ["a", "b", "c"], 1 / 3),  # a short list: 1 / min(4 asked for, 3), not 1 / min(1, 3)
        ([], ["a"], 0.0),
    ],
)
def test_support_recall_hand_worked(pred: list[str], gold: list[str], expected: float) -> None:
    assert support_recall(pred, gold, num_docs=4) == pytest.approx(expected)


def test_support_recall_undefined_without_gold_or_budget() -> None:
    with pytest.raises(ValueError, match="without gold"):
        support_recall(["a"], [], 4)
    with pytest.raises(ValueError, match="num_docs=0"):
        support_recall(["a"], ["a"], 0)
    with pytest.raises(ValueError, match="3 passages predicted for num_docs=2"):
        support_recall(["a", "b", "c"], ["a"], 2)


def test_support_recall_is_what_the_utility_matrix_holds() -> None:
    rng = np.random.default_rng(0)
    docs = np.stack([rng.permutation(30)[:4] for _ in range(3 * 5)]).reshape(5, 3, 4)  # (queries, candidates, 4)
    gold = [rng.choice(30, size=int(rng.integers(1, 7)), replace=False).tolist() for _ in range(5)]
    results = [RetrievalResult(docs[:, j], np.zeros((5, 4), dtype=np.float32)) for j in range(3)]
    matrix = support_recall_matrix(results, gold)
    expected = [[support_recall(docs[q, j].tolist(), gold[q], 4) for j in range(3)] for q in range(5)]
    np.testing.assert_allclose(matrix, expected, rtol=1e-6)


def test_answer_recall_whole_words_after_normalisation() -> None:
    passages = ["The Battle of Guam began in 1944.", "Unrelated text."]
    assert answer_recall(passages, ["battle of GUAM"]) == 1.0
    assert answer_recall(passages, ["Guam.", "Saipan"]) == 1.0
    assert answer_recall(passages, ["Gua"]) == 0.0  # a part of a word does not count
    assert answer_recall(passages, ["Saipan"]) == 0.0


def test_exact_match_and_f1() -> None:
    assert exact_match("the Battle of Guam", ["Battle of Guam"]) == 1.0
    assert exact_match("Guam", ["Battle of Guam"]) == 0.0
    # pred tokens {battle, guam}, gold {battle, of, guam}: P = 1, R = 2/3, F1 = 0.8
    assert f1_score("Battle Guam", ["Battle of Guam"]) == pytest.approx(0.8)
    assert f1_score("nothing", ["Battle of Guam", "Guam"]) == 0.0
    assert f1_score("Guam", ["Battle of Guam", "Guam"]) == 1.0


@pytest.mark.parametrize(
    ("pred", "aliases", "em", "f1"),
    [
        ("The Beatles", ["Beatles"], 1.0, 1.0),  # articles dropped
        ("an  apple", ["a apple"], 1.0, 1.0),  # every article, any spacing
        ("U.S.A.", ["USA"], 1.0, 1.0),  # punctuation removed, not replaced by spaces
        ("  PARIS\n", ["paris"], 1.0, 1.0),  # case and surrounding whitespace
        ("New   York City", ["new york city"], 1.0, 1.0),  # inner whitespace collapsed
        ("Theatre", ["the atre"], 0.0, 0.0),  # "the" only as a whole word: "atre" != "theatre"
        ("1944", ["June 1944", "1944"], 1.0, 1.0),  # max over aliases
        ("June 1944", ["1944", "July 1944"], 0.0, pytest.approx(2 / 3)),  # best alias for F1: 1944 (P 1/2, R 1)
        ("", ["Paris"], 0.0, 0.0),
        ("the", ["a"], 1.0, 1.0),  # both normalise to empty: SQuAD counts them equal
    ],
)
def test_em_f1_squad_edge_cases(pred: str, aliases: list[str], em: float, f1) -> None:
    assert exact_match(pred, aliases) == em
    assert f1_score(pred, aliases) == f1
