"""The served corpus as it lives: the bundle's passages, and those added, replaced and deleted since.

:class:`LiveCorpus` keeps the corpus a bundle was built on (the *base*, rows ``0..n_base``, whose
indexes the bundle carries) and a *delta*: every passage added or replaced since, appended as rows
``n_base..`` (a row number is never reused, so a list ranked before an update still names the
right passages after it), with a mask of the rows still live (a replaced or deleted passage's row
is dead). Each update is encoded first (the members' encoders, outside any lock), then written
ahead to the bundle's update log (:class:`~ragfolio.core.corpus.wal.UpdateLog`, fsynced: the
acknowledgement), then applied; at start the log is replayed. So a kill loses no acknowledged
update and applies no half batch.

Readers take a :class:`Snapshot` (immutable, one per version) and never wait for writers; a
snapshot gives the :class:`~ragfolio.core.retrieval.running.view_runner.CorpusView` a runner ranks,
with a metadata filter's mask over base and delta rows (:mod:`ragfolio.core.corpus.filters`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.corpus.filters import Filter
from ragfolio.core.corpus.metadata_columns import MetadataColumns
from ragfolio.core.corpus.wal import Update, UpdateLog
from ragfolio.core.data.metadata import MetadataError, validate_metadata
from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import passage_id
from ragfolio.core.retrieval.running.pool_runner import passage_texts
from ragfolio.core.retrieval.running.view_runner import CorpusView

logger = logging.getLogger(__name__)

Encode = Callable[[list[str]], Mapping[str, npt.NDArray[np.float32]]]  # passage texts -> vectors by encoder
MAX_MASKS = 64  # filters whose base-row masks a corpus keeps


class DocumentError(ValueError):
    """A document of an update is malformed; ``field`` names it (``documents[3].text``)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class Document:
    """One passage of an update: its id (given, or the hash of its title and text), title, text, metadata."""

    id: str
    title: str
    text: str
    metadata: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, record: Any, where: str) -> Document:
        """The document of a request's or the log's ``record``; :class:`DocumentError` names ``where``."""
        if not isinstance(record, Mapping):
            raise DocumentError(where, f"expected an object, got {type(record).__name__}")
        unknown = sorted(set(record) - {"id", "title", "text", "metadata"})
        if unknown:
            raise DocumentError(f"{where}.{unknown[0]}", "unknown field (allowed: id, title, text, metadata)")
        title, text = record.get("title", ""), record.get("text")
        if not isinstance(title, str):
            raise DocumentError(f"{where}.title", f"expected a string, got {type(title).__name__}")
        if not isinstance(text, str) or not text.strip():
            raise DocumentError(f"{where}.text", "must be a non-empty string")
        pid = record.get("id")
        if pid is None:
            pid = passage_id(title, text)
        if not isinstance(pid, str) or not pid.strip():
            raise DocumentError(f"{where}.id", "must be a non-empty string")
        metadata = record.get("metadata")
        if metadata is not None:
            try:
                metadata = validate_metadata(metadata, f"{where}.metadata") or None
            except MetadataError as exc:
                raise DocumentError(exc.field, exc.reason) from None
        return cls(pid, title, text, metadata)

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"id": self.id, "title": self.title, "text": self.text}
        if self.metadata is not None:
            record["metadata"] = dict(self.metadata)
        return record


