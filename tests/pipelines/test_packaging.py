"""packaging on the tiny fixtures (BM25-only pool, no models): the bundle serves the router the
``router_selection`` record names, where it says, and refuses settings it cannot serve."""

from __future__ import annotations

import dataclasses
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

from ragfolio.core.bundle import PortfolioBundle, load_bundle
from ragfolio.core.cache import ArrayCache
from ragfolio.core.routing.judging.choice import RouterChoice, RouterSelection
from ragfolio.datasets.array_folders import ArrayFolderDataset
from ragfolio.datasets.bundle_folders import BundlesDataset, ServedBundleDataset
from ragfolio.datasets.record_files import RecordDataset
from ragfolio.datasets.router_folders import RouterFolderDataset, RoutersByKindDataset
from ragfolio.pipeline_registry import register_pipelines

pytestmark = pytest.mark.slow

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
GRID = {
    "bm25": [{"k1": [0.6, 1.5], "b": [0.3, 0.9]}],
    "graph": [{"seeds": "bm25", "n_seeds": [1, 2], "rank": "ppr"}],
    "two_hop": [{"first": "bm25", "append": ["title", "text"], "second": "bm25"}],
}
PARAMS = tiny_stage_params(TINY, GRID)
RECORDS = {  # as conf/base/catalog.yml stores them: what packaging reads from the stages before it
    "corpora": "ragfolio.core.data.corpora.Corpora",
    "pool_settings": "ragfolio.core.scoring.runners.PoolSettings",
    "portfolios": "ragfolio.core.selection.portfolios.Portfolios",
    "utility_index": "ragfolio.core.scoring.utility_index.UtilityIndex",
    "router_features": "ragfolio.core.routing.features.router_features.RouterFeatures",
    "router_selection": "ragfolio.core.routing.judging.choice.RouterSelection",
}


@dataclasses.dataclass
class Trained:
    """The stages up to router_training, run once: their catalog, and what they wrote to restore."""

    catalog: DataCatalog
    selection: RouterSelection
    metrics: dict[str, Any]
    root: Path

    def package(self, selection: RouterSelection | None = None, **bundle: Any) -> PortfolioBundle:
        """Run ``packaging`` on ``selection`` (default: what router training wrote), with
        ``router_training.bundle`` settings ``bundle`` over the defaults."""
        self.catalog.save("router_selection", selection or self.selection)
        self.catalog.save("params:router_training.bundle", {**PARAMS["router_training"]["bundle"], **bundle})
        SequentialRunner().run(register_pipelines()["packaging"], self.catalog)
        return self.catalog.load("bundle")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, handoffs: Callable[[Path], dict[str, Any]]) -> Trained:
    root = tmp_path_factory.mktemp("packaging")
    datasets: dict[str, Any] = {**param_datasets(PARAMS)}
    datasets["retrieval_cache"] = MemoryDataset(ArrayCache(root / "cache"), copy_mode="assign")
    datasets |= synthesis_datasets(root)  # data_prep -> question_synthesis -> candidate_scoring
    for name in ("questions", "candidates", "router_metrics"):
        datasets[name] = JSONDataset(filepath=str(root / f"{name}.json"))
    for name, record in RECORDS.items():
        datasets[name] = RecordDataset(str(root / f"{name}.json"), record)
    datasets["utility_matrices"] = ArrayFolderDataset(str(root / "utility"))
    datasets["routers"] = RouterFolderDataset(str(root / "routers"))
    datasets["retrieval_routers"] = RoutersByKindDataset(str(root / "retrieval_routers"))
    datasets["bundle"] = ServedBundleDataset(str(root / "served.json"), str(root / "bundles"))
    datasets["bundles"] = BundlesDataset(str(root / "bundles"))
    datasets |= handoffs(root)  # router_training -> router_evaluation, as the catalog stores them
    catalog = DataCatalog(datasets)
    pipelines = register_pipelines()
    for name in ("data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection", "router_training", "router_evaluation"):
        SequentialRunner().run(pipelines[name], catalog)
    return Trained(catalog, catalog.load("router_selection"), catalog.load("router_metrics"), root)


