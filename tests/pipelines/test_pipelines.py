"""Every pipeline on an in-memory catalog over the tiny real-data fixtures (Kedro's smoke-test style)."""

from __future__ import annotations

import numpy as np
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset

from ragfolio.core.cache import ArrayCache
from ragfolio.datasets import ArrayFolderDataset
from ragfolio.pipeline_registry import register_pipelines

pytestmark = pytest.mark.slow

JSON_OUTPUTS = ("questions", "corpora", "candidates", "utility_index", "portfolios", "portfolio_metrics")


@pytest.fixture
def catalog(tmp_path, tiny_dir, encoders, small_grid) -> DataCatalog:
    params = {
        "data_prep": {"raw_dir": str(tiny_dir), "test_dir": None, "test_fraction": 0.3, "seed": 0},
        "candidate_scoring": {
            "num_docs": 4, "prefilter_depth": 10, "score": "support_recall", "graph_max_degree": 20,
            "encoders": encoders, "grid": small_grid,
        },
        "portfolio_selection": {"k": 3, "k_max": 4, "random_draws": 5, "seed": 0},
        "evaluation": {"report_k": [1, 3]},
    }
    datasets = {f"params:{name}": MemoryDataset(value) for name, value in params.items()}
    datasets["retrieval_cache"] = MemoryDataset(ArrayCache(tmp_path / "cache"), copy_mode="assign")
    # Intermediate outputs persist to files (Kedro releases in-memory ones once consumed).
    for name in JSON_OUTPUTS:
        datasets[name] = JSONDataset(filepath=str(tmp_path / f"{name}.json"))
    datasets["utility_matrices"] = ArrayFolderDataset(str(tmp_path / "utility"))
    return DataCatalog(datasets)


def test_every_pipeline_in_order(catalog: DataCatalog) -> None:
    pipelines = register_pipelines()
    assert pipelines["portfolio"].all_outputs() >= pipelines["evaluation"].all_outputs()
    for name in ("data_prep", "candidate_scoring", "portfolio_selection"):
        SequentialRunner().run(pipelines[name], catalog)
    figures = SequentialRunner().run(pipelines["evaluation"], catalog)
    index = catalog.load("utility_index")
    assert set(index["datasets"]) == {"hotpotqa", "musique"}
    n_candidates = len(index["candidates"])
    assert n_candidates == 12
    for dataset, rows in index["datasets"].items():
        U = catalog.load("utility_matrices")[dataset]
        assert U.shape == (len(rows["ids"]), n_candidates) and U.dtype == np.float32
        assert ((U >= 0) & (U <= 1)).all()
        assert set(rows["split"]) == {"train", "test"}

    metrics = catalog.load("portfolio_metrics")
    assert metrics["n_candidates"] == n_candidates and metrics["num_docs"] == 4
    for key in ("hotpotqa", "musique", "all"):
        entry = metrics["datasets"][key]
        assert len(entry["portfolio"]) == 3
        for split in ("train", "test"):
            report = entry[split]
            assert len(report["greedy_at_k"]) == 4
            assert report["greedy_at_k"] == sorted(report["greedy_at_k"])  # best-of-k never falls
            assert report["oracle_all"] >= max(report["greedy_at_k"]) - 1e-6
        # On its own train rows greedy is at least as good as top-by-average at every k.
        train = entry["train"]
        assert all(g >= t - 1e-6 for g, t in zip(train["greedy_at_k"], train["top_by_average_at_k"]))
        assert 0 < entry["certificate"]["ratio"] <= 1
    assert metrics["datasets"]["all"]["n_test"] == sum(metrics["datasets"][d]["n_test"] for d in ("hotpotqa", "musique"))
    assert set(figures) == {"best_of_k_plot", "winners_heatmap"}
