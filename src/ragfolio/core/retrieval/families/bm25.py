"""``bm25``: lexical BM25 over the corpus (bm25s in process, or an Elasticsearch cluster).

Parameters are those of :class:`~ragfolio.core.retrieval.indexes.bm25_index.BM25Retriever`; ``backend`` is
``inprocess`` (the default, left out of names) or ``elasticsearch``. As a base, ``bm25`` is the
pool's default BM25 (``candidate_scoring.bm25_base``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrieval.family import BACKENDS, Family, Parts, SharedParts, register
from ragfolio.core.retrieval.indexes.bm25_index import BM25_DEFAULTS
from ragfolio.core.retrieval.results import RetrievalResult


@register
class BM25Family(Family):
    """BM25 with ``k1``, ``b``, ``method`` and ``stopwords``."""

    name = "bm25"
    params = dict(BM25_DEFAULTS)
    optional = {"backend": "inprocess"}
    choices = {"backend": BACKENDS}
    base = True

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        return SharedParts(bm25=(params,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        return parts.bm25(params).retrieve(queries, depth)

    def rank_base(
        self, parts: Parts, encoder: str, queries: Sequence[str], depth: int, inputs: Sequence[RetrievalResult]
    ) -> RetrievalResult:
        return parts.bm25({}).retrieve(queries, depth)
