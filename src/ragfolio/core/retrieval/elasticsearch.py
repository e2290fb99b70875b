"""BM25 and dense kNN retrieval served by an Elasticsearch 8/9 cluster.

The same two families as in process (:mod:`.bm25`, :mod:`.dense`) with the same results contract:
corpus row indices in a :class:`RetrievalResult`. One index holds one corpus under one parameter set,
named ``<prefix>-bm25-<digest>`` or ``<prefix>-dense-<digest>`` (the digest covers the corpus and the
parameters), because BM25's ``k1`` and ``b`` are index settings in Elasticsearch (a custom ``BM25``
similarity). A document is ``{"row": <corpus row>, "text": ...}`` or ``{"row": ..., "embedding": [...]}``
under ``_id`` = the passage's stable id (the row number when none is given), so indexing twice
overwrites instead of duplicating; hits map back to rows through ``row``.

The analyzer mirrors bm25s's tokenisation so that both backends rank alike: split on non-word
characters, lower-case, drop one-character tokens and, for ``stopwords: english``, the 33 English
stopwords that Lucene and bm25s share. The built-in ``english`` analyzer also stems, which the
in-process BM25 does not, so it is not used.

Connection settings come from explicit parameters, then the ``ELASTICSEARCH_*`` environment
variables, then the ``elasticsearch:`` section of ``conf/local/credentials.yml`` (see
docs/cluster_elasticsearch.md). The ``elasticsearch`` client is imported only when a cluster is used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import fingerprint
from ragfolio.core.retrieval.base import RetrievalResult, pad_rows
from ragfolio.core.retrieval.bm25 import BM25_DEFAULTS

logger = logging.getLogger(__name__)

ENV_VARS = {
    "url": "ELASTICSEARCH_URL",
    "api_key": "ELASTICSEARCH_API_KEY",
    "username": "ELASTICSEARCH_USERNAME",
    "password": "ELASTICSEARCH_PASSWORD",
}
CREDENTIALS_FILE = Path("conf/local/credentials.yml")
RETRY_STATUSES = (429, 502, 503, 504)  # transient: overloaded, or a proxy in front of a restarting node
SCHEMA_VERSION = 1  # part of every index name: bump when documents or mappings change
INSTALL_HINT = 'the Elasticsearch backend needs the official client: pip install "elasticsearch>=8.13"'


class ElasticsearchUnavailableError(ConnectionError):
    """The cluster could not be reached, or kept answering 429/50x, after the client's retries."""


class ElasticsearchIndexMissingError(LookupError):
    """The index a retriever reads does not exist."""

    def __init__(self, index: str) -> None:
        super().__init__(
            f"Elasticsearch index {index!r} does not exist; build it with index() on the same corpus and "
            "parameters (running candidate_scoring with a backend: elasticsearch candidate does this)"
        )
        self.index = index


class ElasticsearchRequestError(RuntimeError):
    """A search or bulk item the cluster rejected for a reason retrying cannot fix."""


