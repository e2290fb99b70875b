"""PoolRunner: shared parts computed once (also across threads), prepare, and the bounded query memo."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.retrieval.pool import expand_grid
from ragfolio.core.retrieval.running.pool_runner import PoolRunner


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    return install_hashing_encoder(monkeypatch)


def _query_encodings(calls: list) -> list:
    return [c for c in calls if c[1] == "queries"]


def test_prepare_computes_the_shared_parts_so_runs_only_do_their_own_work(tiny_dir, calls, small_grid) -> None:
    candidates = expand_grid(small_grid)
    prepared, queries = tiny_runner(tiny_dir)
    fresh, _ = tiny_runner(tiny_dir)
    prepared.prepare(candidates, queries)
    n_calls = len(calls)
    for candidate in candidates:
        got, want = prepared.run(candidate, queries), fresh.run(candidate, queries)
        np.testing.assert_array_equal(got.doc_ids, want.doc_ids, err_msg=candidate.name)
        np.testing.assert_array_equal(got.scores, want.scores, err_msg=candidate.name)
    # the fresh runner encoded as it went; the prepared one encoded nothing more
    assert len(calls) > n_calls
    before = len(calls)
    prepared.run_all(candidates, queries)
    assert len(calls) == before


def test_hybrid_base_equals_retrieve_with(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    base = runner.base("hybrid:minilm", queries)
    direct = runner.retrieve_with("hybrid:minilm", queries, runner.prefilter_depth)
    np.testing.assert_array_equal(base.doc_ids, direct.doc_ids)
    np.testing.assert_array_equal(base.scores, direct.scores)


class CountingRunner(PoolRunner):
    """Counts (and slows) first-stage retrievals, so concurrent callers overlap."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.retrievals: list[str] = []

    def retrieve_with(self, base, queries, depth):
        self.retrievals.append(base)
        time.sleep(0.05)
        return super().retrieve_with(base, queries, depth)


def test_a_base_asked_by_four_threads_at_once_is_computed_once(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir, CountingRunner)
    barrier = threading.Barrier(4)
    results: list = [None] * 4

    def ask(i: int) -> None:
        barrier.wait()
        results[i] = runner.base("dense:minilm", queries)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runner.retrievals == ["dense:minilm"]
    assert all(result is results[0] for result in results)
    assert [c[:2] for c in calls] == [(64, "passages"), (64, "queries")]


def test_concurrent_runs_of_one_query_share_its_parts(tiny_dir, calls, small_grid) -> None:
    candidates = expand_grid(small_grid)
    runner, queries = tiny_runner(tiny_dir)
    expected = {c.name: tiny_runner(tiny_dir)[0].run(c, queries[:1]) for c in candidates}
    calls.clear()
    barrier = threading.Barrier(len(candidates))
    got: dict = {}

    def run(candidate) -> None:
        barrier.wait()
        got[candidate.name] = runner.run(candidate, queries[:1])

    threads = [threading.Thread(target=run, args=(c,)) for c in candidates]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, want in expected.items():
        np.testing.assert_array_equal(got[name].doc_ids, want.doc_ids, err_msg=name)
    encodings = [c[:3] for c in calls]
    assert len(encodings) == len(set(encodings))  # nothing encoded twice


def test_lru_evicts_old_query_batches_but_keeps_corpus_parts(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir, max_query_batches=2)
    mmr = expand_grid({"mmr": {"prefilter": "bm25", "encoder": "minilm"}})[0]
    runner.run(mmr, queries[:1])
    corpus_parts = runner.memo_stats()["corpus_parts"]
    for q in queries[1:4]:
        runner.run(mmr, [q])
    stats = runner.memo_stats()
    assert stats["query_batches"] == 2 and stats["corpus_parts"] == corpus_parts
    assert [c[1] for c in calls].count("passages") == 1

    n = len(_query_encodings(calls))
    runner.run(mmr, [queries[3]])  # most recent batch: still in memory
    assert len(_query_encodings(calls)) == n
    runner.run(mmr, [queries[0]])  # evicted: computed again
    assert _query_encodings(calls)[-1][2] == (queries[0],)


