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


# --- do no harm: route only at the l's where the dev same-budget test passed Holm's step-down -------------------

def _interval(estimate: float, low: float | None, high: float | None, n: int = 42, *, passed: bool | None = None,
              p_holm: float = 0.2) -> dict:
    """A dev same-budget test as ``same_budget_tests`` writes it (passed: by default, where the interval is above 0)."""
    passed = (low or 0) > 0 if passed is None else passed
    return {"estimate": estimate, "low": low, "high": high, "n": n, "confidence": 0.95, "p": p_holm / 2,
            "p_holm": p_holm, "passed": passed, "m": 4, "alpha": 0.025}


def _dev(best: float, default: float) -> dict:
    return {**_entry(best, default), "dev_best_of_1": best, "dev_default": default}


def test_auto_turns_routing_off_when_the_dev_interval_is_not_above_zero_and_says_so_with_the_numbers() -> None:
    validation = {"learned": _dev(0.70, 0.70), "post_retrieval": _dev(0.722, 0.70)}
    evidence = {"learned": {"l1": _interval(0.0, -0.02, 0.02), "l2": _interval(0.0, -0.02, 0.02)},
                "post_retrieval": {"l1": _interval(0.022, -0.03, 0.07), "l2": _interval(-0.043, -0.082, -0.006)}}
    choice = choose_router(validation, evidence=evidence, ls=(1, 2, 3))
    assert choice.router == "post_retrieval"  # what would be served, by the largest dev gain
    assert choice.routed_ls == () and choice.routing == "off"
    assert not choice.routes_at(1) and not choice.routes_at(2)
    assert ("routing off at l = 1: dev evidence +0.022 [-0.030, +0.070] on 42 questions (95% interval, "
            "Holm-adjusted p 0.2) is not enough") in choice.reason
    assert "2: dev evidence -0.043 [-0.082, -0.006] on 42 questions (95% interval" in choice.reason
    assert "Holm's step-down over the 4 router x l tests, familywise 2.5% one-sided" in choice.reason
    assert choice.default_l == 2 and "default l = 2 (bundle.default_l): no l has evidence" in choice.reason
    assert choice.to_dict()["routed_ls"] == [] and choice.to_dict()["routing"] == "off"


def test_auto_routes_only_where_the_evidence_is_and_prefers_a_router_with_evidence() -> None:
    validation = {"learned": _dev(0.75, 0.70), "post_retrieval": _dev(0.73, 0.70)}
    evidence = {"learned": {"l1": _interval(0.05, -0.01, 0.11), "l2": _interval(0.01, -0.01, 0.03)},
                "post_retrieval": {"l1": _interval(0.03, 0.01, 0.05), "l2": _interval(0.0, -0.02, 0.02)}}
    choice = choose_router(validation, evidence=evidence, ls=(1, 2))
    assert choice.router == "post_retrieval"  # the larger point gain (learned) has no interval above zero
    assert choice.routed_ls == (1,) and choice.routing == "partial"
    assert choice.routes_at(1) and not choice.routes_at(2)
    assert "routing on at l = 1 (dev evidence +0.030 [+0.010, +0.050] on 42 questions (95% interval" in choice.reason
    assert "off at l = 2: dev evidence +0.000 [-0.020, +0.020] on 42 questions (95% interval" in choice.reason
    evidence["post_retrieval"]["l2"] = _interval(0.02, 0.001, 0.04)
    assert choose_router(validation, evidence=evidence, ls=(1, 2)).routing == "on"


def test_without_dev_questions_auto_does_not_route_and_a_named_router_routes_everywhere() -> None:
    validation = {"learned": _entry(0.85, 0.80), "post_retrieval": _entry(0.81, 0.80)}
    off = choose_router(validation, ls=(1, 2))
    assert off.router == "learned" and off.routed_ls == () and "no dev questions" in off.reason
    named = choose_router(validation, "post_retrieval", ls=(1, 2))
    assert named.routed_ls == (1, 2) and named.routing == "on" and "no dev same-budget evidence" in named.reason


