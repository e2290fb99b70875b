"""A content-addressed on-disk cache of numpy arrays.

Encoding a corpus or retrieving for every candidate is the slow part of a run; the cache keys each
result by everything it depends on (corpus and query fingerprints, the parameters), so a rerun that
changes only selection parameters such as ``k`` loads instead of recomputing. Entries are ``.npz``
files read with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

Arrays = dict[str, npt.NDArray[Any]]

# Namespaces that hold parts of a corpus, not of a query batch (see ArrayCache.corpus_reader).
CORPUS_NAMESPACES = ("passage_embeddings",)


def fingerprint(items: Iterable[str]) -> str:
    """A short sha256 of a sequence of strings (order matters)."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(item.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()[:20]


def file_sha256(path: str | Path) -> str:
    """The full sha256 hex digest of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


class ArrayCache:
    """Arrays stored under ``root/<namespace>/<key hash>.npz``.

    Args:
        root: The cache folder; created on the first write, not at construction.
        enabled: When False every lookup recomputes and nothing is written.
        read_only: Load what is stored but write nothing new (online serving and timed
            evaluation: the corpus parts come from disk, per-query work is done afresh).
        namespaces: The namespaces served from (and written to) disk; others always compute.
            None: every namespace.
    """

    def __init__(
        self, root: str | Path, enabled: bool = True, read_only: bool = False,
        namespaces: Collection[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.enabled = enabled
        self.read_only = read_only
        self.namespaces = None if namespaces is None else frozenset(namespaces)

    def reader(self) -> ArrayCache:
        """A read-only view of this cache."""
        return ArrayCache(self.root, enabled=self.enabled, read_only=True, namespaces=self.namespaces)

    def corpus_reader(self) -> ArrayCache:
        """A read-only view that serves only corpus parts (:data:`CORPUS_NAMESPACES`).

        Per-query entries (query embeddings, first-stage rankings, candidate results) are computed
        afresh even when stored, so a timed run pays for every query's work itself.
        """
        return ArrayCache(self.root, enabled=self.enabled, read_only=True, namespaces=CORPUS_NAMESPACES)

    def path_for(self, namespace: str, key: Mapping[str, Any]) -> Path:
        blob = json.dumps(key, sort_keys=True, default=str)
        return self.root / namespace / f"{hashlib.sha256(blob.encode()).hexdigest()[:24]}.npz"

    def get_or_compute(self, namespace: str, key: Mapping[str, Any], compute: Callable[[], Arrays]) -> Arrays:
        """Load the arrays stored for ``key``, or compute, store and return them."""
        if self.namespaces is not None and namespace not in self.namespaces:
            return compute()
        path = self.path_for(namespace, key)
        if self.enabled and path.exists():
            with np.load(path, allow_pickle=False) as stored:
                return {name: stored[name] for name in stored.files}
        arrays = compute()
        if self.enabled and not self.read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so an interrupted run never leaves a half-written entry behind.
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
            os.replace(tmp, path)
        return arrays
