"""BM25 and dense kNN retrieval served by an Elasticsearch 8/9 cluster.

The same two families as in process (:mod:`.bm25`, :mod:`.dense`) with the same results contract:
corpus row indices in a :class:`RetrievalResult`. One index holds one corpus under one parameter set,
named ``<prefix>-bm25-<digest>`` or ``<prefix>-dense-<digest>`` (the digest covers the corpus and the
parameters, and the passages' ids, titles and metadata when titles or metadata are given), because
BM25's ``k1`` and ``b`` are index settings in Elasticsearch (a custom ``BM25`` similarity). A document
is ``{"row": <corpus row>, "text": ...}`` or ``{"row": ..., "embedding": [...]}`` under ``_id`` = the
row number, so indexing twice overwrites instead of duplicating; hits map back to rows through
``row``. Documents may also carry ``passage_id``, ``title`` and ``metadata``, which filters address
(:mod:`~ragfolio.core.retrieval.indexes.elasticsearch_documents` says how they are mapped).

A living corpus keeps the index current through :meth:`~ElasticsearchBM25Retriever.upsert` (rows
added or re-indexed) and :meth:`~ElasticsearchBM25Retriever.delete` (rows removed), both through the
bulk API and searchable when they return; ``retrieve`` and ``retrieve_embedded`` take a filter clause
(``Filter.to_elasticsearch()``) and rows to exclude (rows the corpus has masked but not deleted here),
both applied inside the search so that ``k`` allowed hits come back when ``k`` exist.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import fingerprint
from ragfolio.core.retrieval.indexes.bm25_index import BM25_DEFAULTS
from ragfolio.core.retrieval.indexes.elasticsearch_cluster import ClusterIndex
from ragfolio.core.retrieval.indexes.elasticsearch_documents import bulk_actions, delete_actions, passages_key
from ragfolio.core.retrieval.indexes.elasticsearch_requests import (
    bm25_index_body,
    bm25_searches,
    dense_index_body,
    index_name,
    knn_searches,
)
from ragfolio.core.retrieval.results import RetrievalResult

Metadata = Sequence[Mapping[str, Any] | None]


def _with_passages(meta: dict[str, Any], passages: str | None) -> dict[str, Any]:
    """The name key ``meta``, with the passages' digest when there is one (an index name without it is
    the one built before documents carried titles and metadata)."""
    return meta if passages is None else {**meta, "passages": passages}


@dataclass
class ElasticsearchBM25Retriever(ClusterIndex):
    """BM25 over a text field of an Elasticsearch index: ``index`` (or ``attach``), then ``retrieve``;
    ``upsert`` and ``delete`` keep it current.

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

    def _name_and_meta(self, corpus_key: str, passages: str | None = None) -> tuple[str, dict[str, Any]]:
        meta = _with_passages({"corpus": corpus_key, "k1": self.k1, "b": self.b, "stopwords": self.stopwords},
                              passages)
        return index_name(self.settings.index_prefix, "bm25", meta), {"ragfolio": "bm25", **meta}

    def index(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None = None,
        *,
        titles: Sequence[str] | None = None,
        metadata: Metadata | None = None,
        corpus_key: str | None = None,
    ) -> ElasticsearchBM25Retriever:
        """Index ``texts`` as rows ``0..n-1``; a no-op when the index holds them all.

        Args:
            texts: What BM25 ranks, one per row.
            ids: Each row's passage id (the field ``passage_id``, what a filter's ``id`` reads).
            titles: Each row's title (the field ``title``, for filters).
            metadata: Each row's metadata object, or None (the field ``metadata``).
            corpus_key: Names the corpus (default: a digest of ``texts`` and ``ids``). When ``titles``
                or ``metadata`` are given, a digest of ids, titles and metadata joins the index name
                (:attr:`passages_key_`), so an index built without them is never taken for this one.
        """
        if not texts:
            raise ValueError("cannot index an empty corpus")
        key = corpus_key or fingerprint([*texts, *(ids or [])])
        self.passages_key_ = passages_key(ids, titles, metadata)
        name, meta = self._name_and_meta(key, self.passages_key_)
        body = bm25_index_body(k1=self.k1, b=self.b, stopwords=self.stopwords, meta=meta)
        documents = [{"text": t} for t in texts]
        self._build(name, body, bulk_actions(name, documents, ids=ids, titles=titles, metadata=metadata), len(texts))
        return self

    def attach(self, corpus_key: str, *, passages_key: str | None = None) -> ElasticsearchBM25Retriever:
        """Use the index that :meth:`index` built for ``corpus_key`` (and ``passages_key``, its
        :attr:`passages_key_` when it had titles or metadata); raises if it does not exist."""
        self.passages_key_ = passages_key
        self._attach(self._name_and_meta(corpus_key, passages_key)[0])
        return self

    def retrieve(
        self,
        queries: Sequence[str],
        k: int,
        *,
        filter_clause: Mapping[str, Any] | None = None,
        exclude_rows: Sequence[int] = (),
    ) -> RetrievalResult:
        """Top-``k`` corpus rows per query, ``-1``-padded where fewer allowed passages match.

        Args:
            queries: The query texts.
            k: Rows per query (>= 1).
            filter_clause: An Elasticsearch query clause the rows must match (``bool.filter``), e.g.
                ``parse_filter(f).to_elasticsearch()``.
            exclude_rows: Rows never to return (``bool.must_not``), e.g. rows a living corpus masked.
        """
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        searches = bm25_searches(queries, k, filter_clause=filter_clause, exclude_rows=exclude_rows)
        return self._search(searches, k, float)

    def upsert(
        self,
        rows: Sequence[int],
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        titles: Sequence[str] | None = None,
        metadata: Metadata | None = None,
        vectors: npt.NDArray[np.float32] | None = None,
    ) -> ElasticsearchBM25Retriever:
        """Index ``texts[i]`` as row ``rows[i]`` (a new row, or a replacement of that row's document);
        searchable when this returns. ``vectors`` must be None: a BM25 index holds none (the argument
        is there so that one call fits both retrievers)."""
        if vectors is not None:
            raise ValueError("vectors: a BM25 index holds no vectors; pass them to the dense retriever")
        if len(texts) != len(rows):
            raise ValueError(f"texts: {len(texts)} texts for {len(rows)} rows")
        name = self._require_index()
        documents = [{"text": t} for t in texts]
        self._write(bulk_actions(name, documents, rows=rows, ids=ids, titles=titles, metadata=metadata), "upsert")
        return self

    def delete(self, rows: Sequence[int]) -> ElasticsearchBM25Retriever:
        """Remove the documents of ``rows`` (a row without one is skipped); searchable when this returns."""
        self._write(delete_actions(self._require_index(), rows), "delete")
        return self


