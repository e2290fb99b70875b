"""A frozen record of :mod:`ragfolio.core` stored as a JSON file."""

from __future__ import annotations

from typing import Any

from kedro.io import DatasetError
from kedro.utils import load_obj
from kedro_datasets.json import JSONDataset


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
