"""The corpus retrievers search, and how question contexts and passage files pool into it.

A passage file (:func:`~ragfolio.core.data.loading.load_passage_file`) holds one passage per line::

    {"title": str, "text": str, "id": str (optional), "metadata": {...} (optional)}

read into :class:`PassageRow` s. A passage with an ``id`` keeps it as its corpus id (see
:func:`build_corpus`); ``metadata`` follows :mod:`ragfolio.core.data.metadata` and travels with the
corpus (:meth:`Corpus.to_records`) into the corpora of a run and the served bundle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from ragfolio.core.cache import fingerprint
from ragfolio.core.data.metadata import MetadataError, canonical_json, validate_metadata
from ragfolio.core.data.records import DataFormatError, Question, _require_str, passage_id


@dataclass(frozen=True)
class Corpus:
    """The passages retrievers search, one row per passage.

    Attributes:
        ids: ``(n_passages,)`` stable passage ids, unique.
        titles: ``(n_passages,)`` titles aligned with ``ids``.
        texts: ``(n_passages,)`` texts aligned with ``ids``.
        metadata: ``()`` when no passage has metadata (the default), else ``(n_passages,)``
            objects aligned with ``ids``, ``None`` for a passage without any (see
            :mod:`~ragfolio.core.data.metadata`). Each object is checked and copied; an empty one
            counts as none, and a tuple of only ``None`` becomes ``()``, so a corpus without metadata
            is equal to (and fingerprinted like) one built without the argument. Do not mutate them.
    """

    ids: tuple[str, ...]
    titles: tuple[str, ...]
    texts: tuple[str, ...]
    metadata: tuple[Mapping[str, Any] | None, ...] = field(default=(), hash=False)

    def __post_init__(self) -> None:
        if not len(self.ids) == len(self.titles) == len(self.texts):
            raise ValueError(
                f"ids ({len(self.ids)}), titles ({len(self.titles)}) and texts "
                f"({len(self.texts)}) must have the same length"
            )
        if len(set(self.ids)) != len(self.ids):
            dup = next(i for i, n in _count(self.ids).items() if n > 1)
            raise ValueError(f"passage id {dup!r} occurs more than once in the corpus")
        if self.metadata:
            object.__setattr__(self, "metadata", _checked_metadata(self.metadata, self.ids))

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def _rows(self) -> dict[str, int]:
        # cached_property stores into the instance __dict__, which a frozen dataclass allows.
        return {pid: row for row, pid in enumerate(self.ids)}

    def row_of(self) -> dict[str, int]:
        """Map passage id -> row index (built once, then cached; do not mutate it)."""
        return self._rows

    @cached_property
    def fingerprint(self) -> str:
        """20 hex digits naming this corpus: a sha256 over every row's id, title and text, in order.

        When a passage has metadata, every row adds a fourth field, its metadata as
        :func:`~ragfolio.core.data.metadata.canonical_json` (``"null"`` for none), so a change of
        metadata names another corpus; a corpus without metadata keeps the three-field fingerprint.
        Reports, the served bundle's manifest and ``/portfolio`` carry it, so they can be checked
        to name the same corpus.
        """
        rows: Iterable[tuple[str, ...]] = zip(self.ids, self.titles, self.texts, strict=True)
        if self.metadata:
            rows = (
                (*row, "null" if meta is None else canonical_json(meta))
                for row, meta in zip(rows, self.metadata, strict=True)
            )
        return fingerprint(value for row in rows for value in row)

    def to_records(self) -> list[dict[str, Any]]:
        """``[{"id", "title", "text"}, ...]`` in row order, with ``"metadata"`` on the rows that have it."""
        records: list[dict[str, Any]] = [
            {"id": i, "title": t, "text": x} for i, t, x in zip(self.ids, self.titles, self.texts, strict=True)
        ]
        for record, meta in zip(records, self.metadata, strict=False):  # no metadata: zip stops at once
            if meta is not None:
                record["metadata"] = _copy_metadata(meta)
        return records

    @classmethod
    def from_records(cls, records: list[dict[str, Any]]) -> Corpus:
        """Build a corpus from ``{"id", "title", "text", "metadata"}`` records (e.g. a user corpus).

        ``id`` may be omitted (or ``null``), in which case :func:`passage_id` of title and text is
        used; ``metadata`` may be omitted (or ``null``) too.

        Raises:
            DataFormatError: If a record lacks ``title``/``text``, a value is not a string, or its
                metadata breaks :func:`~ragfolio.core.data.metadata.validate_metadata` (the location
                is ``record <index>``, the field names the key, e.g. ``metadata.year``).
        """
        ids: list[str] = []
        titles: list[str] = []
        texts: list[str] = []
        metadata: list[dict[str, Any] | None] = []
        for i, rec in enumerate(records):
            where = f"record {i}"
            if not isinstance(rec, dict):
                raise DataFormatError("<records>", where, "<row>", "expected an object")
            for key in ("title", "text"):
                if key not in rec:
                    raise DataFormatError("<records>", where, key, "missing")
            title = _require_str(rec["title"], "<records>", where, "title", empty_ok=True)
            text = _require_str(rec["text"], "<records>", where, "text", empty_ok=False)
            pid = rec.get("id")
            pid = passage_id(title, text) if pid is None else pid
            ids.append(_require_str(pid, "<records>", where, "id", empty_ok=False))
            titles.append(title)
            texts.append(text)
            metadata.append(parse_metadata(rec.get("metadata"), "<records>", where))
        return cls(tuple(ids), tuple(titles), tuple(texts), tuple(metadata))


def parse_metadata(value: Any, source: str | Path, line: int | str) -> dict[str, Any] | None:
    """A row's checked ``metadata`` (``None`` when absent, ``null`` or ``{}``), errors as :class:`DataFormatError`.

    Raises:
        DataFormatError: Naming ``source``, ``line`` and the offending key (``metadata.year``).
    """
    if value is None:
        return None
    try:
        return validate_metadata(value) or None
    except MetadataError as err:
        raise DataFormatError(source, line, err.field, err.reason) from err


def _copy_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, list) else value for key, value in meta.items()}


def _checked_metadata(
    metadata: Iterable[Mapping[str, Any] | None], ids: tuple[str, ...]
) -> tuple[dict[str, Any] | None, ...]:
    """``metadata`` checked row by row, empty objects as ``None``; ``()`` when no row has any."""
    checked = tuple(metadata)
    if len(checked) != len(ids):
        raise ValueError(f"metadata ({len(checked)}) must have one entry per passage ({len(ids)}) or be empty")
    rows: list[dict[str, Any] | None] = []
    for row, (pid, meta) in enumerate(zip(ids, checked, strict=True)):
        try:
            rows.append(None if meta is None else validate_metadata(meta) or None)
        except MetadataError as err:
            raise ValueError(f"metadata of row {row} (passage id {pid!r}): {err}") from err
    return tuple(rows) if any(meta is not None for meta in rows) else ()


def _count(items: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


@dataclass(frozen=True)
class PassageRow:
    """One row of a passage file: a passage that extends the corpus, with the user's id and metadata.

    Attributes:
        title: Title (may be empty).
        text: The passage (non-empty).
        id: The user's id, stable across runs, or ``None`` to be named by :func:`passage_id`.
        metadata: Checked metadata (:mod:`~ragfolio.core.data.metadata`) or ``None``.
        source: The file it was read from, for error messages (not compared).
        line: Its line in ``source`` (not compared).
    """

    title: str
    text: str
    id: str | None = None
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    source: str = field(default="<passages>", compare=False)
    line: int | str = field(default=0, compare=False)

    @property
    def where(self) -> str:
        """``"<source>:<line>"``."""
        return f"{self.source}:{self.line}"


@dataclass
class _Row:
    """A corpus row while :func:`build_corpus` fills it; ``where`` and ``metadata_where`` locate its sources."""

    title: str
    text: str
    content: str  # passage_id(title, text)
    where: str
    metadata: Mapping[str, Any] | None = None
    metadata_where: str = ""

    def attach(self, passage: PassageRow) -> None:
        """Give the row ``passage``'s metadata, which must equal any it already has."""
        if passage.metadata is None:
            return
        if self.metadata is None:
            self.metadata, self.metadata_where = passage.metadata, passage.where
        elif canonical_json(self.metadata) != canonical_json(passage.metadata):
            reason = f"differs from the metadata given to the same passage at {self.metadata_where}"
            raise DataFormatError(passage.source, passage.line, "metadata", reason)


