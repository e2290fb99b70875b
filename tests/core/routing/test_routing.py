"""Routing ablations, the measures routers are judged by, and the same-budget check, on hand-worked cases."""

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.query_features import TextHasher, query_features
from ragfolio.core.routing.judging import evaluation
from ragfolio.core.routing.judging.budget import BudgetRuns, question_judge, same_budget_recall
from ragfolio.core.routing.judging.evaluation import (
    RoutingComparison,
    RoutingSplit,
    best_of_l,
    compare_routers,
    compared,
    dev_baselines,
    gap_closed,
    summarized,
)
from ragfolio.core.routing.routers.baseline_routers import (
    GreedyPrefixRouter,
    OracleRouter,
    RandomRouter,
    TopAverageRouter,
)
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.routing.routers.logistic import LogisticRouter

U = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]], dtype=np.float32)
X = RouteInputs(query_features(["a b", "c d", "e f"], {}, TextHasher(n_features=64)))


def test_best_of_l_by_hand() -> None:
    picks = GreedyPrefixRouter().fit(X, U).route(X, 3)[0]
    assert picks.tolist() == [[0, 1, 2]] * 3
    assert best_of_l(U, picks) == pytest.approx([1 / 3, 2 / 3, (1 + 1 + 0.5) / 3])
    oracle = OracleRouter().fit(X, U).route(RouteInputs(X.query, {"utility": U}), 3)[0]
    assert best_of_l(U, oracle) == pytest.approx([2.5 / 3] * 3)
    assert best_of_l(np.zeros((0, 3)), np.zeros((0, 3), dtype=int)) == []


def test_top_average_orders_by_train_mean() -> None:
    Um = np.array([[0.2, 0.9, 0.5], [0.0, 0.8, 0.6], [0.1, 0.7, 0.4]], dtype=np.float32)  # means 0.1, 0.8, 0.5
    picks, scores = TopAverageRouter().fit(X, Um).route(X, 2)
    assert picks.tolist() == [[1, 2]] * 3
    np.testing.assert_allclose(scores, np.tile(Um.mean(axis=0), (3, 1)))
    assert TopAverageRouter().fit(X, U).route(X, 3)[0].tolist() == [[0, 1, 2]] * 3  # equal means: index order


def test_random_picks_are_seeded_permutations() -> None:
    rows = RouteInputs(query_features([f"q{i}" for i in range(50)], {}, TextHasher(n_features=64)))
    router = RandomRouter(random_state=3).fit(rows, np.zeros((50, 4)))
    picks = router.route(rows, 4)[0]
    assert (np.sort(picks, axis=1) == np.arange(4)).all()
    assert len({tuple(p) for p in picks}) > 5
    np.testing.assert_array_equal(router.route(rows, 4)[0], picks)


def test_oracle_needs_the_utilities() -> None:
    with pytest.raises(ValueError, match="routes by each member's utility"):
        OracleRouter().fit(X, U).route(X, 1)


def test_gap_closed() -> None:
    assert gap_closed(0.8, 0.7, 0.9) == pytest.approx(0.5)
    assert gap_closed(0.6, 0.7, 0.9) == pytest.approx(-0.5)
    assert gap_closed(0.7, 0.7, 0.7) is None


def test_logistic_router_learns_a_word_rule() -> None:
    texts = [f"question about {w} number {i}" for i in range(40) for w in ("cats", "planets")]
    rows = RouteInputs(query_features(texts, {}, TextHasher(n_features=128)))
    best = np.array([0 if "cats" in t else 1 for t in texts])
    Um = np.zeros((len(texts), 3))
    Um[np.arange(len(texts)), best] = 1.0
    Um[:4, 2] = 1.0  # a few ties with member 2
    picks = LogisticRouter(C=10.0).fit(rows, Um).route(rows, 2)[0]
    assert (picks[:, 0] == best).mean() > 0.95
    assert picks.shape == (len(texts), 2)


def test_logistic_router_with_a_single_winner() -> None:
    Um = np.array([[1.0, 0.0], [1.0, 0.5], [0.0, 0.0]])
    assert LogisticRouter().fit(X, Um).route(X, 2)[0].tolist() == [[0, 1]] * 3


def test_compare_routers_reports_every_router() -> None:
    texts = [f"which {w} is it {i}" for i in range(30) for w in ("river", "mountain")]
    rows = RouteInputs(query_features(texts, {}, TextHasher(n_features=64)))
    Um = np.array([[1.0, 0.0] if "river" in t else [0.0, 1.0] for t in texts], dtype=np.float32)
    train, test = RoutingSplit(rows.take(range(40)), Um[:40]), RoutingSplit(rows.take(range(40, 60)), Um[40:])
    learned = Router(hidden=8, embedding_dim=4, max_epochs=5, random_state=0).fit(train.inputs, train.utilities)
    comparison = compare_routers(learned, train, test, seed=0, logistic_c=1.0)
    assert list(comparison.picks) == compared() and all(p.shape == (20, 2) for p in comparison.picks.values())
    report = comparison.report()
    assert report["oracle"]["best_of_l"] == [1.0, 1.0]
    assert report["single_best_member"] == report["top_average"]["best_of_l"][0] == 0.5
    summarized = ("learned", "greedy_prefix", "top_average", "logistic")
    assert set(report["summary"]) == {f"{name}_l{l}" for name in summarized for l in (1, 2)}


def test_the_judged_lists_are_what_the_router_classes_declare() -> None:
    """The orders the reports were written in (router_metrics.json's keys depend on them)."""
    assert compared() == ["learned", "random", "top_average", "greedy_prefix", "logistic", "nearest_neighbour", "oracle"]
    assert summarized() == ["learned", "greedy_prefix", "top_average", "logistic"]
    assert dev_baselines() == ["top_average", "greedy_prefix", "oracle"]


