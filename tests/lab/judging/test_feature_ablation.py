"""The retrieval-feature ablation: every featurizer column has a group, and dropping the group that
carries the signal shows as the loss of the router's gain."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
from ragfolio.core.routing.judging.evaluation import RoutingSplit
from ragfolio_lab.judging.feature_ablation import (
    ALL_FEATURES,
    ablate_features,
    drop_columns,
    feature_group,
    feature_groups,
)

K = 3
MEMBERS = ["m0", "m1", "m2"]


def _names() -> dict[str, list[str]]:
    featurizer = RetrievalFeaturizer(("e5",), 4, 10)
    return {"first_stage": featurizer.first_stage_names(), "members": featurizer.member_names()}


def test_every_column_of_the_featurizer_has_one_group() -> None:
    names = _names()
    groups = feature_groups(names)
    assert set(groups) == {"first_stage.scores", "first_stage.lists", "first_stage.agreement", "first_stage.form",
                           "members.scores", "members.agreement", "members.lists"}
    for block, columns in names.items():
        covered = sorted(i for g in groups.values() for i in g.get(block, []))
        assert covered == list(range(len(columns)))
    assert feature_group("first_stage", "dense:e5.margin2") == "first_stage.scores"
    assert feature_group("first_stage", "bm25.seed_links") == "first_stage.lists"
    assert feature_group("first_stage", "agree.bm25~dense:e5.rank_corr") == "first_stage.agreement"
    assert feature_group("members", "overlap.bm25") == "members.agreement"
    assert feature_group("members", "top1") == "members.scores"
    assert feature_group("members", "distinct_titles") == "members.lists"
    judging = RetrievalFeaturizer(("e5",), 4, 10, judge=True).member_names()
    assert feature_groups({"members": judging})["members.judgements"] == {"members": [len(judging) - 3, len(judging) - 2,
                                                                                     len(judging) - 1]}
    with pytest.raises(ValueError, match="block"):
        feature_group("queries", "top1")


def _split(n: int, seed: int, names: dict[str, list[str]]) -> RoutingSplit:
    """Member 0 is best on ~60% of questions; the best member's ``top1`` (members.scores) is higher."""
    rng = np.random.default_rng(seed)
    best = rng.choice(K, n, p=[0.6, 0.2, 0.2])
    U = np.full((n, K), 0.5, dtype=np.float32)
    U[:, 0] = 0.6
    U[np.arange(n), best] = 1.0
    members = rng.normal(size=(n, K, len(names["members"]))).astype(np.float32)
    members[np.arange(n), best, names["members"].index("top1")] += 3.0
    first = rng.normal(size=(n, len(names["first_stage"]))).astype(np.float32)
    return RoutingSplit(RouteInputs({"first_stage": first}, {"members": members}), U)


def test_drop_columns_removes_only_the_named_columns() -> None:
    names = _names()
    split = _split(10, 0, names)
    dropped = drop_columns(split.inputs, {"members": [0, 1], "first_stage": [2]})
    assert dropped.results is not None and split.inputs.results is not None
    np.testing.assert_array_equal(dropped.results["members"], split.inputs.results["members"][:, :, 2:])
    assert dropped.query["first_stage"].shape[1] == len(names["first_stage"]) - 1
    with pytest.raises(ValueError, match="no 'members' block"):
        drop_columns(RouteInputs({"first_stage": split.inputs.query["first_stage"]}), {"members": [0]})


def test_dropping_the_group_that_carries_the_signal_loses_the_gain() -> None:
    names = _names()
    train, test = _split(400, 0, names), _split(300, 1, names)
    out = ablate_features("post_retrieval", {}, train, test, MEMBERS, names)
    variants = out["variants"]
    full, no_scores = variants[ALL_FEATURES], variants["without members.scores"]
    assert not full["fallback"] and full["gap_closed_l1"] > 0.5
    assert full["minus_single_best"]["low"] > 0
    assert no_scores["fallback"] and no_scores["gap_closed_l1"] == pytest.approx(0.0)
    assert no_scores["minus_all_features"]["high"] < 0  # its loss is measured, paired, against all features
    assert variants["without members"]["fallback"]
    assert not variants["without first_stage.form"]["fallback"]  # a noise group leaves the gain
    assert no_scores["n_features"] == full["n_features"] - 2
    assert out["n_test"] == 300 and 0 < out["headroom_share"] < 1
    # Bonferroni over the table: each interval at 1 - 0.05 / m, wider than at a looser family level
    assert out["n_intervals"] == 2 * len(variants) - 1
    assert out["interval_confidence"] == pytest.approx(1 - 0.05 / out["n_intervals"])
    loose = ablate_features("post_retrieval", {}, train, test, MEMBERS, names, confidence=0.5)["variants"][ALL_FEATURES]

    def width(x: dict) -> float:
        return x["high"] - x["low"]

    assert width(full["minus_single_best"]) > width(loose["minus_single_best"])
    assert full["minus_single_best"]["estimate"] == loose["minus_single_best"]["estimate"]
