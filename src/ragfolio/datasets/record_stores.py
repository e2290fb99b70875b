"""The store question_synthesis resumes from, as a Kedro dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ragfolio.core.synthesis.store import RecordStore


class RecordStoreDataset(AbstractDataset[None, RecordStore]):
    """Loads the :class:`~ragfolio.core.synthesis.store.RecordStore` of the JSONL file ``filepath``.

    The node that writes questions appends to the store one record at a time, so that a stopped run
    resumes; it is an input only: ``save`` is refused.
    """

    def __init__(self, filepath: str) -> None:
        self._filepath = Path(filepath)

    def load(self) -> RecordStore:
        return RecordStore(self._filepath)

    def save(self, data: None) -> None:
        raise DatasetError("RecordStoreDataset is appended to through the RecordStore it loads, not saved")

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}
