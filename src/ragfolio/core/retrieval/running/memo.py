"""A thread-safe memo for the shared parts of a pool run: corpus parts kept, query parts bounded.

:class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner` keeps each expensive part (an index, embeddings, a
first-stage ranking) here under a key. Parts of the corpus stay for the memo's lifetime; parts of a
query batch are grouped under the batch's fingerprint and the least recently used batches are
dropped beyond ``max_query_batches``, so a long-running service stays bounded.

The memo counts its hits and misses, and tags every query part with the *scope* that was current
when it was computed (:meth:`PartsMemo.set_scope`): a hit on a part computed under another scope is
a ``foreign_query_hit``. An end-to-end comparison gives each system its own scope (and clears the
query parts between systems), so a system that reused another's query embeddings or rankings, and
so looked faster than it is, shows up as a non-zero count.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Lookups answered from memory (hits) or computed (misses), for corpus and query parts; a
# foreign query hit reads a query part computed under another scope.
COUNTERS = ("corpus_hits", "corpus_misses", "query_hits", "query_misses", "foreign_query_hits")


class _Slot:
    """One memo entry: its value once computed, and the lock held while computing it."""

    __slots__ = ("done", "lock", "scope", "value")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False
        self.value: Any = None
        self.scope: str | None = None


class PartsMemo:
    """A thread-safe memo of corpus parts (kept) and query-batch parts (LRU of whole batches).

    A key is computed once even when several threads ask for it together: the first to take the
    key's lock computes, the others wait on that lock and reuse the value. The table lock is held
    only to find a key's slot, never while computing; a failed computation leaves the key empty.
    A computation may ask for other keys (a base asks for query embeddings) but not for its own.

    Args:
        max_query_batches: Query batches kept; asking for a new one drops the least recently used.
    """

    def __init__(self, max_query_batches: int) -> None:
        if max_query_batches < 1:
            raise ValueError(f"max_query_batches={max_query_batches} must be >= 1")
        self.max_query_batches = max_query_batches
        self._lock = threading.Lock()
        self._corpus: dict[Hashable, _Slot] = {}
        self._batches: OrderedDict[str, dict[Hashable, _Slot]] = OrderedDict()
        self._scope: str | None = None
        self._counts = dict.fromkeys(COUNTERS, 0)

    def _slot(self, key: Hashable, batch: str | None) -> _Slot:
        with self._lock:
            if batch is None:
                table = self._corpus
            elif batch in self._batches:
                self._batches.move_to_end(batch)
                table = self._batches[batch]
            else:
                table = self._batches[batch] = {}
                while len(self._batches) > self.max_query_batches:
                    evicted, _ = self._batches.popitem(last=False)
                    logger.debug("query batch %s evicted from the memo", evicted)
            return table.setdefault(key, _Slot())

    def get(self, key: Hashable, compute: Callable[[], T], batch: str | None = None) -> T:
        """The value under ``key``, from ``compute()`` the first time.

        Args:
            key: What the part is, within its batch.
            compute: Builds the part; called once per key while the key stays in memory.
            batch: The query batch's fingerprint, or None for a corpus part.
        """
        slot = self._slot(key, batch)
        kind = "corpus" if batch is None else "query"
        with slot.lock:
            hit = slot.done
            if not hit:
                slot.value, slot.done, slot.scope = compute(), True, self._scope
            self._count(f"{kind}_{'hits' if hit else 'misses'}")
            if hit and batch is not None and slot.scope != self._scope:
                self._count("foreign_query_hits")
        value: T = slot.value
        return value

    def _count(self, counter: str) -> None:
        with self._lock:
            self._counts[counter] += 1

    def set_scope(self, scope: str | None) -> None:
        """Tag the query parts computed from now on with ``scope`` (a system's name; None: untagged)."""
        with self._lock:
            self._scope = scope

    def stats(self) -> dict[str, int]:
        """Computed ``corpus_parts``, ``query_batches`` held, computed ``query_parts``, and the
        counters of :data:`COUNTERS` since the memo was built."""
        with self._lock:
            return {
                "corpus_parts": sum(s.done for s in self._corpus.values()),
                "query_batches": len(self._batches),
                "query_parts": sum(s.done for table in self._batches.values() for s in table.values()),
                **self._counts,
            }

    def corpus_items(self) -> dict[Hashable, Any]:
        """The corpus parts computed so far, by key (query parts are not included)."""
        with self._lock:
            return {key: slot.value for key, slot in self._corpus.items() if slot.done}

    def clear_batches(self) -> None:
        """Drop every query batch (a computation in flight still returns its value)."""
        with self._lock:
            self._batches.clear()
