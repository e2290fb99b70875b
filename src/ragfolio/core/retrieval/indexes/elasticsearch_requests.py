"""The bodies Elasticsearch is sent and the replies it gives, as pure functions (no client, no I/O).

Index settings and mappings (BM25 with ragfolio's analyzer, ``dense_vector``; both with the passage
fields of :mod:`.elasticsearch_documents`), ``_msearch`` lines for BM25 and kNN searches, optionally
restricted by a filter clause and excluded rows, and replies back into corpus rows.

A restriction is part of the search, not applied to its hits afterwards, so a search still returns
``k`` hits when ``k`` allowed documents match: BM25 puts the filter clause in ``bool.filter`` and the
excluded rows in ``bool.must_not``; kNN passes the same ``bool`` as its ``filter`` option, which
Elasticsearch applies while it walks the vector index.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.indexes.elasticsearch_documents import checked_rows, passage_mapping
from ragfolio.core.retrieval.indexes.elasticsearch_settings import (
    ElasticsearchIndexMissingError,
    ElasticsearchRequestError,
)
from ragfolio.core.retrieval.results import RetrievalResult, pad_rows

SCHEMA_VERSION = 1  # part of every index name: bump when documents or mappings change incompatibly
MAX_TERMS = 65_536  # terms per `terms` query (the index setting index.max_terms_count's default)


def index_name(prefix: str, kind: str, key: Mapping[str, Any]) -> str:
    """``<prefix>-<kind>-<16 hex>``: one index per corpus and parameter set ``key``."""
    payload = json.dumps({"schema": SCHEMA_VERSION, **key}, sort_keys=True, default=str)
    return f"{prefix}-{kind}-{hashlib.sha256(payload.encode()).hexdigest()[:16]}"


def bm25_index_body(*, k1: float, b: float, stopwords: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` and ``mappings`` of a BM25 index; one shard so term statistics are exact."""
    if stopwords not in ("english", "none"):
        raise ValueError(f"stopwords={stopwords!r} must be 'english' or 'none'")
    filters = ["lowercase", "ragfolio_min2"] + (["ragfolio_stop"] if stopwords == "english" else [])
    analysis = {
        "tokenizer": {"ragfolio_words": {"type": "pattern", "pattern": "\\W+", "flags": "UNICODE_CHARACTER_CLASS"}},
        "filter": {
            "ragfolio_min2": {"type": "length", "min": 2},
            "ragfolio_stop": {"type": "stop", "stopwords": "_english_"},
        },
        "analyzer": {"ragfolio_text": {"type": "custom", "tokenizer": "ragfolio_words", "filter": filters}},
    }
    return {
        "settings": {
            "number_of_shards": 1,
            "similarity": {"ragfolio_bm25": {"type": "BM25", "k1": float(k1), "b": float(b)}},
            "analysis": analysis,
        },
        "mappings": _mappings(meta, {
            "row": {"type": "integer"},
            "text": {"type": "text", "analyzer": "ragfolio_text", "similarity": "ragfolio_bm25"},
        }),
    }


