"""Run the portfolio members a router chose for a query (or a batch of them), concurrently, with a deadline.

The shared parts of the chosen members (query embeddings, bases, expansions) are computed once by
:meth:`PoolRunner.prepare` (independent parts in parallel), then each member does only its own work
in a thread pool owned by :class:`PortfolioExecutor`. A batch of queries
(:meth:`PortfolioExecutor.run_batch`) computes the parts of all its queries at once and runs each
member once over it. A member that raises or misses the deadline is reported with its error and
left out of the answer; the call never raises for a member's failure.

What routing decided is a :class:`MemberPlan` per query: the members to run and the depth
(passages per member) to run them at, with any runs routing made already (a post-retrieval
router runs every member, a cascade its shortlist). :meth:`PortfolioExecutor.run_plans` runs a
batch of plans: those at one depth together, on :meth:`PortfolioExecutor.at_depth`, the one place
that gives the executor at another depth (kept, sharing every corpus and query part).

For online use build the runner on a disabled disk cache, ``ArrayCache(path, enabled=False)``, so
per-query embeddings, bases and results are not written to disk (the corpus parts are computed
once per process and kept in memory; the runner's LRU bounds the per-query parts).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from types import TracebackType

from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.retrieval.running.runner_depth import runner_at_depth

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberRun:
    """One member's answer to one query.

    Attributes:
        name: The member's candidate name.
        doc_ids: Corpus rows, best first, padding removed (empty when the member failed).
        scores: Scores aligned with ``doc_ids``.
        latency_ms: Wall time of the member's own work in milliseconds (up to the deadline when
            it timed out); in a batch, its work over the whole batch.
        error: ``"timeout after 2.0 s"`` or ``"<ExceptionType>: <message>"``; None when it answered.
    """

    name: str
    doc_ids: list[int]
    scores: list[float]
    latency_ms: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class MemberResults:
    """The chosen members' answers to one query.

    Attributes:
        query: The query.
        runs: One run per chosen member, in the order asked (failed ones included, with error).
        shared_ms: Time spent on the shared parts (:meth:`PoolRunner.prepare`), in milliseconds.
        latency_ms: Wall time of the whole call, in milliseconds.
    """

    query: str
    runs: list[MemberRun]
    shared_ms: float
    latency_ms: float

    @property
    def degraded(self) -> bool:
        """Whether some member failed or timed out."""
        return any(not run.ok for run in self.runs)

    @property
    def ok_runs(self) -> list[MemberRun]:
        return [run for run in self.runs if run.ok]

    @property
    def reasons(self) -> list[str]:
        """``"<member>: <error>"`` for each failed member."""
        return [f"{run.name}: {run.error}" for run in self.runs if not run.ok]

    def merged_doc_ids(self) -> list[int]:
        """The answered members' passages interleaved by rank (all rank-1s first), de-duplicated."""
        rankings = [run.doc_ids for run in self.ok_runs]
        merged: dict[int, None] = {}
        for rank in range(max((len(r) for r in rankings), default=0)):
            for ranking in rankings:
                if rank < len(ranking):
                    merged.setdefault(ranking[rank], None)
        return list(merged)


@dataclass(frozen=True)
class MemberPlan:
    """What to run for one query: the members a router chose, at a depth.

    Attributes:
        query: The question.
        members: Member indices, in the order the runs are reported.
        depth: Passages per member (the runner's ``num_docs``).
        ran: Runs made already at ``depth`` while routing, by member index (a post-retrieval
            router's k members, a cascade's shortlist; failed runs included); they are not run again.
        shared_ms: Time of the shared parts of those runs, in milliseconds (0 when none).
        latency_ms: Wall time of those runs, in milliseconds (0 when none).
    """

    query: str
    members: list[int]
    depth: int
    ran: Mapping[int, MemberRun] = field(default_factory=dict)
    shared_ms: float = 0.0
    latency_ms: float = 0.0

    @property
    def missing(self) -> list[int]:
        """The members still to run, in report order."""
        return [j for j in self.members if j not in self.ran]

    def at(self, depth: int) -> MemberPlan:
        """The same members at ``depth`` (the runs made at another depth are not reused)."""
        return self if depth == self.depth else MemberPlan(self.query, self.members, depth)


