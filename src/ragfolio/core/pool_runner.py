"""Run a pool of candidates over one corpus and one batch of queries, sharing the heavy parts.

Candidates of a pool are cheap variations on a few expensive base parts: a BM25 index, one set of
passage embeddings per encoder, and deep first-stage rankings ("bases", ``prefilter_depth`` deep).
:class:`PoolRunner` computes each base part once, keeps it in memory and in an
:class:`~ragfolio.core.cache.ArrayCache` on disk across runs, and derives every candidate from them.

Base names: ``bm25`` (the pool's default BM25), ``dense:<encoder>``, ``hybrid:<encoder>`` (RRF of
the two, equal weights).

Memory and threads: corpus parts (tokens, indexes, passage embeddings, the graph) stay for the
runner's lifetime; parts of a query batch (query embeddings, bases, expanded queries) live in an
LRU of ``max_query_batches`` batches, so a service answering one query at a time stays bounded.
``run`` may be called from several threads at once: each shared part is computed by one of them
while the others wait for it. For online use build the runner on ``ArrayCache(path,
enabled=False)`` so per-query parts and results are not written to disk.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from functools import partial
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache, fingerprint
from ragfolio.core.encoders import encoder_identity, make_encoder
from ragfolio.core.memo import PartsMemo
from ragfolio.core.pool import CandidateSpec
from ragfolio.core.retrievers.base import RetrievalResult
from ragfolio.core.retrievers.bm25 import BM25Retriever, tokenize
from ragfolio.core.retrievers.completion import check_full, complete_rows
from ragfolio.core.retrievers.dense import DenseRetriever
from ragfolio.core.retrievers.diversity import discounted_similarity, mmr, vendi
from ragfolio.core.retrievers.elasticsearch import (
    ElasticsearchBM25Retriever,
    ElasticsearchDenseRetriever,
    ElasticsearchSettings,
)
from ragfolio.core.retrievers.fusion import reciprocal_rank_fusion, score_fusion
from ragfolio.core.retrievers.graph import PassageGraph, graph_expand
from ragfolio.core.retrievers.iterative import expand_queries, merge_hops

logger = logging.getLogger(__name__)

Embedding = npt.NDArray[np.float32]

# Bumped when a family's rankings change for the same parameters, so cached results are recomputed
# (every candidate's cache key carries its family's version; a family not listed is at 1).
# graph 2: short neighbourhoods are backfilled from the seeds' first-stage ranking.
RESULT_VERSIONS = {"graph": 2}
# Bumped when the completion of short rows (applied to every family, see completion.py) changes.
COMPLETION_VERSION = 1
# The first-stage ranking each family builds on, by the parameter naming it: a short row is
# completed from it first (bm25, dense and hybrid rank the corpus themselves).
FIRST_STAGE = {"ds": "prefilter", "mmr": "prefilter", "vendi": "prefilter", "graph": "seeds", "two_hop": "first"}
T = TypeVar("T")


def passage_texts(titles: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The text a retriever sees for each passage: ``"<title>. <text>"``."""
    return [f"{title}. {text}" for title, text in zip(titles, texts, strict=True)]


