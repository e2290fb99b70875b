"""The write-ahead log of live corpus updates: one fsynced JSON line per batch, replayed at start.

``POST /documents`` and ``DELETE /documents/{id}`` change the served corpus while it runs. Each batch
is appended to a log in the bundle folder and fsynced before the request is acknowledged, so a
process killed at any point (SIGKILL included) loses no acknowledged batch and, at restart,
:meth:`UpdateLog.replay` applies no half batch: a line is a whole batch or nothing.

The file is JSON Lines, UTF-8, one object a line::

    {"header": {"base_corpus": "<fingerprint of the bundle's corpus>", "format": 1}}   (first line)
    {"op": "upsert", "payload": {"documents": [...], "ids": []}, "seq": 1, "sha256": "...", "time": "..."}

``sha256`` is the hex digest of the canonical JSON (sorted keys, no spaces) of the line's other
fields (``op``, ``payload``, ``seq``, ``time``): the payload and what it means, so a flipped byte in
either is caught. A kill mid-write can only tear the last line (appends are serialised and each is
fsynced before the next); replay drops such a line and truncates the file to the last good one.
A bad line anywhere else is corruption and raises :class:`UpdateLogError`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger(__name__)

FORMAT = 1
OPS = ("upsert", "delete")
DOCUMENT_KEYS = {"id", "title", "text", "metadata"}  # "metadata" is optional


class UpdateLogError(ValueError):
    """The log is corrupt other than by a torn last line (a bad middle line, a wrong header, seq going back)."""


@dataclass(frozen=True)
class Update:
    """One acknowledged batch of the log.

    Attributes:
        seq: the batch's number, 1 for a fresh log's first batch, +1 a batch.
        op: ``"upsert"`` (add or replace passages by id) or ``"delete"`` (remove them).
        documents: upsert: the records ``{"id", "title", "text", "metadata"?}``; delete: ``()``.
        ids: delete: the passage ids removed; upsert: ``()``.
        time: when the batch was written, ISO 8601 in UTC.
    """

    seq: int
    op: Literal["upsert", "delete"]
    documents: tuple[dict[str, Any], ...]
    ids: tuple[str, ...]
    time: str


def fold(updates: Iterable[Update]) -> dict[str, dict[str, Any] | None]:
    """The net effect of ``updates`` by passage id: its last upserted record, or ``None`` if deleted last.

    Pure; ids are ordered by their last change (an id changed again moves to the end), so the result
    lists changes in the order they took effect.
    """
    state: dict[str, dict[str, Any] | None] = {}
    for update in updates:
        changes = [(d["id"], d) for d in update.documents] if update.op == "upsert" else [(i, None) for i in update.ids]
        for doc_id, record in changes:
            state.pop(doc_id, None)
            state[doc_id] = record
    return state


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _checksum(entry: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical({k: entry[k] for k in ("op", "payload", "seq", "time")})).hexdigest()


def _check_batch(op: str, documents: Sequence[dict[str, Any]], ids: Sequence[str]) -> None:
    """Raise ValueError naming the field if a batch is not a well-formed upsert or delete."""
    if op not in OPS:
        raise ValueError(f"op={op!r} must be one of {OPS}")
    if op == "upsert":
        if not documents or ids:
            raise ValueError(f"an upsert needs documents and no ids (got {len(documents)} documents, {len(ids)} ids)")
        for i, doc in enumerate(documents):
            if not isinstance(doc, dict):
                raise ValueError(f"documents[{i}] must be a dict, got {type(doc).__name__}")
            if unknown := set(doc) - DOCUMENT_KEYS:
                raise ValueError(f"documents[{i}] has unknown keys {sorted(unknown)}; allowed: {sorted(DOCUMENT_KEYS)}")
            for key in ("id", "title", "text"):
                if not isinstance(doc.get(key), str):
                    raise ValueError(f"documents[{i}].{key} must be a string, got {doc.get(key)!r}")
            if not doc["id"]:
                raise ValueError(f"documents[{i}].id must not be empty")
            if "metadata" in doc and not isinstance(doc["metadata"], dict):
                raise ValueError(f"documents[{i}].metadata must be a dict, got {type(doc['metadata']).__name__}")
    else:
        if not ids or documents:
            raise ValueError(f"a delete needs ids and no documents (got {len(ids)} ids, {len(documents)} documents)")
        for i, doc_id in enumerate(ids):
            if not isinstance(doc_id, str) or not doc_id:
                raise ValueError(f"ids[{i}] must be a non-empty string, got {doc_id!r}")


def _fsync_dir(folder: Path) -> None:
    """Make a file's creation or rename in ``folder`` durable (its directory entry)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class UpdateLog:
    """An append-only, fsynced log of corpus update batches at ``path``; safe to share between threads.

    Constructing one touches no file. :meth:`append` replays the file first if this object has not yet
    read it, so the next ``seq`` follows the last one on disk and a torn tail is cut off before writing.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.base_corpus: str | None = None  # the header's fingerprint, known after replay() or reset()
        self._lock = threading.Lock()
        self._next_seq = 1
        self._read = False  # whether the file was replayed (or reset) by this object

    @classmethod
    def open(cls, path: str | Path, base_fingerprint: str) -> UpdateLog:
        """The log at ``path`` for the corpus ``base_fingerprint``: replayable as it is if its header names
        that corpus, else a fresh one (a missing file, or a log of another build of the bundle's corpus,
        or one with no header, which is moved aside to ``<name>.<UTC timestamp>.stale``).
        Raises UpdateLogError if it is corrupt (a corrupt log is never moved aside silently)."""
        log = cls(path)
        if not log.path.exists():
            log.reset(base_fingerprint)
            return log
        log.replay()
        if log.base_corpus != base_fingerprint:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            stale = log.path.with_name(f"{log.path.name}.{stamp}.stale")
            os.replace(log.path, stale)
            logger.warning("update log %s was written for corpus %r, not %r (the bundle was rebuilt): "
                           "moved it to %s and started a fresh log", log.path, log.base_corpus, base_fingerprint, stale)
            log.reset(base_fingerprint)
        return log

    def reset(self, base_fingerprint: str) -> None:
        """Replace the log, atomically, by one holding only a header naming ``base_fingerprint``; seq restarts at 1."""
        if not isinstance(base_fingerprint, str) or not base_fingerprint:
            raise ValueError(f"base_fingerprint={base_fingerprint!r} must be a non-empty string")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_canonical({"header": {"base_corpus": base_fingerprint, "format": FORMAT}}) + b"\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o644)  # mkstemp makes the file private
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            _fsync_dir(self.path.parent)
            self.base_corpus, self._next_seq, self._read = base_fingerprint, 1, True

    def append(self, op: Literal["upsert", "delete"], documents: Sequence[dict[str, Any]] = (),
               ids: Sequence[str] = ()) -> Update:
        """Write one batch as one line and fsync it; returning is the acknowledgement (the batch survives a kill).

        Raises:
            ValueError: the batch is malformed (the message names the field); nothing is written.
        """
        _check_batch(op, documents, ids)
        with self._lock:
            if not self._read:
                self._replay_locked()
            time = datetime.now(UTC).isoformat(timespec="milliseconds")
            entry: dict[str, Any] = {"seq": self._next_seq, "op": op, "time": time,
                                     "payload": {"documents": [dict(d) for d in documents], "ids": list(ids)}}
            entry["sha256"] = _checksum(entry)
            line = _canonical(entry) + b"\n"
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                try:
                    view = memoryview(line)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                except OSError:  # e.g. a full disk: cut the part written, so the next line is not glued onto it
                    os.ftruncate(fd, size)
                    raise
            finally:
                os.close(fd)
            if created:
                _fsync_dir(self.path.parent)
            self._next_seq += 1
            payload = entry["payload"]
            return Update(entry["seq"], op, tuple(payload["documents"]), tuple(payload["ids"]), time)

    def replay(self) -> list[Update]:
        """Every whole, checksum-valid batch of the log, in seq order (``[]`` if there is no file).

        A torn or unreadable last line (a kill mid-write) is dropped: the file is truncated to the end of
        the last good line and a warning names the file and the byte offset. Sets :attr:`base_corpus`.

        Raises:
            UpdateLogError: a bad line that is not the last, a header not on line 1 or of another format,
                or a seq that does not increase (each names the file and line number).
        """
        with self._lock:
            return self._replay_locked()

    def _replay_locked(self) -> list[Update]:
        data = self.path.read_bytes() if self.path.exists() else b""
        *whole, tail = data.split(b"\n")  # tail: bytes after the last newline, b"" unless a write was cut
        updates: list[Update] = []
        base: str | None = None
        offset = 0
        for number, raw in enumerate(whole, start=1):
            where = f"{self.path}: line {number}"
            try:
                record = json.loads(raw.decode("utf-8"))
                if not isinstance(record, dict):
                    raise ValueError("not a JSON object")
                if "header" not in record and record.get("sha256") != _checksum(record):
                    raise ValueError("checksum mismatch")
            except (ValueError, KeyError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                if number == len(whole) and tail == b"":  # the last line, whole but garbled (e.g. power loss)
                    self._truncate(offset, len(data), err)
                    break
                raise UpdateLogError(f"{where} is corrupt ({err}); only the last line may be torn by a kill, "
                                     f"so this log was damaged otherwise") from err
            if "header" in record:
                header = record["header"]
                if number != 1 or not isinstance(header, dict) or header.get("format") != FORMAT:
                    raise UpdateLogError(f"{where}: a header must be line 1 with format {FORMAT}, got {header!r}")
                base = header.get("base_corpus")
            else:
                updates.append(self._update(record, where, updates[-1].seq if updates else 0))
            offset += len(raw) + 1
        if tail:  # no newline at the end: the last write was cut before it finished
            self._truncate(offset, len(data), ValueError("no newline at its end"))
        self.base_corpus = base
        self._next_seq, self._read = (updates[-1].seq + 1 if updates else 1), True
        return updates

    @staticmethod
    def _update(record: dict[str, Any], where: str, previous: int) -> Update:
        """A checksum-valid line as an Update; UpdateLogError if it is not one a writer of this format wrote."""
        seq, op, payload = record.get("seq"), record.get("op"), record.get("payload")
        if not isinstance(seq, int) or seq <= previous:
            raise UpdateLogError(f"{where}: seq={seq!r} must be an integer above the previous line's {previous}")
        if op not in OPS or not isinstance(payload, dict):
            raise UpdateLogError(f"{where}: op={op!r} must be one of {OPS} with a payload object")
        try:
            _check_batch(op, payload.get("documents", []), payload.get("ids", []))
        except ValueError as err:
            raise UpdateLogError(f"{where}: {err}") from err
        return Update(seq, op, tuple(payload.get("documents", [])), tuple(payload.get("ids", [])), record["time"])

    def _truncate(self, offset: int, size: int, reason: Exception) -> None:
        logger.warning("update log %s: dropped a torn last line at byte offset %d (%d bytes: %s), most likely a "
                       "kill mid-write; truncated the file to its last whole batch", self.path, offset,
                       size - offset, reason)
        with open(self.path, "r+b") as f:
            f.truncate(offset)
            f.flush()
            os.fsync(f.fileno())
