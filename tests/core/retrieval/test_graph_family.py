"""The ``graph`` family's entity cap and neighbourhood cap, run by a PoolRunner (hashing encoders)."""

from __future__ import annotations

import numpy as np
import pytest
from fake_encoders import HASHING, install_hashing_encoder, tiny_runner

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph
from ragfolio.core.retrieval.pool import expand_grid
from ragfolio.core.retrieval.ranking.graph_expansion import graph_expand
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

GRAPH_DENSE = {"seeds": "dense:minilm", "n_seeds": 1, "rank": "dense", "encoder": "minilm", "hops": [1, 5],
               "max_entity_df": [2, 100], "max_candidates": [6, 2000]}


@pytest.fixture(autouse=True)
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    return install_hashing_encoder(monkeypatch)


def test_each_entity_cap_is_one_graph_built_without_the_degree_cap(tiny_dir) -> None:
    runner, _ = tiny_runner(tiny_dir, graph_max_degree=1)
    capped = runner.graph(100)
    assert runner.graph(100) is capped and runner.graph(2) is not capped
    assert runner.graph() is runner.graph(None) and runner.graph() is not capped
    want = PassageGraph.build(runner.titles, runner.texts, max_degree=None, max_entity_df=100)
    assert (capped.adjacency != want.adjacency).nnz == 0
    assert np.diff(runner.graph().adjacency.indptr).max() <= 1  # the runner's degree cap, default graph only
    assert np.diff(capped.adjacency.indptr).max() > 1


def test_prepare_builds_every_entity_graph_the_candidates_walk(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.prepare(expand_grid({"graph": GRAPH_DENSE}), queries)
    n_parts = runner.memo_stats()["corpus_parts"]
    runner.graph(2), runner.graph(100)
    assert runner.memo_stats()["corpus_parts"] == n_parts  # both were built by prepare
    runner.graph()
    assert runner.memo_stats()["corpus_parts"] == n_parts + 1  # the default graph was not needed


def test_graph_dense_candidates_run_as_graph_expand_on_their_capped_graph(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)
    candidates = expand_grid({"graph": GRAPH_DENSE})
    assert len(candidates) == 8
    for candidate in candidates:
        p = candidate.params
        want = graph_expand(
            runner.base("dense:minilm", queries), runner.graph(p["max_entity_df"]), runner.num_docs, n_seeds=1,
            hops=p["hops"], rank="dense", query_emb=runner.query_embeddings("minilm", queries),
            passage_emb=runner.passage_embeddings("minilm"), max_candidates=p["max_candidates"],
        )
        got = runner._compute(candidate, queries)
        np.testing.assert_array_equal(got.doc_ids, want.doc_ids, err_msg=candidate.name)
        assert runner.run(candidate, queries).doc_ids.shape == (len(queries), runner.num_docs)


def test_the_caps_are_part_of_the_cache_key(tiny_dir, tmp_path) -> None:
    questions = load_folder(tiny_dir)
    corpus = build_corpus(questions)
    runner = PoolRunner(corpus.titles, corpus.texts, HASHING, ArrayCache(tmp_path), num_docs=3, prefilter_depth=8)
    queries = [q.question for q in questions]
    plain = {"seeds": "dense:minilm", "n_seeds": 1, "rank": "dense", "encoder": "minilm"}
    for candidate in expand_grid({"graph": [plain, {**plain, "max_entity_df": [2, 3]}, {**plain, "max_candidates": 4}]}):
        runner.run(candidate, queries)
    assert len(list((tmp_path / "candidates").glob("*.npz"))) == 4
