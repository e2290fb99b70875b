"""PortfolioExecutor: concurrent members answer what the runner answers; failures are left out."""

from __future__ import annotations

import threading
import time

import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.retrieval.pool import CandidateSpec, expand_grid
from ragfolio.core.retrieval.running.member_executor import MemberPlan, MemberResults, MemberRun, PortfolioExecutor
from ragfolio.core.retrieval.running.pool_runner import PoolRunner


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    return install_hashing_encoder(monkeypatch)


def _expected(tiny_dir, spec: CandidateSpec, query: str) -> tuple[list[int], list[float]]:
    result = tiny_runner(tiny_dir)[0].run(spec, [query])
    keep = result.doc_ids[0] >= 0
    return result.doc_ids[0][keep].tolist(), result.scores[0][keep].tolist()


@pytest.mark.parametrize("concurrent", [True, False])
def test_each_member_answers_what_runner_run_answers(tiny_dir, calls, small_grid, concurrent) -> None:
    members = expand_grid(small_grid)
    runner, queries = tiny_runner(tiny_dir)
    chosen = [11, 0, 6, 9, 8, 4]  # two_hop (dense hop), bm25, ds, graph, vendi, hybrid: routed order
    with PortfolioExecutor(runner, members, timeout_s=30.0) as executor:
        for query in queries[:3]:
            results = executor.run(query, chosen, concurrent=concurrent)
            assert [run.name for run in results.runs] == [members[i].name for i in chosen]
            assert not results.degraded and results.reasons == []
            for i, run in zip(chosen, results.runs, strict=True):
                assert (run.doc_ids, run.scores) == _expected(tiny_dir, members[i], query)
            assert results.latency_ms >= results.shared_ms >= 0


def test_a_member_that_raises_is_dropped_and_named(tiny_dir, calls, small_grid) -> None:
    members = expand_grid(small_grid)[:2] + [
        CandidateSpec("broken", "sparse", {}),  # raises in the runner: unknown family
        CandidateSpec("bad-base", "mmr", {"prefilter": "nope", "encoder": "minilm", "lambda": 0.5}),
    ]
    runner, queries = tiny_runner(tiny_dir)
    with PortfolioExecutor(runner, members) as executor:
        results = executor.run(queries[0], [2, 0, 3, 1])
    assert [run.ok for run in results.runs] == [False, True, False, True]
    assert results.degraded
    assert results.reasons == [
        "broken: ValueError: unknown family 'sparse' for candidate broken",
        "bad-base: ValueError: base='nope' must be 'bm25', 'dense:<encoder>' or 'hybrid:<encoder>'",
    ]
    assert results.runs[0].doc_ids == [] and results.runs[0].scores == []
    for run, i in zip(results.ok_runs, [0, 1], strict=True):
        assert (run.doc_ids, run.scores) == _expected(tiny_dir, members[i], queries[0])


class StuckRunner(PoolRunner):
    """A runner whose member ``slow`` blocks ``hold_s`` or until released (a hung retriever)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.hold_s = 10.0

    def run(self, candidate, queries):
        if candidate.name == "slow":
            self.release.wait(self.hold_s)
        return super().run(candidate, queries)


def test_a_member_past_the_deadline_is_dropped_without_waiting_for_it(tiny_dir, calls, small_grid) -> None:
    fast = expand_grid(small_grid)[0]
    members = [CandidateSpec("slow", fast.family, fast.params), fast]
    runner, queries = tiny_runner(tiny_dir, StuckRunner)
    runner.prepare(members, queries[1:2])  # corpus parts warm, so the timing below is the members'
    executor = PortfolioExecutor(runner, members, timeout_s=0.5)
    try:
        start = time.perf_counter()
        results = executor.run(queries[0], [0, 1])
        elapsed = time.perf_counter() - start
    finally:
        runner.release.set()
        executor.close()
    assert results.reasons == ["slow: timeout after 0.5 s"]
    assert results.runs[1].ok and results.runs[1].doc_ids == _expected(tiny_dir, fast, queries[0])[0]
    assert 0.5 <= elapsed - results.shared_ms / 1000 < 1.0  # the stuck thread still holds on for 10 s


def test_a_hung_member_holds_only_its_own_threads(tiny_dir, calls, small_grid) -> None:
    """Bulkheads: with every thread of the hung member's pool stuck, the other member still answers."""
    fast = expand_grid(small_grid)[0]
    members = [CandidateSpec("slow", fast.family, fast.params), fast]
    runner, queries = tiny_runner(tiny_dir, StuckRunner)
    runner.prepare(members, queries)
    executor = PortfolioExecutor(runner, members, timeout_s=0.2, max_workers=2)
    try:
        results = [executor.run(query, [0, 1]) for query in queries[:5]]  # 5 hung runs > 2 threads
    finally:
        runner.release.set()
        executor.close()
    assert all(r.reasons == ["slow: timeout after 0.2 s"] for r in results)
    assert all(r.runs[1].ok for r in results)  # one shared pool of 2 would have left it queued behind "slow"


def test_sequential_runs_report_members_past_the_deadline(tiny_dir, calls, small_grid) -> None:
    fast = expand_grid(small_grid)[0]
    members = [CandidateSpec("slow", fast.family, fast.params), fast]
    runner, queries = tiny_runner(tiny_dir, StuckRunner)
    runner.hold_s = 0.3  # finishes, but after the deadline; the next member is not started then
    with PortfolioExecutor(runner, members, timeout_s=0.1) as executor:
        results = executor.run(queries[0], [0, 1], concurrent=False)
    assert results.reasons == ["slow: timeout after 0.1 s", f"{fast.name}: timeout after 0.1 s"]
    assert results.ok_runs == [] and results.merged_doc_ids() == []


