"""A nested mapping of arrays (or a record of them) stored as an inspectable folder, no pickles."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from kedro.io import AbstractDataset, DatasetError
from kedro.utils import load_obj

from ragfolio.core.record_checks import checked_fields


class ArrayTreeDataset(AbstractDataset[Any, Any]):
    """A nested mapping whose leaves are arrays, stored as an inspectable folder: ``tree.json`` (the
    mapping, each array replaced by ``{"__array__": "arrays/<n>.npy"}``, or ``.npz`` for a scipy
    sparse matrix) beside the ``arrays/`` it names. No pickles.

    With ``record`` (a dataclass of :mod:`ragfolio.core`, named as
    :class:`~ragfolio.datasets.record_files.RecordDataset` names one) it stores that record field by
    field, with ``keyed: true`` a mapping of key -> record; loading checks the fields
    (:func:`~ragfolio.core.record_checks.checked_fields`). Router training writes its hand-offs to
    router evaluation so (``router_inputs``, ``retrieval_inputs``, ``dev_router_comparison``).
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
