"""Answers stored per question, system and settings, so that an interrupted evaluation resumes.

An end-to-end evaluation makes ~20 LLM calls per question; on a CPU a run of a few hundred
questions takes hours. :class:`AnswerStore` appends each answered question's records to a JSONL
file as soon as they exist (one line per system, flushed and fsynced) and, at the start of a run,
reads back what is stored, keyed by ``(question id, system, settings)``: ``settings`` is a hash of
everything that changes an answer or its timing (:func:`settings_hash`), so a run with other
settings answers afresh instead of reusing stale rows. A last line cut short by a killed run is
skipped with a warning; any other unreadable line is an error naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (question id, system, settings hash)


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


Q = TypeVar("Q", bound=_Identified)


def settings_hash(settings: Mapping[str, Any]) -> str:
    """A short sha256 of ``settings`` as sorted JSON (non-JSON values by ``str``)."""
    blob = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class AnswerStore:
    """Records of answered questions in a JSONL file, by ``(id, system, settings)``.

    Args:
        path: The JSONL file (created with its folder on the first :meth:`add`); None keeps
            nothing (every question is answered, nothing is written).
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._records: dict[Key, dict[str, Any]] | None = None

    def _load(self) -> dict[Key, dict[str, Any]]:
        if self._records is not None:
            return self._records
        self._records = {}
        if self.path is None or not self.path.exists():
            return self._records
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = (str(row["id"]), str(row["system"]), str(row["settings"]))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                if number == len(lines):  # a write cut short by a stopped run: that question is redone
                    logger.warning("%s:%d is incomplete (%s); its question is answered again", self.path, number, error)
                    continue
                raise ValueError(f"{self.path}:{number}: not a stored answer ({error}): {line[:120]!r}") from error
            self._records[key] = row
        return self._records

    def __len__(self) -> int:
        return len(self._load())

    def get(self, question_id: str, systems: Iterable[str], settings: str) -> list[dict[str, Any]] | None:
        """The stored records of every one of ``systems`` for the question, or None if any is missing."""
        stored = self._load()
        rows = [stored.get((question_id, system, settings)) for system in systems]
        return None if any(r is None for r in rows) else [r for r in rows if r is not None]

    def add(self, records: Iterable[dict[str, Any]], settings: str) -> None:
        """Store ``records`` (each with ``id`` and ``system``) under ``settings``, on disk at once."""
        rows = [{**r, "settings": settings} for r in records]
        stored = self._load()
        for row in rows:
            stored[str(row["id"]), str(row["system"]), settings] = row
        if self.path is None or not rows:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(row, default=_json_default) + "\n" for row in rows))
            handle.flush()
            os.fsync(handle.fileno())


def _json_default(value: Any) -> Any:
    """numpy scalars as Python numbers (``item()``); anything else is an error, as in ``json``."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def answer_all(
    questions: Sequence[Q], systems: Sequence[str], store: AnswerStore, settings: str,
    answer: Callable[[Q], list[dict[str, Any]]], *, resume: bool = True, desc: str = "answering",
) -> tuple[list[dict[str, Any]], int]:
    """Every question's records: read from ``store`` when it holds all ``systems`` under ``settings``
    (unless ``resume`` is False), else from ``answer(question)`` and stored at once.

    Returns:
        ``(records, n_reused)``: the records in question order, each question's in ``systems`` order
        (whatever order the systems ran in), so a resumed run writes the same rows as a fresh one;
        and how many questions were read back.
    """
    position = {system: i for i, system in enumerate(systems)}
    rows: list[dict[str, Any]] = []
    reused = 0
    for question in tqdm(questions, desc=desc, unit="q"):
        stored = store.get(question.id, systems, settings) if resume else None
        if stored is None:
            stored = answer(question)
            store.add(stored, settings)
            stored = sorted(({**r, "settings": settings} for r in stored), key=lambda r: position[r["system"]])
        else:
            reused += 1
        rows += stored
    return rows, reused
