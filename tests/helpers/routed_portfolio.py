"""A routed portfolio over the tiny corpus, for the tests of the served system and of answering, and
one over the switching questions, whose members win on different, learnable halves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.pool import CandidateSpec, expand_grid, make_candidate
from ragfolio.core.retrieval.running.member_executor import PortfolioExecutor
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.query_features import Features, TextHasher
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.scoring.utility import support_recall_matrix
from ragfolio.core.system.routed_system import RoutedSystem

# A learned router small enough to train in a second that learns the switching questions' two halves
# from their hashed words (no dropout, a larger step and more epochs than a real run's).
SWITCHING_NET = {"hidden": 16, "embedding_dim": 8, "dropout": 0.0, "lr": 0.01, "max_epochs": 200, "patience": 50}


def query_features(runner: PoolRunner, members: list[CandidateSpec], hasher: TextHasher, queries: list[str]) -> Features:
    """What :meth:`RoutedSystem.features` gives a learned router over ``members`` (encoder ``minilm``)."""
    probe = RoutedSystem.__new__(RoutedSystem)
    probe.runner, probe.hasher, probe.encoders = runner, hasher, ["minilm"]
    probe.executor = PortfolioExecutor(runner, members)
    try:
        return RoutedSystem.features(probe, queries)
    finally:
        probe.executor.close()


def routed_portfolio(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, small_grid: dict
) -> tuple[PoolRunner, list[CandidateSpec], Router, TextHasher, list[str]]:
    """``(runner, members, router, hasher, queries)``: three members of ``small_grid`` over the tiny
    corpus (hashing encoders) and a learned router over them, fitted to prefer the first."""
    install_hashing_encoder(monkeypatch)
    runner, queries = tiny_runner(tiny_dir)
    members = [m for m in expand_grid(small_grid) if m.family in ("bm25", "dense", "mmr")][:3]
    hasher = TextHasher(n_features=64)
    X = query_features(runner, members, hasher, queries)
    U = np.tile(np.array([[1.0, 0.5, 0.0]], dtype=np.float32), (len(queries), 1))
    router = Router(hidden=8, embedding_dim=4, max_epochs=5, random_state=0)
    router.fit(RouteInputs(X), U, [m.name for m in members])
    return runner, members, router, hasher, queries


def switching_portfolio(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[PoolRunner, list[CandidateSpec], npt.NDArray[np.float32], Router, TextHasher, list[str]]:
    """``(runner, members, U, router, hasher, queries)`` over the switching questions in ``folder``
    (the ``switching_dir`` fixture) at 2 passages per member: BM25, a one-seed graph walk from BM25 and a dense member
    (hashing encoders); ``U`` ``(60, 3)`` their support recall, where BM25 wins the "What" half and
    the walk the "Who" half; and a learned router fitted on ``U`` that switches between them."""
    install_hashing_encoder(monkeypatch)
    runner, queries = tiny_runner(folder, num_docs=2)
    members = [make_candidate("bm25", {"k1": 0.9, "b": 0.75}),
               make_candidate("graph", {"seeds": "bm25", "n_seeds": 1, "rank": "ppr"}),
               make_candidate("dense", {"encoder": "minilm"})]
    records = load_folder(folder)
    row = {pid: i for i, pid in enumerate(build_corpus(records).ids)}
    gold = [[row[c.passage_id] for c in q.contexts if c.is_supporting] for q in records]
    U = support_recall_matrix([runner.run(m, queries) for m in members], gold)
    hasher = TextHasher(n_features=64)
    router = Router(**SWITCHING_NET, random_state=0).fit(
        RouteInputs(query_features(runner, members, hasher, queries)), U, [m.name for m in members])
    return runner, members, U, router, hasher, queries