def dense_index_body(*, dims: int, index_type: str, hnsw_m: int, meta: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` and ``mappings`` of a ``dense_vector`` index (cosine; ``flat`` is exact search)."""
    if index_type not in ("flat", "hnsw"):
        raise ValueError(f"index_type={index_type!r} must be 'flat' or 'hnsw'")
    options: dict[str, Any] = {"type": "flat"} if index_type == "flat" else {"type": "hnsw", "m": hnsw_m}
    vector = {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine", "index_options": options}
    return {
        "settings": {"number_of_shards": 1},
        "mappings": _mappings(meta, {"row": {"type": "integer"}, "embedding": vector}),
    }


def _mappings(meta: Mapping[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    """A strict root (a document has only the fields named) with ``properties`` and the passage fields."""
    passage = passage_mapping()
    return {"dynamic": "strict", "_meta": dict(meta), **passage,
            "properties": {**properties, **passage["properties"]}}


def restriction(filter_clause: Mapping[str, Any] | None, exclude_rows: Sequence[int]) -> dict[str, Any] | None:
    """A ``bool`` query that keeps the documents matching ``filter_clause`` (a query clause, e.g.
    :meth:`~ragfolio.core.corpus.filters.Filter.to_elasticsearch`) whose ``row`` is not in
    ``exclude_rows``; None when neither restricts. Excluded rows go in ``terms`` queries of at most
    :data:`MAX_TERMS` rows each.

    Raises:
        ValueError: ``filter_clause`` is not a mapping, or a row is not an integer >= 0.
    """
    parts = _restriction_parts(filter_clause, exclude_rows)
    return {"bool": parts} if parts else None


def _restriction_parts(filter_clause: Mapping[str, Any] | None, exclude_rows: Sequence[int]) -> dict[str, Any]:
    if filter_clause is not None and not isinstance(filter_clause, Mapping):
        raise ValueError(f"filter_clause must be an Elasticsearch query clause (a dict, e.g. from "
                         f"Filter.to_elasticsearch()), got {type(filter_clause).__name__}")
    rows = sorted(set(checked_rows(exclude_rows, "exclude_rows", unique=False)))
    parts: dict[str, Any] = {}
    if filter_clause is not None:
        parts["filter"] = [dict(filter_clause)]
    if rows:
        parts["must_not"] = [{"terms": {"row": rows[i:i + MAX_TERMS]}} for i in range(0, len(rows), MAX_TERMS)]
    return parts


def bm25_searches(
    queries: Sequence[str], k: int, *, filter_clause: Mapping[str, Any] | None = None, exclude_rows: Sequence[int] = ()
) -> list[dict[str, Any]]:
    """One ``_msearch`` body per query: a ``match`` (OR of the analysed terms), top ``k`` rows; with a
    restriction, the ``match`` is a ``bool``'s ``must`` beside the filter and the excluded rows."""
    parts = _restriction_parts(filter_clause, exclude_rows)

    def query(q: str) -> dict[str, Any]:
        match = {"match": {"text": {"query": q}}}
        return {"bool": {"must": [match], **parts}} if parts else match

    return [{"size": k, "query": query(q), "_source": ["row"], "track_total_hits": False} for q in queries]


def knn_searches(
    query_emb: npt.NDArray[np.float32],
    k: int,
    num_candidates: int,
    *,
    filter_clause: Mapping[str, Any] | None = None,
    exclude_rows: Sequence[int] = (),
) -> list[dict[str, Any]]:
    """One ``_msearch`` body per ``(n_queries, dim)`` row: approximate (or, on ``flat``, exact) kNN,
    with the restriction as the kNN ``filter`` (applied during the search, so ``k`` allowed hits come
    back when ``k`` exist)."""
    knn: dict[str, Any] = {"field": "embedding", "k": k, "num_candidates": max(k, num_candidates)}
    if (only := restriction(filter_clause, exclude_rows)) is not None:
        knn["filter"] = only
    rows = np.asarray(query_emb, dtype=np.float32)
    return [
        {"size": k, "knn": {**knn, "query_vector": row.tolist()}, "_source": ["row"], "track_total_hits": False}
        for row in rows
    ]


def msearch_lines(index: str, searches: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The NDJSON lines of an ``_msearch`` request: a header naming ``index`` before each body."""
    return [line for search in searches for line in ({"index": index}, dict(search))]


def parse_msearch(
    response: Mapping[str, Any], k: int, index: str, score: Callable[[float], float] = float
) -> RetrievalResult:
    """Hits of an ``_msearch`` response as ``(n_queries, k)`` rows, ``-1``-padded.

    Raises:
        ElasticsearchIndexMissingError: A search found no index.
        ElasticsearchRequestError: A search failed for another reason (type and reason quoted).
    """
    rows, row_scores = [], []
    for i, item in enumerate(response["responses"]):
        if "error" in item:
            error = item["error"]
            kind = error.get("type") if isinstance(error, Mapping) else str(error)
            if kind == "index_not_found_exception":
                raise ElasticsearchIndexMissingError(index)
            reason = error.get("reason") if isinstance(error, Mapping) else ""
            raise ElasticsearchRequestError(f"search {i} on {index!r} failed ({item.get('status')}): {kind}: {reason}")
        hits = item["hits"]["hits"]
        rows.append([int(hit["_source"]["row"]) for hit in hits])
        row_scores.append([score(hit["_score"]) for hit in hits])
    return pad_rows(rows, row_scores, k)
