"""``graph``: seed passages from a base, expanded over the passage graph and ranked again.

See :func:`~ragfolio.core.retrieval.ranking.graph_expansion.graph_expand`; ``encoder`` is needed (and only read)
by ``rank=dense``. ``max_entity_df`` walks the graph without links through titles (the stand-in
for entities) that more than that many passages carry or mention, and without the runner's degree
cap (:meth:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner.graph`); ``max_candidates`` caps each query's
neighbourhood. Both unset (None), a candidate ranks as before they existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragfolio.core.retrieval.family import Family, Parts, SharedParts, register
from ragfolio.core.retrieval.ranking.graph_expansion import graph_expand
from ragfolio.core.retrieval.results import RetrievalResult


@register
class GraphFamily(Family):
    """Expands base ``seeds`` over the title-mention graph."""

    name = "graph"
    params = {"seeds": None, "n_seeds": 2, "hops": 1, "rank": "ppr", "damping": 0.85, "encoder": None}
    optional = {"max_entity_df": None, "max_candidates": None}
    required = ("seeds",)
    first_stage = "seeds"
    live_updates = False  # the graph links the indexed passages; added ones join at the next run
    result_version = 2  # 2: short neighbourhoods are backfilled from the seeds' ranking

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        encoders = (params["encoder"],) if params["encoder"] else ()
        cap = params["max_entity_df"]
        return SharedParts(bases=(params["seeds"],), query_encoders=encoders, passage_encoders=encoders,
                           graph=cap is None, entity_graphs=() if cap is None else (cap,))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        encoder = params["encoder"]
        q_emb = parts.query_embeddings(encoder, queries) if encoder else None
        p_emb = parts.passage_embeddings(encoder) if encoder else None
        return graph_expand(
            parts.base(params["seeds"], queries), parts.graph(params["max_entity_df"]), depth, n_seeds=params["n_seeds"],
            hops=params["hops"], rank=params["rank"], damping=params["damping"], query_emb=q_emb, passage_emb=p_emb,
            max_candidates=params["max_candidates"],
        )