def _joined(plan: MemberPlan, new: MemberResults | None) -> MemberResults:
    """A plan's results: the runs routing made and ``new``, the run of its missing members (if any)."""
    if new is None:
        return MemberResults(plan.query, [plan.ran[j] for j in plan.members], plan.shared_ms, plan.latency_ms)
    if not plan.ran:
        return new
    runs = {**plan.ran, **dict(zip(plan.missing, new.runs, strict=True))}
    return MemberResults(plan.query, [runs[j] for j in plan.members], plan.shared_ms + new.shared_ms,
                         plan.latency_ms + new.latency_ms)


def _timeout_error(timeout_s: float) -> str:
    return f"timeout after {float(timeout_s)!r} s"


@dataclass(frozen=True)
class _Ranked:
    """One member's ranking of a batch of queries, or why there is none."""

    result: RetrievalResult | None
    latency_ms: float
    error: str | None = None

    def member_run(self, name: str, row: int) -> MemberRun:
        """The :class:`MemberRun` of query ``row`` of the batch (padding removed)."""
        if self.result is None:
            return MemberRun(name, [], [], self.latency_ms, self.error)
        keep = self.result.doc_ids[row] >= 0
        return MemberRun(name, [int(i) for i in self.result.doc_ids[row][keep]],
                         [float(s) for s in self.result.scores[row][keep]], self.latency_ms)


def _rank(runner: PoolRunner, spec: CandidateSpec, queries: Sequence[str]) -> _Ranked:
    """Run one member over ``queries``; an exception becomes the ranking's error."""
    start = time.perf_counter()
    try:
        result = runner.run(spec, queries)
    except Exception as exc:  # a member's failure is reported, never raised: the others still answer
        logger.warning("member %s failed on %d queries (first %r): %s: %s", spec.name, len(queries), queries[0],
                       type(exc).__name__, exc)
        return _Ranked(None, 1000 * (time.perf_counter() - start), f"{type(exc).__name__}: {exc}")
    return _Ranked(result, 1000 * (time.perf_counter() - start))


