"""A routed portfolio over the tiny corpus, for the tests of the served system and of answering."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.retrieval.pool import CandidateSpec, expand_grid
from ragfolio.core.retrieval.running.member_executor import PortfolioExecutor
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.query_features import TextHasher
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.system.routed_system import RoutedSystem


def routed_portfolio(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch, small_grid: dict
) -> tuple[PoolRunner, list[CandidateSpec], Router, TextHasher, list[str]]:
    """``(runner, members, router, hasher, queries)``: three members of ``small_grid`` over the tiny
    corpus (hashing encoders) and a learned router over them, fitted to prefer the first."""
    install_hashing_encoder(monkeypatch)
    runner, queries = tiny_runner(tiny_dir)
    members = [m for m in expand_grid(small_grid) if m.family in ("bm25", "dense", "mmr")][:3]
    hasher = TextHasher(n_features=64)
    probe = RoutedSystem.__new__(RoutedSystem)
    probe.runner, probe.hasher, probe.encoders = runner, hasher, ["minilm"]
    probe.executor = PortfolioExecutor(runner, members)
    X = RoutedSystem.features(probe, queries)
    probe.executor.close()
    U = np.tile(np.array([[1.0, 0.5, 0.0]], dtype=np.float32), (len(queries), 1))
    router = Router(hidden=8, embedding_dim=4, max_epochs=5, random_state=0)
    router.fit(RouteInputs(X), U, [m.name for m in members])
    return runner, members, router, hasher, queries
