"""Fits give the same bits whatever the process did before and however many threads it starts with."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.determinism import FIT_THREADS, deterministic_fit
from ragfolio.core.routing.features.query_features import TextHasher, query_features
from ragfolio.core.routing.routers.learned import Router

ROOT = Path(__file__).resolve().parents[3]


def synthetic(n: int = 120, seed: int = 0) -> tuple[RouteInputs, np.ndarray]:
    rng = np.random.default_rng(seed)
    words = ["river", "mountain", "violin", "who", "what", "is", "the", "of", "famous", "old", "city", "year"]
    texts = [" ".join(rng.choice(words, 6)) for _ in range(n)]
    U = rng.choice([0.0, 0.5, 1.0], size=(n, 3)).astype(np.float32)
    dense = {"emb": rng.normal(size=(n, 24)).astype(np.float32)}
    return RouteInputs(query_features(texts, dense, TextHasher(n_features=128))), U


def router_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def fit_and_save(folder: Path) -> str:
    inputs, U = synthetic()
    Router(hidden=16, embedding_dim=8, max_epochs=8, patience=4, random_state=3).fit(inputs, U, ["a", "b", "c"]).save(folder)
    return router_digest(folder)


def test_the_context_restores_threads_kernels_and_the_callers_random_state() -> None:
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    with deterministic_fit(seed=5):
        assert torch.get_num_threads() == FIT_THREADS and torch.are_deterministic_algorithms_enabled()
        assert all(pool["num_threads"] == FIT_THREADS for pool in threadpool_info())
        inside = torch.rand(3)
    assert torch.equal(torch.rand(3), expected)  # the caller's generator did not move
    assert torch.get_num_threads() == threads and torch.are_deterministic_algorithms_enabled() == deterministic
    with deterministic_fit(seed=5):
        assert torch.equal(torch.rand(3), inside)  # the fit's own seed
    with pytest.raises(ValueError, match="threads=0"), deterministic_fit(threads=0):
        pass


def test_a_fit_leaves_the_global_generator_alone_and_ignores_its_state(tmp_path) -> None:
    torch.manual_seed(1)
    expected = torch.rand(2)
    torch.manual_seed(1)
    first = fit_and_save(tmp_path / "a")
    assert torch.equal(torch.rand(2), expected)  # no global seeding
    torch.manual_seed(99)
    torch.rand(1000)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert fit_and_save(tmp_path / "b") == first
    finally:
        torch.set_num_threads(previous)


FIT_SCRIPT = """
import sys, torch
sys.path.insert(0, {tests!r})
from test_determinism import fit_and_save
from pathlib import Path
torch.rand(int(sys.argv[2]))  # whatever ran before the fit in this process
print(fit_and_save(Path(sys.argv[1])))
"""


@pytest.mark.slow
def test_two_processes_with_other_thread_counts_write_the_same_router(tmp_path) -> None:
    script = FIT_SCRIPT.format(tests=str(Path(__file__).resolve().parent))
    digests = []
    for i, (threads, draws) in enumerate((("1", "0"), ("2", "777"))):
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path / str(i)), draws], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
        assert out.returncode == 0, out.stderr[-2000:]
        digests.append(out.stdout.split()[-1])
    assert digests[0] == digests[1]
