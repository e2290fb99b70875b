"""The built-in retriever families, registered in this order (the order of pool reports).

``base`` parameters name a shared first-stage ranking: ``bm25``, ``dense:<encoder>`` or
``hybrid:<encoder>``.

=============  ===========================================================================
bm25           k1, b, method, stopwords; backend (inprocess | elasticsearch)
dense          encoder, index_type; backend (inprocess | elasticsearch)
hybrid         encoder, method (rrf | score), rrf_k, weight (of the dense side)
ds             prefilter (a base), encoder, gamma, r
mmr            prefilter, encoder, lambda
vendi          prefilter, encoder, s
graph          seeds (a base), n_seeds, hops, rank (ppr | dense), damping, encoder; max_entity_df, max_candidates
two_hop        first (a base), append (title | text), second (bm25 | dense:<encoder>), merge
cross_encoder  prefilter (a base), depth (its passages scored by the trained cross-encoder)
=============  ===========================================================================
"""

from ragfolio.core.retrieval.families import bm25, dense, hybrid, discounted_similarity, mmr, vendi, graph, two_hop  # noqa: I001
from ragfolio.core.retrieval.families import cross_encoder  # noqa: I001

__all__ = ["bm25", "dense", "hybrid", "discounted_similarity", "mmr", "vendi", "graph", "two_hop", "cross_encoder"]
