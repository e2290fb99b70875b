"""The Elasticsearch backend against a real cluster: indexing, idempotence, agreement with bm25s,
metadata filters and live updates.

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
    from ragfolio.core.retrieval.indexes.elasticsearch_documents import bulk_actions

    texts, ids, queries = tiny
    es = ElasticsearchBM25Retriever(settings, k1=1.2, b=0.75).index(texts, ids)
    client, name = es.client, es.index_name_
    assert client.count(index=name)["count"] == len(texts)

    # Indexing again is a no-op; re-sending every document overwrites them by _id.
    ElasticsearchBM25Retriever(settings, k1=1.2, b=0.75).index(texts, ids)
    helpers.bulk(client, bulk_actions(name, [{"text": t} for t in texts], ids=ids), refresh=True)
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


def small_corpus() -> tuple[list[str], list[str], list[str], list[dict[str, Any] | None]]:
    """Twelve passages that all mention rivers, with ids, titles and varied metadata (one has none)."""
    cities = ["Paris", "Lyon", "Berlin", "Hamburg", "Rome", "Turin", "Vienna", "Graz", "Prague", "Brno", "Bern",
              "Basel"]
    texts = [f"{city} lies on a river; the river crosses {city}." for city in cities]
    metadata: list[dict[str, Any] | None] = [
        {"lang": "en" if i % 2 == 0 else "fr", "year": 2016 + i // 2 + (0.5 if i == 3 else 0),
         "published": f"20{18 + i // 3}-0{1 + i % 3}-15", "tags": ["geo", "river"] if i % 4 == 0 else ["geo"],
         **({"reviewed": True} if i % 3 == 0 else {})}
        for i in range(len(cities))
    ]
    metadata[11] = None
    return texts, [f"p-{i}" for i in range(len(cities))], cities, metadata


FILTERS = [
    {"lang": "en"},
    {"year": {"gt": 2018, "lte": 2020}},
    {"year": 2017.5},
    {"published": {"gte": "2020-02-01", "lt": "2021-03-01T00:00:00Z"}},
    {"tags": "river"},
    {"reviewed": {"exists": False}},
    {"or": [{"id": {"in": ["p-1", "p-4"]}}, {"title": "Bern"}]},
    {"not": {"lang": {"in": ["fr"]}}, "tags": {"nin": ["river"]}},
]


def test_filters_select_what_the_local_evaluation_selects_and_updates_are_searchable(settings) -> None:
    from ragfolio.core.corpus.filters import parse_filter
    from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever

    texts, ids, titles, metadata = small_corpus()
    n = len(texts)
    es = ElasticsearchBM25Retriever(settings).index(texts, ids, titles=titles, metadata=metadata)
    assert es.passages_key_ is not None

    for raw in FILTERS:  # every passage matches "river": the filter alone decides which rows come back
        parsed = parse_filter(raw)
        want = {i for i in range(n) if parsed.matches(metadata[i], id=ids[i], title=titles[i])}
        got = es.retrieve(["river"], n, filter_clause=parsed.to_elasticsearch())
        assert {int(r) for r in got.doc_ids[0] if r >= 0} == want, raw
    english = parse_filter({"lang": "en"}).to_elasticsearch()
    top = es.retrieve(["river"], 4, filter_clause=english).doc_ids[0]
    assert len(top) == 4 and all(r >= 0 and r % 2 == 0 for r in top)  # k hits when k of the 6 match
    top = es.retrieve(["river"], 8, filter_clause=english, exclude_rows=[0, 2]).doc_ids[0]
    assert sorted(int(r) for r in top if r >= 0) == [4, 6, 8, 10] and (top[4:] == -1).all()

    es.upsert([n], ["A zebra swims in the river Danube."], ids=["p-new"], titles=["Zebra"],
              metadata=[{"lang": "en", "published": "2025-01-01"}])
    assert es.retrieve(["zebra"], 3).doc_ids[0, 0] == n
    recent = parse_filter({"published": {"gte": "2024-06-01"}, "id": "p-new"}).to_elasticsearch()
    assert es.retrieve(["river"], 3, filter_clause=recent).doc_ids[0].tolist() == [n, -1, -1]
    french = parse_filter({"lang": "fr"}).to_elasticsearch()
    assert n not in es.retrieve(["zebra"], 3, filter_clause=french).doc_ids[0]
    es.upsert([1], ["Lyon lies where a zebra crossing meets the river."])  # row 1 re-indexed in place
    assert set(es.retrieve(["zebra"], 3).doc_ids[0][:2]) == {1, n}
    es.delete([n, 99])  # row 99 has no document: no error
    assert n not in es.retrieve(["zebra"], 3).doc_ids[0]
    assert es.client.count(index=es.index_name_)["count"] == n
    # indexing the base corpus again is a no-op although the index changed since
    again = ElasticsearchBM25Retriever(settings).index(texts, ids, titles=titles, metadata=metadata)
    assert again.index_name_ == es.index_name_ and again.n_docs_ == n


def test_filtered_knn_returns_k_allowed_rows_and_sees_updates(settings) -> None:
    from ragfolio.core.corpus.filters import parse_filter
    from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchDenseRetriever

    _, ids, titles, metadata = small_corpus()
    n = len(ids)
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(n, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    for index_type in ("flat", "hnsw"):
        es = ElasticsearchDenseRetriever(settings, index_type=index_type).index(emb, ids, titles=titles,
                                                                                metadata=metadata)
        english = parse_filter({"lang": "en"}).to_elasticsearch()
        got = es.retrieve_embedded(emb[1:2], 4, filter_clause=english, exclude_rows=[0]).doc_ids[0]
        assert len(got) == 4 and all(r >= 0 and r % 2 == 0 and r != 0 for r in got), index_type

        probe = -emb[5:6]  # nothing in the corpus is near it
        es.upsert([n], vectors=probe, ids=["p-new"], metadata=[{"lang": "fr"}])
        assert es.retrieve_embedded(probe, 1).doc_ids[0, 0] == n
        assert es.retrieve_embedded(probe, 1, filter_clause=english).doc_ids[0, 0] != n
        es.delete([n])
        assert n not in es.retrieve_embedded(probe, 3).doc_ids[0]
