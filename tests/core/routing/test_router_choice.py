"""``router_training.bundle.router: auto``: the router with the largest validation gain is served."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.judging.choice import choose_router
from ragfolio.core.routing.routers.learned import Router


def _entry(best: float | None, default: float | None, fallback: bool = False) -> dict:
    return {"val_best_of_1": best, "val_default": default, "fallback": fallback}


def test_auto_picks_the_largest_validation_gain_not_the_largest_best_of_1() -> None:
    # learned validates on other questions (a higher best-of-1, but a smaller gain over the default there)
    validation = {"learned": _entry(0.90, 0.89), "pre_retrieval": _entry(0.82, 0.80),
                  "post_retrieval": _entry(0.85, 0.80)}
    choice = choose_router(validation)
    assert choice.router == "post_retrieval" and choice.requested == "auto"
    assert choice.validation["post_retrieval"]["val_gain"] == pytest.approx(0.05)
    assert "post_retrieval +0.0500" in choice.reason and "learned +0.0100" in choice.reason
    validation["pre_retrieval"] = _entry(0.87, 0.80)
    assert choose_router(validation).router == "pre_retrieval"


def test_fallback_counts_as_no_gain_ties_go_to_the_cheaper_router_and_unknowns_never_win() -> None:
    validation = {"learned": _entry(0.80, 0.80), "pre_retrieval": _entry(0.95, 0.80, fallback=True),
                  "post_retrieval": _entry(0.80, 0.80, fallback=True)}
    assert choose_router(validation).router == "learned"  # all gain 0: the cheapest
    validation["learned"] = _entry(None, None)  # saved before the values were recorded
    choice = choose_router(validation)
    assert choice.router == "pre_retrieval" and choice.validation["learned"]["val_gain"] is None
    with pytest.raises(ValueError, match="no router"):
        choose_router({"learned": _entry(float("nan"), 0.5)})


def test_a_named_router_is_served_as_configured_with_the_scores_reported() -> None:
    validation = {"learned": _entry(0.81, 0.80), "post_retrieval": _entry(0.85, 0.80)}
    choice = choose_router(validation, "learned")
    assert choice.router == "learned" and "as configured" in choice.reason and "post_retrieval +0.0500" in choice.reason
    with pytest.raises(ValueError, match="pre_retrieval"):
        choose_router(validation, "pre_retrieval")


def test_the_learned_router_records_its_validation_as_routed_and_the_default_there(tmp_path) -> None:
    rng = np.random.default_rng(0)
    X = {"x": rng.normal(size=(60, 4)).astype(np.float32)}
    U = np.zeros((60, 3), dtype=np.float32)
    U[:, 0] = 0.5
    U[X["x"][:, 0] > 0.8, 2] = 1.0  # member 2 wins a detectable minority
    router = Router(hidden=8, embedding_dim=4, max_epochs=40, patience=40, random_state=0).fit(RouteInputs(X), U)
    assert router.default_ == 0 and router.val_default_ == pytest.approx(0.5)
    assert router.val_default_ - 1e-9 <= router.val_routed_best_of_1_ <= 1.0
    router.save(tmp_path / "r")
    again = Router.load(tmp_path / "r")
    assert again.val_routed_best_of_1_ == router.val_routed_best_of_1_ and again.val_default_ == router.val_default_


def test_with_a_dev_split_auto_compares_the_dev_gains_on_the_same_questions() -> None:
    # validation says post_retrieval, dev (one set of questions for every router) says pre_retrieval
    validation = {"learned": {**_entry(0.90, 0.89), "dev_best_of_1": 0.70, "dev_default": 0.70},
                  "pre_retrieval": {**_entry(0.82, 0.80, fallback=True), "dev_best_of_1": 0.74, "dev_default": 0.70},
                  "post_retrieval": {**_entry(0.85, 0.80), "dev_best_of_1": 0.72, "dev_default": 0.70}}
    choice = choose_router(validation)
    assert choice.router == "pre_retrieval" and choice.on == "dev" and "dev gain" in choice.reason
    assert choice.validation["pre_retrieval"]["dev_gain"] == pytest.approx(0.04)
    assert choice.validation["pre_retrieval"]["val_gain"] == 0.0  # fell back on validation: still reported
    assert choice.to_dict()["on"] == "dev"
    del validation["learned"]["dev_best_of_1"]  # one router without dev values: every router is judged on validation
    again = choose_router(validation)
    assert again.on == "validation" and again.router == "post_retrieval"
