"""A bundle with the corpus indexes its service searches, built once where the bundle is written."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ragfolio.core.system.routed_system import RoutedSystem

if TYPE_CHECKING:
    from ragfolio.core.bundle import PortfolioBundle


def with_indexes(bundle: PortfolioBundle) -> PortfolioBundle:
    """``bundle`` holding every corpus index its service searches, so a service maps them instead of
    building them at start-up.

    What the service builds is found by doing what its warm-up does: one query routed to all k
    members (the router's own features included), then the runner's
    :meth:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner.corpus_indexes`. Indexes the
    bundle already holds are reused, not rebuilt.
    """
    system = RoutedSystem.from_bundle(bundle)
    try:
        system.warm_up()
        return dataclasses.replace(bundle, indexes=system.runner.corpus_indexes(), manifest={})
    finally:
        system.close()
