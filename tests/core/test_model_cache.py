"""Models joined from their part wheels: once per machine, atomically, by concurrent processes too."""

from __future__ import annotations

import hashlib
import multiprocessing
from pathlib import Path

import pytest

from ragfolio.core.llm.models import GEMMA_3_270M, model_path
from ragfolio.core.model_cache import join_pieces


def _pieces(tmp_path: Path) -> tuple[list[Path], str]:
    pieces = []
    for i in range(3):
        piece = tmp_path / f"piece{i}.bin"
        piece.write_bytes(bytes([i]) * (1 << 20))
        pieces.append(piece)
    return pieces, hashlib.sha256(b"".join(p.read_bytes() for p in pieces)).hexdigest()


def test_join_pieces_concatenates_in_order_and_checks_the_hash(tmp_path: Path) -> None:
    pieces, sha = _pieces(tmp_path)
    target = join_pieces(pieces, tmp_path / "cache" / "model.bin", sha)
    assert target.read_bytes() == b"".join(p.read_bytes() for p in pieces)
    assert join_pieces(pieces, target, sha) == target  # found, not joined again


def test_a_wrong_hash_leaves_nothing_in_the_cache(tmp_path: Path) -> None:
    pieces, _ = _pieces(tmp_path)
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="expected 0+"):
        join_pieces(pieces, cache / "model.bin", "0" * 64)
    assert not (cache / "model.bin").exists()
    assert [p.name for p in cache.iterdir()] == ["model.bin.lock"]  # no half-written temporary file


def _join_gemma(cache: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    barrier.wait()  # every process starts joining at the same moment
    try:
        out.put(model_path(GEMMA_3_270M.name, Path(cache)))
    except Exception as err:  # noqa: BLE001 - reported to the parent, which fails the test
        out.put(f"{type(err).__name__}: {err}")


def test_concurrent_processes_join_a_real_model_into_an_empty_cache(tmp_path: Path) -> None:
    """Four processes ask for Gemma-3-270M (four part wheels, 253 MB) at once, as the test workers of a
    new machine do: each gets the same verified file, and no temporary file is left."""
    context = multiprocessing.get_context("spawn")
    barrier, out, n = context.Barrier(4), context.Queue(), 4
    workers = [context.Process(target=_join_gemma, args=(str(tmp_path), barrier, out)) for _ in range(n)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=300) for _ in range(n)]
    for worker in workers:
        worker.join(timeout=60)
    target = tmp_path / GEMMA_3_270M.file_name
    assert results == [str(target)] * n
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert digest == GEMMA_3_270M.sha256
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, target.name + ".lock"])
