"""Stage 2, retrieval: the candidate pool and the retrievers it is made of.

* :mod:`~ragfolio.core.retrieval.pool`: the YAML grid expanded into named candidates.
* :mod:`~ragfolio.core.retrieval.family`: the contract of a retriever family and its registry;
  :mod:`ragfolio.core.retrieval.families` holds the built-in ones, one module each.
* :mod:`~ragfolio.core.retrieval.pool_runner`, :mod:`~ragfolio.core.retrieval.runners`,
  :mod:`~ragfolio.core.retrieval.memo`: running a pool over a corpus, sharing the heavy parts.
* :mod:`~ragfolio.core.retrieval.executor`: running the routed members of a portfolio concurrently,
  with a deadline (the service and RAG).
* Retrievers: :mod:`~ragfolio.core.retrieval.bm25`, :mod:`~ragfolio.core.retrieval.dense`,
  :mod:`~ragfolio.core.retrieval.fusion`, :mod:`~ragfolio.core.retrieval.diversity`,
  :mod:`~ragfolio.core.retrieval.graph`, :mod:`~ragfolio.core.retrieval.passage_graph`,
  :mod:`~ragfolio.core.retrieval.iterative`, :mod:`~ragfolio.core.retrieval.completion`, and the
  Elasticsearch backend (:mod:`~ragfolio.core.retrieval.elasticsearch`).
* Encoders: :mod:`~ragfolio.core.retrieval.encoders`, :mod:`~ragfolio.core.retrieval.split_models`.

Every retriever returns a :class:`RetrievalResult` (``base``).
"""

from ragfolio.core.retrieval.base import Prefilter, RetrievalResult

__all__ = ["Prefilter", "RetrievalResult"]