@dataclass(frozen=True)
class ElasticsearchSettings:
    """Where the cluster is and how to talk to it.

    Args:
        url: ``http(s)://host:port`` of a node.
        api_key: An encoded API key (exclusive with ``username``/``password``).
        username: Basic-auth user (with ``password``).
        password: Basic-auth password.
        index_prefix: First part of every index name ragfolio creates (lower case).
        request_timeout: Seconds per HTTP request.
        max_retries: Retries of a request on connection errors, timeouts and 429/502/503/504.
        retry_backoff: Base of the exponential backoff between retries, in seconds (0: none).
        verify_certs: Check the server's TLS certificate.
        ca_certs: A CA bundle for a self-signed cluster.
        bulk_chunk_size: Documents per ``_bulk`` request.
        msearch_batch_size: Queries per ``_msearch`` request.
    """

    url: str
    api_key: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    index_prefix: str = "ragfolio"
    request_timeout: float = 30.0
    max_retries: int = 3
    retry_backoff: float = 0.5
    verify_certs: bool = True
    ca_certs: str | None = None
    bulk_chunk_size: int = 500
    msearch_batch_size: int = 100

    def __post_init__(self) -> None:
        if not re.match(r"^https?://[^/\s]+", self.url):
            raise ValueError(f"url={self.url!r} must look like http://host:9200 or https://host:9200")
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password must be given together")
        if self.api_key and self.username:
            raise ValueError("give either api_key or username/password, not both")
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", self.index_prefix):
            raise ValueError(f"index_prefix={self.index_prefix!r} must be lower-case letters, digits, '-' or '_'")
        for name in ("max_retries", "bulk_chunk_size", "msearch_batch_size"):
            if getattr(self, name) < (0 if name == "max_retries" else 1):
                raise ValueError(f"{name}={getattr(self, name)} is out of range")

    @classmethod
    def resolve(
        cls,
        params: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        credentials_file: str | Path | None = CREDENTIALS_FILE,
    ) -> ElasticsearchSettings:
        """Settings from ``params``, then environment variables, then the credentials file.

        Each key takes the first source that sets it: ``params`` (e.g. PoolRunner's ``elasticsearch``
        argument), ``ELASTICSEARCH_URL`` / ``_API_KEY`` / ``_USERNAME`` / ``_PASSWORD``, then the
        ``elasticsearch:`` section of ``credentials_file`` when that file exists.
        """
        environ = os.environ if environ is None else environ
        known = {f.name for f in fields(cls)}
        merged: dict[str, Any] = {}
        if credentials_file is not None and Path(credentials_file).is_file():
            import yaml

            section = (yaml.safe_load(Path(credentials_file).read_text(encoding="utf-8")) or {}).get("elasticsearch")
            merged.update(section or {})
        merged.update({key: environ[var] for key, var in ENV_VARS.items() if environ.get(var)})
        merged.update({key: value for key, value in (params or {}).items() if value is not None})
        unknown = sorted(set(merged) - known)
        if unknown:
            raise ValueError(f"unknown Elasticsearch setting(s) {unknown}; known: {sorted(known)}")
        if not merged.get("url"):
            raise ValueError(
                "no Elasticsearch URL: export ELASTICSEARCH_URL=http://host:9200, or set elasticsearch.url "
                f"in {credentials_file}"
            )
        return cls(**merged)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of ``elasticsearch.Elasticsearch`` (retries are the client's own)."""
        options: dict[str, Any] = {
            "hosts": [self.url], "request_timeout": self.request_timeout, "max_retries": self.max_retries,
            "retry_on_timeout": True, "retry_on_status": RETRY_STATUSES, "verify_certs": self.verify_certs,
        }
        if self.retry_backoff > 0:  # exponential backoff with jitter, capped at 32 x the base
            options.update(retry_backoff_base=self.retry_backoff, retry_backoff_cap=32 * self.retry_backoff)
        if self.ca_certs:
            options["ca_certs"] = self.ca_certs
        if self.api_key:
            options["api_key"] = self.api_key
        elif self.username is not None:
            options["basic_auth"] = (self.username, self.password)
        return options

    def connect(self, **overrides: Any) -> Any:
        """A new ``elasticsearch.Elasticsearch`` client (no request is sent until it is used)."""
        try:
            from elasticsearch import Elasticsearch
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        return Elasticsearch(**{**self.client_options(), **overrides})


# --- requests and responses (pure) ----------------------------------------------------------------
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


def rank_overlap(a: RetrievalResult, b: RetrievalResult, k: int) -> npt.NDArray[np.float64]:
    """Per-query overlap of two rankings' top ``k``: ``|A & B| / max(|A|, |B|)``, shape ``(n_queries,)``.

    ``A`` and ``B`` are the rows' first ``k`` ids without ``-1`` padding; two empty rows agree (1.0).
    """
    if a.doc_ids.shape[0] != b.doc_ids.shape[0]:
        raise ValueError(f"{a.doc_ids.shape[0]} and {b.doc_ids.shape[0]} queries differ")
    out = np.ones(a.doc_ids.shape[0], dtype=np.float64)
    for i, (x, y) in enumerate(zip(a.doc_ids[:, :k], b.doc_ids[:, :k], strict=True)):
        top_a, top_b = set(x[x >= 0].tolist()), set(y[y >= 0].tolist())
        if top_a or top_b:
            out[i] = len(top_a & top_b) / max(len(top_a), len(top_b))
    return out


# --- talking to the cluster -------------------------------------------------------------------------
@contextmanager
def translated_errors(settings: ElasticsearchSettings, index: str) -> Iterator[None]:
    """Turn the client's transport and API errors into ragfolio's, naming the URL or the index."""
    import elastic_transport
    from elasticsearch import ApiError, AuthenticationException, AuthorizationException, NotFoundError

    try:
        yield
    except (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout) as err:
        raise ElasticsearchUnavailableError(
            f"cannot reach Elasticsearch at {settings.url} after {settings.max_retries} retries ({err}); "
            "is it running, and is ELASTICSEARCH_URL right?"
        ) from err
    except NotFoundError as err:
        if "index_not_found_exception" in str(err.body):
            raise ElasticsearchIndexMissingError(index) from err
        raise
    except (AuthenticationException, AuthorizationException) as err:
        raise PermissionError(
            f"Elasticsearch at {settings.url} refused the credentials ({err.meta.status}); set "
            "ELASTICSEARCH_API_KEY or ELASTICSEARCH_USERNAME/ELASTICSEARCH_PASSWORD"
        ) from err
    except ApiError as err:
        if err.meta.status in RETRY_STATUSES:
            raise ElasticsearchUnavailableError(
                f"Elasticsearch at {settings.url} still answered {err.meta.status} after "
                f"{settings.max_retries} retries: {err}"
            ) from err
        raise


@dataclass
class _ClusterIndex:
    """What both retrievers share: the settings, a lazily made client and one index."""

    settings: ElasticsearchSettings
    client: Any = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        self.index_name_: str | None = None
        self.n_docs_ = 0

    def _client(self) -> Any:
        if self.client is None:
            self.client = self.settings.connect()
        return self.client

    def _build(self, name: str, body: Mapping[str, Any], actions: Iterator[dict[str, Any]], n_docs: int) -> None:
        """Create index ``name`` if needed and bulk-load it, unless it already holds ``n_docs`` documents."""
        from elasticsearch import BadRequestError, helpers

        client = self._client()
        with translated_errors(self.settings, name):
            if client.indices.exists(index=name) and client.count(index=name)["count"] == n_docs:
                logger.info("Elasticsearch index %s already holds the %d passages", name, n_docs)
            else:
                try:
                    client.indices.create(index=name, **body)
                except BadRequestError as err:  # created meanwhile by another process: fine
                    if "resource_already_exists_exception" not in str(err.body):
                        raise
                stream = helpers.streaming_bulk(
                    client, actions, chunk_size=self.settings.bulk_chunk_size, max_retries=self.settings.max_retries,
                    initial_backoff=max(self.settings.retry_backoff, 0.01), raise_on_error=False,
                )
                failed = []
                for ok, item in tqdm(stream, total=n_docs, desc=f"indexing {name}", unit="doc", disable=n_docs < 1000):
                    if not ok:
                        failed.append(item)
                if failed:
                    raise ElasticsearchRequestError(
                        f"{len(failed)} document(s) failed to index into {name!r}, the first: {failed[0]}"
                    )
                client.indices.refresh(index=name)
            count = client.count(index=name)["count"]
        if count != n_docs:
            raise ElasticsearchRequestError(f"index {name!r} holds {count} documents, expected {n_docs}")
        self.index_name_, self.n_docs_ = name, n_docs

    def _attach(self, name: str) -> None:
        with translated_errors(self.settings, name):
            client = self._client()
            if not client.indices.exists(index=name):
                raise ElasticsearchIndexMissingError(name)
            self.index_name_, self.n_docs_ = name, int(client.count(index=name)["count"])

    def _search(self, searches: list[dict[str, Any]], k: int, score: Callable[[float], float]) -> RetrievalResult:
        """Run ``searches`` in ``_msearch`` batches; items the cluster rejected as overloaded are retried."""
        if self.index_name_ is None:
            raise RuntimeError("call index() or attach() before retrieving")
        name, batch = self.index_name_, self.settings.msearch_batch_size
        answers: list[Mapping[str, Any]] = [{}] * len(searches)
        starts = range(0, len(searches), batch)
        for start in tqdm(starts, desc=f"searching {name}", unit="batch", disable=len(starts) < 10):
            pending = list(range(start, min(start + batch, len(searches))))
            for attempt in range(self.settings.max_retries + 1):
                with translated_errors(self.settings, name):
                    reply = self._client().msearch(searches=msearch_lines(name, [searches[i] for i in pending]))
                retry = []
                for i, item in zip(pending, reply["responses"], strict=True):
                    if item.get("status") in RETRY_STATUSES and attempt < self.settings.max_retries:
                        retry.append(i)
                    else:
                        answers[i] = item
                if not retry:
                    break
                time.sleep(self.settings.retry_backoff * 2**attempt)
                pending = retry
        return parse_msearch({"responses": answers}, k, name, score)


@dataclass
class ElasticsearchBM25Retriever(_ClusterIndex):
    """BM25 over a text field of an Elasticsearch index: ``index`` (or ``attach``), then ``retrieve``.

    Args:
        settings: The cluster (see :meth:`ElasticsearchSettings.resolve`).
        k1: Term-frequency saturation (>= 0).
        b: Length normalisation in [0, 1].
        method: Only ``lucene``, the variant Elasticsearch implements (kept for the grid's sake).
        stopwords: ``english`` or ``none``.
        client: An ``Elasticsearch`` client to use instead of one made from ``settings``.
    """

    k1: float = BM25_DEFAULTS["k1"]
    b: float = BM25_DEFAULTS["b"]
    method: str = BM25_DEFAULTS["method"]
    stopwords: str = BM25_DEFAULTS["stopwords"]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k1 < 0:
            raise ValueError(f"k1={self.k1} must be >= 0")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"b={self.b} must be in [0, 1]")
        if self.method != "lucene":
            raise ValueError(f"method={self.method!r}: Elasticsearch implements only method='lucene'")
        if self.stopwords not in ("english", "none"):
            raise ValueError(f"stopwords={self.stopwords!r} must be 'english' or 'none'")

    def _name_and_meta(self, corpus_key: str) -> tuple[str, dict[str, Any]]:
        meta = {"corpus": corpus_key, "k1": self.k1, "b": self.b, "stopwords": self.stopwords}
        return index_name(self.settings.index_prefix, "bm25", meta), {"ragfolio": "bm25", **meta}

    def index(
        self, texts: Sequence[str], ids: Sequence[str] | None = None, *, corpus_key: str | None = None
    ) -> ElasticsearchBM25Retriever:
        """Index ``texts`` (row ``i`` under ``_id`` ``ids[i]``); a no-op when the index is complete."""
        if not texts:
            raise ValueError("cannot index an empty corpus")
        key = corpus_key or fingerprint([*texts, *(ids or [])])
        name, meta = self._name_and_meta(key)
        body = bm25_index_body(k1=self.k1, b=self.b, stopwords=self.stopwords, meta=meta)
        self._build(name, body, bulk_actions(name, [{"text": t} for t in texts], ids), len(texts))
        return self

    def attach(self, corpus_key: str) -> ElasticsearchBM25Retriever:
        """Use the index that :meth:`index` built for ``corpus_key`` (raises if it does not exist)."""
        self._attach(self._name_and_meta(corpus_key)[0])
        return self

    def retrieve(self, queries: Sequence[str], k: int) -> RetrievalResult:
        """Top-``k`` corpus rows per query, ``-1``-padded where a query matches fewer passages."""
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        return self._search(bm25_searches(queries, k), k, float)


