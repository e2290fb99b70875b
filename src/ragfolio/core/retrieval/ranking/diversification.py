"""Greedy diversification over a prefilter: discounted similarity, MMR and Vendi.

Each family reorders the candidates of a :data:`Prefilter` (padding ``-1`` ignored) for every
query at once. Embeddings are L2-normalised, so ``rel(q, d) = query_emb[q] . passage_emb[d]`` and
``sim(a, b) = passage_emb[a] . passage_emb[b]`` are cosines. Queries are processed in chunks: the
chunk's candidate embeddings ``(c, P, dim)`` are gathered once, ``rel`` ``(c, P)`` and the
candidate similarity ``(c, P, P)`` come from two batched matmuls, and every greedy step is an
array operation over the whole chunk. Equal criteria go to the candidate ranked higher by the
prefilter.

Returned scores are each family's selection criterion at the time of the pick (documented per
function); rows are in pick order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.results import Prefilter, RetrievalResult

__all__ = ["discounted_similarity", "mmr", "vendi"]

FloatArray = npt.NDArray[np.floating]
IntArray = npt.NDArray[np.int64]
# (rel (c, P), sim (c, P, P), valid (c, P), steps) -> (positions (c, steps), -1 when none left;
# scores (c, steps))
Selector = Callable[
    [FloatArray, FloatArray, npt.NDArray[np.bool_], int], tuple[IntArray, FloatArray]
]

_CHUNK = 128  # queries per chunk: (128, 100, 384) float32 candidates is ~20 MB


def discounted_similarity(
    prefilter: Prefilter,
    query_emb: FloatArray,
    passage_emb: FloatArray,
    k: int,
    *,
    gamma: float,
    r: float,
) -> RetrievalResult:
    """Discounted similarity: pick the best, then discount candidates similar to it.

    Scores start at ``(1 + rel) / 2``, which maps cosines into ``[0, 1]`` so that a multiplicative
    discount always lowers a score (on raw cosines it would raise negative ones). After each pick
    ``p`` every remaining score is multiplied by ``exp(-gamma * s)`` with ``s = sim(p, d)`` when
    ``sim(p, d) >= r`` and ``s = 0`` otherwise; negative similarities also count as 0, so the
    discount never boosts. The products are tracked in log space, so large ``gamma`` cannot
    underflow into ties.

    Args:
        prefilter: ``(n_queries, P)`` candidates.
        query_emb: ``(n_queries, dim)`` L2-normalised query embeddings.
        passage_emb: ``(n_passages, dim)`` L2-normalised passage embeddings.
        k: passages to return per query.
        gamma: discount strength, ``>= 0`` (0 gives pure relevance order).
        r: similarity threshold below which no discount applies.

    Returns:
        ``(n_queries, k)`` ranking; scores are the discounted scores (in ``[0, 1]``) at pick time.
    """
    if not np.isfinite(gamma) or gamma < 0:
        raise ValueError(f"gamma={gamma} must be a finite number >= 0")
    if not np.isfinite(r):
        raise ValueError(f"r={r} must be finite")

    def select(
        rel: FloatArray, sim: FloatArray, valid: npt.NDArray[np.bool_], steps: int
    ) -> tuple[IntArray, FloatArray]:
        c = rel.shape[0]
        rows = np.arange(c)
        penalty = np.where(sim >= r, np.maximum(sim, 0.0), 0.0)  # (c, P, P)
        base = np.log(np.clip((1.0 + rel.astype(np.float64)) / 2.0, 1e-300, None))
        log_score = np.where(valid, base, -np.inf)
        pos = np.full((c, steps), -1, dtype=np.int64)
        val = np.full((c, steps), -np.inf)
        for t in range(steps):
            j = log_score.argmax(axis=1)
            best = log_score[rows, j]
            ok = best > -np.inf
            pos[:, t] = np.where(ok, j, -1)
            val[:, t] = np.where(ok, np.exp(best), -np.inf)
            log_score[rows, j] = -np.inf
            log_score -= gamma * penalty[rows, j]
        return pos, val

    return _run(prefilter, query_emb, passage_emb, k, select)


def mmr(
    prefilter: Prefilter,
    query_emb: FloatArray,
    passage_emb: FloatArray,
    k: int,
    *,
    lambda_: float,
) -> RetrievalResult:
    """Maximal marginal relevance (Carbonell & Goldstein, 1998).

    Picks ``argmax_d lambda_ * rel(q, d) - (1 - lambda_) * max_{s in S} sim(d, s)``, the max being
    0 while ``S`` is empty (so the first pick is the most relevant passage when ``lambda_ > 0``).

    Args:
        prefilter: ``(n_queries, P)`` candidates.
        query_emb: ``(n_queries, dim)`` L2-normalised query embeddings.
        passage_emb: ``(n_passages, dim)`` L2-normalised passage embeddings.
        k: passages to return per query.
        lambda_: relevance weight in ``[0, 1]`` (1 gives pure relevance order).

    Returns:
        ``(n_queries, k)`` ranking; scores are the MMR criterion at pick time.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_={lambda_} must be in [0, 1]")

    def select(
        rel: FloatArray, sim: FloatArray, valid: npt.NDArray[np.bool_], steps: int
    ) -> tuple[IntArray, FloatArray]:
        c, p = rel.shape
        rows = np.arange(c)
        taken = ~valid
        max_sim = np.zeros((c, p), dtype=sim.dtype)
        pos = np.full((c, steps), -1, dtype=np.int64)
        val = np.full((c, steps), -np.inf)
        for t in range(steps):
            crit = np.where(taken, -np.inf, lambda_ * rel - (1.0 - lambda_) * max_sim)
            j = crit.argmax(axis=1)
            best = crit[rows, j]
            ok = best > -np.inf
            pos[:, t] = np.where(ok, j, -1)
            val[:, t] = best
            taken[rows, j] = True
            max_sim = sim[rows, j] if t == 0 else np.maximum(max_sim, sim[rows, j])
        return pos, val

    return _run(prefilter, query_emb, passage_emb, k, select)


