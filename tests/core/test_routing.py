"""Routing baselines and measures on hand-worked matrices."""

import numpy as np
import pytest

from ragfolio.core.features import TextHasher, query_features
from ragfolio.core.routing import (
    LogisticRouter,
    best_of_l,
    fixed_picks,
    gap_closed,
    oracle_picks,
    random_picks,
)

U = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])


def test_best_of_l_by_hand() -> None:
    picks = fixed_picks([0, 1, 2], 3)
    assert best_of_l(U, picks) == pytest.approx([1 / 3, 2 / 3, (1 + 1 + 0.5) / 3])
    assert best_of_l(U, oracle_picks(U)) == pytest.approx([2.5 / 3] * 3)
    assert best_of_l(np.zeros((0, 3)), np.zeros((0, 3), dtype=int)) == []


def test_random_picks_are_permutations() -> None:
    picks = random_picks(50, 4, np.random.default_rng(0))
    assert (np.sort(picks, axis=1) == np.arange(4)).all()
    assert len({tuple(p) for p in picks}) > 5


def test_gap_closed() -> None:
    assert gap_closed(0.8, 0.7, 0.9) == pytest.approx(0.5)
    assert gap_closed(0.6, 0.7, 0.9) == pytest.approx(-0.5)
    assert gap_closed(0.7, 0.7, 0.7) is None


def test_logistic_router_learns_a_word_rule() -> None:
    texts = [f"question about {w} number {i}" for i in range(40) for w in ("cats", "planets")]
    X = query_features(texts, {}, TextHasher(n_features=128))
    best = np.array([0 if "cats" in t else 1 for t in texts])
    Um = np.zeros((len(texts), 3))
    Um[np.arange(len(texts)), best] = 1.0
    Um[:4, 2] = 1.0  # a few ties with member 2
    picks = LogisticRouter(C=10.0).fit(X, Um).predict_topl(X, 2)
    assert (picks[:, 0] == best).mean() > 0.95
    assert picks.shape == (len(texts), 2)


def test_logistic_router_with_a_single_winner() -> None:
    X = query_features(["a b", "c d", "e f"], {}, TextHasher(n_features=64))
    Um = np.array([[1.0, 0.0], [1.0, 0.5], [0.0, 0.0]])
    assert LogisticRouter().fit(X, Um).predict_topl(X, 2).tolist() == [[0, 1]] * 3