@dataclass
class ElasticsearchDenseRetriever(_ClusterIndex):
    """kNN over a ``dense_vector`` field: ``index`` passage embeddings, then ``retrieve_embedded``.

    Scores are cosine similarities (Elasticsearch's ``(1 + cos) / 2`` mapped back), which equal the
    in-process inner products for L2-normalised embeddings.

    Args:
        settings: The cluster.
        index_type: ``flat`` (exact) or ``hnsw`` (approximate).
        hnsw_m: Neighbours per HNSW node (``hnsw`` only).
        num_candidates: Candidates per shard of an approximate search (default ``max(100, 10 k)``).
        client: An ``Elasticsearch`` client to use instead of one made from ``settings``.
    """

    index_type: str = "flat"
    hnsw_m: int = 32
    num_candidates: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.index_type not in ("flat", "hnsw"):
            raise ValueError(f"index_type={self.index_type!r} must be 'flat' or 'hnsw'")

    def _name_and_meta(self, corpus_key: str, dims: int) -> tuple[str, dict[str, Any]]:
        meta = {"corpus": corpus_key, "dims": dims, "index_type": self.index_type, "hnsw_m": self.hnsw_m}
        return index_name(self.settings.index_prefix, "dense", meta), {"ragfolio": "dense", **meta}

    def index(
        self, passage_emb: npt.NDArray[np.float32], ids: Sequence[str] | None = None, *, corpus_key: str | None = None
    ) -> ElasticsearchDenseRetriever:
        """Index ``passage_emb`` of shape ``(n_passages, dim)``; ``corpus_key`` defaults to its digest."""
        emb = np.ascontiguousarray(passage_emb, dtype=np.float32)
        if emb.ndim != 2 or len(emb) == 0:
            raise ValueError(f"passage_emb must be a non-empty 2-d array, got shape {emb.shape}")
        key = corpus_key or hashlib.sha256(emb.tobytes()).hexdigest()[:20]
        name, meta = self._name_and_meta(key, emb.shape[1])
        body = dense_index_body(dims=emb.shape[1], index_type=self.index_type, hnsw_m=self.hnsw_m, meta=meta)
        documents = [{"embedding": row.tolist()} for row in emb]
        self._build(name, body, bulk_actions(name, documents, ids), len(emb))
        return self

    def attach(self, corpus_key: str, dims: int) -> ElasticsearchDenseRetriever:
        """Use the index that :meth:`index` built for ``corpus_key`` and ``dims``."""
        self._attach(self._name_and_meta(corpus_key, dims)[0])
        return self

    def retrieve_embedded(self, query_emb: npt.NDArray[np.float32], k: int) -> RetrievalResult:
        """Top-``k`` rows for each of ``query_emb``'s ``(n_queries, dim)`` rows."""
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        candidates = min(10_000, self.num_candidates or max(100, 10 * k))  # 10,000: the cluster's cap
        return self._search(knn_searches(query_emb, k, candidates), k, lambda s: 2.0 * s - 1.0)