def test_the_bundle_serves_what_router_training_chose(trained: Trained) -> None:
    bundle, choice = trained.package(), trained.selection.choices["all"]
    assert bundle.router.name == choice.router and bundle.routed_ls == choice.routed_ls
    recorded, reported = bundle.selection["served_router"], trained.metrics["served"]
    # the report's entry without what router evaluation measured on test: packaging needs no test report
    assert set(reported) - set(recorded) == {"corpus", "n_test", "test_best_of_l", "test_minus_single_best",
                                            "test_gap_closed_l1", "test_served_recall", "same_budget"}
    assert recorded == {key: reported[key] for key in recorded} and recorded["dev_best_of_l"] is not None
    assert set(bundle.selection) == {"greedy_train_values", "certificate", "n_train", "separation", "corpus", "served_router"}
    assert set(bundle.selection["separation"]) >= {"separates", "tied_picks", "epsilon", "reasons"}
    assert bundle.default_l == choice.served_default_l(2) == recorded["default_l"] and bundle.name == "all"
    assert choice.default_l == (min(choice.routed_ls) if choice.routed_ls else 2)
    assert bundle.selector_seed == 42
    assert trained.package(selector_seed=7).selector_seed == 7  # the seed the service and evaluation answer with
    bundles = trained.catalog.load("bundles")  # one per portfolio key, each serving its own choice
    assert list(bundles) == ["all", *(key for key in trained.selection.choices if key != "all")]
    for key, choice in trained.selection.choices.items():
        assert bundles[key].name == key and bundles[key].router.name == choice.router
        assert bundles[key].routed_ls == choice.routed_ls


def test_the_served_bundle_is_written_once_and_pointed_at(trained: Trained) -> None:
    """No copy of the served bundle: a pointer names its folder among the bundles, and loads it."""
    served = trained.package(portfolio="hotpotqa")
    assert json.loads((trained.root / "served.json").read_text()) == {"portfolio": "hotpotqa", "bundle": "bundles/hotpotqa"}
    assert served.name == "hotpotqa" and served.checksum == load_bundle(trained.root / "bundles" / "hotpotqa").checksum
    assert sorted(p.name for p in trained.root.iterdir() if (p / "manifest.json").exists()) == []  # no bundle outside bundles/
    assert trained.package().name == "all"


def test_packaging_reads_no_output_of_router_evaluation() -> None:
    pipelines = register_pipelines()
    assert not pipelines["packaging"].inputs() & pipelines["router_evaluation"].all_outputs()


def test_the_bundle_serves_the_router_a_router_selection_names(trained: Trained) -> None:
    """The typed record decides what is served, and the bundle records its dev numbers."""
    measured = trained.metrics["datasets"]["all"]
    named = {key: RouterChoice(router="pre_retrieval", requested="pre_retrieval", reason="named by the test",
                               validation=choice.validation, on="dev", routed_ls=(1,), default_l=1)
             for key, choice in trained.selection.choices.items()}  # router training chooses for every portfolio
    selection = RouterSelection(trained.selection.validation, named)
    bundle = trained.package(selection, router="pre_retrieval")
    assert bundle.router.name == "pre_retrieval" and bundle.routed_ls == (1,) and bundle.default_l == 1
    served = bundle.selection["served_router"]
    assert served["router"] == "pre_retrieval" and served["reason"] == "named by the test" and served["routed_ls"] == [1]
    dev, k = measured["dev"], len(measured["dev"]["pre_retrieval"]["best_of_l"])  # what is served, as the report has it:
    assert served["dev_best_of_l"] == [dev["pre_retrieval"]["best_of_l"][0], *[dev["single_best_member"]] * (k - 1)]
    assert served["dev_gap_closed_l1"] == dev["pre_retrieval"]["gap_closed_l1"] and served["default_l"] == 1
    old = {key: dataclasses.replace(choice, default_l=None) for key, choice in named.items()}  # recorded before it
    assert trained.package(RouterSelection(selection.validation, old), router="pre_retrieval").default_l == 2

    everywhere = {key: dataclasses.replace(choice, router="learned", requested="learned", routed_ls=None)
                  for key, choice in named.items()}
    bundle = trained.package(RouterSelection(selection.validation, everywhere), router="learned")
    assert bundle.router.name == "learned" and bundle.routed_ls is None  # routes at every l


def test_settings_it_cannot_serve_are_refused_by_name(trained: Trained) -> None:
    with pytest.raises(ValueError, match=r"router_training.bundle.default_l=4 is above portfolio 'all''s k=3"):
        trained.package(default_l=4)
    with pytest.raises(ValueError, match=r"router_training.bundle.portfolio='nq' is not one of"):
        trained.package(portfolio="nq")
    unchosen = RouterSelection(trained.selection.validation,
                               {key: c for key, c in trained.selection.choices.items() if key != "all"})
    with pytest.raises(ValueError, match=r"router training chose no router for portfolio 'all'"):
        trained.package(unchosen)
    with pytest.raises(ValueError, match=r"bundle.router='post_retrieval', but router training chose under 'auto'"):
        trained.package(router="post_retrieval")  # edited after router training ran