def test_a_router_class_declaring_a_place_joins_that_list(monkeypatch: pytest.MonkeyPatch) -> None:
    class MedianRouter(TopAverageRouter):
        name: ClassVar[str] = "median"
        judged_as: ClassVar[Mapping[str, int]] = {"ablation": 3, "dev_baseline": 9}

    classes = {name: evaluation.router_class(name) for name in evaluation.router_names()} | {"median": MedianRouter}
    monkeypatch.setattr(evaluation, "router_names", lambda: list(classes))
    monkeypatch.setattr(evaluation, "router_class", classes.__getitem__)
    assert evaluation.ablations() == ["random", "top_average", "greedy_prefix", "median", "logistic",
                                      "nearest_neighbour", "oracle"]  # by place; a tie by registration order
    assert evaluation.dev_baselines()[-1] == "median" and "median" not in evaluation.summarized()


def test_report_bootstraps_learned_minus_single_best_paired() -> None:
    """Member 0 wins the first 30 questions, member 1 the last 10; the learned router is right on 38."""
    Ut = np.array([[1.0, 0.0]] * 30 + [[0.0, 1.0]] * 10, dtype=np.float32)
    right = np.array([[0, 1]] * 30 + [[1, 0]] * 10)
    learned = right.copy()
    learned[[30, 31]] = learned[[30, 31], ::-1]  # 2 mistakes, where the single best is wrong too
    picks = {name: right for name in compared()} | {"learned": learned, "top_average": np.array([[0, 1]] * 40)}
    report = RoutingComparison(picks, Ut).report()
    l1, l2 = report["learned_minus_single_best"]["l1"], report["learned_minus_single_best"]["l2"]
    assert l1["estimate"] == pytest.approx(38 / 40 - 30 / 40) and l1["n"] == 40
    assert 0.05 < l1["low"] < l1["estimate"] < l1["high"] < 0.4  # 8 wins of +1 in 40: sd of the mean 0.063
    assert l2["estimate"] == pytest.approx(1.0 - 30 / 40) and l2["low"] > l1["low"]  # two members solve every question


def test_every_router_gets_paired_intervals_to_the_single_best_and_the_greedy_prefix() -> None:
    """The retrieval routers' routings (added after the ablations) get the same intervals as learned."""
    Ut = np.array([[1.0, 0.0]] * 30 + [[0.0, 1.0]] * 10, dtype=np.float32)
    right, single = np.array([[0, 1]] * 30 + [[1, 0]] * 10), np.array([[0, 1]] * 40)
    picks = {name: single for name in compared()} | {"learned": right, "post_retrieval": right, "pre_retrieval": single}
    report = RoutingComparison(picks, Ut).report()
    for name in (*compared(), "pre_retrieval", "post_retrieval"):
        if name == "top_average":  # the baseline itself
            assert "minus_single_best" not in report[name]
            continue
        assert set(report[name]["minus_single_best"]) == {"l1", "l2"}
        if name != "greedy_prefix":
            assert set(report[name]["minus_greedy_prefix"]) == {"l1", "l2"}
    post = report["post_retrieval"]["minus_single_best"]["l1"]
    assert post["estimate"] == pytest.approx(10 / 40) and post["low"] > 0  # right on the 10 the single best misses
    assert report["pre_retrieval"]["minus_single_best"]["l1"] == {"estimate": 0.0, "low": 0.0, "high": 0.0, "n": 40}
    assert report["post_retrieval"]["minus_greedy_prefix"]["l2"]["estimate"] == pytest.approx(0.0)  # both hold 0 and 1
    assert report["learned_minus_single_best"] == report["learned"]["minus_single_best"]


def test_same_budget_recall_by_hand() -> None:
    """Two questions, two members of 1 passage each; the single best returns 1, then 2 passages."""
    runs = BudgetRuns(
        members=[np.array([[10], [20]]), np.array([[11], [-1]])],
        single=[np.array([[10], [21]]), np.array([[10, 12], [21, 20]])],
        judges=[question_judge("support_recall", gold, []) for gold in ([10, 11], [20])],
    )
    picks = np.array([[1, 0], [0, 1]])
    result = same_budget_recall(runs, picks)
    # support recall = |pred & gold| / min(l * num_docs, |gold|), the budget both sides had
    assert result["routed_union_recall"] == pytest.approx([(1 + 1) / 2, (1 + 1) / 2])
    assert result["single_best_recall"] == pytest.approx([(1 + 0) / 2, (0.5 + 1) / 2])
    both = BudgetRuns.concatenate([runs, runs])
    assert len(both.judges) == 4 and both.single[1].shape == (4, 2)


def test_same_budget_recall_under_answer_recall() -> None:
    """With ``score: answer_recall`` the check asks whether any passage of the union holds an answer."""
    passages = {10: "the Nile is long", 11: "nothing here", 20: "Paris, France", 21: "elsewhere", 12: "Nile again"}
    texts = [passages.get(i, "") for i in range(25)]
    runs = BudgetRuns(
        members=[np.array([[11], [21]]), np.array([[10], [20]])],
        single=[np.array([[11], [21]]), np.array([[11, 12], [21, 20]])],
        judges=[question_judge("answer_recall", answers, texts) for answers in (["Nile"], ["Paris"])],
    )
    result = same_budget_recall(runs, np.array([[0, 1], [0, 1]]))
    assert result["routed_union_recall"] == pytest.approx([0.0, 1.0])
    assert result["single_best_recall"] == pytest.approx([0.0, 1.0])
