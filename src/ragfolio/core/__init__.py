"""Framework-free core of ragfolio, one package a stage of the method.

==============  ====================================================================
``data``        questions and passages: the JSONL format, converters, corpora
``retrieval``   retriever families, the candidate pool, encoders, running members
``scoring``     the utility matrix ``U`` (queries x candidates) and its row index
``selection``   greedy portfolio selection on ``U``, baselines, best-of-k curves
``routing``     routers (learned, ablations, retrieval-aware) and how they are judged
``answering``   the LLM, RAG answering, the selector, end-to-end comparisons
``bundle``      the served folder: portfolio, router, corpus, embeddings, checksums
==============  ====================================================================

Shared by several stages: :mod:`~ragfolio.core.metrics` (per-query scores),
:mod:`~ragfolio.core.stats` (bootstrap intervals), :mod:`~ragfolio.core.cache` (on-disk arrays),
:mod:`~ragfolio.core.batching` (micro-batches of concurrent requests).

Nothing under ``ragfolio.core`` imports kedro, mlflow, bentoml or dvc; the Kedro pipelines and the
service only translate in and out of it (a test checks this in a fresh interpreter).
"""
