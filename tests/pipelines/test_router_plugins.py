"""A user's router, from a module named only in the parameters, is trained, judged and served like a built-in."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.pickle import PickleDataset
from param_datasets import param_datasets
from synthesis_stage import synthesis_datasets

from ragfolio.core.bundle import resolve_bundle
from ragfolio.core.cache import ArrayCache
from ragfolio.core.routing import registry
from ragfolio.datasets.bundle_folders import BundlesDataset, ServedBundleDataset
from ragfolio.datasets.record_files import RecordDataset
from ragfolio.pipeline_registry import register_pipelines

# A servable router of a user's project: it declares what it reads (the shared first stage's
# features) and saves itself with ragfolio's router.json helpers; nothing in ragfolio names it, and
# it does not record its module (ragfolio.core.routing.registry.save_router does).
ROUTER_MODULE = '''
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
from safetensors.numpy import load_file, save_file

from ragfolio.core.routing.base import check_l, member_names, ranked, read_config, write_config
from ragfolio.core.routing.registry import register_router


@register_router
@dataclass
class CentroidRouter:
    """Scores each member by the cosine of the query's first-stage features to the centroid of the
    train questions it won."""

    name: ClassVar[str] = "centroid"
    reads: ClassVar[str] = "first_stage"
    query_blocks: list = field(default_factory=lambda: ["first_stage"])
    random_state: int = 0
    members_: list = field(default_factory=list, init=False)

    def _unit(self, inputs):
        x = np.asarray(inputs.query["first_stage"], dtype=np.float32)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def fit(self, inputs, U, members=None):
        x, U = self._unit(inputs), np.asarray(U, dtype=np.float32)
        self.members_ = member_names(members, U.shape[1])
        won = (U == U.max(axis=1, keepdims=True)).astype(np.float32)
        self.centroids_ = (won.T @ x) / np.maximum(won.sum(axis=0), 1)[:, None]
        return self

    def route(self, inputs, l):
        check_l(l, len(self.members_))
        scores = self._unit(inputs) @ self.centroids_.T
        return ranked(scores, l), scores

    def save(self, folder):
        path = write_config(folder, self.name, {"members": self.members_})
        save_file({"centroids": self.centroids_}, str(Path(path) / "router.safetensors"))

    @classmethod
    def load(cls, folder):
        router = cls()
        router.members_ = read_config(folder, cls.name)["members"]
        router.centroids_ = load_file(str(Path(folder) / "router.safetensors"))["centroids"]
        return router
'''

GRID = {  # as tests/pipelines/test_router_training.py's
    "bm25": [{"k1": [0.6, 1.5], "b": [0.3, 0.9]}],
    "graph": [{"seeds": "bm25", "n_seeds": [1, 2], "rank": "ppr"}],
    "two_hop": [{"first": "bm25", "append": ["title", "text"], "second": "bm25"}],
}


@pytest.fixture
def router_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The module ``my_routers`` in a folder of its own, importable as a user's project module is."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "my_routers.py").write_text(ROUTER_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    # the registry is per process: forget the user's router (monkeypatch.delitem would put it back at its undo)
    registry._ROUTERS.pop("centroid", None)
    sys.modules.pop("my_routers", None)


def test_a_router_module_named_in_the_parameters_is_trained_judged_and_served(
        router_module: Path, tmp_path: Path, tiny_dir: Path) -> None:
    router_training = {
        "router_modules": ["my_routers"], "text_features": {"n_features": 64}, "encoders": [],
        "router": {"hidden": 8, "embedding_dim": 4, "max_epochs": 3, "patience": 2},
        "retrieval_routing": {"agreement_depth": 5, "centroid": {}},
        "bundle": {"router": "centroid", "default_l": 2}, "seed": 0,
    }
    params = {
        "data_prep": {"raw_dir": str(tiny_dir), "test_dir": None, "test_fraction": 0.3, "dev_fraction": 0.3, "seed": 0},
        "candidate_scoring": {"num_docs": 2, "prefilter_depth": 10, "score": "support_recall", "graph_max_degree": 20,
                              "encoders": {}, "grid": GRID},
        "candidate_grids": {},
        "portfolio_selection": {"k": 3, "k_max": 4, "random_draws": 5, "seed": 0},
        "router_training": router_training,
        "packaging": {},
        "paper_router": None,  # the lab's study of the paper's router: off
    }
    datasets = {**param_datasets(params)}
    datasets["retrieval_cache"] = MemoryDataset(ArrayCache(tmp_path / "cache"), copy_mode="assign")
    datasets |= synthesis_datasets(tmp_path)  # data_prep -> question_synthesis -> candidate_scoring
    datasets["router_metrics"] = JSONDataset(filepath=str(tmp_path / "router_metrics.json"))
    datasets["dev_same_budget"] = PickleDataset(filepath=str(tmp_path / "dev_same_budget.pkl"))
    datasets["bundles"] = BundlesDataset(str(tmp_path / "bundles"))
    datasets["bundle"] = ServedBundleDataset(str(tmp_path / "served.json"), str(tmp_path / "bundles"))
    datasets["router_selection"] = RecordDataset(  # a user's router's values stored as the catalog stores them
        str(tmp_path / "router_selection.json"), "ragfolio.core.routing.judging.choice.RouterSelection")
    catalog = DataCatalog(datasets)
    pipelines = register_pipelines()
    stages = ("data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection", "router_training", "router_evaluation", "packaging")
    SequentialRunner().run(sum((pipelines[s] for s in stages[1:]), pipelines[stages[0]]), catalog)

    metrics = catalog.load("router_metrics")
    entry = metrics["datasets"]["all"]
    assert "centroid" in registry.servable_names(learned=False)
    assert len(entry["centroid"]["best_of_l"]) == metrics["k"]  # judged on test beside the built-ins
    assert "centroid" in catalog.load("dev_same_budget")["all"]  # and on dev, by the do-no-harm rule
    assert metrics["served"]["router"] == "centroid"
    assert json.loads((tmp_path / "bundles" / "all" / "router" / "router.json").read_text())["module"] == "my_routers"

    # A fresh process that imports nothing of the user's serves it: loading imports the module router.json names.
    serve = (
        "from ragfolio.core.bundle import load_bundle\n"
        "from ragfolio.core.system.request import RetrievalRequest\n"
        "from ragfolio.core.system.routed_system import RoutedSystem\n"
        f"bundle = load_bundle({str(resolve_bundle(tmp_path / 'served.json'))!r})\n"
        "system = RoutedSystem.from_bundle(bundle)\n"
        "routed = system.retrieve(RetrievalRequest('which river is the longest', 1, system.depth))\n"
        "print(type(bundle.router).__module__, bundle.router.name, routed.routed, len(routed.members))\n"
        "system.close()\n"
    )
    env = {"PYTHONPATH": str(router_module), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", serve], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    module, name, routed, members = done.stdout.split()[-4:]
    assert (module, name, members) == ("my_routers", "centroid", "1")
    assert routed == str(metrics["served"]["routed_ls"] is None or 1 in metrics["served"]["routed_ls"])
