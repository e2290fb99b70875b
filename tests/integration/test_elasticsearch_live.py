"""The Elasticsearch backend against a real cluster: indexing, idempotence, agreement with bm25s.

Runs only when ``ELASTICSEARCH_URL`` is set (any Elasticsearch 8 or 9; see
docs/cluster_elasticsearch.md)::

    ELASTICSEARCH_URL=http://localhost:9200 .venv/bin/python -m pytest tests/integration -m integration

Every index it creates carries a random prefix and is deleted at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("ELASTICSEARCH_URL"),
        reason="ELASTICSEARCH_URL is not set: start Elasticsearch 8/9 and export ELASTICSEARCH_URL=http://host:9200 "
        "to run it",
    ),
]

K = 4


@pytest.fixture
def settings() -> Iterator[Any]:
    from ragfolio.core.retrieval.indexes.elasticsearch_settings import ElasticsearchSettings

    resolved = ElasticsearchSettings.resolve({"index_prefix": f"ragfolio-it-{uuid.uuid4().hex[:8]}"})
    yield resolved
    client = resolved.connect()
    for name in client.indices.get(index=f"{resolved.index_prefix}-*", expand_wildcards="all"):
        client.indices.delete(index=name)


@pytest.fixture
def tiny(tiny_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """Passage texts as every retriever sees them, their stable ids, and the questions."""
    from ragfolio.core.data.loading import load_folder
    from ragfolio.core.data.passages import build_corpus
    from ragfolio.core.retrieval.running.pool_runner import passage_texts

    questions = load_folder(tiny_dir)
    corpus = build_corpus(questions)
    return passage_texts(corpus.titles, corpus.texts), list(corpus.ids), [q.question for q in questions]


def test_bm25_indexes_once_and_agrees_with_bm25s(settings, tiny, record_property) -> None:
    from elasticsearch import helpers
    from rankings import rank_overlap

    from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
    from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever
    from ragfolio.core.retrieval.indexes.elasticsearch_requests import bulk_actions

    texts, ids, queries = tiny
    es = ElasticsearchBM25Retriever(settings, k1=1.2, b=0.75).index(texts, ids)
    client, name = es.client, es.index_name_
    assert client.count(index=name)["count"] == len(texts)

    # Indexing again is a no-op; re-sending every document overwrites them by _id.
    ElasticsearchBM25Retriever(settings, k1=1.2, b=0.75).index(texts, ids)
    helpers.bulk(client, bulk_actions(name, [{"text": t} for t in texts], ids), refresh=True)
    assert client.count(index=name)["count"] == len(texts)

    got = es.retrieve(queries, K)
    want = BM25Retriever(k1=1.2, b=0.75).index(texts).retrieve(queries, K)
    overlap = float(rank_overlap(got, want, K).mean())
    record_property("bm25_overlap_at_4", overlap)
    print(f"Elasticsearch vs in-process BM25 overlap@{K}: {overlap:.3f} over {len(queries)} queries")
    assert overlap >= 0.5
    assert (got.doc_ids[:, 0] >= 0).all()


def test_dense_flat_knn_equals_exact_inner_product_search(settings) -> None:
    from rankings import rank_overlap

    from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchDenseRetriever
    from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever

    rng = np.random.default_rng(0)
    emb = rng.normal(size=(60, 16)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    queries = emb[:10] + 0.1 * rng.normal(size=(10, 16)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    got = ElasticsearchDenseRetriever(settings, index_type="flat").index(emb).retrieve_embedded(queries, K)
    want = DenseRetriever().index(emb).retrieve_embedded(queries, K)
    overlap = float(rank_overlap(got, want, K).mean())
    print(f"Elasticsearch flat kNN vs FAISS flat overlap@{K}: {overlap:.3f}")
    assert overlap >= 0.9
    np.testing.assert_allclose(got.scores[:, 0], want.scores[:, 0], atol=1e-3)


def test_a_missing_index_is_named(settings) -> None:
    from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever
    from ragfolio.core.retrieval.indexes.elasticsearch_settings import ElasticsearchIndexMissingError

    with pytest.raises(ElasticsearchIndexMissingError, match="does not exist"):
        ElasticsearchBM25Retriever(settings).attach("no-such-corpus")
