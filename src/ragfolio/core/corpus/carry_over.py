"""The update log of a rebuilt bundle: the documents added and deleted while the old one served,
carried over onto the new corpus.

A rerun of the pipeline rebuilds the bundle in place (``06_models/bundles/<key>``), and its corpus
(the base) changes: it holds what ``corpus_dir`` holds now, which may include documents added live
before. :func:`open_log` opens the bundle's update log for the new base; when the log was written
for another base, its net state by id (:func:`~ragfolio.core.corpus.wal.fold`: the last change
of each id wins) is folded into a fresh log, leaving out what the new base already says (a document
the base holds with the same title, text and metadata; a delete of an id the base does not hold),
and the old log is kept beside it (``<name>.<time>.stale``). So the documents a team added live
stay served across a rerun without being added twice, and those the rerun took in cost nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragfolio.core.corpus.wal import UpdateLog, fold
from ragfolio.core.data.passages import Corpus

logger = logging.getLogger(__name__)


def _in_base(base: Corpus, record: dict[str, Any]) -> bool:
    """Whether ``base`` holds ``record`` as it is (same id, title, text and metadata)."""
    row = base.row_of().get(record["id"])
    if row is None:
        return False
    metadata = base.metadata[row] if base.metadata else None
    return (base.titles[row], base.texts[row], metadata or None) == (
        record.get("title", ""), record["text"], record.get("metadata") or None)


def open_log(path: str | Path, base: Corpus) -> UpdateLog:
    """The update log at ``path`` for corpus ``base``, with an older base's updates carried over
    (see the module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        old = UpdateLog(path)
        updates = old.replay()
        if old.base_corpus not in (None, base.fingerprint) and updates:
            net = fold(updates)
            upserts = [record for record in net.values() if record is not None and not _in_base(base, record)]
            deletes = [pid for pid, record in net.items() if record is None and pid in base.row_of()]
            log = UpdateLog.open(path, base.fingerprint)  # moves the old log aside
            if upserts:
                log.append("upsert", documents=upserts)
            if deletes:
                log.append("delete", ids=deletes)
            logger.info("update log %s carried over onto corpus %s: %d documents and %d deletes still apply "
                        "(%d ids the new corpus already holds as logged)", path, base.fingerprint, len(upserts),
                        len(deletes), len(net) - len(upserts) - len(deletes))
            return log
    return UpdateLog.open(path, base.fingerprint)
