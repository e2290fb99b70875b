"""Answers stored per question, system and settings, so that an interrupted evaluation resumes.

An end-to-end evaluation makes ~20 LLM calls per question; on a CPU a run of a few hundred
questions takes hours. :class:`AnswerStore` appends each answered question's records to a JSONL
file as soon as they exist (one line per system, flushed and fsynced) and, at the start of a run,
reads back what is stored, keyed by ``(question id, question digest, system, settings)``: the
digest is a hash of the question's text and gold answers (:func:`question_digest`), so an edited
question or gold is answered again, and ``settings`` is a hash of
everything that changes that system's answer or its timing (:func:`settings_hash`), so a run with
other settings answers afresh instead of reusing stale rows, and a run that adds a system answers
with that system alone. A last line cut short by a killed run is
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

Key = tuple[str, str, str, str]  # (question id, question digest, system, settings hash)


class _Identified(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def question(self) -> str: ...

    @property
    def answers(self) -> Sequence[str]: ...


Q = TypeVar("Q", bound=_Identified)


def settings_hash(settings: Mapping[str, Any]) -> str:
    """A short sha256 of ``settings`` as sorted JSON (non-JSON values by ``str``)."""
    blob = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def question_digest(question: _Identified) -> str:
    """A short sha256 of a question's text and gold answers (its part of a stored record's key)."""
    return settings_hash({"question": question.question, "answers": list(question.answers)})


class AnswerStore:
    """Records of answered questions in a JSONL file, by ``(id, question digest, system, settings)``.

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
                key = (str(row["id"]), str(row["question_digest"]), str(row["system"]), str(row["settings"]))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                if number == len(lines):  # a write cut short by a stopped run: that question is redone
                    logger.warning("%s:%d is incomplete (%s); its question is answered again", self.path, number, error)
                    continue
                raise ValueError(f"{self.path}:{number}: not a stored answer ({error}): {line[:120]!r}") from error
            self._records[key] = row
        return self._records

    def __len__(self) -> int:
        return len(self._load())

    def get(self, question_id: str, digest: str, system: str, settings: str) -> dict[str, Any] | None:
        """The stored record of ``system`` for the question (its id and :func:`question_digest`) under
        ``settings``, or None."""
        return self._load().get((question_id, digest, system, settings))

    def add(self, records: Iterable[dict[str, Any]], digest: str, settings: Mapping[str, str]) -> None:
        """Store ``records`` of one question (each with ``id`` and ``system``) under the question's
        ``digest`` and each system's ``settings``, on disk at once."""
        rows = [{**r, "question_digest": digest, "settings": settings[str(r["system"])]} for r in records]
        stored = self._load()
        for row in rows:
            stored[str(row["id"]), digest, str(row["system"]), row["settings"]] = row
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
    questions: Sequence[Q], settings: Mapping[str, str], store: AnswerStore,
    answer: Callable[[Q, list[str]], list[dict[str, Any]]], *, resume: bool = True, desc: str = "answering",
) -> tuple[list[dict[str, Any]], int]:
    """Every question's records for the systems of ``settings`` (system -> its settings hash):
    those ``store`` holds are read back (unless ``resume`` is False); ``answer(question, missing)``
    answers with the systems it lacks, and their records are stored at once.

    Returns:
        ``(records, n_reused)``: the records in question order, each question's in the order of
        ``settings`` (whatever order the systems ran in), so a resumed run writes the same rows as
        a fresh one; and how many questions were read back whole.
    """
    rows: list[dict[str, Any]] = []
    reused = 0
    for question in tqdm(questions, desc=desc, unit="q"):
        digest = question_digest(question)
        found = {s: store.get(question.id, digest, s, key) if resume else None for s, key in settings.items()}
        if missing := [s for s, row in found.items() if row is None]:
            new = answer(question, missing)
            store.add(new, digest, settings)
            found |= {r["system"]: {**r, "question_digest": digest, "settings": settings[r["system"]]} for r in new}
            if lost := [s for s in missing if found[s] is None]:
                raise ValueError(f"answering {question.id!r} gave no record of {lost}")
        else:
            reused += 1
        rows += [row for row in found.values() if row is not None]
    return rows, reused
