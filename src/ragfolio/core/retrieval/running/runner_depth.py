"""A pool runner at another depth: the same corpus and query parts, ``depth`` passages per candidate.

Called by :meth:`ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.at_depth`, the one
place that makes and keeps the executor (and so the runner) at another depth.
"""

from __future__ import annotations

import copy

from ragfolio.core.retrieval.running.pool_runner import PoolRunner


def runner_at_depth(runner: PoolRunner, depth: int) -> PoolRunner:
    """``runner`` returning ``depth`` passages per candidate (its ``num_docs``; 1..``prefilter_depth``,
    the depth of the first-stage rankings it shares), sharing every corpus and query part with it.
    """
    if not 1 <= depth <= runner.prefilter_depth:
        raise ValueError(f"num_docs={depth} must be in 1..prefilter_depth={runner.prefilter_depth}")
    view = copy.copy(runner)  # shallow: the parts memo and the encoders are shared
    view.num_docs = depth
    return view
