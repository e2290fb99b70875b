"""Run a pool of candidates over one corpus and one batch of queries, sharing the heavy parts.

Candidates of a pool are cheap variations on a few expensive base parts: a BM25 index, one set of
passage embeddings per encoder, and deep first-stage rankings ("bases", ``prefilter_depth`` deep).
:class:`PoolRunner` computes each base part once, keeps it in memory and in an
:class:`~ragfolio.core.cache.ArrayCache` on disk across runs, and derives every candidate from them.

Base names are those the families declare (:func:`~ragfolio.core.retrieval.family.base_family`):
``bm25`` (the pool's default BM25), ``dense:<encoder>``, ``hybrid:<encoder>`` (RRF of the two,
equal weights); each family ranks its own (:meth:`~ragfolio.core.retrieval.family.Family.rank_base`).

Memory and threads: corpus parts (tokens, indexes, passage embeddings, the graph) stay for the
runner's lifetime (the indexes among them, :meth:`PoolRunner.corpus_indexes`, are what a bundle
saves, and a runner given a bundle's uses them instead of building its own); parts of a query
batch (query embeddings, bases, expanded queries) live in an LRU of ``max_query_batches``
batches, so a service answering one query at a time stays bounded.
``run`` may be called from several threads at once: each shared part is computed by one of them
while the others wait for it. For online use build the runner on ``ArrayCache(path,
enabled=False)`` so per-query parts and results are not written to disk.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from functools import cached_property, partial
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache, fingerprint
from ragfolio.core.retrieval.encoders.kinds import encoder_identity, make_encoder
from ragfolio.core.retrieval.encoders.vector_store import encode_missing, passage_store
from ragfolio.core.retrieval.family import Family, base_family, families
from ragfolio.core.retrieval.indexes.bm25_index import BM25_DEFAULTS, BM25Retriever, tokenize
from ragfolio.core.retrieval.indexes.corpus_index import CorpusIndex, index_key, indexes_among, stored_vectors
from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever, ElasticsearchDenseRetriever
from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever, resolved_index_type
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.ranking.completion import check_full, complete_rows
from ragfolio.core.retrieval.ranking.graph_expansion import PassageGraph
from ragfolio.core.retrieval.ranking.hops import expand_queries
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.retrieval.running.cross_scores import ColumnScores, CrossEncoderPart
from ragfolio.core.retrieval.running.memo import PartsMemo
from ragfolio.core.retrieval.running.remote_indexes import remote_bm25, remote_dense
from ragfolio.core.retrieval.running.shared_parts import run_parts, shared_part_calls

logger = logging.getLogger(__name__)

Embedding = npt.NDArray[np.float32]

# Cache-key versions of the first-stage rankings and of completion (tests/core/test_cache_versions.py).
BASE_VERSION = 1
COMPLETION_VERSION = 1
T = TypeVar("T")
# Depth of the shared first-stage rankings that rerankers reorder (candidate_scoring.prefilter_depth).
DEFAULT_PREFILTER_DEPTH = 50


def passage_texts(titles: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The text a retriever sees for each passage: ``"<title>. <text>"``."""
    return [f"{title}. {text}" for title, text in zip(titles, texts, strict=True)]


