"""A pool runner at another depth: the same corpus and query parts, ``num_docs`` passages per candidate."""

from __future__ import annotations

import copy

from ragfolio.core.retrieval.running.pool_runner import PoolRunner


def runner_at_depth(runner: PoolRunner, num_docs: int) -> PoolRunner:
    """``runner`` returning ``num_docs`` passages per candidate (1..``prefilter_depth``, the depth of
    the first-stage rankings it shares), sharing every corpus and query part with it.
    """
    if not 1 <= num_docs <= runner.prefilter_depth:
        raise ValueError(f"num_docs={num_docs} must be in 1..prefilter_depth={runner.prefilter_depth}")
    view = copy.copy(runner)  # shallow: the parts memo and the encoders are shared
    view.num_docs = num_docs
    return view
