"""Candidate scoring on a Dask ``LocalCluster`` gives the in-process matrices, bit for bit."""

from __future__ import annotations

from pathlib import Path

import cloudpickle
import fake_encoders
import numpy as np
import pytest
from fake_encoders import HASHING, install_hashing_encoder, register_hashing_kind

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.passages import Corpus
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.scoring import distributed as dist
from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, score_candidates
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

# One or more candidates of every family, over the hashing encoders.
GRID = {
    "bm25": [{"k1": [0.9, 1.5], "b": 0.75}],
    "dense": [{"encoder": ["minilm", "e5"]}],
    "hybrid": [{"encoder": "minilm", "method": ["rrf", "score"]}],
    "ds": [{"prefilter": "dense:e5", "encoder": "e5", "gamma": 2.0, "r": 0.3}],
    "mmr": [{"prefilter": "bm25", "encoder": "minilm", "lambda": 0.7}],
    "vendi": [{"prefilter": "hybrid:minilm", "encoder": "minilm", "s": 0.5}],
    "graph": [{"seeds": "bm25", "n_seeds": 2, "rank": "ppr"}],
    "two_hop": [{"first": "bm25", "append": "title", "second": ["bm25", "dense:e5"]}],
}


def _params(score: str, scheduler_address: str | None = None) -> dict:
    return {"num_docs": 3, "prefilter_depth": 8, "score": score, "graph_max_degree": 10, "encoders": HASHING,
            "grid": GRID, "query_block_size": 3, "scheduler_address": scheduler_address}


@pytest.fixture(params=["union", "per_dataset"])
def prepared(request: pytest.FixtureRequest, tiny_dir: Path) -> tuple[list, Corpora]:
    params = {"raw_dir": str(tiny_dir), "seed": 0, "corpus": request.param}
    questions = load_questions(params)
    return questions, build_corpora(questions, params)


@pytest.fixture(autouse=True)
def _fresh_runner_table():
    dist._RUNNERS.clear()
    yield
    dist._RUNNERS.clear()


def _score(prepared, cache_dir: Path, params: dict) -> tuple[dict, dict]:
    questions, corpora = prepared
    return score_candidates(questions, corpora, expand_candidates(params), ArrayCache(cache_dir), params)


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype == np.float32
        assert a[name].shape == b[name].shape
        assert a[name].tobytes() == b[name].tobytes(), name  # bit for bit, rows in order


@pytest.mark.parametrize("score", ["support_recall", "answer_recall"])
def test_thread_workers_give_the_in_process_matrices(prepared, tmp_path, monkeypatch, score) -> None:
    install_hashing_encoder(monkeypatch)
    expected, index = _score(prepared, tmp_path / "local", _params(score))
    assert all(len(index.datasets[d].ids) > 3 for d in expected)  # several blocks per dataset
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        got, got_index = _score(prepared, tmp_path / "cluster", _params(score, cluster.scheduler_address))
        again, _ = _score(prepared, tmp_path / "local", _params(score, cluster.scheduler_address))  # warm cache
    assert got_index == index
    _assert_same(expected, got)
    _assert_same(expected, again)
    # Workers kept one runner per distinct corpus and configuration, not one per block or dataset.
    assert len(dist._RUNNERS) == 2 * len(prepared[1].corpora)


def test_process_workers_give_the_in_process_matrices(prepared, tmp_path, monkeypatch) -> None:
    install_hashing_encoder(monkeypatch)
    expected, _ = _score(prepared, tmp_path / "local", _params("support_recall"))
    cloudpickle.register_pickle_by_value(fake_encoders)  # the worker processes cannot import it
    try:
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster, distributed.Client(cluster) as client:
            client.run(register_hashing_kind)
            got, _ = _score(prepared, tmp_path / "cluster", _params("support_recall", cluster.scheduler_address))
    finally:
        cloudpickle.unregister_pickle_by_value(fake_encoders)
    _assert_same(expected, got)
    assert not dist._RUNNERS  # the runners lived in the worker processes
    # Both workers wrote to the one on-disk cache.
    assert list((tmp_path / "cluster").rglob("*.npz"))


def test_encoders_used_follows_bases() -> None:
    specs = [CandidateSpec.from_record(c) for c in expand_candidates(_params("support_recall"))]
    assert sorted(dist.encoders_used(specs)) == ["e5", "minilm"]
    bm25_only = [s for s in specs if s.family == "bm25"]
    assert dist.encoders_used(bm25_only) == []


def test_blocks_cover_every_query_in_order() -> None:
    corpus = dist.CorpusPart.of(Corpus(("p",), ("t",), ("x",)))
    job = dist.ScoringJob("d", corpus, tuple("abcdefg"), tuple((i,) for i in range(7)))
    blocks = list(job.blocks(3))
    assert [q for q, _ in blocks] == [("a", "b", "c"), ("d", "e", "f"), ("g",)]
    with pytest.raises(ValueError, match="block_size=0"):
        list(job.blocks(0))
    with pytest.raises(ValueError, match="2 targets"):
        dist.ScoringJob("d", corpus, ("a",), ((0,), (1,)))
