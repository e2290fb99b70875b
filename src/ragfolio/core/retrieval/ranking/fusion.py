"""Hybrid retrieval: fuse several rankings of the same queries into one.

Both fusions score the union of the input lists of a query; a passage missing from a list gets
nothing from that list. Ties are broken by the lowest corpus row id, so results are deterministic.
Each input row is assumed free of duplicate passages (every ragfolio retriever guarantees it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.results import RetrievalResult

__all__ = ["reciprocal_rank_fusion", "score_fusion"]


def reciprocal_rank_fusion(
    results: Sequence[RetrievalResult],
    k: int,
    *,
    rrf_k: float = 60.0,
    weights: Sequence[float] | None = None,
) -> RetrievalResult:
    """Reciprocal rank fusion (Cormack et al., 2009).

    ``score(d) = sum_i w_i / (rrf_k + rank_i(d))`` with ``rank_i`` starting at 1; lists that do not
    contain ``d`` add nothing.

    Args:
        results: rankings of the same ``n_queries`` queries, any depths.
        k: number of passages to return per query.
        rrf_k: rank offset, ``>= 0``; larger values flatten the rank discount.
        weights: one non-negative weight per input; all 1 when ``None``.

    Returns:
        ``(n_queries, k)`` fused ranking; scores are the fused RRF scores.
    """
    if not np.isfinite(rrf_k) or rrf_k < 0:
        raise ValueError(f"rrf_k={rrf_k} must be a finite number >= 0")
    w = _check_inputs(results, k, [1.0] * len(results) if weights is None else weights)
    contrib = [
        np.broadcast_to(wi / (rrf_k + np.arange(1, r.k + 1, dtype=np.float64)), r.doc_ids.shape)
        for wi, r in zip(w, results, strict=True)
    ]
    return _fuse([r.doc_ids for r in results], contrib, k)


def score_fusion(
    results: Sequence[RetrievalResult], k: int, *, weights: Sequence[float]
) -> RetrievalResult:
    """Weighted sum of per-query min-max normalised scores.

    For each query and input ``i``, ``norm_i(d) = (s_i(d) - min_i) / (max_i - min_i)`` over the
    input's own (non-padding) list, so every list spans ``[0, 1]``; a list whose scores are all
    equal (including a single-passage list) normalises to 1. ``score(d) = sum_i w_i * norm_i(d)``.

    Args:
        results: rankings of the same ``n_queries`` queries, any depths; scores of non-padding
            entries must be finite.
        k: number of passages to return per query.
        weights: one non-negative weight per input.

    Returns:
        ``(n_queries, k)`` fused ranking; scores are the fused scores.
    """
    w = _check_inputs(results, k, weights)
    contrib = []
    for i, (wi, r) in enumerate(zip(w, results, strict=True)):
        valid = r.doc_ids >= 0
        s = r.scores.astype(np.float64)
        if not np.isfinite(s[valid]).all():
            raise ValueError(f"results[{i}] has non-finite scores on non-padding entries")
        lo = np.where(valid, s, np.inf).min(axis=1, keepdims=True)
        hi = np.where(valid, s, -np.inf).max(axis=1, keepdims=True)
        span = hi - lo
        safe_span = np.where(span > 0, span, 1.0)
        norm = np.where(span > 0, (np.where(valid, s, 0.0) - lo) / safe_span, 1.0)
        contrib.append(wi * norm)
    return _fuse([r.doc_ids for r in results], contrib, k)


def _check_inputs(
    results: Sequence[RetrievalResult], k: int, weights: Sequence[float]
) -> npt.NDArray[np.float64]:
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    if len(results) == 0:
        raise ValueError("results must hold at least one RetrievalResult")
    n_queries = {r.doc_ids.shape[0] for r in results}
    if len(n_queries) != 1:
        raise ValueError(f"results disagree on n_queries: {sorted(n_queries)}")
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(results),):
        raise ValueError(
            f"weights={list(weights)} must hold one weight per result ({len(results)})"
        )
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights={list(weights)} must be finite and >= 0")
    return w


def _fuse(
    doc_ids: Sequence[npt.NDArray[np.int64]],
    contrib: Sequence[npt.NDArray[np.float64]],
    k: int,
) -> RetrievalResult:
    """Sum ``contrib`` per (query, passage) over all lists and keep the top ``k`` per query."""
    n = doc_ids[0].shape[0]
    ids = np.concatenate([np.asarray(d, dtype=np.int64) for d in doc_ids], axis=1)
    val = np.concatenate(contrib, axis=1)
    q = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], ids.shape)
    mask = ids >= 0
    q, ids, val = q[mask], ids[mask], val[mask]

    out_ids = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.full((n, k), -np.inf, dtype=np.float32)
    if ids.size == 0:
        return RetrievalResult(out_ids, out_scores)

    order = np.lexsort((ids, q))
    q, ids, val = q[order], ids[order], val[order]
    starts = np.flatnonzero(np.r_[True, (q[1:] != q[:-1]) | (ids[1:] != ids[:-1])])
    q, ids, total = q[starts], ids[starts], np.add.reduceat(val, starts)

    # Best first within a query; equal scores go to the lowest row id.
    order = np.lexsort((ids, -total, q))
    q, ids, total = q[order], ids[order], total[order]
    col = np.arange(q.size) - np.searchsorted(q, q, side="left")
    keep = col < k
    out_ids[q[keep], col[keep]] = ids[keep]
    out_scores[q[keep], col[keep]] = total[keep]
    return RetrievalResult(out_ids, out_scores)
