"""Kedro datasets of this project: thin adapters over :mod:`ragfolio.core` storage."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from kedro.io import AbstractDataset, DatasetError
from kedro.utils import load_obj
from kedro_datasets.json import JSONDataset

from ragfolio.core.answering.store import AnswerStore
from ragfolio.core.bundle import PortfolioBundle, load_bundle, resolve_bundle, save_bundle, save_served
from ragfolio.core.cache import ArrayCache
from ragfolio.core.record_checks import checked_fields
from ragfolio.core.retrieval.reranking import cross_fitting
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

    _saved: type[Any] = TrainedCrossEncoder
    _loaded: Any = CrossEncoderFolder
    _manifest = MANIFEST

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> Any:
        try:
            return self._loaded.read(self._path)
        except (FileNotFoundError, ValueError) as e:
            raise DatasetError(str(e)) from e

    def save(self, data: Any) -> None:
        if not isinstance(data, self._saved):
            raise DatasetError(f"{self._path} holds a {self._saved.__name__}, not a {type(data).__name__}")
        data.save(self._path)

    def _exists(self) -> bool:
        return (self._path / self._manifest).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class CrossEncoderFoldsDataset(CrossEncoderDataset):
    """Its fold models (``cross_encoder_folds``): saves a ``TrainedCrossFitting``, loads a ``CrossFittingFolder``."""

    _saved, _loaded, _manifest = cross_fitting.TrainedCrossFitting, cross_fitting.CrossFittingFolder, cross_fitting.MANIFEST


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


class TimingsDataset(JSONDataset):
    """Measured times one stage hands another (``08_reporting/timings/``, which neither git nor DVC
    tracks: :mod:`ragfolio.core.timings`). A missing file, as after a ``dvc pull`` on another machine,
    loads as ``{}``: no timings to report, and nothing a stage's results depend on."""

    def load(self) -> Any:
        return super().load() if super()._exists() else {}

    def _exists(self) -> bool:
        return True


class ArrayTreeDataset(AbstractDataset[Any, Any]):
    """A nested mapping whose leaves are arrays, stored as an inspectable folder: ``tree.json`` (the
    mapping, each array replaced by ``{"__array__": "arrays/<n>.npy"}``, or ``.npz`` for a scipy
    sparse matrix) beside the ``arrays/`` it names. No pickles.

    With ``record`` (a dataclass of :mod:`ragfolio.core`, named as :class:`RecordDataset` names one)
    it stores that record field by field, with ``keyed: true`` a mapping of key -> record; loading
    checks the fields (:func:`~ragfolio.core.record_checks.checked_fields`). Router training writes
    its hand-offs to router evaluation so (``router_inputs``, ``retrieval_inputs``, ``dev_router_comparison``).
    """

    def __init__(self, path: str, record: str | None = None, keyed: bool = False) -> None:
        self._path = Path(path)
        self._record_name, self._keyed = record, keyed
        self._record = load_obj(record) if record else None

    def load(self) -> Any:
        index_file = self._path / "tree.json"
        if not index_file.exists():
            raise DatasetError(f"no array tree at {self._path} (missing {index_file.name})")
        tree = _read_leaves(self._path, json.loads(index_file.read_text())["tree"])
        if (cls := self._record) is None:
            return tree

        def record(fields: dict[str, Any]) -> Any:
            return cls(**checked_fields(cls, fields, f"{self._path} ({self._record_name})"))

        try:
            return {key: record(v) for key, v in tree.items()} if self._keyed else record(tree)
        except ValueError as e:
            raise DatasetError(str(e)) from e

    def save(self, data: Any) -> None:
        if self._record is not None:
            records = data.values() if self._keyed else [data]
            if bad := [type(r).__name__ for r in records if not isinstance(r, self._record)]:
                raise DatasetError(f"{self._path} holds {self._record_name} records, not {bad}")
            data = {key: _fields(r) for key, r in data.items()} if self._keyed else _fields(data)
        shutil.rmtree(self._path / "arrays", ignore_errors=True)
        (self._path / "arrays").mkdir(parents=True)
        tree = _write_leaves(self._path, data, itertools.count())
        (self._path / "tree.json").write_text(json.dumps({"format": 1, "tree": tree}, indent=1))

    def _exists(self) -> bool:
        return (self._path / "tree.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path), "record": self._record_name, "keyed": self._keyed}


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def _write_leaves(root: Path, value: Any, numbers: Iterator[int]) -> Any:
    """``value`` as JSON, each array written under ``root/arrays`` and replaced by its file's name."""
    if isinstance(value, Mapping):
        return {str(key): _write_leaves(root, v, numbers) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_write_leaves(root, v, numbers) for v in value]
    if sp.issparse(value):
        name = f"arrays/{next(numbers)}.npz"
        sp.save_npz(root / name, value, compressed=False)
        return {"__array__": name}
    if isinstance(value, np.ndarray):
        name = f"arrays/{next(numbers)}.npy"
        np.save(root / name, np.ascontiguousarray(value), allow_pickle=False)
        return {"__array__": name}
    return value.item() if isinstance(value, np.generic) else value


def _read_leaves(root: Path, value: Any) -> Any:
    """The inverse of :func:`_write_leaves`."""
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            name = value["__array__"]
            return sp.load_npz(root / name) if name.endswith(".npz") else np.load(root / name, allow_pickle=False)
        return {key: _read_leaves(root, v) for key, v in value.items()}
    if isinstance(value, list):
        return [_read_leaves(root, v) for v in value]
    return value


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
        return {key: load_router(self._path / key) for key in _folder_keys(self._path, "routers", "router_training")}

    def save(self, data: dict[str, RouterProtocol]) -> None:
        _save_folders(self._path, data, save_router, "router key")

    def _exists(self) -> bool:
        return (self._path / "index.json").exists()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


def _folder_keys(root: Path, what: str, stage: str) -> list[str]:
    """The keys of ``root/index.json`` (folders by key, as :func:`_save_folders` writes them)."""
    index_file = root / "index.json"
    if not index_file.exists():
        raise DatasetError(f"no {what} at {root} (missing {index_file.name}): run the {stage} pipeline")
    return list(json.loads(index_file.read_text())["keys"])


def _save_folders(root: Path, data: Mapping[str, Any], save_one: Callable[[Any, Path], Any], what: str) -> None:
    """``root/<key>/`` for each item of ``data`` (``save_one(item, folder)``) and ``root/index.json``, afresh."""
    if root.exists():
        shutil.rmtree(root)
    for key, item in data.items():
        if "/" in key or key.startswith("."):
            raise DatasetError(f"{what} {key!r} is not a valid folder name")
        save_one(item, root / key)
    (root / "index.json").write_text(json.dumps({"keys": list(data)}, indent=1))


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
        return _LazyBundles(self._path, _folder_keys(self._path, "bundles", "packaging"))

    def save(self, data: dict[str, PortfolioBundle]) -> None:
        _save_folders(self._path, data, save_bundle, "portfolio key")

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