def _synthetic_task(detectable: bool, seed: int = 0):
    """Two members over ten rows a question (two gold): member 1 finds the gold on a subpopulation S
    where the single best (member 0) finds none, and half of it elsewhere; S is read off the first
    feature (``detectable``) or independent of every feature."""
    from ragfolio.core.metrics import support_recall
    from ragfolio.core.routing.judging.budget import BudgetRuns

    rng = np.random.default_rng(seed)
    n = 400
    X = rng.normal(size=(n, 4)).astype(np.float32)
    in_s = X[:, 0] > 0.5 if detectable else rng.random(n) < 0.3
    base = 10 * np.arange(n)[:, None]
    gold, junk = base + np.array([0, 1]), base + np.array([5, 6, 7, 8])
    m0 = np.where(in_s[:, None], junk[:, :2], gold)
    m0_deep = np.where(in_s[:, None], junk, np.concatenate([gold, junk[:, :2]], axis=1))
    m1 = np.where(in_s[:, None], gold, np.stack([gold[:, 0], junk[:, 2]], axis=1))
    U = np.stack([np.where(in_s, 0.0, 1.0), np.where(in_s, 1.0, 0.5)], axis=1).astype(np.float32)
    judges = [lambda rows, num_docs, g=set(g): support_recall(rows, g, num_docs) for g in gold.tolist()]
    dev = slice(280, n)
    runs = BudgetRuns(members=[m0[dev], m1[dev]], single=[m0[dev], m0_deep[dev]], judges=judges[dev])
    return {"x": X}, U, dev, runs


@pytest.mark.parametrize("detectable", [True, False], ids=["detectable", "undetectable"])
def test_on_a_synthetic_task_routing_switches_on_only_where_a_member_wins_a_detectable_subpopulation(detectable) -> None:
    from ragfolio.core.routing.judging.budget import same_budget_tests
    from ragfolio.core.routing.routers.logistic import LogisticRouter

    X, U, dev, runs = _synthetic_task(detectable)
    train = slice(0, dev.start)
    router = LogisticRouter().fit(RouteInputs({"x": X["x"][train]}), U[train], ["m0", "m1"])
    picks, _ = router.route(RouteInputs({"x": X["x"][dev]}), 2)
    evidence = same_budget_tests(runs, {"learned": picks}, (1, 2))["learned"]
    routed_best = float(U[dev][np.arange(len(picks)), picks[:, 0]].mean())
    validation = {"learned": _dev(routed_best, float(U[dev][:, 0].mean()))}
    choice = choose_router(validation, evidence={"learned": evidence}, ls=(1, 2))
    # l = 2: both members' lists beat the single best's four passages wherever S is, detectable or not
    assert choice.routes_at(2) and evidence["l2"]["low"] > 0
    assert choice.routes_at(1) is detectable, (evidence["l1"], choice.reason)
    if detectable:
        assert evidence["l1"]["low"] > 0.1 and choice.routing == "on"
    else:
        assert evidence["l1"]["low"] <= 0 and "routing on at l = 2" in choice.reason and "off at l = 1" in choice.reason


def _one_router_wins_a_little(n: int = 100):
    """Two members, one passage each, gold row 0 of each question: the single best (member 0) finds it
    on 80 questions, member 1 on 90 (15 it alone finds, 5 it alone misses). ``post_retrieval`` routes
    to member 1 first (routed union minus single best at l = 1: +1 on 15, -1 on 5, else 0); the three
    other routers route as the single best does (a difference of 0 everywhere)."""
    from ragfolio.core.metrics import support_recall
    from ragfolio.core.routing.judging.budget import BudgetRuns

    rows = 10 * np.arange(n)
    gold, junk = rows, rows + 5
    m1_only, m0_only = np.arange(n) < 15, (np.arange(n) >= 15) & (np.arange(n) < 20)
    m0 = np.where(m1_only, junk, gold)[:, None]
    m1 = np.where(m0_only, junk + 1, gold)[:, None]
    judges = [lambda got, num_docs, g=g: support_recall(got, {int(g)}, num_docs) for g in gold]
    runs = BudgetRuns(members=[m0, m1], single=[m0, np.concatenate([m0, m1], axis=1)], judges=judges)
    first, second = np.tile([1, 0], (n, 1)), np.tile([0, 1], (n, 1))
    return runs, {"learned": second, "pre_retrieval": second, "cascade": second, "post_retrieval": first}


def test_a_router_whose_interval_clears_zero_alone_but_not_among_all_router_x_l_tests_is_not_routed() -> None:
    from ragfolio.core.routing.judging.budget import same_budget_comparison, same_budget_tests

    runs, picks = _one_router_wins_a_little()
    uncorrected = same_budget_comparison(runs, picks["post_retrieval"], (1, 2))["union_minus_single"]
    assert uncorrected["l1"]["estimate"] == pytest.approx(0.1) and uncorrected["l1"]["low"] > 0  # the old rule routes
    assert same_budget_tests(runs, {"post_retrieval": picks["post_retrieval"]}, (1,))["post_retrieval"]["l1"]["passed"]
    evidence = same_budget_tests(runs, picks, (1, 2))  # 4 routers x 2 l's: Holm's first step is at 0.025 / 8
    test = evidence["post_retrieval"]["l1"]
    assert test["m"] == 8 and test["p"] < 0.025 and not test["passed"] and test["low"] <= 0
    assert test["confidence"] == pytest.approx(1 - 0.05 / 8)
    validation = {"learned": _dev(0.80, 0.80), "pre_retrieval": _dev(0.80, 0.80), "cascade": _dev(0.80, 0.80),
                  "post_retrieval": _dev(0.90, 0.80)}
    choice = choose_router(validation, evidence=evidence, ls=(1, 2))
    assert choice.router == "post_retrieval" and choice.routed_ls == () and choice.routing == "off"
    assert "over the 8 router x l tests" in choice.reason and choice.default_l == 2
    with pytest.raises(ValueError, match="has no 'passed'"):  # uncorrected intervals are refused, not read
        choose_router(validation, evidence={"post_retrieval": uncorrected}, ls=(1, 2))


