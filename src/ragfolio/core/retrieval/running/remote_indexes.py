"""A pool runner's indexes on an Elasticsearch cluster (``backend: elasticsearch``), built once per corpus.

The cluster index holds the corpus's passage texts (BM25) or vectors (dense), keyed by row; when the
corpus's rows carry metadata (a served bundle's, :attr:`PoolRunner.passage_metadata
<ragfolio.core.retrieval.running.pool_runner.PoolRunner>`), it also stores each row's id, title and
metadata, so a query's filter is applied inside the cluster's search
(:mod:`ragfolio.core.corpus.filters`); without metadata it is named and built as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever, ElasticsearchDenseRetriever
from ragfolio.core.retrieval.indexes.elasticsearch_settings import ElasticsearchSettings

if TYPE_CHECKING:
    from ragfolio.core.retrieval.running.pool_runner import PoolRunner


def remote_fields(runner: PoolRunner) -> dict[str, Any]:
    """What the index stores beside each passage for filters: nothing when the corpus has no metadata."""
    if runner.passage_metadata is None:
        return {}
    ids, metadata = runner.passage_metadata
    return {"ids": list(ids), "titles": list(runner.titles), "metadata": list(metadata)}


def remote_bm25(runner: PoolRunner, params: Mapping[str, Any]) -> ElasticsearchBM25Retriever:
    """The runner's corpus indexed for BM25 with ``params`` on the cluster its settings name."""
    return ElasticsearchBM25Retriever(ElasticsearchSettings.resolve(runner.elasticsearch), **params).index(
        runner.passage_texts, corpus_key=runner.corpus_key, **remote_fields(runner))


def remote_dense(runner: PoolRunner, encoder: str, index_type: str) -> ElasticsearchDenseRetriever:
    """The runner's ``encoder`` vectors indexed (``index_type``) on the cluster its settings name."""
    return ElasticsearchDenseRetriever(ElasticsearchSettings.resolve(runner.elasticsearch),
                                       index_type=index_type).index(runner.passage_embeddings(encoder),
                                                                    **remote_fields(runner))
