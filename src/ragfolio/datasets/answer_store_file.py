"""The resumable answer store as a Kedro input: the :class:`~ragfolio.core.answering.store.AnswerStore` of a JSONL file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ragfolio.core.answering.store import AnswerStore


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
