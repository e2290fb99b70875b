"""``dense``: nearest passages by embedding cosine (FAISS in process, or an Elasticsearch cluster).

``index_type`` is ``flat`` (exact) or ``hnsw``; ``backend`` is ``inprocess`` (the default, left
out of names) or ``elasticsearch``. As a base, ``dense:<encoder>`` searches the encoder's in-process
index of the corpus's size (``auto``: flat or HNSW).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrieval.family import BACKENDS, DenseIndex, Family, Parts, SharedParts, register
from ragfolio.core.retrieval.results import RetrievalResult


@register
class DenseFamily(Family):
    """Dense retrieval with ``encoder``'s embeddings."""

    name = "dense"
    params = {"encoder": None, "index_type": "flat"}
    required = ("encoder",)
    optional = {"backend": "inprocess"}
    choices = {"backend": BACKENDS}
    base = True
    base_encoder = True

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        index = DenseIndex(params["encoder"], params["index_type"], params["backend"])
        return SharedParts(query_encoders=(params["encoder"],), dense=(index,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        index = parts.dense(params["encoder"], params["index_type"], params["backend"])
        return index.retrieve_embedded(parts.query_embeddings(params["encoder"], queries), depth)

    def base_needs(self, encoder: str) -> SharedParts:
        return SharedParts(query_encoders=(encoder,), dense=(DenseIndex(encoder, "auto"),))

    def rank_base(
        self, parts: Parts, encoder: str, queries: Sequence[str], depth: int, inputs: Sequence[RetrievalResult]
    ) -> RetrievalResult:
        return parts.dense(encoder).retrieve_embedded(parts.query_embeddings(encoder, queries), depth)