def test_the_default_l_is_the_smallest_l_with_evidence_else_the_setting() -> None:
    validation = {"learned": _dev(0.70, 0.70), "post_retrieval": _dev(0.75, 0.70)}
    evidence = {"learned": {f"l{l}": _interval(0.0, -0.02, 0.02) for l in (1, 2, 3, 4)},
                "post_retrieval": {"l1": _interval(0.01, -0.01, 0.03), "l2": _interval(0.02, -0.01, 0.05),
                                   "l3": _interval(0.04, 0.01, 0.07), "l4": _interval(0.05, 0.02, 0.08)}}
    choice = choose_router(validation, evidence=evidence, ls=(1, 2, 3, 4), default_l=2)
    assert choice.routed_ls == (3, 4) and choice.default_l == 3
    assert "default l = 3: the smallest l with evidence" in choice.reason
    evidence["post_retrieval"]["l2"] = _interval(0.03, 0.005, 0.06)
    assert choose_router(validation, evidence=evidence, ls=(1, 2, 3, 4), default_l=4).default_l == 2
    for tests in evidence.values():  # no l with evidence: the single best member at the setting's default
        tests.update({key: {**test, "passed": False} for key, test in tests.items()})
    off = choose_router(validation, evidence=evidence, ls=(1, 2, 3, 4), default_l=3)
    assert off.routed_ls == () and off.default_l == 3 and "default l = 3 (bundle.default_l)" in off.reason
    named = choose_router(validation, "post_retrieval", evidence=evidence, ls=(1, 2, 3, 4), default_l=3)
    assert named.routed_ls == (1, 2, 3, 4) and named.default_l == 3  # a named router: as configured


def test_a_router_selection_reads_back_what_it_wrote_and_names_a_bad_key() -> None:
    import json

    from ragfolio.core.routing.judging.choice import RouterSelection

    validation = {"learned": _dev(0.70, 0.60), "pre_retrieval": _dev(0.75, 0.60)}
    evidence = {"pre_retrieval": {"l1": _interval(0.1, 0.02, 0.2, 30), "l2": _interval(0.0, -0.1, 0.1, 30)}}
    choices = {"all": choose_router(validation, evidence=evidence, ls=(1, 2)), "hotpotqa": choose_router(validation)}
    selection = RouterSelection({"all": validation, "hotpotqa": validation}, choices)
    stored = json.loads(json.dumps(selection.to_dict()))  # as the catalog's RecordDataset stores it
    assert RouterSelection.from_dict(stored) == selection and stored["schema_version"] == 2
    assert selection.choices["all"].routed_ls == (1,) and selection.choices["hotpotqa"].routed_ls == ()
    assert selection.choices["all"].default_l == 1 and selection.choices["hotpotqa"].default_l == 2
    with pytest.raises(ValueError, match=r"unknown keys \['choise'\], missing keys \['choices'\]"):
        RouterSelection.from_dict({"validation": {}, "choise": {}})
    with pytest.raises(ValueError, match="schema version 3"):
        RouterSelection.from_dict({**stored, "schema_version": 3})
    # a version-1 record (before the default l was chosen) still reads: its default l is the setting's
    old = {"validation": stored["validation"], "choices": {key: {k: v for k, v in choice.items() if k != "default_l"}
                                                           for key, choice in stored["choices"].items()}}
    read = RouterSelection.from_dict(old).choices["all"]
    assert read.default_l is None and read.served_default_l(2) == 2 and read.routed_ls == (1,)


