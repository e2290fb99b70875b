"""The routers that see the retrieval, routing a batch of queries (or one) at answer time.

Router training computes the retrieval features of whole query blocks from cached rankings
(:mod:`ragfolio.core.routing.features.retrieval_features`); a question being answered has no cached
ranking, so :class:`OnlineRetrievalRouting` computes its features from the runner it retrieves
with, as a service would:

* ``pre_retrieval``: the first-stage rankings (``bm25`` and ``dense:<encoder>``, ``prefilter_depth``
  deep) and the passage graph (a corpus part, built once), then the first-stage features; the
  router picks l members and only those run. The first-stage rankings are the ones the members
  build on, so the members reuse them (within the query's own caches).
* ``post_retrieval``: the same, and every one of the k members runs (concurrently) so that each
  member's result list can be featurised; the router picks whose l lists go to the LLM. A member
  that failed or timed out has nothing to give: it is ranked after every member that ran, in the
  router's order, so it is picked only when fewer than l members ran.
* ``cascade`` (reads ``shortlist``): the first-stage features, then the router's ``shortlist``
  (:meth:`~ragfolio.core.routing.routers.cascade.CascadeRouter.shortlist`: m members per query);
  only those run, their lists are featurised (a member that did not run has an empty list, which
  the router does not read) and the router picks among them as post-retrieval, the members that
  did not run after those that did and failed ones last. Routed to more members than ran, the
  picks that did not run run then, in one more call for the batch. ``OnlineRoute.ran`` says which
  members ran for the query.

A batch (:meth:`OnlineRetrievalRouting.route_batch`) is routed together: one first-stage ranking
per base for the whole batch (one encoder call per encoder), post-retrieval every member once over
the batch (:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.run_batch`), the features of
all its queries in one featurizer call and one ``route`` (predict) call per distinct l. Each row is
featurised on its own, so a query is routed as it is alone. The time of each stage is returned
(:attr:`BatchRouting.stages_ms`).

Both are cheap next to an LLM call: a few milliseconds of ranking and feature arithmetic per query,
measured per query as ``route_ms`` (and, post-retrieval, the k members' retrieval as well).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.retrieval.running.member_executor import MemberResults, MemberRun, PortfolioExecutor
from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.features.list_judgements import ListJudge
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer

Bases = Mapping[str, RetrievalResult]  # the first-stage rankings by base name


@dataclass(frozen=True)
class OnlineRoute:
    """The routing of one query.

    Attributes:
        members: Member indices to answer from, best first, ``(l,)``.
        route_ms: Features and routing, first-stage rankings included (post-retrieval and cascade:
            the members' retrieval too), in milliseconds.
        results: Post-retrieval and cascade: one run per member of the portfolio, in its order (they
            ran before routing; cascade: a member that did not run has a run with an error saying
            so); None before retrieval.
        scores: The router's score of each routed member, aligned with ``members``.
        ran: The members that ran for the query (all k post-retrieval, the routed ones before
            retrieval, the shortlist and any pick beyond it for a cascade).
    """

    members: list[int]
    route_ms: float
    results: MemberResults | None
    scores: list[float] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class BatchRouting:
    """The routing of a batch of queries.

    Attributes:
        routes: One :class:`OnlineRoute` per query, in order (``route_ms`` is the batch's).
        stages_ms: Milliseconds per stage, for the whole batch: ``members`` (post-retrieval: the
            k members over the batch, shared parts included; cascade: the shortlisted ones and any
            picks beyond them), ``first_stage`` (the first-stage
            rankings, after the members' shared parts when they ran), ``features`` (query and
            retrieval features), ``predict`` (the router's ``route`` calls).
    """

    routes: list[OnlineRoute]
    stages_ms: dict[str, float]


def routes_on_retrieval(router: RouterProtocol) -> bool:
    """Whether ``router`` reads the retrieval (its ``reads``: the first-stage rankings, a shortlist's
    or every member's results), so that it routes through :class:`OnlineRetrievalRouting` rather
    than from query features alone."""
    return getattr(router, "reads", "query") in ("first_stage", "shortlist", "members")


NOT_RUN = "not run: outside the cascade's shortlist"  # the error of a member a cascade did not run


class OnlineRetrievalRouting:
    """A fitted ``pre_retrieval``, ``cascade`` or ``post_retrieval`` router over a portfolio's executor.

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
        self.reads = getattr(router, "reads", "query")
        self.reads_results = self.reads in ("shortlist", "members")  # the routing runs members and returns them

    @property
    def k(self) -> int:
        return len(self.executor.members)

    def _query_inputs(self, queries: list[str], stages: dict[str, float]) -> tuple[Features, Bases, PassageGraph | None]:
        """The query blocks of ``queries`` ``(n,)`` with ``first_stage`` ``(n, d_f)``, the first-stage
        rankings and the passage graph; records the ``first_stage`` and ``features`` times in ``stages``."""
        runner = self.executor.runner
        start = time.perf_counter()
        bases = self.featurizer.fetch_bases(runner, queries, self.executor.shared_pool())  # bases side by side
        graph = runner.graph()
        stages["first_stage"] = 1000 * (time.perf_counter() - start)
        start = time.perf_counter()
        blocks: Features = {}
        extra = [b for b in getattr(self.router, "query_blocks", ["first_stage"]) if b != "first_stage"]
        if extra:
            if self.query_features is None:
                raise ValueError(f"the router reads query blocks {extra}; pass query_features")
            blocks.update(self.query_features(queries))
        blocks["first_stage"] = self.featurizer.first_stage(queries, bases, runner.titles, graph)
        stages["features"] = 1000 * (time.perf_counter() - start)
        return blocks, bases, graph

    def _with_members(self, queries: list[str], blocks: Features, runs: Sequence[Mapping[int, MemberRun]],
                      bases: Bases, graph: PassageGraph | None, stages: dict[str, float]) -> RouteInputs:
        """``blocks`` and ``results["members"]`` ``(n, k, d_m)``, the features of each query's member
        ``runs`` (``{member: run}``; a member without a run has an empty list); adds to ``features``."""
        start = time.perf_counter()
        empty = MemberRun("", [], [], 0.0, NOT_RUN)
        lists = [_as_results([r.get(j, empty) for r in runs], self.featurizer.num_docs) for j in range(self.k)]
        runner = self.executor.runner
        members = self.featurizer.members(queries, lists, bases, runner.titles, graph, ListJudge(runner))
        stages["features"] += 1000 * (time.perf_counter() - start)
        return RouteInputs(blocks, {"members": members})

    def route(self, query: str, l: int) -> OnlineRoute:
        """Route ``query`` to ``min(l, k)`` members; post-retrieval runs all k members first, a cascade its shortlist."""
        return self.route_batch([query], [l]).routes[0]

    def route_batch(self, queries: Sequence[str], ls: Sequence[int]) -> BatchRouting:
        """Route each ``queries[i]`` to ``min(ls[i], k)`` members, the batch together (module docstring).

        Args:
            queries: The questions, ``(n,)``, n >= 1.
            ls: Members to route each to, ``(n,)``.

        Returns:
            The routes, in order, and the time of each stage.
        """
        if not queries or len(queries) != len(ls):
            raise ValueError(f"{len(queries)} queries and {len(ls)} values of l: need as many, at least one")
        queries = list(queries)
        capped = [min(int(l), self.k) for l in ls]
        if self.reads == "shortlist":
            return self._cascade_batch(queries, capped)
        start = time.perf_counter()
        stages: dict[str, float] = {}
        results = None
        if self.reads_results:
            results = self.executor.run_batch(queries, [list(range(self.k))] * len(queries))
            stages["members"] = 1000 * (time.perf_counter() - start)
        blocks, bases, graph = self._query_inputs(queries, stages)
        inputs = RouteInputs(blocks) if results is None else self._with_members(
            queries, blocks, [dict(enumerate(r.runs)) for r in results], bases, graph, stages)
        begin = time.perf_counter()
        picks: list[list[int]] = [[] for _ in queries]
        scores: list[list[float]] = [[] for _ in queries]
        if results is not None:  # one full ranking; members that did not run go last
            chosen, all_scores = self.router.route(inputs, self.k)
            for i, result in enumerate(results):
                ran = [int(j) for j in chosen[i] if result.runs[j].ok]
                picks[i] = (ran + [int(j) for j in chosen[i] if not result.runs[j].ok])[: capped[i]]
                scores[i] = [float(all_scores[i][j]) for j in picks[i]]
        else:
            for l in sorted(set(capped)):  # noqa: E741 - one predict call per distinct l (usually one)
                chosen, all_scores = self.router.route(inputs, l)
                for i in (i for i, li in enumerate(capped) if li == l):
                    picks[i] = [int(j) for j in chosen[i]]
                    scores[i] = [float(all_scores[i][j]) for j in picks[i]]
        stages["predict"] = 1000 * (time.perf_counter() - begin)
        route_ms = 1000 * (time.perf_counter() - start)
        routes = [OnlineRoute(picks[i], route_ms, None if results is None else results[i], scores[i],
                              picks[i] if results is None else list(range(self.k)))
                  for i in range(len(queries))]
        return BatchRouting(routes, stages)

    def _cascade_batch(self, queries: list[str], capped: list[int]) -> BatchRouting:
        """A cascade's :meth:`route_batch`: first stage, shortlist, its members, their features, one
        ``route`` call, then the picks that did not run (module docstring)."""
        start = time.perf_counter()
        stages: dict[str, float] = {}
        blocks, bases, graph = self._query_inputs(queries, stages)
        short = self.router.shortlist(RouteInputs(blocks))  # type: ignore[attr-defined]
        begin = time.perf_counter()
        first = self.executor.run_batch(queries, [[int(j) for j in row] for row in short])
        stages["members"] = 1000 * (time.perf_counter() - begin)
        runs = [dict(zip((int(j) for j in row), r.runs, strict=True)) for row, r in zip(short, first, strict=True)]
        inputs = self._with_members(queries, blocks, runs, bases, graph, stages)
        begin = time.perf_counter()
        chosen, all_scores = self.router.route(inputs, self.k)
        picks = []
        for i, row in enumerate(chosen):  # those that ran, those that did not, those that failed
            order = [int(j) for j in row]
            ok = [j for j in order if j in runs[i] and runs[i][j].ok]
            failed = [j for j in order if j in runs[i] and not runs[i][j].ok]
            picks.append((ok + [j for j in order if j not in runs[i]] + failed)[: capped[i]])
        stages["predict"] = 1000 * (time.perf_counter() - begin)
        shared_ms, latency_ms = [r.shared_ms for r in first], [r.latency_ms for r in first]
        beyond = {i: missing for i, p in enumerate(picks) if (missing := [j for j in p if j not in runs[i]])}
        if beyond:  # routed to more members than ran
            begin = time.perf_counter()
            more = self.executor.run_batch([queries[i] for i in beyond], list(beyond.values()))
            for (i, missing), result in zip(beyond.items(), more, strict=True):
                runs[i].update(zip(missing, result.runs, strict=True))
                shared_ms[i], latency_ms[i] = shared_ms[i] + result.shared_ms, latency_ms[i] + result.latency_ms
            stages["members"] += 1000 * (time.perf_counter() - begin)
        route_ms = 1000 * (time.perf_counter() - start)
        names = [m.name for m in self.executor.members]
        routes = [
            OnlineRoute(picks[i], route_ms,
                        MemberResults(q, [runs[i].get(j, MemberRun(names[j], [], [], 0.0, NOT_RUN)) for j in range(self.k)],
                                      shared_ms[i], latency_ms[i]),
                        [float(all_scores[i][j]) for j in picks[i]], sorted(runs[i]))
            for i, q in enumerate(queries)
        ]
        return BatchRouting(routes, stages)


def _as_results(runs: Sequence[MemberRun], num_docs: int) -> RetrievalResult:
    """One member's runs of n queries as an ``(n, num_docs)`` result (a failed run: an empty list)."""
    ids = np.full((len(runs), num_docs), -1, dtype=np.int64)
    out = np.full((len(runs), num_docs), -np.inf, dtype=np.float32)
    for row, run in enumerate(runs):
        n = min(len(run.doc_ids), num_docs)
        ids[row, :n], out[row, :n] = list(run.doc_ids)[:n], list(run.scores)[:n]
    return RetrievalResult(ids, out)