def vendi(
    prefilter: Prefilter,
    query_emb: FloatArray,
    passage_emb: FloatArray,
    k: int,
    *,
    s: float,
) -> RetrievalResult:
    """Greedy Vendi-score diversification (Friedman & Dieng, 2023).

    Maximises ``f(D) = s * VS(D) / |D| + (1 - s) * mean_{d in D} rel(q, d)`` one pick at a time,
    where ``VS(D) = exp(-sum_i l_i log l_i)`` over the eigenvalues ``l_i`` of ``K / |D|`` (``K``
    the cosine kernel among ``D``; tiny negative eigenvalues clipped to 0). ``VS`` lies in
    ``[1, |D|]``; dividing by ``|D|`` puts it in ``[1/|D|, 1]``, the scale of a cosine, so ``s``
    trades comparable quantities. The first pick is the most relevant passage.

    Args:
        prefilter: ``(n_queries, P)`` candidates.
        query_emb: ``(n_queries, dim)`` L2-normalised query embeddings.
        passage_emb: ``(n_passages, dim)`` L2-normalised passage embeddings.
        k: passages to return per query.
        s: diversity weight in ``[0, 1]`` (0 gives pure relevance order).

    Returns:
        ``(n_queries, k)`` ranking; the score of the ``t``-th pick is ``f`` of the first ``t``
        picks, which need not decrease with ``t``.
    """
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"s={s} must be in [0, 1]")

    def select(
        rel: FloatArray, sim: FloatArray, valid: npt.NDArray[np.bool_], steps: int
    ) -> tuple[IntArray, FloatArray]:
        c, p = rel.shape
        rows = np.arange(c)
        rel = rel.astype(np.float64)
        sim = sim.astype(np.float64)
        diag = np.einsum("cpp->cp", sim)
        taken = ~valid
        pos = np.full((c, steps), -1, dtype=np.int64)
        val = np.full((c, steps), -np.inf)
        chosen = np.zeros((c, steps), dtype=np.int64)
        rel_sum = np.zeros(c)
        for t in range(steps):
            m = t + 1
            if t == 0:
                crit = np.where(taken, -np.inf, rel)
                j = crit.argmax(axis=1)
                f = s + (1.0 - s) * rel[rows, j]
            else:
                sel = chosen[:, :t]
                kernel = np.empty((c, p, m, m))
                among = sim[rows[:, None, None], sel[:, :, None], sel[:, None, :]]  # (c, t, t)
                kernel[:, :, :t, :t] = among[:, None]
                # (c, P, t): similarity of every candidate to each passage chosen so far
                cross = np.take_along_axis(sim, sel[:, :, None], axis=1).transpose(0, 2, 1)
                kernel[:, :, :t, t] = cross
                kernel[:, :, t, :t] = cross
                kernel[:, :, t, t] = diag
                vs = _vendi_score(kernel / m)
                objective = s * vs / m + (1.0 - s) * (rel_sum[:, None] + rel) / m
                crit = np.where(taken, -np.inf, objective)
                j = crit.argmax(axis=1)
                f = crit[rows, j]
            ok = ~taken[rows, j]
            pos[:, t] = np.where(ok, j, -1)
            val[:, t] = np.where(ok, f, -np.inf)
            chosen[:, t] = j
            rel_sum += rel[rows, j]
            taken[rows, j] = True
        return pos, val

    return _run(prefilter, query_emb, passage_emb, k, select)


