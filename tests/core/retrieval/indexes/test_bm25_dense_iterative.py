"""BM25, dense and two-hop retrieval on a hand-made corpus with hand-computed answers."""

import math

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
