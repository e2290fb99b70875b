"""The routed system that serves a request: the bundle's, over the corpus as it is now and the request's filter.

A served corpus lives (:class:`~ragfolio.core.corpus.live_corpus.LiveCorpus`) and a request may
carry a metadata filter; both are a view of the bundle's corpus
(:class:`~ragfolio.core.retrieval.running.view_runner.CorpusView`). :class:`LiveSystems` gives the
routed system of the current corpus version and a filter: the bundle's own while nothing was
updated and no filter is asked, else the same portfolio and router over a view runner, made once
per (version, filter) and kept in a small LRU. A system dropped from it is closed a while later,
not at once, so a request still running on it finishes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from ragfolio.core.corpus.filters import Filter
from ragfolio.core.corpus.live_corpus import LiveCorpus
from ragfolio.core.retrieval.running.view_runner import runner_over
from ragfolio.core.system.routed_system import RoutedSystem

logger = logging.getLogger(__name__)


class LiveSystems:
    """Routed systems over the views of a living corpus (see the module docstring).

    Args:
        system: The bundle's routed system (over the corpus it was built on).
        corpus: The living corpus over that corpus.
        max_views: Systems kept (versions and filters in use).
        close_after_s: Seconds a dropped system stays open for requests running on it.
    """

    def __init__(self, system: RoutedSystem, corpus: LiveCorpus, *, max_views: int = 8,
                 close_after_s: float = 120.0) -> None:
        self.system, self.corpus = system, corpus
        self.max_views, self.close_after_s = max_views, close_after_s
        self._views: OrderedDict[tuple[int, str], RoutedSystem] = OrderedDict()
        self._lock = threading.Lock()

    def system_for(self, where: Filter | None = None) -> RoutedSystem:
        """The system serving a request with filter ``where`` now."""
        snapshot = self.corpus.snapshot()
        if snapshot.version == 0 and where is None:
            return self.system
        key = (snapshot.version, "" if where is None else where.key())
        with self._lock:
            if (system := self._views.get(key)) is not None:
                self._views.move_to_end(key)
                return system
        system = self.system.over(runner_over(self.system.runner, snapshot.view(where)))
        with self._lock:
            if (other := self._views.get(key)) is not None:  # another thread made it meanwhile
                system.close()
                return other
            self._views[key] = system
            while len(self._views) > self.max_views:
                _, dropped = self._views.popitem(last=False)
                timer = threading.Timer(self.close_after_s, dropped.close)
                timer.daemon = True
                timer.start()
        return system

    def warm(self) -> None:
        """Make the current version's system and build what its members read of the added passages
        (one query through all k members), so the first request after an update does not pay for it."""
        self.system_for(None).warm_up()

    def close(self) -> None:
        with self._lock:
            views, self._views = list(self._views.values()), OrderedDict()
        for system in views:
            system.close()
