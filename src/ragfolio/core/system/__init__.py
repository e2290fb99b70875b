"""Stage 6, system: the served system's retrieval, the bundle's portfolio and router routing live queries.

It comes after routing (it serves a trained router) and before answering (which reads from it):

* :mod:`~ragfolio.core.system.request`: :class:`RetrievalRequest`, a request's query, l and depth as
  the edge resolved them once (:class:`RequestRules`), the record everything below takes.
* :mod:`~ragfolio.core.system.routed_system`: :class:`RoutedSystem` routes a batch of requests and runs
  each query's top-l members concurrently (what ``/retrieve`` and the MLflow model serve), with
  :class:`RoutedRetrieval`, what one query got; built from a bundle by ``RoutedSystem.from_bundle``.
* :mod:`~ragfolio.core.system.bundle_indexes`: the bundle with the corpus indexes its service searches.

It imports no LLM; :class:`~ragfolio.core.answering.adaptive_rag.AdaptiveRAG` answers on top of it.
Import from the submodules; this ``__init__`` imports nothing.
"""
