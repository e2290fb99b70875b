"""An a-posteriori optimality certificate for a greedy portfolio (submodularity bounds ``OPT``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragfolio.core.selection.baseline_portfolios import oracle_value
from ragfolio.core.selection.gains import BLOCK_ROWS, FloatMatrix, as_utility, check_k, row_blocks, top_gains, widen
from ragfolio.core.selection.greedy import GreedyResult


@dataclass(frozen=True)
class Certificate:
    """An a-posteriori optimality certificate.

    Attributes:
        upper_bound: a value no portfolio of size k can exceed on this ``U`` (``>= OPT``).
        ratio: ``F(S_greedy) / upper_bound`` in ``(0, 1]``: the portfolio is at least this
            fraction of optimal (``1.0`` when ``U`` is all zeros).
    """

    upper_bound: float
    ratio: float



# --------------------------------------------------------------------------------------------
# guarantees


def certificate(U: npt.ArrayLike, result: GreedyResult, k: int | None = None) -> Certificate:
    """Bound ``OPT`` from the sets greedy met, by submodularity.

    For any set ``S_i`` (the first ``i`` picks, ``i = 0 .. len``) and any ``|T| <= k``,
    ``F(T) <= F(S_i) + sum_{r in T} gain(r | S_i)``, hence

        OPT <= min( oracle, min_i [ F(S_i) + sum of the k largest gain(r | S_i) ] ),

    with ``oracle = (1 / N) sum_q max_r U[q, r]``. The gains come from ``result.gain_bounds``
    when it has at least k of them per prefix, else they are recomputed from ``U``.

    Args:
        U: the ``(N, m)`` utilities the result was computed on.
        result: a greedy result.
        k: the portfolio size to bound ``OPT`` for; defaults to ``len(result.indices)``.

    Returns:
        The upper bound on ``OPT`` and ``ratio = F(S_k) / upper_bound``, ``S_k`` the first ``k``
        picks.
    """
    U = as_utility(U)
    k = len(result.indices) if k is None else k
    check_k(k, U.shape[1])
    bounds = result.gain_bounds
    if bounds is None or bounds.shape[1] < k:
        bounds = _exact_gain_bounds(U, result.indices, k)
    prefix_values = np.array([0.0, *result.values])
    upper = min(oracle_value(U), float(np.min(prefix_values + bounds[:, :k].sum(axis=1))))
    # The greedy portfolio of size k is the first k picks (a longer run still bounds OPT_k: every
    # prefix S_i gives a valid bound).
    value = result.values[min(k, len(result.values)) - 1]
    upper = max(upper, value)  # only float rounding can put it below an achieved value
    ratio = 1.0 if upper == 0 else min(1.0, value / upper)
    return Certificate(upper_bound=upper, ratio=ratio)


def _exact_gain_bounds(U: FloatMatrix, indices: list[int], k: int) -> npt.NDArray[np.float64]:
    """``(len + 1, k)``: the k largest gains w.r.t. each prefix of ``indices``, descending."""
    n, m = U.shape
    sums = np.zeros((len(indices) + 1, m))
    for s, e in row_blocks(n, BLOCK_ROWS):
        block = widen(U[s:e])  # float16 differences would round
        best = np.zeros(e - s, dtype=block.dtype)
        for i in range(len(indices) + 1):
            if i:
                np.maximum(best, block[:, indices[i - 1]], out=best)
            sums[i] += np.maximum(block - best[:, None], 0).sum(axis=0, dtype=np.float64)
    return np.stack([top_gains(row, k) for row in sums]) / n
