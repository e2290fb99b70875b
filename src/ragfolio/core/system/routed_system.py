"""The served system's retrieval: route a batch of queries -> run each query's top-l members concurrently.

:class:`RoutedSystem` ties together the router (:mod:`ragfolio.core.routing.routers.learned`, or any
registered kind; :mod:`ragfolio.core.routing.online` for those that read the retrieval) and the
concurrent member execution (:mod:`ragfolio.core.retrieval.running.member_executor`). It is what
``/retrieve`` and the MLflow model serve, and what :class:`~ragfolio.core.answering.adaptive_rag.AdaptiveRAG`
answers from; it imports no LLM. Latency is recorded per stage, so a caller can report it per query.

Where routing was not shown to help (the bundle's ``routed_ls``, router training's do-no-harm
rule), a request for l members is not routed: the single best member alone returns ``l * num_docs``
passages (at most ``prefilter_depth``), the same passages' worth, and its
:class:`RoutedRetrieval` says ``routed=False``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running.member_executor import MemberResults, PortfolioExecutor
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.features.query_features import Features, TextHasher, query_features
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings
from ragfolio.core.routing.online import OnlineRetrievalRouting, routes_on_retrieval
from ragfolio.core.system.runner_depth import runner_at_depth

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
            single best member alone returned ``l * num_docs`` passages.
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


class RoutedSystem:
    """A trained portfolio and router over one corpus, routing and retrieving a batch of queries (or one).

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
            ``single_best`` alone at ``l * num_docs`` passages. None: every l is routed.
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
        single_best: int = 0,
    ) -> None:
        if len(members) != len(router.members_):
            raise ValueError(f"{len(members)} members for a router over {len(router.members_)}")
        if not 0 <= single_best < len(members):
            raise ValueError(f"single_best={single_best} is not a member index (0..{len(members) - 1})")
        self.runner, self.members, self.router = runner, list(members), router
        self.routed_ls = None if routed_ls is None else frozenset(int(l) for l in routed_ls)
        self.single_best, self.timeout_s = single_best, timeout_s
        self._deeper: dict[int, PortfolioExecutor] = {}  # the single best member's runs at l * num_docs
        self._deeper_lock = threading.Lock()
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
            routed_ls=bundle.routed_ls, single_best=bundle.single_best,
        )

    def at_depth(self, num_docs: int) -> RoutedSystem:
        """This system with each member returning ``num_docs`` passages: the same portfolio, router,
        deadline and routed l's over a view of the runner that shares every corpus and query part
        (:func:`~ragfolio.core.system.runner_depth.runner_at_depth`); its own executor (close it)."""
        return RoutedSystem(
            runner_at_depth(self.runner, num_docs), self.members, self.router, self.hasher, self.encoders,
            timeout_s=self.timeout_s, retrieval_features=self.retrieval_features, routed_ls=self.routed_ls,
            single_best=self.single_best,
        )

    def with_router(self, router: RouterProtocol) -> RoutedSystem:
        """The same portfolio, runner and deadline routed by ``router`` (over the same members, in
        order) at every l: the served system's ``routed_ls`` were chosen for its own router. A router
        that reads the retrieval gets the same featurizer; its own executor (close it)."""
        return RoutedSystem(
            self.runner, self.members, router, self.hasher, self.encoders, timeout_s=self.timeout_s,
            retrieval_features=self.retrieval_features, single_best=self.single_best,
        )

    @property
    def k(self) -> int:
        return len(self.members)

    def warm_up(self, query: str = "warm-up") -> RoutedRetrieval:
        """Build every corpus part: ``query`` routed to all k members, whatever ``routed_ls`` says."""
        return self._routed_batch([query], [self.k])[0]

    def routes_at(self, l: int) -> bool:  # noqa: E741 - members per query
        """Whether a request for ``l`` members is routed (else the single best member serves it)."""
        return self.routed_ls is None or l in self.routed_ls

    def unrouted_depth(self, l: int) -> int:  # noqa: E741
        """Passages the single best member returns for an unrouted request of ``l`` members."""
        return min(l * self.runner.num_docs, self.runner.prefilter_depth)

    def features(self, queries: Sequence[str]) -> Features:
        """The router's input for ``queries`` (query embeddings are shared with the members; the
        encoders run side by side in the executor's shared pool)."""
        pool, texts = self.executor.shared_pool(), list(queries)
        futures = {name: pool.submit(self.runner.query_embeddings, name, texts) for name in self.encoders}
        embeddings = {name: future.result() for name, future in futures.items()}
        return query_features(list(queries), embeddings, self.hasher)

    def route(self, query: str, l: int) -> tuple[list[int], list[float], float]:
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
        start = time.perf_counter()
        picks, scores, _ = self._route_by_query(self.features([query]), [l])
        return picks[0], scores[0], 1000 * (time.perf_counter() - start)

    def _route_by_query(
        self, features: Features, ls: Sequence[int]
    ) -> tuple[list[list[int]], list[list[float]], float]:
        """A query-only router's ``(picks, scores, predict ms)`` for each row of ``features`` (one
        ``route`` call per distinct l)."""
        start = time.perf_counter()
        inputs = RouteInputs(features)
        picks: list[list[int]] = [[] for _ in ls]
        scores: list[list[float]] = [[] for _ in ls]
        for l in sorted(set(ls)):  # noqa: E741 - one forward pass per distinct l (usually one)
            chosen, all_scores = self.router.route(inputs, l)
            for i in (i for i, li in enumerate(ls) if li == l):
                picks[i] = [int(j) for j in chosen[i]]
                scores[i] = [float(all_scores[i][j]) for j in picks[i]]
        return picks, scores, 1000 * (time.perf_counter() - start)

    def retrieve(self, query: str, l: int, *, members: Sequence[int] | None = None) -> RoutedRetrieval:
        """Route ``query`` to l members (or use the given ``members``) and run them concurrently.

        A batch of one (:meth:`retrieve_batch`). Post-retrieval, the routed members' results are
        those the router saw (nothing runs twice): ``route_ms`` is then the features and routing,
        and the results' latency the k members' run.
        """
        if members is not None:
            chosen = list(members)
            return RoutedRetrieval(chosen, [float("nan")] * len(chosen), self.executor.run(query, chosen), 0.0)
        return self.retrieve_batch([query], [l])[0]

    def retrieve_batch(self, queries: Sequence[str], ls: Sequence[int]) -> list[RoutedRetrieval]:
        """Route each ``queries[i]`` to ``ls[i]`` members and run them, the whole batch together.

        Every router is batched: the query features (one encoder call per encoder) or, for a router
        that sees the retrieval, the first-stage rankings of the batch are computed once, the
        features of all queries in one featurizer call, the router's ``route`` once per distinct l;
        then each member chosen by any query runs once over the batch
        (:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.run_batch`). Post-retrieval, all k
        members run over the batch before routing, and each query keeps its routed members' runs.
        A query is routed and retrieved as it would be alone (each row is featurised and ranked on
        its own).

        Args:
            queries: The questions, ``(n,)``, n >= 1.
            ls: Members per query, ``(n,)``, each in 1..k.

        Returns:
            One :class:`RoutedRetrieval` per query, in order; ``stages_ms`` and ``route_ms`` are the batch's.
        """
        if not queries or len(queries) != len(ls):
            raise ValueError(f"{len(queries)} queries and {len(ls)} values of l: need as many, at least one")
        queries, ls = list(queries), [int(l) for l in ls]
        if all(self.routes_at(l) for l in ls):
            return self._routed_batch(queries, ls)
        out: dict[int, RoutedRetrieval] = {}
        groups = {l: [i for i, li in enumerate(ls) if li == l] for l in dict.fromkeys(ls)}
        routed = [i for l, rows in groups.items() if self.routes_at(l) for i in rows]
        if routed:
            out.update(zip(routed, self._routed_batch([queries[i] for i in routed], [ls[i] for i in routed]),
                           strict=True))
        for l, rows in groups.items():  # noqa: E741
            if not self.routes_at(l):
                out.update(zip(rows, self._single_best_batch([queries[i] for i in rows], l), strict=True))
        return [out[i] for i in range(len(queries))]

    def _single_best_batch(self, queries: list[str], l: int) -> list[RoutedRetrieval]:  # noqa: E741
        """The single best member alone, :meth:`unrouted_depth` passages per query (an unrouted l)."""
        depth = self.unrouted_depth(l)
        with self._deeper_lock:
            if (executor := self._deeper.get(depth)) is None:
                executor = self._deeper[depth] = PortfolioExecutor(
                    runner_at_depth(self.runner, depth), self.members, timeout_s=self.timeout_s)
        runs = executor.run_batch(queries, [[self.single_best]] * len(queries))
        return [RoutedRetrieval([self.single_best], [float("nan")], run, 0.0, {}, len(queries), routed=False)
                for run in runs]

    def _routed_batch(self, queries: list[str], ls: list[int]) -> list[RoutedRetrieval]:
        """:meth:`retrieve_batch` of queries whose every l is routed."""
        n = len(queries)
        if self.online is None:
            start = time.perf_counter()
            features = self.features(queries)  # one encoder call per encoder, for the batch
            features_ms = 1000 * (time.perf_counter() - start)
            picks, scores, predict_ms = self._route_by_query(features, ls)
            stages = {"features": features_ms, "predict": predict_ms}
            route_ms = features_ms + predict_ms
            runs = self.executor.run_batch(queries, picks)
            return [RoutedRetrieval(picks[i], scores[i], runs[i], route_ms, stages, n) for i in range(n)]
        batch = self.online.route_batch(queries, ls)
        stages = dict(batch.stages_ms)
        routes = batch.routes
        if not self.online.reads_results:  # pre-retrieval: only the routed members run (on the batch's bases)
            runs = self.executor.run_batch(queries, [r.members for r in routes])
            return [RoutedRetrieval(r.members, r.scores, runs[i], r.route_ms, stages, n) for i, r in enumerate(routes)]
        out = []
        for route in routes:
            seen = route.results
            if seen is None:  # a post-retrieval or cascade route always carries the members' runs
                raise RuntimeError("a post-retrieval routing returned no member results")
            results = MemberResults(seen.query, [seen.runs[j] for j in route.members], seen.shared_ms, seen.latency_ms)
            out.append(RoutedRetrieval(route.members, route.scores, results,
                                       max(0.0, route.route_ms - seen.latency_ms), stages, n))
        return out

    def passages(self, doc_ids: Sequence[int]) -> list[tuple[str, str]]:
        """``(title, text)`` of corpus rows."""
        return [(self.runner.titles[i], self.runner.texts[i]) for i in doc_ids]

    def close(self) -> None:
        self.executor.close()
        for executor in self._deeper.values():
            executor.close()