@dataclass
class ElasticsearchDenseRetriever(ClusterIndex):
    """kNN over a ``dense_vector`` field: ``index`` passage embeddings, then ``retrieve_embedded``;
    ``upsert`` and ``delete`` keep it current.

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
        self.dims_: int | None = None

    def _name_and_meta(self, corpus_key: str, dims: int, passages: str | None = None) -> tuple[str, dict[str, Any]]:
        meta = _with_passages(
            {"corpus": corpus_key, "dims": dims, "index_type": self.index_type, "hnsw_m": self.hnsw_m}, passages
        )
        return index_name(self.settings.index_prefix, "dense", meta), {"ragfolio": "dense", **meta}

    def index(
        self,
        passage_emb: npt.NDArray[np.float32],
        ids: Sequence[str] | None = None,
        *,
        titles: Sequence[str] | None = None,
        metadata: Metadata | None = None,
        corpus_key: str | None = None,
    ) -> ElasticsearchDenseRetriever:
        """Index ``passage_emb`` of shape ``(n_passages, dim)`` as rows ``0..n-1``; ``ids``, ``titles``,
        ``metadata`` and ``corpus_key`` (default: the embeddings' digest) as in
        :meth:`ElasticsearchBM25Retriever.index`."""
        emb = np.ascontiguousarray(passage_emb, dtype=np.float32)
        if emb.ndim != 2 or len(emb) == 0:
            raise ValueError(f"passage_emb must be a non-empty 2-d array, got shape {emb.shape}")
        key = corpus_key or hashlib.sha256(emb.tobytes()).hexdigest()[:20]
        self.passages_key_ = passages_key(ids, titles, metadata)
        name, meta = self._name_and_meta(key, emb.shape[1], self.passages_key_)
        body = dense_index_body(dims=emb.shape[1], index_type=self.index_type, hnsw_m=self.hnsw_m, meta=meta)
        documents = [{"embedding": row.tolist()} for row in emb]
        self._build(name, body, bulk_actions(name, documents, ids=ids, titles=titles, metadata=metadata), len(emb))
        self.dims_ = emb.shape[1]
        return self

    def attach(self, corpus_key: str, dims: int, *, passages_key: str | None = None) -> ElasticsearchDenseRetriever:
        """Use the index that :meth:`index` built for ``corpus_key``, ``dims`` (and ``passages_key``)."""
        self.passages_key_ = passages_key
        self._attach(self._name_and_meta(corpus_key, dims, passages_key)[0])
        self.dims_ = dims
        return self

    def retrieve_embedded(
        self,
        query_emb: npt.NDArray[np.float32],
        k: int,
        *,
        filter_clause: Mapping[str, Any] | None = None,
        exclude_rows: Sequence[int] = (),
    ) -> RetrievalResult:
        """Top-``k`` rows for each of ``query_emb``'s ``(n_queries, dim)`` rows; ``filter_clause`` and
        ``exclude_rows`` as in :meth:`ElasticsearchBM25Retriever.retrieve`, passed as the kNN
        search's ``filter`` (so the search walks only the allowed documents)."""
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        candidates = min(10_000, self.num_candidates or max(100, 10 * k))  # 10,000: the cluster's cap
        searches = knn_searches(query_emb, k, candidates, filter_clause=filter_clause, exclude_rows=exclude_rows)
        return self._search(searches, k, lambda s: 2.0 * s - 1.0)

    def upsert(
        self,
        rows: Sequence[int],
        texts: Sequence[str] | None = None,
        *,
        ids: Sequence[str] | None = None,
        titles: Sequence[str] | None = None,
        metadata: Metadata | None = None,
        vectors: npt.NDArray[np.float32] | None = None,
    ) -> ElasticsearchDenseRetriever:
        """Index ``vectors[i]`` (shape ``(len(rows), dim)``) as row ``rows[i]``; searchable when this
        returns. ``texts`` is not stored (a dense index holds vectors), only checked for length."""
        if vectors is None:
            raise ValueError("vectors: the dense retriever needs the rows' embeddings, shape (len(rows), dim)")
        emb = np.asarray(vectors, dtype=np.float32)
        if emb.ndim != 2 or len(emb) != len(rows) or emb.shape[1] != (self.dims_ or emb.shape[1]):
            raise ValueError(f"vectors: shape {emb.shape}, expected ({len(rows)}, {self.dims_ or 'dim'})")
        if texts is not None and len(texts) != len(rows):
            raise ValueError(f"texts: {len(texts)} texts for {len(rows)} rows")
        name = self._require_index()
        documents = [{"embedding": row.tolist()} for row in emb]
        self._write(bulk_actions(name, documents, rows=rows, ids=ids, titles=titles, metadata=metadata), "upsert")
        return self

    def delete(self, rows: Sequence[int]) -> ElasticsearchDenseRetriever:
        """Remove the documents of ``rows`` (a row without one is skipped); searchable when this returns."""
        self._write(delete_actions(self._require_index(), rows), "delete")
        return self
