"""``cross_encoder``: a prefilter base reranked by the cross-encoder trained on the train labels.

The cross-encoder reads each (question, passage) pair jointly, which no other family does. Candidate
scoring trains it (:mod:`ragfolio.core.retrieval.reranking`) when the grid holds this family, and
the pool runner loads it from the folder its settings name (``PoolSettings.cross_encoder``); without
one the family refuses, naming the setting. With cross-fitting (``PoolSettings.cross_encoder_folds``)
a train question's pairs are scored by the fold model that did not train on it
(:mod:`ragfolio.core.retrieval.reranking.cross_fitting`), so its train rows are not optimistic. ``depth``: how many of the prefilter's top passages are
scored (at most ``prefilter_depth``); the family returns them by descending score.

``fusion``: ``none`` ranks by the cross-encoder's score alone; ``rrf`` by reciprocal rank fusion
of its order and the prefilter's top ``depth`` (:func:`~ragfolio.core.retrieval.ranking.fusion.reciprocal_rank_fusion`,
as the ``hybrid`` family fuses BM25 and dense). On ``../shared/data``'s dev questions the fine-tuned cross-encoder alone reranks BM25's
top 20 to BM25's own recall@4 and MRR; the two orders err on different questions, which the fused
order can use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.family import Family, Parts, SharedParts, register
from ragfolio.core.retrieval.ranking.fusion import reciprocal_rank_fusion
from ragfolio.core.retrieval.results import RetrievalResult


@register
class CrossEncoderFamily(Family):
    """Reorders base ``prefilter``'s top ``depth`` passages by the cross-encoder's score."""

    name = "cross_encoder"
    params = {"prefilter": None, "depth": 20}
    required = ("prefilter",)
    optional = {"fusion": "none"}
    choices = {"fusion": ("none", "rrf")}
    first_stage = "prefilter"

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        return SharedParts(bases=(params["prefilter"],), cross_encoder=True)

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        if int(params["depth"]) < 1:
            raise ValueError(f"cross_encoder: depth={params['depth']} must be >= 1")
        prefilter = parts.base(params["prefilter"], queries)
        reranked = min(int(params["depth"]), prefilter.k)  # the cross-encoder's own depth: passages it scores
        scores = parts.cross_scores(params["prefilter"], queries, reranked)  # -inf on padding
        top = RetrievalResult(prefilter.doc_ids[:, :reranked], prefilter.scores[:, :reranked])
        return rerank(top, scores, depth, params["fusion"])


def rerank(first: RetrievalResult, scores: npt.NDArray[np.float32], k: int, fusion: str = "none") -> RetrievalResult:
    """The ``(n, k)`` ranking of ``first``'s ``(n, depth)`` rows by the cross-encoder's ``scores``.

    ``fusion="none"``: by descending score (ties keep the first stage's order), ``-1``-padded when
    ``depth < k``; ``"rrf"``: reciprocal rank fusion of that order with the first stage's.
    """
    order = np.argsort(-scores, axis=1, kind="stable")
    reranked = RetrievalResult(np.take_along_axis(first.doc_ids, order, axis=1), np.take_along_axis(scores, order, axis=1))
    if fusion == "rrf":
        return reciprocal_rank_fusion([first, reranked], k)
    n = min(first.k, k)
    doc_ids = np.full((len(scores), k), -1, dtype=np.int64)
    top = np.full((len(scores), k), -np.inf, dtype=np.float32)
    doc_ids[:, :n], top[:, :n] = reranked.doc_ids[:, :n], reranked.scores[:, :n]
    return RetrievalResult(doc_ids, top)
