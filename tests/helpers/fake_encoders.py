"""A fast, deterministic stand-in encoder for runner tests: hashed bag of words, calls recorded."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.encoders.kinds import ENCODER_KINDS
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

# The pool's encoder names, served by the hashing encoder (two sizes so they differ).
HASHING = {"minilm": {"kind": "hashing", "dim": 64}, "e5": {"kind": "hashing", "dim": 48}}


class HashingEncoder:
    """Each word adds 1 to coordinate ``crc32(word) % dim``; rows L2-normalised.

    Every call is appended to ``calls`` as ``(dim, "queries" | "passages", texts)``.
    """

    def __init__(self, calls: list[tuple[int, str, tuple[str, ...]]], dim: int = 64) -> None:
        self.calls, self.dim = calls, dim

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((self.dim, "queries", tuple(texts)))
        return self._embed(texts)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((self.dim, "passages", tuple(texts)))
        return self._embed(texts)


def install_hashing_encoder(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, tuple[str, ...]]]:
    """Register encoder kind ``hashing`` for this test; returns the list its calls go to."""
    calls: list[tuple[int, str, tuple[str, ...]]] = []
    monkeypatch.setitem(ENCODER_KINDS, "hashing", lambda **options: HashingEncoder(calls, **options))
    return calls


def tiny_runner(
    tiny_dir: Path, runner_class: type[PoolRunner] = PoolRunner, num_docs: int = 3, **kwargs
) -> tuple[PoolRunner, list[str]]:
    """A runner over the corpus of the questions in ``tiny_dir`` (hashing encoders, no disk cache) and
    those questions."""
    questions = load_folder(tiny_dir)
    corpus = build_corpus(questions)
    runner = runner_class(
        corpus.titles, corpus.texts, HASHING, ArrayCache(tiny_dir / "unused", enabled=False),
        num_docs=num_docs, prefilter_depth=8, **kwargs,
    )
    return runner, [q.question for q in questions]


def register_hashing_kind() -> None:
    """Register kind ``hashing`` for good in this process (Dask workers: ``client.run`` it there)."""
    from ragfolio.core.retrieval.encoders import (
        kinds,  # the module itself, so that a pickled copy of this still edits it
    )

    kinds.ENCODER_KINDS["hashing"] = lambda **options: HashingEncoder([], **options)