class PortfolioExecutor:
    """Runs chosen portfolio members for a query or a batch of queries, concurrently, within a deadline.

    Args:
        runner: The pool runner over the corpus (built on a disabled disk cache for online use).
        members: The portfolio's members; ``run``'s ``chosen`` indexes into them.
        timeout_s: Seconds the members get, counted from when they start (after the shared parts).
        max_workers: Threads of each member's own pool (default 4), and of the pool that computes
            the shared parts (one per member, at most 32). A member that timed out keeps its thread
            until it finishes (threads cannot be interrupted), but only its own: each member runs in
            a pool of its own (a bulkhead), so a slow member queues behind itself, never the others.
    """

    def __init__(
        self,
        runner: PoolRunner,
        members: Sequence[CandidateSpec],
        *,
        timeout_s: float = 5.0,
        max_workers: int | None = None,
    ) -> None:
        if not members:
            raise ValueError("members is empty: the executor needs at least one portfolio member")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s={timeout_s} must be > 0")
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"max_workers={max_workers} must be >= 1")
        self.runner = runner
        self.members = list(members)
        self.timeout_s = timeout_s
        self.max_workers = max_workers or 4
        self._pools: dict[int | None, ThreadPoolExecutor] = {}  # a member's index, or None: the shared parts
        self._closed = False
        self._lock = threading.Lock()
        # this executor at every depth asked for (at_depth), shared by all of them
        self._depths: dict[int, PortfolioExecutor] = {runner.num_docs: self}
        self._depths_lock = threading.Lock()

    def at_depth(self, depth: int) -> PortfolioExecutor:
        """This executor returning ``depth`` passages per member, made on first use and kept.

        The one place a runner at another depth is made: it shares every corpus part (indexes,
        passage graph, encoders) and query part (embeddings, first-stage rankings) with this one,
        so nothing is built twice; its members run in pools of their own. Every executor made here
        shares the same cache (at most ``prefilter_depth`` of them).

        Raises:
            ValueError: ``depth`` is outside 1..``prefilter_depth``.
        """
        with self._depths_lock:
            if (executor := self._depths.get(depth)) is None:
                executor = PortfolioExecutor(runner_at_depth(self.runner, depth), self.members,
                                             timeout_s=self.timeout_s, max_workers=self.max_workers)
                executor._depths, executor._depths_lock = self._depths, self._depths_lock
                self._depths[depth] = executor
            return executor

    def _get_pool(self, member: int | None = None) -> ThreadPoolExecutor:
        """Member ``member``'s own pool, or (None) the pool of the shared parts; made on first use."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the PortfolioExecutor is closed")
            if (pool := self._pools.get(member)) is None:
                size = min(32, len(self.members)) if member is None else self.max_workers
                name = "portfolio-shared" if member is None else f"portfolio-member-{member}"
                pool = self._pools[member] = ThreadPoolExecutor(size, thread_name_prefix=name)
            return pool

    def shared_pool(self) -> ThreadPoolExecutor:
        """The threads the shared parts are computed in (e.g. a router's first-stage rankings)."""
        return self._get_pool()

    def _specs(self, chosen: Sequence[int]) -> list[CandidateSpec]:
        if not chosen:
            raise ValueError("chosen is empty: pass the indices of the members to run")
        for i in chosen:
            if not 0 <= i < len(self.members):
                raise ValueError(f"chosen index {i} is outside 0..{len(self.members) - 1} (members)")
        if len(set(chosen)) < len(chosen):
            raise ValueError(f"chosen={list(chosen)} repeats a member")
        return [self.members[i] for i in chosen]

    def run(self, query: str, chosen: Sequence[int], *, concurrent: bool = True) -> MemberResults:
        """Answer ``query`` with the members at indices ``chosen`` (the router's top-l, in order).

        Args:
            query: The question.
            chosen: Indices into ``members``, in the order the runs are reported.
            concurrent: Run the members in the pool (True) or one after another in the caller's
                thread (False; a member running past the deadline cannot be stopped then, so it is
                reported as timed out when it ends, and members not started by then are skipped).

        Returns:
            One :class:`MemberRun` per chosen member; failed members carry their error.
        """
        if concurrent:
            return self.run_batch([query], [chosen])[0]
        specs = self._specs(chosen)
        start = time.perf_counter()
        shared_ms = self._prepare(specs, [query], None)
        runs = self._sequential(specs, query)
        self._log_left_out(runs)
        return MemberResults(query, runs, shared_ms, 1000 * (time.perf_counter() - start))

    def run_batch(self, queries: Sequence[str], chosen: Sequence[Sequence[int]]) -> list[MemberResults]:
        """Answer each ``queries[i]`` with the members at indices ``chosen[i]``, over the batch at once.

        The shared parts are computed once for the whole batch (one encoder call per encoder,
        one first-stage ranking per base), then every member chosen by some query runs once over
        the whole batch, concurrently with the others, within the deadline; each query keeps the
        rows of its own members. A member's own work is small next to the shared parts, and a
        run over a subset of the batch would compute them again for that subset. Each row is
        ranked on its own, so a query gets the passages it gets alone.

        Args:
            queries: The questions, ``(n,)``.
            chosen: ``(n, l_i)``: for each query, indices into ``members`` in report order.

        Returns:
            One :class:`MemberResults` per query, in order. ``shared_ms``, ``latency_ms`` and each
            run's ``latency_ms`` are the batch's (what every query of it waited for).
        """
        if len(queries) != len(chosen) or not queries:
            raise ValueError(f"{len(queries)} queries and {len(chosen)} member choices: need as many, at least one")
        for picks in chosen:
            self._specs(picks)  # checks the indices
        union = list(dict.fromkeys(j for picks in chosen for j in picks))
        start = time.perf_counter()
        shared_ms = self._prepare([self.members[j] for j in union], queries, self._get_pool())
        begin = time.perf_counter()
        futures: dict[int, Future[_Ranked]] = {
            j: self._get_pool(j).submit(_rank, self.runner, self.members[j], queries) for j in union
        }
        wait(futures.values(), timeout=self.timeout_s)
        waited_ms = 1000 * (time.perf_counter() - begin)
        ranked: dict[int, _Ranked] = {}
        for j, future in futures.items():
            if future.done():
                ranked[j] = future.result()  # _rank never raises
            else:
                future.cancel()  # drops it if it has not started; a running one finishes unobserved
                ranked[j] = _Ranked(None, waited_ms, _timeout_error(self.timeout_s))
        total_ms = 1000 * (time.perf_counter() - start)
        out = []
        for row, (query, picks) in enumerate(zip(queries, chosen, strict=True)):
            runs = [ranked[j].member_run(self.members[j].name, row) for j in picks]
            self._log_left_out(runs)
            out.append(MemberResults(query, runs, shared_ms, total_ms))
        return out

    def run_plans(self, plans: Sequence[MemberPlan]) -> list[MemberResults]:
        """Run each plan's members at its depth; results in order.

        The plans at one depth run together, as one :meth:`run_batch` of the members each has not
        run yet (:attr:`MemberPlan.missing`), on :meth:`at_depth`; a plan whose members all ran
        while routing runs nothing. A query's results list its members' runs in its plan's order,
        and the time of the runs routing made plus the time of the new ones.

        Args:
            plans: One per query, ``(n,)``, n >= 1.

        Returns:
            One :class:`MemberResults` per plan, in order.
        """
        if not plans:
            raise ValueError("no plans: pass at least one")
        fresh: dict[int, MemberResults] = {}
        for depth in sorted({plan.depth for plan in plans}):
            if todo := [i for i, plan in enumerate(plans) if plan.depth == depth and plan.missing]:
                runs = self.at_depth(depth).run_batch([plans[i].query for i in todo], [plans[i].missing for i in todo])
                fresh.update(zip(todo, runs, strict=True))
        return [_joined(plan, fresh.get(i)) for i, plan in enumerate(plans)]

    def _prepare(self, specs: list[CandidateSpec], queries: Sequence[str], pool: ThreadPoolExecutor | None) -> float:
        """Compute the shared parts; returns the milliseconds it took."""
        start = time.perf_counter()
        try:
            self.runner.prepare(specs, queries, executor=pool)
        except Exception as exc:  # each member recomputes what it needs and reports its own failure
            logger.warning("shared parts failed for %d queries (first %r) (%s: %s); members compute their own",
                           len(queries), queries[0], type(exc).__name__, exc)
        return 1000 * (time.perf_counter() - start)

    @staticmethod
    def _log_left_out(runs: list[MemberRun]) -> None:
        for run in runs:
            if not run.ok:
                logger.info("member %s left out: %s", run.name, run.error)

    def _sequential(self, specs: list[CandidateSpec], query: str) -> list[MemberRun]:
        deadline = time.perf_counter() + self.timeout_s
        runs = []
        for spec in specs:
            if time.perf_counter() >= deadline:
                runs.append(MemberRun(spec.name, [], [], 0.0, _timeout_error(self.timeout_s)))
                continue
            run = _rank(self.runner, spec, [query]).member_run(spec.name, 0)
            if run.ok and time.perf_counter() > deadline:
                run = MemberRun(spec.name, [], [], run.latency_ms, _timeout_error(self.timeout_s))
            runs.append(run)
        return runs

    def close(self) -> None:
        """Shut the pools down without waiting for members still running (timed-out ones), this
        executor's and those of the executors :meth:`at_depth` made."""
        with self._depths_lock:
            family = list(dict.fromkeys([self, *self._depths.values()]))
        for executor in family:
            with executor._lock:
                executor._closed = True
                pools, executor._pools = list(executor._pools.values()), {}
            for pool in pools:
                pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> PortfolioExecutor:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
