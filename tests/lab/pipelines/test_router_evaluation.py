"""router_evaluation on the tiny fixtures (BM25-only pool, no models): run on its own, from what
router_training stored, it writes the same report as router training and evaluation run together."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from param_datasets import param_datasets
from synthesis_stage import synthesis_datasets
from tiny_stages import tiny_stage_params

from ragfolio.core.cache import ArrayCache
from ragfolio.core.routing.registry import servable_names
from ragfolio.datasets.array_folders import ArrayFolderDataset
from ragfolio.datasets.record_files import RecordDataset
from ragfolio.datasets.router_folders import RouterFolderDataset, RoutersByKindDataset
from ragfolio.pipeline_registry import register_pipelines

GRID = {
    "bm25": [{"k1": [0.6, 1.5], "b": [0.3, 0.9]}],
    "two_hop": [{"first": "bm25", "append": ["title", "text"], "second": "bm25"}],
}
BEFORE = ("data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection")


def _catalog(root: Path, tiny_dir: Path, stored: dict[str, Any]) -> DataCatalog:
    params = tiny_stage_params(tiny_dir, GRID)
    datasets: dict[str, Any] = {**param_datasets(params)}
    datasets["retrieval_cache"] = MemoryDataset(ArrayCache(root / "cache"), copy_mode="assign")
    datasets |= synthesis_datasets(root)  # data_prep -> question_synthesis -> candidate_scoring
    for name in ("questions", "candidates", "router_metrics", "router_headline"):
        datasets[name] = JSONDataset(filepath=str(root / f"{name}.json"), save_args={"indent": 1})
    datasets["utility_matrices"] = ArrayFolderDataset(str(root / "utility"))
    # read by candidate scoring's own nodes too, so Kedro releases it from memory at the end of that run
    datasets["pool_settings"] = RecordDataset(str(root / "pool_settings.json"), "ragfolio.core.scoring.runners.PoolSettings")
    datasets["routers"] = RouterFolderDataset(str(root / "routers"))
    datasets["retrieval_routers"] = RoutersByKindDataset(str(root / "retrieval_routers"))
    return DataCatalog({**datasets, **stored})


@pytest.mark.slow
def test_router_evaluation_on_its_own_writes_the_report_of_one_run(
    tmp_path: Path, tiny_dir: Path, handoffs: Callable[[Path], dict[str, Any]],
) -> None:
    pipelines = register_pipelines()
    together = _catalog(tmp_path / "together", tiny_dir, {})  # every hand-off in memory, one run
    SequentialRunner().run(sum((pipelines[name] for name in (*BEFORE[1:], "router_training", "router_evaluation")),
                               pipelines[BEFORE[0]]), together)

    root = tmp_path / "apart"
    apart = _catalog(root, tiny_dir, handoffs(root))  # stage by stage: each stage loads what the one before stored
    for name in (*BEFORE, "router_training", "router_evaluation"):
        SequentialRunner().run(pipelines[name], apart)
    for name in ("router_metrics.json", "router_headline.json"):
        assert (root / name).read_bytes() == (tmp_path / "together" / name).read_bytes(), name
    metrics = json.loads((root / "router_metrics.json").read_text())
    assert set(servable_names()) <= set(metrics["datasets"]["all"]) and metrics["datasets"]["all"]["dev"]["n_dev"] > 0
    assert (root / "dev_router_comparison" / "tree.json").exists() and (root / "retrieval_inputs" / "arrays").is_dir()


def test_the_router_plot_draws_a_line_for_every_router_of_the_report() -> None:
    from ragfolio.core.routing.judging.evaluation import compared
    from ragfolio_lab.pipelines.router_evaluation.report_views import plot_router_curves

    routers = [*compared(), "paper", "paper_universal", *servable_names(learned=False)]
    # as a report holds them: the comparison's routers, then the universal router's entry
    entry = {name: {"best_of_l": [0.5, 0.6]} for name in routers if name != "paper_universal"}
    entry |= {"n_test": 3, "same_budget": {"single_best_recall": [0.5, 0.55]}, "cascade_curve": {"best_of_1": [0.5]},
              "paper_universal": {"best_of_l": [0.5, 0.6]}}
    fig = plot_router_curves({"k": 2, "datasets": {"hotpotqa": entry}})
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == [*routers, "single best, l x num_docs"]
