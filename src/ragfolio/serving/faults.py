"""A member fault, for benchmarks and tests only: one portfolio member made slow, so that it times out.

Off by default (``fault_injection: null`` in conf/base/serving.yml). With

.. code-block:: yaml

    fault_injection: {member: "<a member's name, as /portfolio lists it>", delay_s: 2.0}

each run of that member (one run per retrieval batch it is routed in) first sleeps ``delay_s``
seconds; past ``member_timeout_s`` it is left out and the response says ``degraded: true`` with
``"<member>: timeout after <s> s"``, as for a real member stuck on a slow index server. The
sleeping thread is held until it wakes, as a hung member's would be. This exists so that
``benchmarks/fault_service.py``, ``benchmarks/soak_service.py`` and the tests can drive that path;
the service logs a warning at start-up while it is on.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from typing import Any, cast

from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio.serving.config import FaultInjectionConfig

logger = logging.getLogger(__name__)


class SlowMemberRunner:
    """A pool runner whose runs of one member sleep first; everything else is the wrapped runner's.

    Args:
        runner: The runner the portfolio executor uses.
        member: Name of the member to slow down.
        delay_s: Seconds each of its runs sleeps before it starts.
    """

    def __init__(self, runner: PoolRunner, member: str, delay_s: float) -> None:
        self.runner, self.member, self.delay_s = runner, member, delay_s

    def run(self, candidate: Any, queries: Sequence[str]) -> Any:
        if candidate.name == self.member:
            time.sleep(self.delay_s)
        return self.runner.run(candidate, queries)

    def __getattr__(self, name: str) -> Any:  # prepare, prefilter_depth, ...: the wrapped runner's
        return getattr(self.runner, name)

    @property
    def num_docs(self) -> int:
        return int(self.runner.num_docs)

    @num_docs.setter
    def num_docs(self, value: int) -> None:
        self.runner.num_docs = value

    def __copy__(self) -> SlowMemberRunner:
        """The same fault over a shallow copy of the wrapped runner: the executor at another depth
        (:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.at_depth`) is slowed too."""
        return SlowMemberRunner(copy.copy(self.runner), self.member, self.delay_s)


def inject_fault(system: RoutedSystem, fault: FaultInjectionConfig | None) -> None:
    """Slow ``fault.member`` down in ``system``'s executor and the executors it makes at other depths
    (nothing when ``fault`` is None).

    Raises:
        ValueError: ``fault.member`` is not one of ``system``'s members (the message lists them).
    """
    if fault is None:
        return
    names = [member.name for member in system.members]
    if fault.member not in names:
        raise ValueError(f"fault_injection.member={fault.member!r} is not a member; the members are {names}")
    system.executor.runner = cast(PoolRunner, SlowMemberRunner(system.executor.runner, fault.member, fault.delay_s))
