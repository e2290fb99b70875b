"""Questions that cannot separate the candidates are named, and their ties broken by the family rule."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.selection.sample_complexity import epsilon_at
from ragfolio.core.selection.separation import family, separation, tie_order, tied_picks
from ragfolio.pipelines.portfolio_selection.nodes import select_portfolios

NAMES = ["bm25(k1=0.9)", "bm25(k1=1.5)", "bm25(k1=2.0)", "dense(encoder=minilm)", "dense(encoder=e5)",
         "hybrid(encoder=e5)", "graph(seeds=bm25)", "mmr(lambda=0.5)"]


def test_a_family_is_the_names_leading_word() -> None:
    assert [family(n) for n in NAMES[:4]] == ["bm25", "bm25", "bm25", "dense"]
    assert family("dense:e5") == "dense" and family("two_hop(first=bm25)") == "two_hop"


def test_ties_spread_over_families_best_first() -> None:
    U = np.ones((20, len(NAMES)))  # every candidate scores 1.000 on every question
    order = tie_order(U, NAMES)
    assert sorted(order) == list(range(len(NAMES)))
    # all tied: families by name, each family's candidates by name, one of each family per round
    assert [NAMES[i] for i in order[:5]] == ["bm25(k1=0.9)", "dense(encoder=e5)", "graph(seeds=bm25)",
                                             "hybrid(encoder=e5)", "mmr(lambda=0.5)"]
    U[:, 4] = 0.5  # dense(e5) now worse: dense's best is minilm, and the dense family sorts after the ones at 1.0
    order = tie_order(U, NAMES)
    assert [NAMES[i] for i in order[:5]] == ["bm25(k1=0.9)", "dense(encoder=minilm)", "graph(seeds=bm25)",
                                             "hybrid(encoder=e5)", "mmr(lambda=0.5)"]


def test_tied_picks_are_found_and_clear_picks_are_not() -> None:
    U = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])
    result = select_greedy(U, 3)
    assert tied_picks(result, 3) == []  # gains 2/4, 1/4, then 0.5/4: each pick unique
    result = select_greedy(np.ones((4, 3)), 3)
    assert tied_picks(result, 3) == [1, 2, 3]  # every pick a tie (the last two at zero gain)


def test_separation_names_ties_and_too_few_questions() -> None:
    result = select_greedy(np.ones((20, 8)), 5)
    found = separation(result, 20, 8, 5, max_epsilon=0.1)
    assert not found.separates and found.tied_picks == [1, 2, 3, 4, 5]
    assert found.epsilon == pytest.approx(epsilon_at(20, 8, 5)) and found.epsilon > 0.1
    text = found.to_dict()
    assert text["separates"] is False and len(text["reasons"]) == 2 and "20 questions" in text["reasons"][1]
    rng = np.random.default_rng(0)
    U = rng.random((20000, 8))
    clear = separation(select_greedy(U, 5), len(U), 8, 5, max_epsilon=0.1)
    assert clear.separates and clear.reasons() == []


def test_a_tied_selection_is_one_per_family_and_is_recorded(caplog: pytest.LogCaptureFixture) -> None:
    from ragfolio.core.scoring.utility_index import DatasetRows, UtilityIndex
    from ragfolio.core.selection.sample_complexity import sample_queries

    n = 20
    index = UtilityIndex(score="support_recall", num_docs=2, candidates=tuple(NAMES),
                         families=tuple(family(x) for x in NAMES), corpus={"mode": "union"},
                         datasets={"teamwiki": DatasetRows(tuple(f"q{i}" for i in range(n)), ("train",) * n,
                                                            ("unknown",) * n)})
    matrices = {"teamwiki": np.ones((n, len(NAMES)), dtype=np.float32)}
    params = {"k": 5, "k_max": 6, "random_draws": 2, "seed": 0}
    with caplog.at_level("WARNING"):
        portfolios = select_portfolios(matrices, index, sample_queries(index, None, 0), params)
    chosen = portfolios.selection("all").portfolio
    assert [family(x) for x in chosen] == ["bm25", "dense", "graph", "hybrid", "mmr"]  # not the first five of the grid
    assert portfolios.selection("all").separation["separates"] is False
    assert "do not separate the 8 candidates" in caplog.text
