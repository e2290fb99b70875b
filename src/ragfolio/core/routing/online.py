"""The routers that see the retrieval, routing one query at a time at answer time.

Router training computes the retrieval features of whole query blocks from cached rankings
(:mod:`ragfolio.core.routing.retrieval_features`); a question being answered has no cached
ranking, so :class:`OnlineRetrievalRouting` computes its features from the runner it retrieves
with, as a service would:

* ``pre_retrieval``: the first-stage rankings (``bm25`` and ``dense:<encoder>``, ``prefilter_depth``
  deep) and the passage graph (a corpus part, built once), then the first-stage features; the
  router picks l members and only those run. The first-stage rankings are the ones the members
  build on, so the members reuse them (within the query's own caches).
* ``post_retrieval``: the same, and every one of the k members runs (concurrently) so that each
  member's result list can be featurised; the router picks whose l lists go to the LLM.

Both are cheap next to an LLM call: a few milliseconds of ranking and feature arithmetic per query,
measured per query as ``route_ms`` (and, post-retrieval, the k members' retrieval as well).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragfolio.core.retrieval.base import RetrievalResult
from ragfolio.core.retrieval.executor import MemberResults, PortfolioExecutor
from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.query_features import Features
from ragfolio.core.routing.retrieval_features import RetrievalFeaturizer


@dataclass(frozen=True)
class OnlineRoute:
    """The routing of one query.

    Attributes:
        members: Member indices to answer from, best first, ``(l,)``.
        route_ms: Features and routing, first-stage rankings included (post-retrieval: the k
            members' retrieval too), in milliseconds.
        results: Post-retrieval: every member's results (they ran before routing); None before retrieval.
        scores: The router's score of each routed member, aligned with ``members``.
    """

    members: list[int]
    route_ms: float
    results: MemberResults | None
    scores: list[float] = field(default_factory=list)


def routes_on_retrieval(router: RouterProtocol) -> bool:
    """Whether ``router`` reads the retrieval (first-stage rankings or member results), so that it
    routes through :class:`OnlineRetrievalRouting` rather than from query features alone."""
    return "first_stage" in getattr(router, "query_blocks", ()) or bool(getattr(router, "reads_results", False))


class OnlineRetrievalRouting:
    """A fitted ``pre_retrieval`` or ``post_retrieval`` router over a portfolio's executor.

    Args:
        router: The fitted router (its ``query_blocks`` other than ``first_stage`` come from
            ``query_features``).
        executor: Runs the portfolio's members on the runner whose rankings feed the features.
        featurizer: The retrieval featurizer router training used (its encoders and depths).
        query_features: The query-only feature blocks of a batch of queries, for routers that
            also read them; None when the router reads ``first_stage`` only.
    """

    def __init__(
        self,
        router: RouterProtocol,
        executor: PortfolioExecutor,
        featurizer: RetrievalFeaturizer,
        query_features: Callable[[list[str]], Features] | None = None,
    ) -> None:
        if len(router.members_) != len(executor.members):
            raise ValueError(f"a router over {len(router.members_)} members for {len(executor.members)} members")
        self.router, self.executor, self.featurizer = router, executor, featurizer
        self.query_features = query_features
        self.reads_results = bool(getattr(router, "reads_results", False))

    @property
    def k(self) -> int:
        return len(self.executor.members)

    def _inputs(self, query: str, results: MemberResults | None) -> RouteInputs:
        runner = self.executor.runner
        bases = self.featurizer.fetch_bases(runner, [query])
        graph = runner.graph()
        blocks: Features = {}
        extra = [b for b in getattr(self.router, "query_blocks", ["first_stage"]) if b != "first_stage"]
        if extra:
            if self.query_features is None:
                raise ValueError(f"the router reads query blocks {extra}; pass query_features")
            blocks.update(self.query_features([query]))
        blocks["first_stage"] = self.featurizer.first_stage([query], bases, runner.titles, graph)
        if results is None:
            return RouteInputs(blocks)
        lists = [_as_result(run.doc_ids, run.scores, self.featurizer.num_docs) for run in results.runs]
        members = self.featurizer.members([query], lists, bases, runner.titles, graph)
        return RouteInputs(blocks, {"members": members})

    def route(self, query: str, l: int) -> OnlineRoute:
        """Route ``query`` to ``min(l, k)`` members; post-retrieval runs all k members first."""
        start = time.perf_counter()
        results = self.executor.run(query, list(range(self.k))) if self.reads_results else None
        picks, scores = self.router.route(self._inputs(query, results), min(l, self.k))
        members = [int(j) for j in picks[0]]
        return OnlineRoute(members, 1000 * (time.perf_counter() - start), results, [float(scores[0][j]) for j in members])


def _as_result(doc_ids: Sequence[int], scores: Sequence[float], num_docs: int) -> RetrievalResult:
    """A member's one-query list as a ``(1, num_docs)`` result (a failed member: an empty list)."""
    ids = np.full((1, num_docs), -1, dtype=np.int64)
    out = np.full((1, num_docs), -np.inf, dtype=np.float32)
    n = min(len(doc_ids), num_docs)
    ids[0, :n], out[0, :n] = list(doc_ids)[:n], list(scores)[:n]
    return RetrievalResult(ids, out)
