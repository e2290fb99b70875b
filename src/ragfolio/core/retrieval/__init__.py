"""Stage 2, retrieval: the candidate pool and the retrievers it is made of.

* :mod:`~ragfolio.core.retrieval.pool`: the YAML grid expanded into named candidates.
* :mod:`~ragfolio.core.retrieval.family`: the contract of a retriever family and its registry;
  :mod:`ragfolio.core.retrieval.families` holds the built-in ones, one module each.
* :mod:`~ragfolio.core.retrieval.running.pool_runner`, :mod:`~ragfolio.core.scoring.runners`,
  :mod:`~ragfolio.core.retrieval.running.memo`: running a pool over a corpus, sharing the heavy parts.
* :mod:`~ragfolio.core.retrieval.running.member_executor`: running the routed members of a portfolio concurrently,
  with a deadline (the service and RAG).
* Retrievers: :mod:`~ragfolio.core.retrieval.indexes.bm25_index`, :mod:`~ragfolio.core.retrieval.indexes.faiss_index`,
  :mod:`~ragfolio.core.retrieval.ranking.fusion`, :mod:`~ragfolio.core.retrieval.ranking.diversification`,
  :mod:`~ragfolio.core.retrieval.ranking.graph_expansion`, :mod:`~ragfolio.core.retrieval.indexes.passage_graph`,
  :mod:`~ragfolio.core.retrieval.ranking.hops`, :mod:`~ragfolio.core.retrieval.ranking.completion`, and the
  Elasticsearch backend (:mod:`~ragfolio.core.retrieval.indexes.elasticsearch`).
* Encoders: :mod:`~ragfolio.core.retrieval.encoders.kinds`, :mod:`~ragfolio.core.retrieval.encoders.split_models`.

Every retriever returns a :class:`RetrievalResult` (``base``).
"""

from ragfolio.core.retrieval.results import Prefilter, RetrievalResult

__all__ = ["Prefilter", "RetrievalResult"]
