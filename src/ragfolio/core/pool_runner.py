"""Run a pool of candidates over one corpus and one batch of queries, sharing the heavy parts.

Candidates of a pool are cheap variations on a few expensive base parts: a BM25 index, one set of
passage embeddings per encoder, and deep first-stage rankings ("bases", ``prefilter_depth`` deep).
:class:`PoolRunner` computes each base part once, keeps it in memory for the run and in an
:class:`~ragfolio.core.cache.ArrayCache` on disk across runs, and derives every candidate from them.

Base names: ``bm25`` (the pool's default BM25), ``dense:<encoder>``, ``hybrid:<encoder>`` (RRF of
the two, equal weights).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache, fingerprint
from ragfolio.core.encoders import Encoder, make_encoder
from ragfolio.core.pool import CandidateSpec
from ragfolio.core.retrievers.base import RetrievalResult
from ragfolio.core.retrievers.bm25 import BM25Retriever, tokenize
from ragfolio.core.retrievers.dense import DenseRetriever
from ragfolio.core.retrievers.diversity import discounted_similarity, mmr, vendi
from ragfolio.core.retrievers.fusion import reciprocal_rank_fusion, score_fusion
from ragfolio.core.retrievers.graph import PassageGraph, graph_expand
from ragfolio.core.retrievers.iterative import expand_queries, merge_hops

logger = logging.getLogger(__name__)

Embedding = npt.NDArray[np.float32]


def passage_texts(titles: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The text a retriever sees for each passage: ``"<title>. <text>"``."""
    return [f"{title}. {text}" for title, text in zip(titles, texts, strict=True)]


class PoolRunner:
    """Computes candidates' rankings over one corpus.

    Args:
        titles: Passage titles, one per corpus row.
        texts: Passage texts, one per corpus row.
        encoders: Encoder configs by name (``{"minilm": {"kind": ..., ...}}``), built lazily.
        cache: Where base parts and candidate results persist between runs.
        num_docs: Passages every candidate returns.
        prefilter_depth: Depth of the shared first-stage rankings.
        bm25_params: The default BM25 used as a base (``k1``, ``b``, ``method``, ``stopwords``).
        graph_max_degree: Degree cap of the passage graph.
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
    ) -> None:
        if num_docs < 1:
            raise ValueError(f"num_docs={num_docs} must be >= 1")
        if prefilter_depth < num_docs:
            raise ValueError(f"prefilter_depth={prefilter_depth} must be >= num_docs={num_docs}")
        self.titles, self.texts = list(titles), list(texts)
        self.encoder_specs = {name: dict(spec) for name, spec in encoders.items()}
        self.cache = cache
        self.num_docs = num_docs
        self.prefilter_depth = prefilter_depth
        self.bm25_params = dict(bm25_params or {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "english"})
        self.graph_max_degree = graph_max_degree
        self.passage_texts = passage_texts(self.titles, self.texts)  # what every retriever sees
        self.corpus_key = fingerprint(self.passage_texts)
        self._encoders: dict[str, Encoder] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}

    # --- shared parts -------------------------------------------------------------------------
    def _encoder(self, name: str) -> Encoder:
        if name not in self.encoder_specs:
            raise ValueError(f"encoder={name!r} is not configured; configured: {sorted(self.encoder_specs)}")
        if name not in self._encoders:
            self._encoders[name] = make_encoder(self.encoder_specs[name])
        return self._encoders[name]

    def _remember(self, key: tuple[Any, ...], compute: Any) -> Any:
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def passage_embeddings(self, encoder: str) -> Embedding:
        """``(n_passages, dim)`` embeddings of the corpus, computed once per corpus and encoder."""

        def compute() -> Embedding:
            key = {"corpus": self.corpus_key, "encoder": self.encoder_specs.get(encoder), "name": encoder}
            texts = self.passage_texts
            logger.info("encoding %d passages with %s (cached after the first run)", len(texts), encoder)
            arrays = self.cache.get_or_compute(
                "passage_embeddings", key, lambda: {"emb": self._encoder(encoder).encode_passages(texts)}
            )
            return arrays["emb"]

        return self._remember(("passage_emb", encoder), compute)

    def query_embeddings(self, encoder: str, queries: Sequence[str]) -> Embedding:
        """``(n_queries, dim)`` query embeddings."""

        def compute() -> Embedding:
            key = {"queries": fingerprint(queries), "encoder": self.encoder_specs.get(encoder), "name": encoder}
            arrays = self.cache.get_or_compute(
                "query_embeddings", key, lambda: {"emb": self._encoder(encoder).encode_queries(list(queries))}
            )
            return arrays["emb"]

        return self._remember(("query_emb", encoder, fingerprint(queries)), compute)

    def _bm25(self, params: Mapping[str, Any]) -> BM25Retriever:
        full = {**self.bm25_params, **params}
        stopwords = full["stopwords"]
        tokens = self._remember(("tokens", stopwords), lambda: tokenize(self.passage_texts, stopwords))
        key = ("bm25", tuple(sorted(full.items())))
        return self._remember(key, lambda: BM25Retriever(**full).index(self.texts, tokens=tokens))

    def _dense(self, encoder: str, index_type: str = "flat") -> DenseRetriever:
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
               "encoders": self.encoder_specs}
        return self._remember(
            ("base", name, qkey),
            lambda: self._cached_result("base", key, lambda: self.retrieve_with(name, queries, self.prefilter_depth)),
        )

    def graph(self) -> PassageGraph:
        return self._remember(
            ("graph",), lambda: PassageGraph.build(self.titles, self.texts, max_degree=self.graph_max_degree)
        )

    # --- candidates ---------------------------------------------------------------------------
    def run(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult:
        """The ``(n_queries, num_docs)`` ranking of one candidate, from the disk cache when possible."""
        key = {"candidate": candidate.to_record(), "queries": fingerprint(queries), "num_docs": self.num_docs,
               "depth": self.prefilter_depth, "bm25": self.bm25_params, "encoders": self.encoder_specs}
        return self._cached_result("candidates", key, lambda: self._compute(candidate, queries))

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
            return self._dense(p["encoder"], p["index_type"]).retrieve_embedded(
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
            expanded = self._remember(
                ("expanded", p["first"], p["append"], fingerprint(queries)),
                lambda: expand_queries(queries, first, self.titles, self.texts, append=p["append"]),
            )
            second = self.retrieve_with(p["second"], expanded, 2 * k)
            return merge_hops(first, second, k, rule=p["merge"])
        raise ValueError(f"unknown family {family!r} for candidate {candidate.name}")
