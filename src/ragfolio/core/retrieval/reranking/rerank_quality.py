"""How well a reranker orders the first stage's passages: recall@k and MRR of the gold passages.

For one question with gold corpus rows G and a ranking of ``depth`` rows:

* recall@k = |top k ∩ G| / min(k, |G|) (the pool's support recall at ``num_docs = k``);
* reciprocal rank = 1 / (rank of the first gold row), 0 when no gold row is in the ranking; MRR is
  its mean.

The reranker reorders the same ``depth`` rows the first stage ranked, so both are measured on the
same rows and only the order differs; the report gives each system's mean with a 95% bootstrap
interval and the paired difference reranked − first stage (:mod:`ragfolio.core.stats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.reranking.labelled_pairs import RerankCases
from ragfolio.core.stats import mean_intervals, paired_differences


def reranked_rows(doc_ids: npt.NDArray[np.int64], scores: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.int64]:
    """``(n, depth)`` rows of ``doc_ids`` by descending score (ties keep the first stage's order),
    ``-1`` padding last whatever its score."""
    scores = np.where(doc_ids < 0, -np.inf, np.asarray(scores, dtype=np.float64))
    order = np.argsort(-scores, axis=1, kind="stable")
    return np.take_along_axis(doc_ids, order, axis=1)


def ranking_metrics(
    rows: npt.NDArray[np.int64], gold: Sequence[frozenset[int]], k: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-question recall@k and reciprocal rank of ``rows`` (``(n, depth)``); each ``(n,)``.

    A question without gold rows scores 0 on both.
    """
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    recall, rr = np.zeros(len(rows)), np.zeros(len(rows))
    for i, (row, g) in enumerate(zip(rows, gold, strict=True)):
        if not g:
            continue
        hits = np.fromiter((int(r) in g for r in row), dtype=bool, count=len(row))
        recall[i] = hits[:k].sum() / min(k, len(g))
        first = np.flatnonzero(hits)
        rr[i] = 1.0 / (first[0] + 1) if len(first) else 0.0
    return recall, rr


def rerank_quality(cases: RerankCases, scores: npt.NDArray[np.floating[Any]], *, k: int = 4, seed: int = 0) -> dict[str, Any]:
    """Recall@k and MRR of the first stage and of its rows reranked by ``scores``.

    Args:
        cases: The questions and the first stage's ``(n, depth)`` rows.
        scores: ``(n, depth)`` the reranker's score of each row (any value on ``-1`` padding).
        k: The cut-off of recall (the pool's ``num_docs``).
        seed: Seed of the bootstrap.

    Returns:
        ``{"n", "depth", "k", "first_stage": {metric: interval}, "reranked": {...},
        "difference": {...}}`` with intervals as :meth:`~ragfolio.core.stats.Interval.to_dict`;
        ``difference`` is reranked − first stage, paired by question.
    """
    if np.shape(scores) != cases.doc_ids.shape:
        raise ValueError(f"scores {np.shape(scores)} must match the cases' doc_ids {cases.doc_ids.shape}")
    first = np.column_stack(ranking_metrics(cases.doc_ids, cases.gold, k))
    reranked = np.column_stack(ranking_metrics(reranked_rows(cases.doc_ids, scores), cases.gold, k))
    report: dict[str, Any] = {"n": len(cases), "depth": int(cases.doc_ids.shape[1]), "k": k}
    if not len(cases):
        return report
    metrics = (f"recall@{k}", "mrr")
    for name, intervals in (("first_stage", mean_intervals(first, seed=seed)),
                            ("reranked", mean_intervals(reranked, seed=seed)),
                            ("difference", paired_differences(reranked, first, seed=seed))):
        report[name] = {metric: iv.to_dict() for metric, iv in zip(metrics, intervals, strict=True)}
    return report