class PoolRunner:
    """Computes candidates' rankings over one corpus; safe to call from several threads.

    Args:
        titles: Passage titles, one per corpus row.
        texts: Passage texts, one per corpus row.
        encoders: Encoder configs by name (``{"minilm": {"kind": ..., ...}}``), built lazily.
        cache: Where base parts and candidate results persist between runs (disable it online).
        num_docs: Passages every candidate returns.
        prefilter_depth: Depth of the shared first-stage rankings.
        bm25_params: The default BM25 used as a base (``k1``, ``b``, ``method``, ``stopwords``).
        graph_max_degree: Degree cap of the passage graph.
        max_query_batches: Query batches whose parts stay in memory (least recently used go first).
        passage_embeddings: Precomputed ``(n_passages, dim)`` corpus embeddings by encoder name (a
            saved bundle's), used instead of encoding the corpus.
        elasticsearch: Connection settings of ``backend: elasticsearch`` candidates (keys of
            :class:`ElasticsearchSettings`); unset keys come from ``ELASTICSEARCH_*`` variables or
            conf/local/credentials.yml.
    """

    def __init__(
        self,
        titles: Sequence[str],
        texts: Sequence[str],
        encoders: Mapping[str, Mapping[str, Any]],
        cache: ArrayCache,
        *,
        num_docs: int = 4,
        prefilter_depth: int = 100,
        bm25_params: Mapping[str, Any] | None = None,
        graph_max_degree: int = 50,
        max_query_batches: int = 256,
        passage_embeddings: Mapping[str, Embedding] | None = None,
        elasticsearch: Mapping[str, Any] | None = None,
    ) -> None:
        if num_docs < 1:
            raise ValueError(f"num_docs={num_docs} must be >= 1")
        if prefilter_depth < num_docs:
            raise ValueError(f"prefilter_depth={prefilter_depth} must be >= num_docs={num_docs}")
        if len(texts) < num_docs:
            raise ValueError(f"the corpus has {len(texts)} passages, fewer than num_docs={num_docs}")
        self.titles, self.texts = list(titles), list(texts)
        self.encoder_specs = {name: dict(spec) for name, spec in encoders.items()}
        # Settings and package versions of each encoder: part of every cache key that vectors feed.
        self.encoder_ids = {name: encoder_identity(spec) for name, spec in self.encoder_specs.items()}
        self.cache = cache
        self.num_docs = num_docs
        self.prefilter_depth = prefilter_depth
        self.bm25_params = dict(bm25_params or {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "english"})
        self.graph_max_degree = graph_max_degree
        self.passage_texts = passage_texts(self.titles, self.texts)  # what every retriever sees
        self.corpus_key = fingerprint(self.passage_texts)
        self._memo = PartsMemo(max_query_batches)
        self._given_embeddings = dict(passage_embeddings or {})
        self.elasticsearch = dict(elasticsearch or {})
        for name, emb in self._given_embeddings.items():
            if len(emb) != len(self.texts):
                raise ValueError(f"passage_embeddings[{name!r}] has {len(emb)} rows for {len(self.texts)} passages")

    # --- shared parts -------------------------------------------------------------------------
    def memo_stats(self) -> dict[str, int]:
        """Parts held in memory: ``corpus_parts``, ``query_batches`` and ``query_parts``."""
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
        """``(n_passages, dim)`` embeddings of the corpus, computed once per corpus and encoder."""

        def compute() -> Embedding:
            if encoder in self._given_embeddings:
                return self._given_embeddings[encoder]
            key = {"corpus": self.corpus_key, "encoder": self.encoder_ids.get(encoder), "name": encoder}
            texts = self.passage_texts
            logger.info("encoding %d passages with %s (cached after the first run)", len(texts), encoder)
            arrays = self.cache.get_or_compute(
                "passage_embeddings", key, lambda: {"emb": self._encode(encoder, texts, queries=False)}
            )
            return arrays["emb"]

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

    def _bm25(self, params: Mapping[str, Any]) -> BM25Retriever | ElasticsearchBM25Retriever:
        full = {**self.bm25_params, **params}
        if full.pop("backend", "inprocess") == "elasticsearch":  # indexed once per corpus and parameters
            return self._remember(("es_bm25", tuple(sorted(full.items()))), lambda: ElasticsearchBM25Retriever(
                ElasticsearchSettings.resolve(self.elasticsearch), **full
            ).index(self.passage_texts, corpus_key=self.corpus_key))
        stopwords = full["stopwords"]
        tokens = self._remember(("tokens", stopwords), lambda: tokenize(self.passage_texts, stopwords))
        key = ("bm25", tuple(sorted(full.items())))
        return self._remember(key, lambda: BM25Retriever(**full).index(self.texts, tokens=tokens))

    def _dense(
        self, encoder: str, index_type: str = "flat", backend: str = "inprocess"
    ) -> DenseRetriever | ElasticsearchDenseRetriever:
        if backend == "elasticsearch":
            return self._remember(("es_dense", encoder, index_type), lambda: ElasticsearchDenseRetriever(
                ElasticsearchSettings.resolve(self.elasticsearch), index_type=index_type
            ).index(self.passage_embeddings(encoder)))
        return self._remember(
            ("dense", encoder, index_type),
            lambda: DenseRetriever(index_type=index_type).index(self.passage_embeddings(encoder)),
        )

    def _cached_result(
        self, namespace: str, key: Mapping[str, Any], compute: Callable[[], RetrievalResult]
    ) -> RetrievalResult:
        def as_arrays() -> dict[str, npt.NDArray[Any]]:
            result = compute()
            return {"doc_ids": result.doc_ids, "scores": result.scores}

        arrays = self.cache.get_or_compute(namespace, {"corpus": self.corpus_key, **key}, as_arrays)
        return RetrievalResult(arrays["doc_ids"], arrays["scores"])

    def retrieve_with(self, base: str, queries: Sequence[str], depth: int) -> RetrievalResult:
        """Rank the corpus for ``queries`` with a base retriever (``bm25`` or ``dense:<encoder>``)."""
        if base == "bm25":
            return self._bm25({}).retrieve(queries, depth)
        family, _, encoder = base.partition(":")
        if family == "dense" and encoder:
            return self._dense(encoder).retrieve_embedded(self.query_embeddings(encoder, queries), depth)
        if family == "hybrid" and encoder:
            parts = [self.retrieve_with("bm25", queries, depth), self.retrieve_with(f"dense:{encoder}", queries, depth)]
            return reciprocal_rank_fusion(parts, depth)
        raise ValueError(f"base={base!r} must be 'bm25', 'dense:<encoder>' or 'hybrid:<encoder>'")

    def base(self, name: str, queries: Sequence[str]) -> RetrievalResult:
        """A shared first-stage ranking ``prefilter_depth`` deep, cached in memory and on disk."""
        qkey = fingerprint(queries)
        key = {"base": name, "queries": qkey, "depth": self.prefilter_depth, "bm25": self.bm25_params,
               "encoders": self.encoder_ids}

        def compute() -> RetrievalResult:
            family, _, encoder = name.partition(":")
            if family == "hybrid" and encoder:  # the same fusion as retrieve_with, from the shared parts
                parts = [self.base("bm25", queries), self.base(f"dense:{encoder}", queries)]
                return reciprocal_rank_fusion(parts, self.prefilter_depth)
            return self.retrieve_with(name, queries, self.prefilter_depth)

        return self._remember(("base", name), lambda: self._cached_result("base", key, compute), qkey)

    def expanded_queries(self, first: str, append: str, queries: Sequence[str]) -> list[str]:
        """``queries`` with the top passage of base ``first`` appended (``title`` or ``text``)."""
        return self._remember(
            ("expanded", first, append),
            lambda: expand_queries(queries, self.base(first, queries), self.titles, self.texts, append=append),
            fingerprint(queries),
        )

    def graph(self) -> PassageGraph:
        return self._remember(
            ("graph",), lambda: PassageGraph.build(self.titles, self.texts, max_degree=self.graph_max_degree)
        )

    def forget_queries(self) -> None:
        """Drop every query-batch part from memory (corpus parts stay)."""
        self._memo.clear_batches()

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
        encoders: dict[str, None] = {}  # dicts as ordered sets
        bases: dict[str, None] = {}
        expansions: dict[tuple[str, str, str], None] = {}
        corpus: list[Callable[[], object]] = []
        for candidate in candidates:
            p, family = candidate.params, candidate.family
            if family == "bm25":
                corpus.append(partial(self._bm25, p))
            elif family == "dense":
                corpus.append(partial(self._dense, p["encoder"], p["index_type"], p.get("backend", "inprocess")))
                encoders[p["encoder"]] = None
            elif family == "hybrid":
                bases.update({"bm25": None, f"dense:{p['encoder']}": None})
            elif family in ("ds", "mmr", "vendi", "graph"):
                bases[p["seeds"] if family == "graph" else p["prefilter"]] = None
                if p["encoder"]:
                    encoders[p["encoder"]] = None
                    corpus.append(partial(self.passage_embeddings, p["encoder"]))
                if family == "graph":
                    corpus.append(self.graph)
            elif family == "two_hop":
                bases[p["first"]] = None
                expansions[(p["first"], p["append"], p["second"])] = None
        for base in bases:  # a dense or hybrid base needs its encoder's query embeddings too
            family, _, encoder = base.partition(":")
            if family in ("dense", "hybrid") and encoder:
                encoders[encoder] = None
        parts = [partial(self.query_embeddings, encoder, queries) for encoder in encoders]
        parts += [partial(self.base, base, queries) for base in bases]
        parts += [partial(self._expand_and_embed, *expansion, queries) for expansion in expansions]
        parts += corpus
        if executor is None:
            for part in parts:
                part()
            return
        # Parts wait for each other through the memo's per-key locks, never for a queued task, so
        # this cannot deadlock; a part no worker has started yet is run by the calling thread.
        futures = [executor.submit(part) for part in parts]
        for part, future in zip(parts, futures, strict=True):
            if future.cancel():
                part()
            else:
                future.result()

    def _expand_and_embed(self, first: str, append: str, second: str, queries: Sequence[str]) -> None:
        expanded = self.expanded_queries(first, append, queries)
        family, _, encoder = second.partition(":")
        if family == "dense" and encoder:
            self._dense(encoder)
            self.query_embeddings(encoder, expanded)

    # --- candidates ---------------------------------------------------------------------------
    def run(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult:
        """The ``(n_queries, num_docs)`` ranking of one candidate, from the disk cache when possible.

        Every row holds exactly ``num_docs`` distinct passages: rows a family leaves short are
        completed by :meth:`_complete`, and :func:`check_full` checks the result, cached or not.
        """
        key = {"candidate": candidate.to_record(), "queries": fingerprint(queries), "num_docs": self.num_docs,
               "depth": self.prefilter_depth, "bm25": self.bm25_params, "encoders": self.encoder_ids,
               "version": [RESULT_VERSIONS.get(candidate.family, 1), COMPLETION_VERSION]}
        result = self._cached_result(
            "candidates", key, lambda: self._complete(candidate, queries, self._compute(candidate, queries))
        )
        check_full(result, len(queries), self.num_docs, candidate.name)
        return result

    def _complete(self, candidate: CandidateSpec, queries: Sequence[str], result: RetrievalResult) -> RetrievalResult:
        """``result`` with short rows completed from the candidate's first stage, then the first
        encoder's dense ranking, then corpus order (see :func:`complete_rows`)."""
        fallbacks = []
        stage = FIRST_STAGE.get(candidate.family)
        if stage:
            fallbacks.append(partial(self.base, candidate.params[stage], queries))
        if self.encoder_specs:
            fallbacks.append(partial(self.base, f"dense:{next(iter(self.encoder_specs))}", queries))
        return complete_rows(result, fallbacks, len(self.texts))

    def run_all(
        self, candidates: Sequence[CandidateSpec], queries: Sequence[str], desc: str = "candidates"
    ) -> list[RetrievalResult]:
        """Rankings of every candidate, with a progress bar."""
        return [self.run(c, queries) for c in tqdm(candidates, desc=desc, unit="cand")]

    def _compute(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult:
        p, k, family = candidate.params, self.num_docs, candidate.family
        if family == "bm25":
            return self._bm25(p).retrieve(queries, k)
        if family == "dense":
            return self._dense(p["encoder"], p["index_type"], p.get("backend", "inprocess")).retrieve_embedded(
                self.query_embeddings(p["encoder"], queries), k
            )
        if family == "hybrid":
            parts = [self.base("bm25", queries), self.base(f"dense:{p['encoder']}", queries)]
            weights = [1.0 - p["weight"], p["weight"]]
            if p["method"] == "rrf":
                return reciprocal_rank_fusion(parts, k, rrf_k=p["rrf_k"], weights=weights)
            if p["method"] == "score":
                return score_fusion(parts, k, weights=weights)
            raise ValueError(f"{candidate.name}: method={p['method']!r} must be 'rrf' or 'score'")
        if family in ("ds", "mmr", "vendi"):
            prefilter = self.base(p["prefilter"], queries)
            q_emb, p_emb = self.query_embeddings(p["encoder"], queries), self.passage_embeddings(p["encoder"])
            if family == "ds":
                return discounted_similarity(prefilter, q_emb, p_emb, k, gamma=p["gamma"], r=p["r"])
            if family == "mmr":
                return mmr(prefilter, q_emb, p_emb, k, lambda_=p["lambda"])
            return vendi(prefilter, q_emb, p_emb, k, s=p["s"])
        if family == "graph":
            encoder = p["encoder"]
            q_emb = self.query_embeddings(encoder, queries) if encoder else None
            p_emb = self.passage_embeddings(encoder) if encoder else None
            return graph_expand(
                self.base(p["seeds"], queries), self.graph(), k, n_seeds=p["n_seeds"], hops=p["hops"],
                rank=p["rank"], damping=p["damping"], query_emb=q_emb, passage_emb=p_emb,
            )
        if family == "two_hop":
            first = self.base(p["first"], queries)
            expanded = self.expanded_queries(p["first"], p["append"], queries)
            second = self.retrieve_with(p["second"], expanded, 2 * k)
            return merge_hops(first, second, k, rule=p["merge"])
        raise ValueError(f"unknown family {family!r} for candidate {candidate.name}")