@dataclass(frozen=True)
class Snapshot:
    """One version of a living corpus (immutable; see the module docstring).

    Attributes:
        version: Updates applied since the bundle's corpus (0: none).
        base: The bundle's corpus, rows ``0..n_base``.
        added: The delta's documents, rows ``n_base..``, in order (dead ones included).
        vectors: The delta's vectors by encoder, aligned with ``added``.
        live: ``(n_base + len(added),)``: the rows still served.
        rows: Passage id -> its live delta row (base ids are in ``base.row_of()``).
    """

    version: int
    base: Corpus
    added: tuple[Document, ...] = ()
    vectors: Mapping[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    live: npt.NDArray[np.bool_] | None = None
    rows: Mapping[str, int] = field(default_factory=dict)
    masks: Any = None  # the corpus's filter-mask cache (shared by every snapshot)

    @property
    def n_base(self) -> int:
        return len(self.base)

    @property
    def n_rows(self) -> int:
        return self.n_base + len(self.added)

    def row_of(self, pid: str) -> int | None:
        """The live row of passage ``pid``, or None."""
        if (row := self.rows.get(pid)) is not None:
            return row
        row = self.base.row_of().get(pid)
        return row if row is not None and (self.live is None or self.live[row]) else None

    def passage(self, row: int) -> tuple[str, str, str, Mapping[str, Any] | None]:
        """``(id, title, text, metadata)`` of any row ever served (dead ones too)."""
        if row < self.n_base:
            metadata = self.base.metadata[row] if self.base.metadata else None
            return self.base.ids[row], self.base.titles[row], self.base.texts[row], metadata
        doc = self.added[row - self.n_base]
        return doc.id, doc.title, doc.text, doc.metadata

    def allowed(self, where: Filter | None = None) -> npt.NDArray[np.bool_] | None:
        """The rows a query with filter ``where`` may get (None: every row)."""
        if where is None:
            return self.live
        base = self.masks(where) if self.masks is not None else np.ones(self.n_base, bool)
        added = np.array([doc_matches(where, doc) for doc in self.added], dtype=bool)
        mask = np.concatenate([base, added])
        return mask if self.live is None else mask & self.live

    def view(self, where: Filter | None = None) -> CorpusView:
        """The view a runner ranks for a query with filter ``where``."""
        name = f"v{self.version}" + ("" if where is None else f" {where.key()}")
        dead = () if self.live is None else tuple(int(r) for r in np.flatnonzero(~self.live))
        return CorpusView(self.n_base, tuple(d.title for d in self.added), tuple(d.text for d in self.added),
                          self.vectors, self.allowed(where), name,
                          remote_filter=None if where is None else where.to_elasticsearch(), dead=dead)

    def status(self) -> dict[str, Any]:
        """What ``/portfolio`` says of the delta: counts and its share of the base corpus."""
        live_added = len(self.added) if self.live is None else int(self.live[self.n_base:].sum())
        dead_base = 0 if self.live is None else int((~self.live[: self.n_base]).sum())
        return {"version": self.version, "base_corpus": self.base.fingerprint, "base_passages": self.n_base,
                "added": live_added, "removed_from_base": dead_base,
                "passages": self.n_base - dead_base + live_added,
                "delta_share": (live_added + dead_base) / max(1, self.n_base)}


def doc_matches(where: Filter, doc: Document) -> bool:
    return where.matches(doc.metadata, id=doc.id, title=doc.title)


class _BaseMasks:
    """Filter masks over the base rows, computed once per filter (an LRU of :data:`MAX_MASKS`)."""

    def __init__(self, base: Corpus) -> None:
        self.base = base
        self._columns: MetadataColumns | None = None
        self._masks: OrderedDict[str, npt.NDArray[np.bool_]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, where: Filter) -> npt.NDArray[np.bool_]:
        key = where.key()
        with self._lock:
            if (mask := self._masks.get(key)) is not None:
                self._masks.move_to_end(key)
                return mask
            if self._columns is None:
                rows = list(self.base.metadata) if self.base.metadata else [None] * len(self.base)
                self._columns = MetadataColumns.from_rows(rows, self.base.ids, self.base.titles)
            mask = self._masks[key] = np.asarray(where.mask(self._columns), dtype=bool)
            while len(self._masks) > MAX_MASKS:
                self._masks.popitem(last=False)
            return mask


@dataclass(frozen=True)
class Applied:
    """What an update did: ids added (new), replaced (existed), deleted, and the version it made."""

    version: int
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()


class LiveCorpus:
    """A bundle's corpus with live updates, logged ahead (see the module docstring).

    Args:
        base: The bundle's corpus.
        encode: Vectors of passage texts (``"<title>. <text>"``) by encoder name: every encoder
            whose passage vectors a member reads.
        log: The update log (None: updates are kept in memory only, lost at a restart).
    """

    def __init__(self, base: Corpus, encode: Encode, log: UpdateLog | None = None) -> None:
        self.base, self.encode, self.log = base, encode, log
        self._lock = threading.Lock()  # one writer at a time; readers take snapshots
        self._snapshot = Snapshot(0, base, masks=_BaseMasks(base))
        if log is not None:
            updates = log.replay()
            if updates:
                self._replay(updates)

    def snapshot(self) -> Snapshot:
        return self._snapshot

    def _replay(self, updates: Sequence[Update]) -> None:
        """Apply the logged updates in order, every added passage encoded in one call (a passage's
        vector does not depend on the others encoded with it)."""
        batches = [[Document.parse(record, f"log seq {u.seq}") for record in u.documents] if u.op == "upsert" else []
                   for u in updates]
        every = [doc for docs in batches for doc in docs]
        vectors = self._vectors(every) if every else {}
        start = 0
        for update, docs in zip(updates, batches, strict=True):
            if update.op == "upsert":
                end = start + len(docs)
                self._apply_upsert(docs, {name: v[start:end] for name, v in vectors.items()})
                start = end
            else:
                self._apply_delete([pid for pid in update.ids if self._snapshot.row_of(pid) is not None])
        logger.info("replayed %d updates of %s (%d passages encoded): %s", len(updates),
                    self.log.path if self.log else "-", len(every), self._snapshot.status())

    def _vectors(self, docs: Sequence[Document]) -> dict[str, npt.NDArray[np.float32]]:
        texts = passage_texts([d.title for d in docs], [d.text for d in docs])
        return {name: np.asarray(v, dtype=np.float32) for name, v in self.encode(texts).items()}

    def upsert(self, records: Sequence[Any]) -> Applied:
        """Add or replace passages by id, all or none: parsed, encoded, logged, then applied.

        Raises:
            DocumentError: A record is malformed (nothing is applied).
        """
        if not records:
            raise DocumentError("documents", "must hold at least one document")
        docs = [Document.parse(record, f"documents[{i}]") for i, record in enumerate(records)]
        seen: dict[str, int] = {}
        for i, doc in enumerate(docs):
            if doc.id in seen:
                raise DocumentError(f"documents[{i}].id", f"repeats documents[{seen[doc.id]}].id {doc.id!r}")
            seen[doc.id] = i
        vectors = self._vectors(docs)  # the slow part, outside the lock
        with self._lock:
            if self.log is not None:
                self.log.append("upsert", documents=[doc.to_record() for doc in docs])
            return self._apply_upsert(docs, vectors)

    def delete(self, ids: Sequence[str]) -> Applied:
        """Delete passages by id, all or none.

        Raises:
            KeyError: An id names no live passage (nothing is applied).
        """
        with self._lock:
            missing = [pid for pid in ids if self._snapshot.row_of(pid) is None]
            if missing:
                raise KeyError(missing[0])
            if self.log is not None:
                self.log.append("delete", ids=list(ids))
            return self._apply_delete(list(ids))

    def _apply_upsert(self, docs: Sequence[Document], vectors: Mapping[str, npt.NDArray[np.float32]]) -> Applied:
        old = self._snapshot
        live = np.ones(old.n_rows, bool) if old.live is None else old.live.copy()
        rows = dict(old.rows)
        replaced = []
        for doc in docs:
            if (row := old.row_of(doc.id)) is not None:
                live[row] = False
                replaced.append(doc.id)
        n_rows = old.n_rows
        for i, doc in enumerate(docs):
            rows[doc.id] = n_rows + i
        live = np.concatenate([live, np.ones(len(docs), bool)])
        merged = {name: np.concatenate([old.vectors[name], v]) if name in old.vectors else v
                  for name, v in vectors.items()}
        self._snapshot = Snapshot(old.version + 1, old.base, old.added + tuple(docs), merged, live, rows, old.masks)
        added = tuple(d.id for d in docs if d.id not in replaced)
        return Applied(self._snapshot.version, added=added, replaced=tuple(replaced))

    def _apply_delete(self, ids: Sequence[str]) -> Applied:
        old = self._snapshot
        live = np.ones(old.n_rows, bool) if old.live is None else old.live.copy()
        rows = dict(old.rows)
        for pid in ids:
            row = old.row_of(pid)
            if row is not None:
                live[row] = False
                rows.pop(pid, None)
        self._snapshot = Snapshot(old.version + 1, old.base, old.added, old.vectors, live, rows, old.masks)
        return Applied(self._snapshot.version, deleted=tuple(ids))
