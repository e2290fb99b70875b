"""BM25, dense and two-hop retrieval on a hand-made corpus with hand-computed answers."""

import gc
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever
from ragfolio.core.retrieval.ranking.hops import expand_queries, merge_hops
from ragfolio.core.retrieval.results import RetrievalResult

CORPUS = ["apple banana", "apple apple cherry", "durian"]


def test_bm25_matches_hand_computed_lucene_scores() -> None:
    result = BM25Retriever(k1=1.2, b=0.75).index(CORPUS).retrieve(["cherry apple"], 3)
    # Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), N = 3, avgdl = (2 + 3 + 1) / 3.
    n, avgdl = 3, 2.0

    def term(tf: int, df: int, dl: int) -> float:
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))

    doc1 = term(2, 2, 3) + term(1, 1, 3)
    doc0 = term(1, 2, 2)
    assert result.doc_ids[0].tolist() == [1, 0, -1]  # durian shares no term: not retrieved
    np.testing.assert_allclose(result.scores[0, :2], [doc1, doc0], rtol=1e-5)


def test_bm25_query_without_known_terms_returns_padding() -> None:
    result = BM25Retriever().index(CORPUS).retrieve(["zebra"], 2)
    assert result.doc_ids.tolist() == [[-1, -1]]


def test_bm25_validates_parameters() -> None:
    with pytest.raises(ValueError, match="b=1.5"):
        BM25Retriever(b=1.5)


def test_dense_flat_is_exact_inner_product() -> None:
    emb = np.array([[1, 0], [0.6, 0.8], [0, 1]], dtype=np.float32)
    result = DenseRetriever().index(emb).retrieve_embedded(np.array([[0.0, 1.0]], dtype=np.float32), 2)
    assert result.doc_ids.tolist() == [[2, 1]]
    np.testing.assert_allclose(result.scores, [[1.0, 0.8]], rtol=1e-6)


def test_two_hop_expands_with_title_and_merges() -> None:
    first = RetrievalResult(np.array([[2, 0, 1]]), np.ones((1, 3), dtype=np.float32))
    second = RetrievalResult(np.array([[0, 3, 4]]), np.ones((1, 3), dtype=np.float32))
    titles = ["A", "B", "C", "D", "E"]
    assert expand_queries(["who?"], first, titles, ["a", "b", "c", "d", "e"], "title") == ["who? C"]
    assert expand_queries(["who?"], first, titles, ["a", "b", "c", "d", "e"], "text") == ["who? C. c"]
    assert merge_hops(first, second, 4, "interleave").doc_ids.tolist() == [[2, 0, 3, 1]]
    assert merge_hops(first, second, 4, "first1").doc_ids.tolist() == [[2, 0, 3, 4]]
    assert merge_hops(first, second, 4, "first2").doc_ids.tolist() == [[2, 0, 3, 4]]
    assert merge_hops(first, second, 2, "first2").doc_ids.tolist() == [[2, 0]]


@pytest.mark.parametrize("mmap", [True, False])
def test_bm25_saved_with_bm25s_loads_and_ranks_alike(tmp_path, mmap: bool) -> None:
    built = BM25Retriever(k1=0.9, b=0.4, stopwords="none").index(CORPUS)
    built.save(tmp_path / "bm25")
    assert (tmp_path / "bm25" / "retriever.json").is_file() and (tmp_path / "bm25" / "vocab.index.json").is_file()
    loaded = BM25Retriever.load(tmp_path / "bm25", mmap=mmap)
    assert (loaded.k1, loaded.b, loaded.stopwords) == (0.9, 0.4, "none")
    queries = ["cherry apple", "durian", "nothing known"]
    want, got = built.retrieve(queries, 3), loaded.retrieve(queries, 3)
    np.testing.assert_array_equal(got.doc_ids, want.doc_ids)
    np.testing.assert_array_equal(got.scores, want.scores)


_SAVE_BM25 = """
import sys
from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
BM25Retriever().index(["the apple and the banana", "apple cherry", "durian fig grape"]).save(sys.argv[1])
"""


def test_bm25_saved_bytes_do_not_depend_on_the_hash_seed(tmp_path) -> None:
    # Each pipeline step runs in its own process, with its own hash seed: a rerun must save the same files.
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _SAVE_BM25, str(tmp_path / seed)], env=env, check=True, timeout=120)
    files = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert "vocab.index.json" in files and files == sorted(p.name for p in (tmp_path / "2").iterdir())
    for name in files:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name


def _unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
@pytest.mark.parametrize("mmap", [True, False])
def test_dense_saved_with_faiss_loads_and_ranks_alike(tmp_path, index_type: str, mmap: bool) -> None:
    passages, queries = _unit_rows(500, 16, 0), _unit_rows(20, 16, 1)
    built = DenseRetriever(index_type=index_type, hnsw_ef_search=64).index(passages)
    built.save(tmp_path / "dense")
    loaded = DenseRetriever.load(tmp_path / "dense", mmap=mmap)
    assert loaded.built_type == index_type and loaded.n_passages == 500 and loaded.hnsw_ef_search == 64
    want, got = built.retrieve_embedded(queries, 4), loaded.retrieve_embedded(queries, 4)
    np.testing.assert_array_equal(got.doc_ids, want.doc_ids)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)
    rows = loaded.vectors()  # the stored vectors, not a copy; the array keeps the index alive
    assert rows.shape == (500, 16) and not rows.flags.writeable
    del loaded
    gc.collect()
    np.testing.assert_array_equal(rows, passages)


def test_dense_auto_is_flat_up_to_hnsw_above_then_hnsw_close_to_exact() -> None:
    passages, queries = _unit_rows(2000, 16, 2), _unit_rows(50, 16, 3)
    assert DenseRetriever(index_type="auto", hnsw_above=2000).index(passages).built_type == "flat"
    approx = DenseRetriever(index_type="auto", hnsw_above=1999).index(passages)
    assert approx.built_type == "hnsw"
    exact = DenseRetriever(index_type="flat").index(passages).retrieve_embedded(queries, 4).doc_ids
    found = approx.retrieve_embedded(queries, 4).doc_ids
    overlap = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(exact, found, strict=True)])
    assert overlap > 0.95, overlap
    with pytest.raises(ValueError, match="index_type='ivf' must be one of"):
        DenseRetriever(index_type="ivf")