def _vendi_score(scaled_kernel: FloatArray) -> FloatArray:
    """``exp`` of the eigenvalue entropy of ``(..., m, m)`` kernels already divided by ``m``."""
    lam = np.clip(np.linalg.eigvalsh(scaled_kernel), 0.0, None)
    plogp = np.where(lam > 0, lam * np.log(np.where(lam > 0, lam, 1.0)), 0.0)
    return np.exp(-plogp.sum(axis=-1))


def _run(
    prefilter: Prefilter,
    query_emb: FloatArray,
    passage_emb: FloatArray,
    k: int,
    select: Selector,
) -> RetrievalResult:
    """Validate inputs, gather candidates chunk by chunk and apply ``select``."""
    ids = np.asarray(prefilter.doc_ids, dtype=np.int64)
    n, p = ids.shape
    query_emb = np.asarray(query_emb, dtype=np.float32)
    passage_emb = np.asarray(passage_emb, dtype=np.float32)
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    if query_emb.ndim != 2 or query_emb.shape[0] != n:
        raise ValueError(f"query_emb {query_emb.shape} must be (n_queries={n}, dim)")
    if passage_emb.ndim != 2 or passage_emb.shape[1] != query_emb.shape[1]:
        raise ValueError(
            f"passage_emb {passage_emb.shape} must be (n_passages, dim={query_emb.shape[1]})"
        )
    if ids.size and ids.max() >= passage_emb.shape[0]:
        raise ValueError(
            f"prefilter row id {ids.max()} out of range for {passage_emb.shape[0]} passages"
        )

    out_ids = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.full((n, k), -np.inf, dtype=np.float32)
    steps = min(k, p)
    if steps == 0:
        return RetrievalResult(out_ids, out_scores)
    for lo in range(0, n, _CHUNK):
        block = ids[lo : lo + _CHUNK]
        valid = block >= 0
        emb = passage_emb[np.where(valid, block, 0)]  # (c, P, dim)
        rel = np.matmul(emb, query_emb[lo : lo + _CHUNK, :, None])[:, :, 0]
        sim = np.matmul(emb, emb.transpose(0, 2, 1))
        pos, val = select(rel, sim, valid, steps)
        got = pos >= 0
        picked = np.take_along_axis(block, np.maximum(pos, 0), axis=1)
        out_ids[lo : lo + _CHUNK, :steps] = np.where(got, picked, -1)
        out_scores[lo : lo + _CHUNK, :steps] = np.where(got, val, -np.inf)
    return RetrievalResult(out_ids, out_scores)
