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
  picks that did not run are left in the plan for the executor to run.

Routing returns a plan per query (:class:`~ragfolio.core.retrieval.running.member_executor.MemberPlan`:
the routed members at the runner's depth, with the runs routing made, ``ran``), and the caller has
the executor run it
(:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.run_plans`): the members
routing ran are not run again, the others run then (before retrieval: all of them).

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
from ragfolio.core.retrieval.running.member_executor import MemberPlan, MemberRun, PortfolioExecutor
from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.features.list_judgements import ListJudge
from ragfolio.core.routing.features.query_features import Features
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer

Bases = Mapping[str, RetrievalResult]  # the first-stage rankings by base name


@dataclass(frozen=True)
class OnlineRoute:
    """The routing of one query.

    Attributes:
        plan: The members to answer from, best first, ``(l,)``, at the runner's depth, with the
            runs routing made (``plan.ran``: all k post-retrieval, a cascade's shortlist, none
            before retrieval) and their time.
        route_ms: Features and routing, first-stage rankings included (post-retrieval and cascade:
            the runs of ``plan.ran`` too), in milliseconds.
        scores: The router's score of each routed member, aligned with ``plan.members``.
    """

    plan: MemberPlan
    route_ms: float
    scores: list[float] = field(default_factory=list)

    @property
    def members(self) -> list[int]:
        """Member indices to answer from, best first, ``(l,)``."""
        return self.plan.members


@dataclass(frozen=True)
class BatchRouting:
    """The routing of a batch of queries.

    Attributes:
        routes: One :class:`OnlineRoute` per query, in order (``route_ms`` is the batch's).
        stages_ms: Milliseconds per stage, for the whole batch: ``members`` (post-retrieval: the
            k members over the batch, shared parts included; cascade: the shortlisted ones),
            ``first_stage`` (the first-stage
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

    def route(self, query: str, l: int) -> OnlineRoute:  # noqa: E741
        """Route ``query`` to ``min(l, k)`` members; post-retrieval runs all k members first, a cascade its shortlist."""
        return self.route_batch([query], [l]).routes[0]

    def route_batch(self, queries: Sequence[str], ls: Sequence[int]) -> BatchRouting:
        """Route each ``queries[i]`` to ``min(ls[i], k)`` members, the batch together (module docstring).

        Args:
            queries: The questions, ``(n,)``, n >= 1.
            ls: Members to route each to, ``(n,)``.

        Returns:
            The routes (each with its plan, for the executor to run), in order, and the time of each stage.
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
        route_ms, depth = 1000 * (time.perf_counter() - start), self.executor.runner.num_docs
        plans = [MemberPlan(q, picks[i], depth) if results is None else
                 MemberPlan(q, picks[i], depth, dict(enumerate(results[i].runs)), results[i].shared_ms, results[i].latency_ms)
                 for i, q in enumerate(queries)]
        return BatchRouting([OnlineRoute(plan, route_ms, scores[i]) for i, plan in enumerate(plans)], stages)

    def _cascade_batch(self, queries: list[str], capped: list[int]) -> BatchRouting:
        """A cascade's :meth:`route_batch`: first stage, shortlist, its members, their features, one
        ``route`` call (module docstring)."""
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
        route_ms, depth = 1000 * (time.perf_counter() - start), self.executor.runner.num_docs
        routes = [  # picks beyond the shortlist (routed to more members than ran) are the plan's to run
            OnlineRoute(MemberPlan(q, picks[i], depth, runs[i], first[i].shared_ms, first[i].latency_ms), route_ms,
                        [float(all_scores[i][j]) for j in picks[i]])
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
