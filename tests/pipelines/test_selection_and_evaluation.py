"""portfolio_selection and evaluation on synthetic utility matrices (no encoders): the query sample,
the report's intervals and the sample-complexity study."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from matplotlib.figure import Figure

from ragfolio.core.scoring.utility_index import UtilityIndex
from ragfolio.core.selection.baseline_portfolios import random_k
from ragfolio.core.selection.sample_complexity import draw_rows, key_seed
from ragfolio.datasets.record_files import RecordDataset
from ragfolio.pipeline_registry import register_pipelines
from ragfolio.pipelines.evaluation.nodes import EvaluationParams, evaluate_portfolios, study_sample_complexity
from ragfolio.pipelines.portfolio_selection.nodes import sample_queries, select_portfolios

M = 6


def synthetic(
    n_a: int = 60, n_b: int = 40, seed: int = 0, split_of: Callable[[int], str] = lambda i: "train" if i % 3 else "test",
) -> tuple[dict[str, np.ndarray], UtilityIndex]:
    rng = np.random.default_rng(seed)
    matrices, datasets = {}, {}
    for name, n in (("a", n_a), ("b", n_b)):
        matrices[name] = (np.round(4 * rng.random((n, M)) ** 2) / 4).astype(np.float32)
        split = [split_of(i) for i in range(n)]
        datasets[name] = {"ids": [f"{name}{i}" for i in range(n)], "split": split, "type": ["bridge"] * n}
    index = UtilityIndex.from_dict({
        "candidates": [f"c{j}" for j in range(M)], "families": ["dense"] * M, "score": "support_recall",
        "num_docs": 4, "corpus": {"mode": "union"}, "datasets": datasets,
    })
    return matrices, index


SELECTION = {"k": 2, "k_max": 3, "random_draws": 3, "seed": 5}


def test_greedy_selects_on_the_drawn_rows_only() -> None:
    matrices, index = synthetic()
    sample = sample_queries(index, {**SELECTION, "n_queries": 10})
    rows = sample.draw("a").rows
    assert rows == draw_rows(40, 10, key_seed(5, "a")).tolist() and sample.draw("all").n_train == 40 + 26
    # Make column 5 perfect on the drawn rows and worthless elsewhere: only a selection on the draw picks it first.
    train = np.flatnonzero(np.array(index.datasets["a"].split) == "train")
    matrices["a"][:, 5] = 0.0
    matrices["a"][train[rows], 5] = 1.0
    sel = select_portfolios(matrices, index, sample, {**SELECTION, "n_queries": 10}).selection("a")
    assert sel.greedy[0] == 5 and sel.n_train == 10 and sel.n_train_available == 40
    full = select_portfolios(matrices, index, sample_queries(index, SELECTION), SELECTION).selection("a")
    assert full.greedy[0] != 5 and full.n_train == 40
    with pytest.raises(ValueError, match="rerun sample_queries"):
        select_portfolios(matrices, synthetic(n_a=30)[1], sample, SELECTION)
    with pytest.raises(ValueError, match="n_queries"):
        sample_queries(index, {**SELECTION, "n_queries": 0})


def test_the_random_orders_are_the_tested_random_k_on_one_seeded_generator() -> None:
    matrices, index = synthetic()
    selections = select_portfolios(matrices, index, sample_queries(index, SELECTION), SELECTION).selections
    rng = np.random.default_rng(SELECTION["seed"])  # one generator across the keys, in the report's order
    for key, selection in selections.items():
        n_train = selection.n_train
        expected = [random_k(np.zeros((n_train, M)), SELECTION["k_max"], rng) for _ in range(SELECTION["random_draws"])]
        assert selection.random == expected, key


def test_dev_rows_are_not_selected_on_and_are_reported_beside_test() -> None:
    matrices, index = synthetic(split_of=lambda i: "test" if i % 5 == 0 else "dev" if i % 5 == 1 else "train")
    portfolios = select_portfolios(matrices, index, sample_queries(index, SELECTION), SELECTION)
    assert portfolios.selection("a").n_train == 36  # 60 rows: 12 test, 12 dev
    candidates = [{"name": n, "family": "dense"} for n in index.candidates]
    report = evaluate_portfolios(matrices, index, portfolios, candidates, {"report_k": [1, 2], "intervals": {"n_resamples": 200}})
    for key, n_dev in (("a", 12), ("b", 8), ("all", 20)):
        entry = report["datasets"][key]
        assert entry["n_dev"] == n_dev and entry["n_train"] + n_dev + entry["n_test"] == {"a": 60, "b": 40, "all": 100}[key]
        assert "greedy_minus_top_by_average_at_k" in entry["dev"]  # held out: with intervals, like test
        assert "greedy_minus_top_by_average_at_k" not in entry["train"]
    without = evaluate_portfolios(*synthetic(), select_portfolios(*synthetic(), sample_queries(synthetic()[1], SELECTION),
                                                                  SELECTION), candidates, {"report_k": [1, 2]})
    assert "dev" not in without["datasets"]["a"] and "n_dev" not in without["datasets"]["a"]


def test_selection_then_evaluation_writes_intervals_and_the_study(tmp_path) -> None:
    matrices, index = synthetic()
    params = {"sample_complexity": {"sizes": [5, 10, "all"], "seeds": 4}, "intervals": {"n_resamples": 500}}
    catalog = DataCatalog({
        "utility_matrices": MemoryDataset(matrices), "utility_index": MemoryDataset(index),
        "candidates": MemoryDataset([{"name": n, "family": "dense"} for n in index.candidates]),
        "params:portfolio_selection": MemoryDataset({**SELECTION, "n_queries": 20}),
        "params:evaluation": MemoryDataset({"report_k": [1, 2], **params}),
        # persisted: Kedro releases in-memory datasets once consumed
        **{name: JSONDataset(filepath=str(tmp_path / f"{name}.json"))
           for name in ("portfolio_metrics", "sample_complexity")},
        "query_sample": RecordDataset(str(tmp_path / "query_sample.json"), "ragfolio.core.selection.query_sample.QuerySample"),
        "portfolios": RecordDataset(str(tmp_path / "portfolios.json"), "ragfolio.core.selection.portfolios.Portfolios"),
    })
    pipelines = register_pipelines()
    SequentialRunner().run(pipelines["portfolio_selection"], catalog)
    assert catalog.load("query_sample").draw("b").n == 20
    free = SequentialRunner().run(pipelines["evaluation"], catalog)
    assert {"best_of_k_plot", "sample_complexity_plot"} <= set(free)
    outputs = {name: value.load() if hasattr(value, "load") else value for name, value in free.items()}
    assert all(isinstance(outputs[name], Figure) for name in ("best_of_k_plot", "sample_complexity_plot"))

    metrics = catalog.load("portfolio_metrics")
    assert metrics["intervals"]["confidence"] == 0.95
    for key in ("a", "b", "all"):
        entry = metrics["datasets"][key]
        assert entry["n_selected_on"] == 20 and entry["n_train"] == (26 if key == "b" else 40 if key == "a" else 66)
        test = entry["test"]
        for name in ("greedy_minus_top_by_average", "greedy_minus_single_best"):
            intervals = test[f"{name}_at_k"]
            assert len(intervals) == 3 and all(iv["low"] <= iv["estimate"] <= iv["high"] for iv in intervals)
            assert test["at_portfolio_k"][name] == intervals[1]
        assert [iv["estimate"] for iv in test["greedy_interval_at_k"]] == pytest.approx(test["greedy_at_k"])
        assert "greedy_minus_top_by_average_at_k" not in entry["train"]  # in-sample: no interval
    table = outputs["best_of_k_data"]
    assert list(table["greedy_minus_top_by_average"]) == pytest.approx(
        [iv["estimate"] for iv in metrics["datasets"]["all"]["test"]["greedy_minus_top_by_average_at_k"]])

    study = catalog.load("sample_complexity")
    assert set(study["datasets"]) == {"a", "b", "all"} and study["k"] == 2
    for key, n_train in (("a", 40), ("b", 26), ("all", 66)):
        entry = study["datasets"][key]
        assert [r["n"] for r in entry["sizes"]] == [5, 10, n_train] and entry["n_seeds"] == 4
        assert entry["sizes"][-1]["test_mean"] == pytest.approx(entry["full_train"])
        assert [r["epsilon"] for r in entry["sizes"]] == sorted((r["epsilon"] for r in entry["sizes"]), reverse=True)
        assert entry["test_mean_by_n"]["5"] == entry["sizes"][0]["test_mean"]


def test_study_params_are_strict() -> None:
    with pytest.raises(ValueError, match="sizes"):
        EvaluationParams(sample_complexity={"sizes": [10, "most"]})
    with pytest.raises(ValueError, match="seedz"):
        EvaluationParams(sample_complexity={"seedz": 3})
    matrices, index = synthetic()
    portfolios = select_portfolios(matrices, index, sample_queries(index, SELECTION), SELECTION)  # k = 2
    a = study_sample_complexity(matrices, index, portfolios, {"sample_complexity": {"sizes": [5], "seeds": 3, "seed": 1}})
    b = study_sample_complexity(matrices, index, portfolios, {"sample_complexity": {"sizes": [5], "seeds": 3, "seed": 2}})
    assert a["datasets"]["a"]["sizes"][0]["test_values"] != b["datasets"]["a"]["sizes"][0]["test_values"]