def _passage_rows(passages: Iterable[PassageRow | tuple[str, str]]) -> list[PassageRow]:
    """``passages`` as rows; one not read from a file is located as ``passage <i>`` for error messages."""
    rows = [p if isinstance(p, PassageRow) else PassageRow(*p) for p in passages]
    return [replace(p, line=f"passage {i}") if p.line == 0 else p for i, p in enumerate(rows)]


def _first_owners(passages: list[PassageRow], contexts: Iterable[str]) -> dict[str, str]:
    """Content id -> the first user id given that content outside the question contexts.

    Raises:
        DataFormatError: A user id is given to two passages of different title or text.
    """
    in_contexts = set(contexts)
    first: dict[str, PassageRow] = {}
    owners: dict[str, str] = {}
    for p in passages:
        if p.id is None:
            continue
        content = passage_id(p.title, p.text)
        if p.id in first and passage_id(first[p.id].title, first[p.id].text) != content:
            reason = f"passage id {p.id!r} is also given to a different passage at {first[p.id].where}"
            raise DataFormatError(p.source, p.line, "id", reason)
        first.setdefault(p.id, p)
        if content not in in_contexts:
            owners.setdefault(content, p.id)
    return owners


def build_corpus(questions: Iterable[Question], passages: Iterable[PassageRow | tuple[str, str]] = ()) -> Corpus:
    """Pool the contexts of all questions, then ``passages``, into one de-duplicated corpus.

    Passages are de-duplicated by :func:`passage_id` (same title and text up to whitespace) and
    kept in order of first appearance, with the spacing of that first copy, so each gold paragraph
    competes with every distractor and every question's gold ids resolve to a corpus row.

    A passage with a user ``id`` is a row under that id, so the id is stable across runs, except
    when a question's context has its title and text: that row keeps its content id (gold ids
    resolve to it) and takes the passage's metadata. Copies without an id of a user-id passage join
    its row; repeats of one user id must have the same title and text. Two user ids given the same
    text stay two rows. Metadata given to one row more than once must agree.

    Args:
        questions: Questions whose contexts are pooled.
        passages: Further passages that support no question (a passage file's
            :class:`PassageRow` s, or ``(title, text)`` pairs).

    Raises:
        DataFormatError: A user id names two different passages (or another row's id), or one
            row is given two different metadata objects; the error names the passage's file and
            line (``<passages>`` and ``passage <i>`` for rows not read from a file) and the other's.
    """
    rows: dict[str, _Row] = {}
    for q in questions:
        for c in q.contexts:
            rows.setdefault(c.passage_id, _Row(c.title, c.text, c.passage_id, "a question's context"))
    contexts = set(rows)
    items = _passage_rows(passages)
    owners = _first_owners(items, contexts)
    for p in items:
        content = passage_id(p.title, p.text)
        if content in contexts:
            key = content
        else:
            key = p.id if p.id is not None else owners.get(content, content)
        row = rows.setdefault(key, _Row(p.title, p.text, content, p.where))
        if row.content != content:  # a user id equal to another passage's id
            reason = f"passage id {key!r} is also the id of a different passage ({row.where})"
            raise DataFormatError(p.source, p.line, "id", reason)
        row.attach(p)
    return Corpus(
        ids=tuple(rows),
        titles=tuple(row.title for row in rows.values()),
        texts=tuple(row.text for row in rows.values()),
        metadata=tuple(row.metadata for row in rows.values()),
    )
