"""Questions, passages and the retrieval corpus of ragfolio's JSONL format.

One question per line::

    {"id": str, "dataset": str, "question": str, "answers": [str, ...], "type": str | null,
     "contexts": [{"title": str, "text": str, "is_supporting": bool}, ...]}

Rules enforced when a file is read with :func:`~ragfolio.core.data.loading.load_jsonl` (a violation
raises :class:`DataFormatError` naming the file, the line and the field):

* ``id``, ``dataset`` and ``question`` are non-empty strings; ids are unique within a file (and
  within a folder read by :func:`~ragfolio.core.data.loading.load_folder`).
* ``answers`` is a list of non-empty strings (all accepted aliases). The list **may be empty**: a
  question without reference answers can still be retrieved for and scored against its supporting
  contexts; answer metrics skip it.
* ``type`` is a string or ``null``.
* ``contexts`` is a list (possibly empty) of objects with a string ``title`` (may be empty), a
  non-empty string ``text`` and a boolean ``is_supporting``.
* Any other key (``split``, ``sources``, ``supporting_facts`` ...) is allowed and ignored.

A passage is identified by :func:`passage_id`, a hash of its whitespace-normalised title and text,
so the same paragraph gets the same id in every run and in every file it appears in, whatever its
spacing (older HotpotQA rows put two spaces between sentences, newer ones one).

A passage file (:func:`~ragfolio.core.data.loading.load_passage_file`) holds one passage per line::

    {"title": str, "text": str, "id": str (optional), "metadata": {...} (optional)}

read into :class:`~ragfolio.core.data.passages.PassageRow` s and pooled with the questions' contexts
into the :class:`~ragfolio.core.data.passages.Corpus` (:mod:`ragfolio.core.data.passages`; both are
importable from here too).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self


class DataFormatError(ValueError):
    """A row of an input file that does not follow the expected format.

    Attributes:
        path: The offending file (or a description such as ``"<record>"``).
        line: 1-based line number, or a location such as ``"record 3"`` for files that are one
            JSON document.
        field: The offending field, e.g. ``"contexts[2].is_supporting"``.
        reason: What is wrong with it.
    """

    def __init__(self, path: str | Path, line: int | str, field: str, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(f"{path}:{line}: field '{field}': {reason}")

    @classmethod
    def invalid_json(
        cls, path: str | Path, line: int, error: json.JSONDecodeError, field: str = "<row>", truncated: bool = False
    ) -> Self:
        """The error for a line that is not JSON, with the column where parsing stopped.

        ``json``'s own messages end in "at" and leave the position to its exception's attributes
        (``"Invalid control character at"``); this puts the column into the message. ``truncated``
        says the line is the file's last and ends without a newline: most likely a row cut short by
        a copy or a download that stopped, which the message then says first.
        """
        reason = f"invalid JSON at column {error.colno}: {error.msg.removesuffix(' at')}"
        if truncated:
            reason = f"the row looks truncated (the file's last line, without a newline): {reason}"
        return cls(path, line, field, reason)


@dataclass(frozen=True)
class Context:
    """One paragraph shown with a question.

    Attributes:
        title: Title of the source page (may be empty).
        text: The paragraph itself.
        is_supporting: Whether the paragraph is needed to answer the question (gold).
    """

    title: str
    text: str
    is_supporting: bool

    @property
    def passage_id(self) -> str:
        """The stable id of this paragraph, see :func:`passage_id`."""
        return passage_id(self.title, self.text)


def normalize_whitespace(text: str) -> str:
    """``text`` with every run of whitespace (spaces, tabs, newlines) made one space, ends stripped."""
    return " ".join(text.split())


def passage_id(title: str, text: str) -> str:
    """Stable passage id: ``"p"`` + the first 16 hex digits of ``sha1(title + "\\n" + text)``.

    Title and text are whitespace-normalised first (:func:`normalize_whitespace`), so copies of a
    paragraph that differ only in spacing share one id; a paragraph already normally spaced keeps
    the id it had before normalisation was added.

    Args:
        title: Passage title.
        text: Passage text.

    Returns:
        A 17-character id, identical across runs, machines and Python versions.
    """
    key = f"{normalize_whitespace(title)}\n{normalize_whitespace(text)}"
    return "p" + hashlib.sha1(key.encode()).hexdigest()[:16]


def _require_str(value: Any, source: str, line: int | str, field: str, *, empty_ok: bool) -> str:
    if not isinstance(value, str):
        raise DataFormatError(source, line, field, f"expected a string, got {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise DataFormatError(source, line, field, "must be a non-empty string")
    return value


def _require_list(value: Any, source: str, line: int | str, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise DataFormatError(source, line, field, f"expected a list, got {type(value).__name__}")
    return value


def _parse_context(raw: Any, source: str, line: int | str, field: str) -> Context:
    if not isinstance(raw, dict):
        raise DataFormatError(source, line, field, f"expected an object, got {type(raw).__name__}")
    for key in ("title", "text", "is_supporting"):
        if key not in raw:
            raise DataFormatError(source, line, f"{field}.{key}", "missing")
    title = _require_str(raw["title"], source, line, f"{field}.title", empty_ok=True)
    text = _require_str(raw["text"], source, line, f"{field}.text", empty_ok=False)
    if not isinstance(raw["is_supporting"], bool):
        kind = type(raw["is_supporting"]).__name__
        reason = f"expected a bool, got {kind}"
        raise DataFormatError(source, line, f"{field}.is_supporting", reason)
    return Context(title=title, text=text, is_supporting=raw["is_supporting"])


@dataclass(frozen=True)
class Question:
    """One benchmark question with its answers and the paragraphs shown with it.

    Attributes:
        id: Unique id within its file (the benchmark's own id where it has one).
        dataset: Benchmark name, e.g. ``"hotpotqa"``.
        question: The question text, unchanged.
        answers: All accepted answers (aliases); may be empty.
        type: Benchmark-specific question type (``"bridge"``, ``"2hop"`` ...) or ``None``.
        contexts: Paragraphs shown with the question, gold ones flagged; empty for open-domain QA.
    """

    id: str
    dataset: str
    question: str
    answers: tuple[str, ...]
    type: str | None
    contexts: tuple[Context, ...]

    @property
    def has_contexts(self) -> bool:
        """Whether the question comes with any paragraphs."""
        return bool(self.contexts)

    def gold_passage_ids(self) -> tuple[str, ...]:
        """Passage ids of the supporting contexts, in order, without duplicates."""
        ids = (c.passage_id for c in self.contexts if c.is_supporting)
        return tuple(dict.fromkeys(ids))

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict with the keys of the JSONL format."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "question": self.question,
            "answers": list(self.answers),
            "type": self.type,
            "contexts": [
                {"title": c.title, "text": c.text, "is_supporting": c.is_supporting}
                for c in self.contexts
            ],
        }

    @classmethod
    def from_record(
        cls, record: dict[str, Any], *, source: str = "<record>", line: int | str = 0
    ) -> Question:
        """Validate one parsed JSONL row and build a :class:`Question` from it.

        Args:
            record: The parsed row; keys other than the six of the format are ignored.
            source: File name used in error messages.
            line: Line number (or location) used in error messages.

        Raises:
            DataFormatError: If a required field is missing or has the wrong type.
        """
        if not isinstance(record, dict):
            kind = type(record).__name__
            raise DataFormatError(source, line, "<row>", f"expected a JSON object, got {kind}")
        for key in ("id", "dataset", "question", "answers", "type", "contexts"):
            if key not in record:
                raise DataFormatError(source, line, key, "missing")
        qid = _require_str(record["id"], source, line, "id", empty_ok=False)
        dataset = _require_str(record["dataset"], source, line, "dataset", empty_ok=False)
        question = _require_str(record["question"], source, line, "question", empty_ok=False)
        answers = tuple(
            _require_str(a, source, line, f"answers[{i}]", empty_ok=False)
            for i, a in enumerate(_require_list(record["answers"], source, line, "answers"))
        )
        qtype = record["type"]
        if qtype is not None:
            _require_str(qtype, source, line, "type", empty_ok=True)
        contexts = tuple(
            _parse_context(c, source, line, f"contexts[{i}]")
            for i, c in enumerate(_require_list(record["contexts"], source, line, "contexts"))
        )
        return cls(qid, dataset, question, answers, qtype, contexts)