def test_the_served_figures_are_the_single_best_members_where_routing_is_off() -> None:
    """Routing at l = 1 only: the served l = 2 is the single best member at 2 x num_docs, so the served
    test and dev figures there are its own (a difference of exactly 0), not the router's."""
    from ragfolio.core.routing.judging.served import served_choice, served_entry

    validation = {"learned": _dev(0.70, 0.60), "pre_retrieval": _dev(0.75, 0.60)}
    evidence = {"pre_retrieval": {"l1": _interval(0.1, 0.02, 0.2, 30), "l2": _interval(0.0, -0.1, 0.1, 30)}}
    choice = choose_router(validation, evidence=evidence, ls=(1, 2))
    router_minus = {"l1": _interval(0.05, 0.01, 0.09, 12), "l2": _interval(-0.05, -0.09, -0.01, 12)}
    measured = {"n_test": 12, "single_best_member": 0.45,
                "pre_retrieval": {"best_of_l": [0.5, 0.6], "gap_closed_l1": 0.25, "minus_single_best": router_minus},
                "dev": {"n_dev": 30, "single_best_member": 0.5,
                        "pre_retrieval": {"best_of_l": [0.55, 0.65], "gap_closed_l1": 0.3}},
                "chosen_same_budget": {"routed_union_recall": [0.5, 0.55], "single_best_recall": [0.45, 0.7],
                                       "union_minus_single": {"l1": router_minus["l1"]}}}
    entry = served_entry("all", choice, measured, default_l=2, num_docs=4)
    assert entry["router"] == "pre_retrieval" and entry["routed_ls"] == [1] and entry["routing"] == "partial"
    assert entry["default_l"] == 1  # the smallest l with evidence, not the setting's 2
    assert entry["test_best_of_l"] == [0.5, 0.45] and entry["dev_best_of_l"] == [0.55, 0.5]
    assert entry["test_minus_single_best"] == {"l1": router_minus["l1"],
                                               "l2": {"estimate": 0.0, "low": 0.0, "high": 0.0, "n": 12}}
    assert entry["test_served_recall"] == [0.5, 0.7]  # l = 2: the single best member's 8 passages
    assert entry["test_gap_closed_l1"] == 0.25 and entry["dev_gap_closed_l1"] == 0.3
    assert entry["n_test"] == 12 and entry["same_budget"] == measured["chosen_same_budget"] and "corpus" not in entry
    off = choose_router(validation, ls=(1, 2))  # no dev questions: routing off everywhere
    entry_off = served_entry("all", off, {**measured, "learned": measured["pre_retrieval"]}, default_l=2, num_docs=4)
    assert entry_off["test_best_of_l"] == [0.45, 0.45] and entry_off["test_gap_closed_l1"] == 0.0
    assert entry_off["test_served_recall"] == [0.45, 0.7] and entry_off["default_l"] == 2
    assert served_entry("all", choice, {}, default_l=2, num_docs=4, corpus={"mode": "union"})["corpus"] == {
        "mode": "union"}
    # the bundle's record: the same entry without what was measured on test
    bundled = served_choice("all", choice, default_l=2, num_docs=4, dev=measured["dev"])
    assert bundled == {key: value for key, value in entry.items() if key in bundled}
    assert not {key for key in bundled if key.startswith("test_")} and "n_test" not in bundled
    assert served_choice("all", choice, default_l=2, num_docs=4)["dev_best_of_l"] is None  # no dev questions


def test_auto_chooses_within_the_members_run_budget_and_says_what_it_left_out() -> None:
    validation = {"learned": _entry(0.80, 0.80), "pre_retrieval": _entry(0.82, 0.80),
                  "cascade": _entry(0.84, 0.80), "post_retrieval": _entry(0.86, 0.80)}
    ran = {"learned": 1, "pre_retrieval": 1, "cascade": 3, "post_retrieval": 5}
    assert choose_router(validation, members_ran=ran).router == "post_retrieval"  # no limit
    choice = choose_router(validation, members_ran=ran, max_members_run=3)
    assert choice.router == "cascade" and "post_retrieval (runs 5 members)" in choice.reason
    choice = choose_router(validation, members_ran=ran, max_members_run=1)
    assert choice.router == "pre_retrieval" and "cascade (runs 3 members)" in choice.reason
    assert choose_router(validation, "post_retrieval", members_ran=ran, max_members_run=1).router == "post_retrieval"


def test_members_ran_is_the_shortlist_for_the_cascade_all_for_post_retrieval_and_l_for_query_routers() -> None:
    from ragfolio.core.routing.registry import members_ran
    from ragfolio.core.routing.routers.cascade import CascadeRouter
    from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter, PreRetrievalRouter

    cascade = CascadeRouter(members_run=3)
    cascade.members_, cascade.members_run_, cascade.fallback_ = [0, 1, 2, 3, 4], 3, False  # as fitted
    assert members_ran(cascade, 1, 5) == 3 and members_ran(cascade, 4, 5) == 4
    assert members_ran(PostRetrievalRouter(), 1, 5) == 5
    assert members_ran(PreRetrievalRouter(), 2, 5) == 2
