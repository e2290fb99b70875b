"""Kedro datasets of this project: thin adapters over :mod:`ragfolio.core` storage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

import numpy as np
from kedro.io import AbstractDataset, DatasetError
from kedro.utils import load_obj
from kedro_datasets.json import JSONDataset

from ragfolio.core.answering.store import AnswerStore
from ragfolio.core.bundle import PortfolioBundle, load_bundle, save_bundle
from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.reranking.cross_encoder_folder import MANIFEST, CrossEncoderFolder, TrainedCrossEncoder
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.registry import load_router, save_router


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


class CrossEncoderDataset(AbstractDataset[TrainedCrossEncoder, CrossEncoderFolder]):
    """The trained cross-encoder's folder at ``path`` (``candidate_scoring``'s ``cross_encoder``).

    ``save`` writes the folder (:meth:`~ragfolio.core.retrieval.reranking.cross_encoder_folder.TrainedCrossEncoder.save`:
    safetensors, tokenizer and a manifest of checksums, or the manifest alone saying why none was
    trained); ``load`` gives the :class:`CrossEncoderFolder` (where it is, whether it holds a model),
    which the pool settings record, so runners load the model themselves, where they run.
    """

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> CrossEncoderFolder:
        try:
            return CrossEncoderFolder.read(self._path)
        except (FileNotFoundError, ValueError) as e:
            raise DatasetError(str(e)) from e

    def save(self, data: TrainedCrossEncoder) -> None:
        if not isinstance(data, TrainedCrossEncoder):
            raise DatasetError(f"{self._path} holds a TrainedCrossEncoder, not a {type(data).__name__}")
        data.save(self._path)

    def _exists(self) -> bool:
        return (self._path / MANIFEST).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class RecordDataset(JSONDataset):
    """A frozen record of :mod:`ragfolio.core` (a class with ``from_dict`` and ``to_dict``) stored as JSON.

    kedro-datasets' :class:`~kedro_datasets.json.JSONDataset` with the record in front: ``record``
    names the class (e.g. ``ragfolio.core.selection.portfolios.Portfolios``); a stage that writes
    the record saves it, and the stages that read it load the record, checked by its
    ``from_dict`` (a bad key names the file), not a dict. Paths, ``save_args``, ``versioned``,
    ``credentials`` and ``fs_args`` are JSONDataset's (any fsspec filesystem).
    """

    def __init__(self, filepath: str, record: str, save_args: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(filepath=filepath, save_args=save_args, **kwargs)
        self._record_name = record
        self._record = load_obj(record)

    def load(self) -> Any:
        data = super().load()
        try:
            return self._record.from_dict(data)
        except ValueError as e:
            raise DatasetError(f"{self._filepath}: {e}") from e

    def save(self, data: Any) -> None:
        if not isinstance(data, self._record):
            raise DatasetError(f"{self._filepath} holds a {self._record_name}, not a {type(data).__name__}")
        super().save(data.to_dict())

    def _describe(self) -> dict[str, Any]:
        return {**super()._describe(), "record": self._record_name}


class AnswerStoreDataset(AbstractDataset[None, AnswerStore]):
    """Loads the :class:`~ragfolio.core.answering.store.AnswerStore` of the JSONL file ``filepath``.

    The store is appended to by the node that answers questions, one question at a time, so that
    a stopped run resumes; it is an input only: ``save`` is refused.
    """

    def __init__(self, filepath: str) -> None:
        self._filepath = Path(filepath)

    def load(self) -> AnswerStore:
        return AnswerStore(self._filepath)

    def save(self, data: None) -> None:
        raise DatasetError("AnswerStoreDataset is appended to through the AnswerStore it loads, not saved")

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}


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


class RouterFolderDataset(AbstractDataset[dict[str, RouterProtocol], dict[str, RouterProtocol]]):
    """Routers by key, stored as ``<path>/<key>/`` router folders plus ``index.json``.

    Each folder's ``router.json`` names the router's kind, and loading goes through the registry
    (:func:`ragfolio.core.routing.registry.load_router`), so any registered router can be stored.
    """

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> dict[str, RouterProtocol]:
        index_file = self._path / "index.json"
        if not index_file.exists():
            raise DatasetError(f"no routers at {self._path} (missing {index_file.name}): run the router_training pipeline")
        return {key: load_router(self._path / key) for key in json.loads(index_file.read_text())["keys"]}

    def save(self, data: dict[str, RouterProtocol]) -> None:
        if self._path.exists():
            shutil.rmtree(self._path)
        for key, router in data.items():
            if "/" in key or key.startswith("."):
                raise DatasetError(f"router key {key!r} is not a valid folder name")
            save_router(router, self._path / key)
        (self._path / "index.json").write_text(json.dumps({"keys": list(data)}, indent=1))

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
