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

Connection settings (:mod:`~ragfolio.core.retrieval.indexes.elasticsearch_settings`) come from explicit
parameters, then the ``ELASTICSEARCH_*`` environment variables, then credentials the caller passes
(see docs/cluster_elasticsearch.md); requests and responses are built and read by the pure functions
of :mod:`~ragfolio.core.retrieval.indexes.elasticsearch_requests`. The ``elasticsearch`` client is imported
only when a cluster is used.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import fingerprint
from ragfolio.core.retrieval.indexes.bm25_index import BM25_DEFAULTS
from ragfolio.core.retrieval.indexes.elasticsearch_requests import (
    bm25_index_body,
    bm25_searches,
    bulk_actions,
    dense_index_body,
    index_name,
    knn_searches,
    msearch_lines,
    parse_msearch,
)
from ragfolio.core.retrieval.indexes.elasticsearch_settings import (
    RETRY_STATUSES,
    ElasticsearchIndexMissingError,
    ElasticsearchRequestError,
    ElasticsearchSettings,
    ElasticsearchUnavailableError,
)
from ragfolio.core.retrieval.results import RetrievalResult

logger = logging.getLogger(__name__)


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

