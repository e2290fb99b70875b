"""The bundles by portfolio key (checksummed folders of :mod:`ragfolio.core.bundle`) and the pointer naming the served one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset

from ragfolio.core.bundle import PortfolioBundle, load_bundle, resolve_bundle, save_bundle, save_served
from ragfolio.datasets.keyed_folders import folder_keys, save_folders


class ServedBundleDataset(AbstractDataset[str, PortfolioBundle]):
    """The served bundle, by pointer: ``save(key)`` writes ``filepath`` naming ``bundles/<key>``
    (:func:`~ragfolio.core.bundle.save_served`); ``load`` resolves it and loads that bundle."""

    def __init__(self, filepath: str, bundles: str) -> None:
        self._path, self._bundles = Path(filepath), Path(bundles)

    def load(self) -> PortfolioBundle:
        return load_bundle(resolve_bundle(self._path))

    def save(self, data: str) -> None:
        save_served(self._path, self._bundles / data, data)

    def _exists(self) -> bool:
        return self._path.is_file()

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._path), "bundles": str(self._bundles)}


class BundlesDataset(AbstractDataset[dict[str, PortfolioBundle], Mapping[str, PortfolioBundle]]):
    """Bundles by portfolio key: ``<path>/<key>/`` bundle folders plus ``index.json``. Loading reads the
    index only; each bundle is read when its key is asked for (a node holds one bundle at a time)."""

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

    def __contains__(self, key: object) -> bool:  # the index alone: no bundle is loaded to answer
        return key in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