class PoolRunner:
    """Computes candidates' rankings over one corpus; safe to call from several threads.

    It is the :class:`~ragfolio.core.retrieval.family.Parts` every family ranks from.

    Args:
        titles: Passage titles, one per corpus row.
        texts: Passage texts, one per corpus row.
        encoders: Encoder configs by name (``{"minilm": {"kind": ..., ...}}``), built lazily.
        cache: Where base parts and candidate results persist between runs (disable it online).
        num_docs: Passages every candidate returns.
        prefilter_depth: Depth of the shared first-stage rankings.
        bm25_params: The default BM25 used as a base (``k1``, ``b``, ``method``, ``stopwords``).
        graph_max_degree: Degree cap of the passage graph (not of the entity-capped graphs of
            :meth:`graph`, whose document-frequency cap bounds hubs instead).
        max_query_batches: Query batches whose parts stay in memory (least recently used go first).
        passage_embeddings: Precomputed ``(n_passages, dim)`` corpus embeddings by encoder name (a
            saved bundle's), used instead of encoding the corpus.
        elasticsearch: Connection settings of ``backend: elasticsearch`` candidates (keys of
            :class:`ElasticsearchSettings`); unset keys come from ``ELASTICSEARCH_*`` variables (which a
            Kedro run sets from ``conf/local/credentials.yml``, :mod:`ragfolio.hooks`).
        indexes: Built corpus indexes (a saved bundle's, :meth:`corpus_indexes`), used instead of
            building the ones they match.
        cross_encoder: The folder of the trained cross-encoder the ``cross_encoder`` family scores
            with (loaded on first use; :mod:`ragfolio.core.retrieval.running.cross_scores`).
        cross_encoder_folds: The folder of its fold models (cross-fitting): each train question it
            names is scored by the fold model that did not train on it; None: the full model scores all.
        passage_metadata: ``(ids, metadata)`` of the corpus's rows when some carry metadata (a served
            bundle's): an Elasticsearch index then stores them, so a query's filter can address them.
    """

    def __init__(
        self,
        titles: Sequence[str],
        texts: Sequence[str],
        encoders: Mapping[str, Mapping[str, Any]],
        cache: ArrayCache,
        *,
        num_docs: int = 4,
        prefilter_depth: int = DEFAULT_PREFILTER_DEPTH,
        bm25_params: Mapping[str, Any] | None = None,
        graph_max_degree: int = 50,
        max_query_batches: int = 256,
        passage_embeddings: Mapping[str, Embedding] | None = None,
        elasticsearch: Mapping[str, Any] | None = None,
        indexes: Sequence[CorpusIndex] = (),
        cross_encoder: str | None = None,
        cross_encoder_folds: str | None = None,
        passage_metadata: tuple[Sequence[str], Sequence[Mapping[str, Any] | None]] | None = None,
    ) -> None:
        if num_docs < 1:
            raise ValueError(f"num_docs={num_docs} must be >= 1")
        if prefilter_depth < num_docs:
            raise ValueError(f"prefilter_depth={prefilter_depth} must be >= num_docs={num_docs}")
        if len(texts) < num_docs:
            raise ValueError(f"the corpus has {len(texts)} passages, fewer than num_docs={num_docs}")
        self.titles: Sequence[str] = list(titles)  # a view runner's: the indexed rows', then the added ones'
        self.texts: Sequence[str] = list(texts)
        self.encoder_specs = {name: dict(spec) for name, spec in encoders.items()}
        # Settings and package versions of each encoder: part of every cache key that vectors feed.
        self.encoder_ids = {name: encoder_identity(spec) for name, spec in self.encoder_specs.items()}
        self.completion_encoder = next(iter(self.encoder_specs), None)  # completes short rows (see _complete)
        self.cache = cache
        self.num_docs = num_docs
        self.prefilter_depth = prefilter_depth
        self.bm25_params = dict(bm25_params or BM25_DEFAULTS)
        self.graph_max_degree = graph_max_degree
        self._memo = PartsMemo(max_query_batches)
        self._given_embeddings = dict(passage_embeddings or {})
        self.elasticsearch = dict(elasticsearch or {})
        self._given_indexes = {index_key(index.kind, index.key): index.index for index in indexes}
        self.cross_encoder = CrossEncoderPart(cross_encoder, cross_encoder_folds)
        self.passage_metadata = passage_metadata
        for name, emb in self._given_embeddings.items():
            if len(emb) != len(self.texts):
                raise ValueError(f"passage_embeddings[{name!r}] has {len(emb)} rows for {len(self.texts)} passages")

    @cached_property
    def passage_texts(self) -> list[str]:
        """What every retriever sees of each passage; built on first use (a service whose bundle
        holds the indexes never needs it: a second copy of the corpus's text)."""
        return passage_texts(self.titles, self.texts)

    @cached_property
    def corpus_key(self) -> str:
        """The corpus's fingerprint in cache keys."""
        return fingerprint(self.passage_texts)

    # --- shared parts -------------------------------------------------------------------------
    def memo_stats(self) -> dict[str, int]:
        """Parts held in memory (``corpus_parts``, ``query_batches``, ``query_parts``) and the memo's
        hit and miss counters (:data:`ragfolio.core.retrieval.running.memo.COUNTERS`)."""
        return self._memo.stats()

    def _remember(self, key: tuple[Any, ...], compute: Callable[[], T], queries: str | None = None) -> T:
        """``compute()`` once per key; ``queries`` (a query fingerprint) puts the part in the LRU."""
        return self._memo.get(key, compute, queries)

    def _encode(self, name: str, texts: list[str], *, queries: bool) -> Embedding:
        if name not in self.encoder_specs:
            raise ValueError(f"encoder={name!r} is not configured; configured: {sorted(self.encoder_specs)}")
        encoder, lock = self._remember(
            ("encoder", name), lambda: (make_encoder(self.encoder_specs[name]), threading.Lock())
        )
        # One call at a time per encoder: lazy model loading and fast tokenizers are not thread-safe.
        with lock:
            return encoder.encode_queries(texts) if queries else encoder.encode_passages(texts)

    def passage_embeddings(self, encoder: str) -> Embedding:
        """``(n_passages, dim)`` embeddings of the corpus, computed once per corpus and encoder; a changed corpus
        encodes only the passages its encoder's vector store lacks (:mod:`~ragfolio.core.retrieval.encoders.vector_store`)."""

        def compute() -> Embedding:
            if encoder in self._given_embeddings:
                given, stored = self._given_embeddings[encoder], stored_vectors(self._given_indexes, encoder)
                return stored if stored is not None and stored.shape == np.shape(given) else given
            key = {"corpus": self.corpus_key, "encoder": self.encoder_ids.get(encoder), "name": encoder}
            texts = self.passage_texts

            def encode() -> dict[str, Embedding]:  # only on a cache miss, so the log says what happens
                store = passage_store(self.cache, self.encoder_ids.get(encoder))
                return {"emb": encode_missing(texts, partial(self._encode, encoder, queries=False), store, encoder)}

            return self.cache.get_or_compute("passage_embeddings", key, encode)["emb"]

        return self._remember(("passage_emb", encoder), compute)

    def query_embeddings(self, encoder: str, queries: Sequence[str]) -> Embedding:
        """``(n_queries, dim)`` query embeddings."""
        qkey = fingerprint(queries)

        def compute() -> Embedding:
            key = {"queries": qkey, "encoder": self.encoder_ids.get(encoder), "name": encoder}
            arrays = self.cache.get_or_compute(
                "query_embeddings", key, lambda: {"emb": self._encode(encoder, list(queries), queries=True)}
            )
            return arrays["emb"]

        return self._remember(("query_emb", encoder), compute, qkey)

    def bm25(self, params: Mapping[str, Any]) -> BM25Retriever | ElasticsearchBM25Retriever:
        """A BM25 index with ``params`` over :attr:`bm25_params` (``backend`` included), built once."""
        full = {**self.bm25_params, **params}
        if full.pop("backend", "inprocess") == "elasticsearch":  # indexed once per corpus and parameters
            return self._remember(("es_bm25", tuple(sorted(full.items()))), lambda: remote_bm25(self, full))
        stopwords = full["stopwords"]

        def build() -> BM25Retriever:
            tokens = self._remember(("tokens", stopwords), lambda: tokenize(self.passage_texts, stopwords))
            return BM25Retriever(**full).index(self.texts, tokens=tokens)

        return self._index(index_key("bm25", full), build)

    def dense(
        self, encoder: str, index_type: str = "auto", backend: str = "inprocess"
    ) -> DenseRetriever | ElasticsearchDenseRetriever:
        """A dense index over ``encoder``'s passage embeddings, built once (``auto``: flat or HNSW
        by the corpus's size, :func:`~ragfolio.core.retrieval.indexes.faiss_index.resolved_index_type`)."""
        index_type = resolved_index_type(index_type, len(self.texts))
        if backend == "elasticsearch":
            return self._remember(("es_dense", encoder, index_type), lambda: remote_dense(self, encoder, index_type))
        return self._index(
            index_key("dense", {"encoder": encoder, "index_type": index_type}),
            lambda: DenseRetriever(index_type=index_type).index(self.passage_embeddings(encoder)),
        )

    def _index(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        """The corpus index under ``key``: the one given to the runner, else built once."""
        return self._remember(key, lambda: self._given_indexes[key] if key in self._given_indexes else build())

    def corpus_indexes(self) -> list[CorpusIndex]:
        """Every in-process corpus index built or given so far (BM25, FAISS, passage graphs), for a
        bundle to save (:func:`ragfolio.core.system.bundle_indexes.with_indexes`)."""
        return indexes_among(self._memo.corpus_items())

    def _cached_result(
        self, namespace: str, key: Mapping[str, Any], compute: Callable[[], RetrievalResult]
    ) -> RetrievalResult:
        def as_arrays() -> dict[str, npt.NDArray[Any]]:
            result = compute()
            return {"doc_ids": result.doc_ids, "scores": result.scores}

        if not self.cache.enabled:  # online: no key to build (the corpus key hashes every passage)
            return compute()
        arrays = self.cache.get_or_compute(namespace, {"corpus": self.corpus_key, **key}, as_arrays)
        return RetrievalResult(arrays["doc_ids"], arrays["scores"])

    def retrieve_with(self, base: str, queries: Sequence[str], depth: int) -> RetrievalResult:
        """Rank the corpus for ``queries`` with a base retriever (``bm25``, ``dense:<encoder>``, ...),
        the bases it fuses ranked afresh too."""
        family, encoder = base_family(base)
        fused = [self.retrieve_with(name, queries, depth) for name in family.base_needs(encoder).bases]
        return family.rank_base(self, encoder, queries, depth, fused)

    def base(self, name: str, queries: Sequence[str]) -> RetrievalResult:
        """A shared first-stage ranking ``prefilter_depth`` deep, cached in memory and on disk."""
        qkey = fingerprint(queries)
        key = {"base": name, "queries": qkey, "depth": self.prefilter_depth, "bm25": self.bm25_params,
               "encoders": self.encoder_ids, "version": BASE_VERSION}

        def compute() -> RetrievalResult:
            family, encoder = base_family(name)
            if fused := family.base_needs(encoder).bases:  # the same fusion as retrieve_with, from the shared bases
                return family.rank_base(self, encoder, queries, self.prefilter_depth,
                                        [self.base(other, queries) for other in fused])
            return self.retrieve_with(name, queries, self.prefilter_depth)

        return self._remember(("base", name), lambda: self._cached_result("base", key, compute), qkey)

    def expanded_queries(self, first: str, append: str, queries: Sequence[str]) -> list[str]:
        """``queries`` with the top passage of base ``first`` appended (``title`` or ``text``)."""
        return self._remember(
            ("expanded", first, append),
            lambda: expand_queries(queries, self.base(first, queries), self.titles, self.texts, append=append),
            fingerprint(queries),
        )

    def cross_scores(self, base: str, queries: Sequence[str], depth: int) -> Embedding:
        """``(n_queries, depth)`` cross-encoder scores of each query with base ``base``'s top ``depth``
        passages (``-inf`` on padding), each pair scored once per query batch, by the model that
        scores its query (:meth:`CrossEncoderPart.folder_for`: a fold model for a cross-fitted question)."""
        ranking = self.base(base, queries)
        held = self._remember(("cross_scores", base), ColumnScores, fingerprint(queries))
        return held.upto(min(depth, ranking.k), lambda lo, hi: self.cross_encoder.score_rows(
            queries, self.passage_texts, ranking.doc_ids[:, lo:hi]))

    def graph(self, max_entity_df: int | None = None) -> PassageGraph:
        """The passage graph of the corpus, built once per ``max_entity_df``.

        None: every title links, each passage keeps at most ``graph_max_degree`` links. A cap:
        links through titles carried or mentioned by more than ``max_entity_df`` passages are
        dropped and no degree cap applies, since a degree cap of 50 would hide caps of hundreds.
        """
        if max_entity_df is None:
            return self._index(index_key("graph", {"max_entity_df": None}), lambda: PassageGraph.build(
                self.titles, self.texts, max_degree=self.graph_max_degree
            ))
        return self._index(index_key("graph", {"max_entity_df": max_entity_df}), lambda: PassageGraph.build(
            self.titles, self.texts, max_degree=None, max_entity_df=max_entity_df
        ))

    def forget_queries(self) -> None:
        """Drop every query-batch part from memory (corpus parts stay)."""
        self._memo.clear_batches()

    def cold_queries(self, scope: str, *, forget: bool = True) -> None:
        """Drop every query-batch part and tag the ones computed from now on with ``scope``.

        A timed system starts with cold query caches (embeddings, first-stage rankings, results)
        and the warm corpus parts a service keeps; :meth:`memo_stats` then counts any hit on
        another scope's query part as ``foreign_query_hits``. ``forget=False`` only retags (what
        the counters see when scopes share the caches).
        """
        if forget:
            self._memo.clear_batches()
        self._memo.set_scope(scope)

    def prepare(
        self, candidates: Sequence[CandidateSpec], queries: Sequence[str], *, executor: Executor | None = None
    ) -> None:
        """Compute once every shared part ``candidates`` need for ``queries``.

        That is the query embeddings of their encoders, their bases, their two-hop expansions (with
        the expanded queries' embeddings for a dense second hop) and the corpus parts they use, so
        that candidates run afterwards, possibly in parallel, only do their own work.

        Args:
            candidates: The candidates about to run.
            queries: The batch they will run on.
            executor: Where to compute independent parts in parallel (the calling thread helps,
                so this finishes even when every worker is busy); None computes them in turn.
        """
        run_parts(shared_part_calls(self, candidates, queries), executor)

    # --- candidates ---------------------------------------------------------------------------
    def run(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult:
        """The ``(n_queries, num_docs)`` ranking of one candidate, from the disk cache when possible
        (:meth:`candidate_key`). Every row holds exactly ``num_docs`` distinct passages: rows a family
        leaves short are completed by :meth:`_complete`; :func:`check_full` checks any result."""
        complete = partial(self._complete, candidate, queries)
        result = self._cached_result("candidates", self.candidate_key(candidate, queries),
                                     lambda: complete(self._compute(candidate, queries)))
        check_full(result, len(queries), self.num_docs, candidate.name)
        return result

    def candidate_key(self, candidate: CandidateSpec, queries: Sequence[str]) -> dict[str, Any]:
        """The disk-cache key of ``candidate``'s ranking of ``queries``: every setting it reads (the
        graph's degree cap and the completion encoder, whose config order the sorted encoder
        identities lose, included), the declared versions of the family's rankings, of completion and
        of the first stages, and for a family that scores with the cross-encoder the digest of the
        models that scored the queries (:meth:`CrossEncoderPart.digest_for`: the full model's, or one
        over each query's model)."""
        family = self._family(candidate)
        scores_pairs = family.needs(family.full_params(candidate.params)).cross_encoder
        reads = {"cross_encoder": self.cross_encoder.digest_for(queries)} if scores_pairs else {}
        return {**reads, "candidate": candidate.to_record(), "queries": fingerprint(queries), "num_docs": self.num_docs,
                "depth": self.prefilter_depth, "bm25": self.bm25_params, "encoders": self.encoder_ids,
                "graph_max_degree": self.graph_max_degree, "completion_encoder": self.completion_encoder,
                "version": [family.result_version, COMPLETION_VERSION, BASE_VERSION]}

    def _complete(self, candidate: CandidateSpec, queries: Sequence[str], result: RetrievalResult) -> RetrievalResult:
        """``result`` with short rows completed from the candidate's first stage, then the first
        encoder's dense ranking, then corpus order (see :func:`complete_rows`)."""
        fallbacks = []
        stage = self._family(candidate).first_stage
        if stage:
            fallbacks.append(partial(self.base, candidate.params[stage], queries))
        if self.completion_encoder is not None:
            fallbacks.append(partial(self.base, f"dense:{self.completion_encoder}", queries))
        return complete_rows(result, fallbacks, len(self.texts))

    def run_all(
        self, candidates: Sequence[CandidateSpec], queries: Sequence[str], desc: str = "candidates"
    ) -> list[RetrievalResult]:
        """Rankings of every candidate, with a progress bar."""
        return [self.run(c, queries) for c in tqdm(candidates, desc=desc, unit="cand")]

    def _compute(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult:
        """The candidate's own ``(n_queries, num_docs)`` ranking, short rows still ``-1``-padded."""
        family = self._family(candidate)
        return family.run(self, family.full_params(candidate.params), queries, self.num_docs)

    @staticmethod
    def _family(candidate: CandidateSpec) -> Family:
        """The registered family of ``candidate`` (a saved bundle's member may name one not registered here)."""
        family = families().get(candidate.family)
        if family is None:
            raise ValueError(f"unknown family {candidate.family!r} for candidate {candidate.name}")
        return family
