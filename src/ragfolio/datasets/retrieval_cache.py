"""The retrieval cache as a Kedro input: an :class:`~ragfolio.core.cache.ArrayCache` rooted at a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ragfolio.core.cache import ArrayCache


class ArrayCacheDataset(AbstractDataset[None, ArrayCache]):
    """Loads an :class:`~ragfolio.core.cache.ArrayCache` rooted at ``path``.

    The cache is written by the nodes that use it (embeddings, base rankings, candidate results),
    keyed by content, so it is an input only: ``save`` is refused.
    """

    def __init__(self, path: str, enabled: bool = True) -> None:
        self._path = Path(path)
        self._enabled = enabled

    def load(self) -> ArrayCache:
        return ArrayCache(self._path, enabled=self._enabled)

    def save(self, data: None) -> None:
        raise DatasetError("ArrayCacheDataset is written through the ArrayCache it loads, not saved")

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "enabled": self._enabled}
