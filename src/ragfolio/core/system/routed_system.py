"""The served system's retrieval: route a batch of requests -> run each query's top-l members concurrently.

:class:`RoutedSystem` ties together the router (:mod:`ragfolio.core.routing.routers.learned`, or any
registered kind; :mod:`ragfolio.core.routing.online` for those that read the retrieval) and the
concurrent member execution (:mod:`ragfolio.core.retrieval.running.member_executor`). It is what
``/retrieve`` and the MLflow model serve, and what :class:`~ragfolio.core.answering.adaptive_rag.AdaptiveRAG`
answers from; it imports no LLM. Latency is recorded per stage, so a caller can report it per query.

A request goes one way: it comes resolved (:class:`~ragfolio.core.system.request.RetrievalRequest`:
query, l, depth), routing turns each into a plan (:class:`~ragfolio.core.retrieval.running.member_executor.MemberPlan`:
the members, at the request's depth, with the runs routing made), and the executor runs the plans
(:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.run_plans`). A request is
routed at the bundle's ``num_docs``, the depth the router was trained at (a post-retrieval router
sees the k members' lists at that depth), whatever its own depth; its members then run at its
depth, reusing the runs routing made when the two are the same.

Where routing was not shown to help (the bundle's ``routed_ls``, router training's do-no-harm
rule), a request for l members is not routed: the single best member alone returns ``l * depth``
passages (at most ``prefilter_depth``), the same passages' worth, and its
:class:`RoutedRetrieval` says ``routed=False``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running.member_executor import MemberPlan, MemberResults, PortfolioExecutor
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.features.query_features import Features, TextHasher, query_features
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings
from ragfolio.core.routing.online import OnlineRetrievalRouting, routes_on_retrieval
from ragfolio.core.system.request import RequestRules, RetrievalRequest

if TYPE_CHECKING:
    from ragfolio.core.bundle import PortfolioBundle


@dataclass(frozen=True)
class RoutedRetrieval:
    """The routed members' passages for one query.

    Attributes:
        members: Routed member indices into the portfolio, best first, ``(l,)``.
        router_scores: The router's score of each routed member, aligned with ``members``.
        results: What each member returned (failed or timed-out members carry their error).
        route_ms: Time to build the query's features and score the members, in milliseconds (in a
            batch, the batch's; post-retrieval, without the k members' run, which ``results`` times).
        stages_ms: The routing's stages, in milliseconds for the whole batch the query came in:
            ``features`` and ``predict`` for every router, ``first_stage`` for the routers that see the
            retrieval, ``members`` (the k members' run) post-retrieval.
        batch_size: Queries in the batch it was routed and retrieved with.
        routed: False when the router does not route at this l (see the module docstring): the
            single best member alone returned ``l * depth`` passages.
    """

    members: list[int]
    router_scores: list[float]
    results: MemberResults
    route_ms: float
    stages_ms: dict[str, float] = field(default_factory=dict)
    batch_size: int = 1
    routed: bool = True

    @property
    def latency_ms(self) -> float:
        return self.route_ms + self.results.latency_ms


@dataclass(frozen=True)
class _Routed:
    """A request's routing: the plan the executor runs, and what its :class:`RoutedRetrieval` says of it."""

    plan: MemberPlan
    scores: list[float]
    route_ms: float  # without the runs the plan reuses (their time is the results')
    stages_ms: dict[str, float]
    batch_size: int
    routed: bool = True

    def retrieval(self, results: MemberResults) -> RoutedRetrieval:
        return RoutedRetrieval(self.plan.members, self.scores, results, self.route_ms, self.stages_ms,
                               self.batch_size, self.routed)


class RoutedSystem:
    """A trained portfolio and router over one corpus, routing and retrieving a batch of requests (or one).

    Args:
        runner: The pool runner over the corpus (a disabled disk cache for online use).
        members: The portfolio's members, in the router's member order.
        router: The fitted router over those members (any registered kind that reads query features).
        hasher: The text features the router was trained with.
        encoders: Encoders whose query embeddings the router reads (block names of its features).
        timeout_s: Per-member deadline of a retrieval.
        retrieval_features: The retrieval featurizer's settings (``encoders``, ``agreement_depth``),
            needed when ``router`` reads the retrieval (``pre_retrieval``: the first-stage rankings;
            ``post_retrieval``, ``cascade``: all k members', or its shortlist's, results: they run first).
        routed_ls: The l's at which the router routes; any other l is served by member
            ``single_best`` alone. None: every l is routed.
        wide_ls: The unrouted l's at which ``single_best`` gives ``l * depth`` passages; at any
            other unrouted l it gives ``depth``. None: every unrouted l is wide.
        single_best: The member with the best train mean (index into ``members``).
    """

    def __init__(
        self,
        runner: PoolRunner,
        members: Sequence[CandidateSpec],
        router: RouterProtocol,
        hasher: TextHasher,
        encoders: Sequence[str],
        *,
        timeout_s: float = 5.0,
        retrieval_features: RetrievalFeatureSettings | None = None,
        routed_ls: Collection[int] | None = None,
        wide_ls: Collection[int] | None = None,
        single_best: int = 0,
    ) -> None:
        if len(members) != len(router.members_):
            raise ValueError(f"{len(members)} members for a router over {len(router.members_)}")
        if not 0 <= single_best < len(members):
            raise ValueError(f"single_best={single_best} is not a member index (0..{len(members) - 1})")
        self.runner, self.members, self.router = runner, list(members), router
        self.routed_ls = None if routed_ls is None else frozenset(int(l) for l in routed_ls)
        self.wide_ls = None if wide_ls is None else frozenset(int(l) for l in wide_ls)
        self.single_best, self.timeout_s = single_best, timeout_s
        self.hasher, self.encoders = hasher, list(encoders)
        self.executor = PortfolioExecutor(runner, self.members, timeout_s=timeout_s)
        self.retrieval_features = retrieval_features
        self.online: OnlineRetrievalRouting | None = None
        if routes_on_retrieval(router):
            if retrieval_features is None:
                raise ValueError(f"the {router.name} router reads the retrieval: pass retrieval_features "
                                 "(the featurizer router training used, router_features.retrieval_features)")
            featurizer = retrieval_features.featurizer(runner.num_docs)
            self.online = OnlineRetrievalRouting(router, self.executor, featurizer, self.features)

    @classmethod
    def from_bundle(
        cls, bundle: PortfolioBundle, *, timeout_s: float = 5.0, num_docs: int | None = None
    ) -> RoutedSystem:
        """The bundle's portfolio and router, ready to route and retrieve.

        Corpus parts (indexes, the passage graph) are built on the first query; call
        ``system.runner.prepare(bundle.members, ["warm-up"])`` to build them up front.
        """
        return cls(
            bundle.runner(num_docs=num_docs), bundle.members, bundle.router,
            bundle.routing.text_features, bundle.routing.encoders,
            timeout_s=timeout_s, retrieval_features=bundle.routing.retrieval_features,
            routed_ls=bundle.routed_ls, wide_ls=bundle.wide_ls, single_best=bundle.single_best,
        )

    def with_router(self, router: RouterProtocol) -> RoutedSystem:
        """The same portfolio, runner and deadline routed by ``router`` (over the same members, in
        order) at every l: the served system's ``routed_ls`` were chosen for its own router. A router
        that reads the retrieval gets the same featurizer; its own executor (close it). (Another depth
        needs no other system: each request carries its own, :class:`~ragfolio.core.system.request.RetrievalRequest`.)"""
        return RoutedSystem(
            self.runner, self.members, router, self.hasher, self.encoders, timeout_s=self.timeout_s,
            retrieval_features=self.retrieval_features, single_best=self.single_best,
        )

    def over(self, runner: PoolRunner) -> RoutedSystem:
        """The same portfolio, router and settings over ``runner`` (a view of this system's corpus,
        :func:`~ragfolio.core.retrieval.running.view_runner.runner_over`); its own executor (close it)."""
        return RoutedSystem(
            runner, self.members, self.router, self.hasher, self.encoders, timeout_s=self.timeout_s,
            retrieval_features=self.retrieval_features, routed_ls=self.routed_ls, wide_ls=self.wide_ls,
            single_best=self.single_best,
        )

    @property
    def k(self) -> int:
        return len(self.members)

    @property
    def depth(self) -> int:
        """Passages per member of the runner, the depth requests are routed at (the bundle's ``num_docs``)."""
        return self.runner.num_docs

    def rules(self, default_l: int) -> RequestRules:
        """How an edge resolves a request to this system: ``default_l`` members and :attr:`depth`
        passages each unless it says, l in 1..k, depth in 1..``prefilter_depth``."""
        return RequestRules(default_l, self.depth, self.k, self.runner.prefilter_depth)

    def warm_up(self, query: str = "warm-up") -> RoutedRetrieval:
        """Build every corpus part: ``query`` routed to all k members, whatever ``routed_ls`` says."""
        routed = self._route([RetrievalRequest(query, self.k, self.depth)])[0]
        return routed.retrieval(self.executor.run_plans([routed.plan])[0])

    def routes_at(self, l: int) -> bool:  # noqa: E741 - members per query
        """Whether a request for ``l`` members is routed (else the single best member serves it)."""
        return self.routed_ls is None or l in self.routed_ls

    def unrouted_depth(self, l: int, depth: int) -> int:  # noqa: E741
        """Passages the single best member returns for an unrouted request of ``l`` members at
        ``depth``: ``l * depth`` where the prompt is wide (:attr:`wide_ls`), else ``depth``."""
        wide = self.wide_ls is None or l in self.wide_ls
        return min((l if wide else 1) * depth, self.runner.prefilter_depth)

    def features(self, queries: Sequence[str]) -> Features:
        """The router's input for ``queries`` (query embeddings are shared with the members; the
        encoders run side by side in the executor's shared pool)."""
        pool, texts = self.executor.shared_pool(), list(queries)
        futures = {name: pool.submit(self.runner.query_embeddings, name, texts) for name in self.encoders}
        embeddings = {name: future.result() for name, future in futures.items()}
        return query_features(list(queries), embeddings, self.hasher)

    def route(self, query: str, l: int) -> tuple[list[int], list[float], float]:  # noqa: E741
        """``(member indices, their scores, milliseconds)`` of the top-l routing of ``query``.

        A router that reads the retrieval computes its features from the first-stage rankings
        (which the routed members then reuse); a post-retrieval router runs all k members first,
        and their time is part of the routing's.
        """
        if not self.routes_at(l):
            return [self.single_best], [float("nan")], 0.0
        if self.online is not None:
            routed = self.online.route(query, l)
            return routed.members, routed.scores, routed.route_ms
        by_query = self._route([RetrievalRequest(query, l, self.depth)])[0]
        return by_query.plan.members, by_query.scores, by_query.route_ms

    def retrieve(self, request: RetrievalRequest, *, members: Sequence[int] | None = None) -> RoutedRetrieval:
        """Route ``request`` to its l members (or use the given ``members``) and run them concurrently.

        A batch of one (:meth:`retrieve_batch`). Post-retrieval, the routed members' results are
        those the router saw (nothing runs twice): ``route_ms`` is then the features and routing,
        and the results' latency the k members' run.
        """
        if members is not None:
            chosen = list(members)
            results = self.executor.run_plans([MemberPlan(request.query, chosen, request.depth)])[0]
            return RoutedRetrieval(chosen, [float("nan")] * len(chosen), results, 0.0)
        return self.retrieve_batch([request])[0]

    def retrieve_batch(self, requests: Sequence[RetrievalRequest]) -> list[RoutedRetrieval]:
        """Route each request to its l members and run them at its depth, the whole batch together.

        Every router is batched: the query features (one encoder call per encoder) or, for a router
        that sees the retrieval, the first-stage rankings of the batch are computed once, the
        features of all queries in one featurizer call, the router's ``route`` once per distinct l.
        The plans are then run together
        (:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.run_plans`): each
        member chosen by any query at a depth runs once over those queries. Post-retrieval, all k
        members run over the batch before routing, and each query at the routing's depth keeps its
        routed members' runs. A query is routed and retrieved as it would be alone (each row is
        featurised and ranked on its own).

        Args:
            requests: The resolved requests (:meth:`rules`), ``(n,)``, n >= 1.

        Returns:
            One :class:`RoutedRetrieval` per request, in order; ``stages_ms`` and ``route_ms`` are the batch's.
        """
        if not requests:
            raise ValueError("no requests: pass at least one")
        routes = [self.routes_at(request.l) for request in requests]
        routed = [i for i, yes in enumerate(routes) if yes]
        plans = dict(zip(routed, self._route([requests[i] for i in routed]), strict=True)) if routed else {}
        alike = Counter((r.l, r.depth) for r, yes in zip(requests, routes, strict=True) if not yes)  # a batch each
        for i, request in enumerate(requests):  # unrouted: the single best member, l x depth passages
            if i not in plans:
                plan = MemberPlan(request.query, [self.single_best], self.unrouted_depth(request.l, request.depth))
                plans[i] = _Routed(plan, [float("nan")], 0.0, {}, alike[request.l, request.depth], routed=False)
        ordered = [plans[i] for i in range(len(requests))]
        results = self.executor.run_plans([p.plan for p in ordered])
        return [p.retrieval(r) for p, r in zip(ordered, results, strict=True)]

    def _route(self, requests: Sequence[RetrievalRequest]) -> list[_Routed]:
        """The routings of requests whose l the router routes: routed together at :attr:`depth`, each
        planned at its own depth."""
        queries, ls, n = [r.query for r in requests], [r.l for r in requests], len(requests)
        if self.online is None:  # a query-only router
            start = time.perf_counter()
            features = self.features(queries)  # one encoder call per encoder, for the batch
            begin = time.perf_counter()
            inputs = RouteInputs(features)
            picks: list[list[int]] = [[] for _ in ls]
            scores: list[list[float]] = [[] for _ in ls]
            for l in sorted(set(ls)):  # noqa: E741 - one forward pass per distinct l (usually one)
                chosen, all_scores = self.router.route(inputs, l)
                for i in (i for i, li in enumerate(ls) if li == l):
                    picks[i] = [int(j) for j in chosen[i]]
                    scores[i] = [float(all_scores[i][j]) for j in picks[i]]
            stages = {"features": 1000 * (begin - start), "predict": 1000 * (time.perf_counter() - begin)}
            return [_Routed(MemberPlan(r.query, picks[i], r.depth), scores[i], stages["features"] + stages["predict"],
                            stages, n) for i, r in enumerate(requests)]
        batch = self.online.route_batch(queries, ls)
        stages = dict(batch.stages_ms)
        out = []
        for request, route in zip(requests, batch.routes, strict=True):
            plan = route.plan.at(request.depth)  # the runs routing made are reused at their own depth
            out.append(_Routed(plan, route.scores, max(0.0, route.route_ms - plan.latency_ms), stages, n))
        return out

    def passages(self, doc_ids: Sequence[int]) -> list[tuple[str, str]]:
        """``(title, text)`` of corpus rows."""
        return [(self.runner.titles[i], self.runner.texts[i]) for i in doc_ids]

    def close(self) -> None:
        self.executor.close()
