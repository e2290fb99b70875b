"""Routers by key, and by kind then key, as folders the router registry loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.registry import load_router, save_router
from ragfolio.datasets.keyed_folders import folder_keys, save_folders


class RouterFolderDataset(AbstractDataset[dict[str, RouterProtocol], dict[str, RouterProtocol]]):
    """Routers by key, stored as ``<path>/<key>/`` router folders plus ``index.json``.

    Each folder's ``router.json`` names the router's kind, and loading goes through the registry
    (:func:`ragfolio.core.routing.registry.load_router`), so any registered router can be stored.
    """

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> dict[str, RouterProtocol]:
        return {key: load_router(self._path / key) for key in folder_keys(self._path, "routers", "router_training")}

    def save(self, data: dict[str, RouterProtocol]) -> None:
        save_folders(self._path, data, save_router, "router key")

    def _exists(self) -> bool:
        return (self._path / "index.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class RoutersByKindDataset(AbstractDataset[dict[str, dict[str, RouterProtocol]], dict[str, dict[str, RouterProtocol]]]):
    """Routers by kind, then by portfolio: ``<path>/<kind>/`` folders of :class:`RouterFolderDataset`
    plus ``kinds.json`` (router training's servable routers beside the learned one)."""

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> dict[str, dict[str, RouterProtocol]]:
        index_file = self._path / "kinds.json"
        if not index_file.exists():
            raise DatasetError(f"no routers at {self._path} (missing {index_file.name}): run the router_training pipeline")
        return {kind: RouterFolderDataset(str(self._path / kind)).load() for kind in json.loads(index_file.read_text())["kinds"]}

    def save(self, data: dict[str, dict[str, RouterProtocol]]) -> None:
        if self._path.exists():
            shutil.rmtree(self._path)
        for kind, routers in data.items():
            if "/" in kind or kind.startswith("."):
                raise DatasetError(f"router kind {kind!r} is not a valid folder name")
            RouterFolderDataset(str(self._path / kind)).save(routers)
        (self._path / "kinds.json").write_text(json.dumps({"kinds": list(data)}, indent=1))

    def _exists(self) -> bool:
        return (self._path / "kinds.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}