def test_a_failed_part_is_not_remembered(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    with pytest.raises(ValueError, match="encoder='nope' is not configured"):
        runner.query_embeddings("nope", queries)
    runner.encoder_specs["nope"] = {"kind": "hashing", "dim": 8}
    assert runner.query_embeddings("nope", queries).shape == (len(queries), 8)


def test_runner_validates_max_query_batches(tiny_dir) -> None:
    with pytest.raises(ValueError, match="max_query_batches=0"):
        tiny_runner(tiny_dir, max_query_batches=0)


def test_prepare_in_a_pool_matches_prepare_in_turn_and_encodes_each_part_once(tiny_dir, calls, small_grid) -> None:
    candidates = expand_grid(small_grid)
    in_turn, queries = tiny_runner(tiny_dir)
    in_turn.prepare(candidates, queries[:2])
    expected = sorted(c[:3] for c in calls)
    calls.clear()
    pooled, _ = tiny_runner(tiny_dir)
    with ThreadPoolExecutor(4) as pool:
        pooled.prepare(candidates, queries[:2], executor=pool)
    assert sorted(c[:3] for c in calls) == expected
    parts = ("corpus_parts", "query_batches", "query_parts", "corpus_misses", "query_misses")
    assert {k: pooled.memo_stats()[k] for k in parts} == {k: in_turn.memo_stats()[k] for k in parts}


def test_prepare_finishes_when_every_worker_is_busy(tiny_dir, calls, small_grid) -> None:
    runner, queries = tiny_runner(tiny_dir)
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(release.wait, 10.0)  # the only worker is stuck
        start = time.perf_counter()
        runner.prepare(expand_grid(small_grid), queries[:1], executor=pool)
        assert time.perf_counter() - start < 5.0
        release.set()
    assert runner.memo_stats()["query_parts"] > 0


def test_forget_queries_keeps_corpus_parts(tiny_dir, calls, small_grid) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.prepare(expand_grid(small_grid), queries)
    stats = runner.memo_stats()
    runner.forget_queries()
    after = runner.memo_stats()
    assert (after["corpus_parts"], after["query_batches"], after["query_parts"]) == (stats["corpus_parts"], 0, 0)


def test_memo_counts_hits_and_misses_and_hits_on_another_scopes_parts(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.cold_queries("a")
    runner.query_embeddings("minilm", queries[:1])
    runner.query_embeddings("minilm", queries[:1])
    stats = runner.memo_stats()
    assert (stats["query_misses"], stats["query_hits"], stats["foreign_query_hits"]) == (1, 1, 0)
    runner.cold_queries("b", forget=False)  # retag only: b reads a's embeddings
    runner.query_embeddings("minilm", queries[:1])
    assert runner.memo_stats()["foreign_query_hits"] == 1
    runner.cold_queries("c")  # cold: c encodes the query again
    runner.query_embeddings("minilm", queries[:1])
    stats = runner.memo_stats()
    assert (stats["query_misses"], stats["foreign_query_hits"]) == (2, 1)
    assert len(_query_encodings(calls)) == 2


def test_saved_indexes_are_loaded_mapped_and_used_instead_of_built(tiny_dir, calls, small_grid, tmp_path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
    from ragfolio.core.retrieval.indexes.corpus_index import CorpusIndex
    from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever
    from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph

    candidates = expand_grid({**small_grid, "graph": [{"seeds": "bm25", "n_seeds": 2, "max_entity_df": [None, 3]}]})
    built, queries = tiny_runner(tiny_dir)
    built.prepare(candidates, queries)
    want = [built.run(c, queries) for c in candidates]
    indexes = built.corpus_indexes()
    kinds = sorted((index.kind, str(index.key)) for index in indexes)
    assert [kind for kind, _ in kinds] == ["bm25", "bm25", "bm25", "dense", "dense", "graph", "graph"]
    assert ("dense", "{'encoder': 'e5', 'index_type': 'flat'}") in kinds  # auto is flat on a small corpus
    for i, index in enumerate(indexes):
        index.save(tmp_path / str(i))
    loaded = [CorpusIndex.load(index.kind, index.key, tmp_path / str(i)) for i, index in enumerate(indexes)]

    def no_building(*args, **kwargs):
        raise AssertionError("a saved index was built again")

    for cls, method in ((BM25Retriever, "index"), (DenseRetriever, "index"), (PassageGraph, "build")):
        monkeypatch.setattr(cls, method, no_building)
    given, _ = tiny_runner(tiny_dir, indexes=loaded)
    for candidate, expected in zip(candidates, want, strict=True):
        got = given.run(candidate, queries)
        np.testing.assert_array_equal(got.doc_ids, expected.doc_ids, err_msg=candidate.name)
        np.testing.assert_allclose(got.scores, expected.scores, rtol=1e-6, err_msg=candidate.name)
    assert sorted((index.kind, str(index.key)) for index in given.corpus_indexes()) == kinds

    # Given the bundle's embeddings too, the runner reads the passage vectors from the dense
    # indexes' mapped storage instead of holding them a second time, and ranks alike.
    embeddings = {name: np.array(built.passage_embeddings(name)) for name in ("e5", "minilm")}
    both, _ = tiny_runner(tiny_dir, indexes=loaded, passage_embeddings=embeddings)
    for name, emb in embeddings.items():
        dense = next(i.index for i in loaded if i.kind == "dense" and i.key["encoder"] == name)
        rows = both.passage_embeddings(name)
        assert np.shares_memory(rows, dense.vectors()) and not np.shares_memory(rows, emb)
        np.testing.assert_array_equal(rows, emb)
    for candidate, expected in zip(candidates, want, strict=True):
        np.testing.assert_array_equal(both.run(candidate, queries).doc_ids, expected.doc_ids, err_msg=candidate.name)
