"""The served bundle and the bundles by portfolio key: checksummed folders of :mod:`ragfolio.core.bundle`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset

from ragfolio.core.bundle import PortfolioBundle, load_bundle, save_bundle
from ragfolio.datasets.keyed_folders import folder_keys, save_folders


class BundleDataset(AbstractDataset[PortfolioBundle, PortfolioBundle]):
    """The served :class:`~ragfolio.core.bundle.PortfolioBundle`, a checksummed folder."""

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> PortfolioBundle:
        return load_bundle(self._path)

    def save(self, data: PortfolioBundle) -> None:
        save_bundle(data, self._path)

    def _exists(self) -> bool:
        return (self._path / "manifest.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class BundlesDataset(AbstractDataset[dict[str, PortfolioBundle], Mapping[str, PortfolioBundle]]):
    """Bundles by portfolio key: ``<path>/<key>/`` :class:`BundleDataset` folders plus ``index.json``.

    Loading reads the index only; each bundle is read when its key is asked for, so a node that
    answers one dataset at a time holds one bundle's corpus and embeddings at a time.
    """

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> Mapping[str, PortfolioBundle]:
        return _LazyBundles(self._path, folder_keys(self._path, "bundles", "packaging"))

    def save(self, data: dict[str, PortfolioBundle]) -> None:
        save_folders(self._path, data, save_bundle, "portfolio key")

    def _exists(self) -> bool:
        return (self._path / "index.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class _LazyBundles(Mapping[str, PortfolioBundle]):
    """The bundles under ``root`` by key, each loaded (checksum checked) when it is asked for."""

    def __init__(self, root: Path, keys: list[str]) -> None:
        self._root, self._keys = root, list(keys)

    def __getitem__(self, key: str) -> PortfolioBundle:
        if key not in self._keys:
            raise KeyError(key)
        return load_bundle(self._root / key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
