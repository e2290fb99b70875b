"""A ``dict[str, ndarray]`` stored as a folder of ``.npy`` files, memory-mapped on load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
from kedro.io import AbstractDataset, DatasetError


class ArrayFolderDataset(AbstractDataset[dict[str, np.ndarray], dict[str, np.ndarray]]):
    """A ``dict[str, ndarray]`` stored as a folder of ``<key>.npy`` files plus ``index.json``.

    Loading memory-maps the arrays (``mmap_mode="r"``) so large matrices are not read whole.
    """

    def __init__(self, path: str, mmap: bool = True) -> None:
        self._path = Path(path)
        self._mmap = mmap

    def load(self) -> dict[str, np.ndarray]:
        index_file = self._path / "index.json"
        if not index_file.exists():
            raise DatasetError(f"no array folder at {self._path} (missing {index_file.name})")
        keys = json.loads(index_file.read_text())["keys"]
        mode: Literal["r"] | None = "r" if self._mmap else None
        return {key: np.load(self._path / f"{key}.npy", mmap_mode=mode, allow_pickle=False) for key in keys}

    def save(self, data: dict[str, np.ndarray]) -> None:
        self._path.mkdir(parents=True, exist_ok=True)
        for stale in self._path.glob("*.npy"):
            stale.unlink()
        for key, array in data.items():
            if "/" in key or key.startswith("."):
                raise DatasetError(f"array key {key!r} is not a valid file name")
            np.save(self._path / f"{key}.npy", np.ascontiguousarray(array), allow_pickle=False)
        (self._path / "index.json").write_text(json.dumps({"keys": list(data)}, indent=1))

    def _exists(self) -> bool:
        return (self._path / "index.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "mmap": self._mmap}
