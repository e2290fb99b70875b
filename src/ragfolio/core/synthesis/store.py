"""A JSONL file of records by key, appended to as each is made, so that a stopped run resumes.

Writing questions calls the LLM three times a question; on a CPU a few hundred questions take an
hour. :class:`RecordStore` appends each record as soon as it exists (flushed and fsynced) and reads
back, at the start of a run, the last record stored under each key. A key names everything the
record depends on (the passages' ids and a hash of the settings), so records written under other
settings are not reused. A last line cut short by a killed run is skipped with a warning (and cut
off before the next record is appended, so that record does not run on from it); any other
unreadable line is an error naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def settings_hash(settings: Mapping[str, Any]) -> str:
    """A short sha256 of ``settings`` as sorted JSON (non-JSON values by ``str``)."""
    blob = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class RecordStore:
    """Records by ``key`` (a string field of each record) in a JSONL file; the last one stored wins.

    Args:
        path: The JSONL file (created with its folder on the first :meth:`put`); None keeps
            nothing on disk.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._records: dict[str, dict[str, Any]] | None = None
        self._cut: int | None = None  # where a killed run's last line starts: cut there before appending
        self._newline = False  # the last record is whole but its newline was not written

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._records is not None:
            return self._records
        self._records = {}
        if self.path is None or not self.path.exists():
            return self._records
        data = self.path.read_bytes()
        lines = data.split(b"\n")  # a file whose last record is whole ends in "\n": its last piece is empty
        offset = 0
        for number, raw in enumerate(lines, start=1):
            start, offset = offset, offset + len(raw) + 1
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
                key = str(row["key"])
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
                if number == len(lines):
                    logger.warning("%s:%d is incomplete (%s); that record is made again", self.path, number, error)
                    self._cut = start
                    continue
                raise ValueError(f"{self.path}:{number}: not a stored record ({error}): {raw[:120]!r}") from error
            self._records[key] = row
        self._newline = self._cut is None and bool(data) and not data.endswith(b"\n")
        return self._records

    def __len__(self) -> int:
        return len(self._load())

    def get(self, key: str) -> dict[str, Any] | None:
        """The last record stored under ``key``, or None."""
        return self._load().get(key)

    def put(self, record: dict[str, Any]) -> None:
        """Store ``record`` (it has a ``key``) on disk at once."""
        self._load()[str(record["key"])] = record
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._cut is not None:  # a killed run's last line: cut off, so the record does not run on from it
            os.truncate(self.path, self._cut)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(("\n" if self._newline else "") + json.dumps(record) + "\n")
            self._cut, self._newline = None, False
            handle.flush()
            os.fsync(handle.fileno())
