"""Reports and parameters flattened into MLflow keys."""

from ragfolio.tracking.flatten import MAX_PARAM_CHARS, flatten_metrics, flatten_params, knob_params


def test_report_leaves_become_dotted_keys_with_one_based_k() -> None:
    report = {
        "k": 5, "score": "support_recall",
        "datasets": {"hotpotqa": {"test": {"greedy_at_k": [0.5, 0.75], "single_best": 0.5, "ok": True},
                                  "portfolio": ["bm25(...)"], "learned": {"best_of_l": [0.4, 0.6]}}},
    }
    assert flatten_metrics(report) == {
        "k": 5.0, "hotpotqa.test.greedy_at_1": 0.5, "hotpotqa.test.greedy_at_2": 0.75,
        "hotpotqa.test.single_best": 0.5, "hotpotqa.learned.best_of_l_1": 0.4, "hotpotqa.learned.best_of_l_2": 0.6,
    }


def test_prefix_and_non_finite_values() -> None:
    assert flatten_metrics({"datasets": {"all": {"em": 0.2, "f1": float("nan")}}}, "answers") == {"answers.all.em": 0.2}


def test_params_are_flattened_and_cut_to_mlflows_limit() -> None:
    params = {"portfolio_selection": {"k": 5, "seed": 42}, "grid": {"bm25": [{"k1": [0.9, 1.2]}]}, "empty": {},
              "long": "x" * 10_000, "nothing": None}
    flat = flatten_params(params)
    assert flat["portfolio_selection.k"] == "5" and flat["grid.bm25"] == '[{"k1": [0.9, 1.2]}]'
    assert flat["empty"] == "{}" and flat["nothing"] == "null"
    assert len(flat["long"]) == MAX_PARAM_CHARS and flat["long"].endswith("...")


def test_knobs_are_the_top_level_values_of_the_groups_read() -> None:
    params = {"run_name": "tiny", "portfolio_selection": {"k": 5, "seed": 42},
              "router_training": {"seed": 1, "router": {"hidden": 128}}, "candidate_grids": {"paper": {"dense": {}}}}
    assert knob_params(params) == {"run_name": "tiny", "portfolio_selection.k": "5", "portfolio_selection.seed": "42",
                                   "router_training.seed": "1"}
    assert knob_params(params, {"portfolio_selection"}) == {"run_name": "tiny", "portfolio_selection.k": "5",
                                                            "portfolio_selection.seed": "42"}
