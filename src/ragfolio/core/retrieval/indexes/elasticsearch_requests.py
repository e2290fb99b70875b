"""The bodies Elasticsearch is sent and the replies it gives, as pure functions (no client, no I/O).

Index settings and mappings (BM25 with ragfolio's analyzer, ``dense_vector``), bulk actions,
``_msearch`` lines for BM25 and kNN searches, and replies back into corpus rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.indexes.elasticsearch_settings import (
    ElasticsearchIndexMissingError,
    ElasticsearchRequestError,
)
from ragfolio.core.retrieval.results import RetrievalResult, pad_rows

SCHEMA_VERSION = 1  # part of every index name: bump when documents or mappings change


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
        "mappings": {
            "dynamic": "strict",
            "_meta": dict(meta),
            "properties": {
                "row": {"type": "integer"},
                "text": {"type": "text", "analyzer": "ragfolio_text", "similarity": "ragfolio_bm25"},
            },
        },
    }


def dense_index_body(*, dims: int, index_type: str, hnsw_m: int, meta: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` and ``mappings`` of a ``dense_vector`` index (cosine; ``flat`` is exact search)."""
    if index_type not in ("flat", "hnsw"):
        raise ValueError(f"index_type={index_type!r} must be 'flat' or 'hnsw'")
    options: dict[str, Any] = {"type": "flat"} if index_type == "flat" else {"type": "hnsw", "m": hnsw_m}
    vector = {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine", "index_options": options}
    return {
        "settings": {"number_of_shards": 1},
        "mappings": {
            "dynamic": "strict",
            "_meta": dict(meta),
            "properties": {"row": {"type": "integer"}, "embedding": vector},
        },
    }


def bulk_actions(
    index: str, documents: Sequence[Mapping[str, Any]], ids: Sequence[str] | None = None
) -> Iterator[dict[str, Any]]:
    """One ``index`` action per document: ``_id`` is ``ids[row]`` (or ``row``), ``_source`` gets ``row``."""
    if ids is not None and len(ids) != len(documents):
        raise ValueError(f"{len(ids)} ids for {len(documents)} documents")
    for row, document in enumerate(documents):
        doc_id = str(row) if ids is None else str(ids[row])
        yield {"_op_type": "index", "_index": index, "_id": doc_id, "_source": {"row": row, **document}}


def bm25_searches(queries: Sequence[str], k: int) -> list[dict[str, Any]]:
    """One ``_msearch`` body per query: a ``match`` (OR of the analysed terms), top ``k`` rows."""
    return [
        {"size": k, "query": {"match": {"text": {"query": q}}}, "_source": ["row"], "track_total_hits": False}
        for q in queries
    ]


def knn_searches(query_emb: npt.NDArray[np.float32], k: int, num_candidates: int) -> list[dict[str, Any]]:
    """One ``_msearch`` body per ``(n_queries, dim)`` row: approximate (or, on ``flat``, exact) kNN."""
    knn = {"field": "embedding", "k": k, "num_candidates": max(k, num_candidates)}
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
