"""What the diversifying families (``ds``, ``mmr``, ``vendi``) share: a prefilter base reordered
with one encoder's query and passage embeddings."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ragfolio.core.retrieval.family import Family, Parts, SharedParts
from ragfolio.core.retrieval.results import RetrievalResult


class PrefilterDiversifier(Family):
    """A family that reorders base ``prefilter`` with ``encoder``'s embeddings (not registered itself).

    Subclasses set ``name``, ``params`` (``prefilter`` and ``encoder`` first), ``algorithm`` (a
    function of :mod:`ragfolio.core.retrieval.ranking.diversification` called as ``algorithm(prefilter, q_emb,
    p_emb, depth, **options)``) and ``options`` (parameter name -> the algorithm's keyword).
    """

    algorithm: ClassVar[Callable[..., RetrievalResult]]
    options: ClassVar[Mapping[str, str]] = {}
    required = ("prefilter", "encoder")
    first_stage = "prefilter"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        encoder = params["encoder"]
        return SharedParts(bases=(params["prefilter"],), query_encoders=(encoder,), passage_encoders=(encoder,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        prefilter = parts.base(params["prefilter"], queries)
        q_emb, p_emb = parts.query_embeddings(params["encoder"], queries), parts.passage_embeddings(params["encoder"])
        options = {keyword: params[param] for param, keyword in self.options.items()}
        return type(self).algorithm(prefilter, q_emb, p_emb, depth, **options)