def test_merged_doc_ids_interleave_by_rank_without_duplicates() -> None:
    runs = [
        MemberRun("a", [5, 1, 7], [3.0, 2.0, 1.0], 1.0),
        MemberRun("b", [], [], 2.0, "timeout after 1.0 s"),
        MemberRun("c", [1, 9], [0.9, 0.8], 1.0),
        MemberRun("d", [2], [1.0], 1.0),
    ]
    results = MemberResults("q", runs, shared_ms=1.0, latency_ms=3.0)
    assert results.merged_doc_ids() == [5, 1, 2, 9, 7]
    assert [run.name for run in results.ok_runs] == ["a", "c", "d"]
    assert results.degraded and results.reasons == ["b: timeout after 1.0 s"]


def test_executor_validates_its_arguments(tiny_dir, calls, small_grid) -> None:
    members = expand_grid(small_grid)
    runner, queries = tiny_runner(tiny_dir)
    with pytest.raises(ValueError, match="timeout_s=0"):
        PortfolioExecutor(runner, members, timeout_s=0)
    with pytest.raises(ValueError, match="max_workers=0"):
        PortfolioExecutor(runner, members, max_workers=0)
    with pytest.raises(ValueError, match="members is empty"):
        PortfolioExecutor(runner, [])
    executor = PortfolioExecutor(runner, members)
    with pytest.raises(ValueError, match=f"chosen index {len(members)} is outside"):
        executor.run(queries[0], [0, len(members)])
    with pytest.raises(ValueError, match="repeats a member"):
        executor.run(queries[0], [1, 1])
    with pytest.raises(ValueError, match="chosen is empty"):
        executor.run(queries[0], [])
    executor.close()
    with pytest.raises(RuntimeError, match="closed"):
        executor.run(queries[0], [0])


def test_at_depth_is_one_kept_executor_per_depth_sharing_the_runners_parts(tiny_dir, calls, small_grid) -> None:
    members = expand_grid(small_grid)[:3]
    runner, queries = tiny_runner(tiny_dir)
    executor = PortfolioExecutor(runner, members)
    deeper = executor.at_depth(2 * runner.num_docs)
    assert executor.at_depth(runner.num_docs) is executor and executor.at_depth(2 * runner.num_docs) is deeper
    assert deeper.at_depth(runner.num_docs) is executor  # one cache, whichever executor asks
    assert deeper.runner.num_docs == 2 * runner.num_docs
    assert deeper.runner._memo is runner._memo  # the corpus and query parts are shared
    fresh, _ = tiny_runner(tiny_dir)
    fresh.num_docs = 2 * runner.num_docs
    want = fresh.run(members[0], [queries[0]]).doc_ids[0]
    assert deeper.run(queries[0], [0]).runs[0].doc_ids == [int(i) for i in want if i >= 0]
    with pytest.raises(ValueError, match="must be in 1..prefilter_depth"):
        executor.at_depth(runner.prefilter_depth + 1)
    executor.close()  # closes the executors at every depth
    with pytest.raises(RuntimeError, match="closed"):
        deeper.run(queries[0], [0])


def test_run_plans_runs_only_what_routing_did_not_each_depth_once(tiny_dir, calls, small_grid, monkeypatch) -> None:
    members = expand_grid(small_grid)[:3]
    runner, queries = tiny_runner(tiny_dir)
    executor = PortfolioExecutor(runner, members)
    made = executor.run(queries[0], [0, 1])  # what a post-retrieval routing ran, at the runner's depth
    asked: list[tuple[int, list[list[int]]]] = []
    deeper = executor.at_depth(2 * runner.num_docs)
    for ex in (executor, deeper):
        monkeypatch.setattr(ex, "run_batch", lambda qs, chosen, ex=ex, run=ex.run_batch: asked.append(
            (ex.runner.num_docs, [list(c) for c in chosen])) or run(qs, chosen))
    plans = [
        MemberPlan(queries[0], [1, 2, 0], runner.num_docs, dict(zip([0, 1], made.runs, strict=True)),
                   made.shared_ms, made.latency_ms),  # member 2 is still to run
        MemberPlan(queries[1], [2], 2 * runner.num_docs),
        MemberPlan(queries[2], [0, 1], 2 * runner.num_docs),
        MemberPlan(queries[0], [1, 0], runner.num_docs, dict(zip([0, 1], made.runs, strict=True))),  # all ran
    ]
    results = executor.run_plans(plans)
    assert asked == [(runner.num_docs, [[2]]), (2 * runner.num_docs, [[2], [0, 1]])]  # one call per depth
    assert [[run.name for run in r.runs] for r in results] == [[members[j].name for j in p.members] for p in plans]
    assert results[0].runs[0] is made.runs[1] and results[0].runs[2] is made.runs[0]  # reused, not run again
    assert results[0].latency_ms >= made.latency_ms and results[3].latency_ms == 0.0
    assert [len(r.runs[0].doc_ids) for r in results[1:3]] == [2 * runner.num_docs] * 2
    assert MemberPlan("q", [0], 3).at(3).depth == 3 and MemberPlan("q", [0], 3, {0: made.runs[0]}).at(6).ran == {}
    executor.close()
