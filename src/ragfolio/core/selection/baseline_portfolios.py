"""The portfolios greedy is compared with, and the value ``F`` they are all judged by.

``F(S) = (1 / N) * sum_q max_{r in S} U[q, r]`` (:func:`portfolio_value`); the optimum by exhaustive
search where ``C(m, k)`` is small; the paper's baselines: top-k by average utility, the single best
candidate, k at random, and the oracle (best of all columns). Like the optimizers in
:mod:`~ragfolio.core.selection.greedy`, everything but :func:`select_exhaustive` reads ``U`` in
blocks of rows, so a memory-mapped ``U`` is never loaded whole.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragfolio.core.selection.gains import BLOCK_ROWS, as_utility, check_k, check_values, column_sums, row_blocks, widen


@dataclass(frozen=True)
class ExhaustiveResult:
    """The optimal portfolio: ``indices`` (ascending, length k) and its ``value`` ``F``."""

    indices: list[int]
    value: float



def select_exhaustive(
    U: npt.ArrayLike, k: int, *, max_subsets: int = 2_000_000
) -> ExhaustiveResult:
    """The optimal portfolio, by evaluating ``F`` on all ``C(m, k)`` subsets.

    Ties go to the lexicographically first subset. ``U`` is loaded into memory.

    Args:
        U: ``(N, m)`` utilities.
        k: portfolio size, ``1 <= k <= m``.
        max_subsets: refuse (``ValueError``) when ``C(m, k)`` exceeds this.

    Returns:
        The optimal ``indices`` (ascending) and ``OPT``.
    """
    U = np.asarray(as_utility(U))
    n, m = U.shape
    check_k(k, m)
    n_subsets = math.comb(m, k)
    if n_subsets > max_subsets:
        raise ValueError(
            f"exhaustive search over C(m={m}, k={k})={n_subsets} subsets exceeds "
            f"max_subsets={max_subsets}; use select_greedy and certificate instead"
        )
    check_values(U, "U")
    chunk = max(1, 2**24 // (n * k))  # about 64 MB of float32 per chunk
    subsets = itertools.combinations(range(m), k)
    best_value, best_subset = -1.0, tuple[int, ...]()
    while block := list(itertools.islice(subsets, chunk)):
        idx = np.array(block, dtype=np.intp)  # (c, k)
        totals = U[:, idx].max(axis=2).sum(axis=0, dtype=np.float64)  # (N, c, k) -> (c,)
        i = int(np.argmax(totals))
        if totals[i] > best_value:
            best_value, best_subset = float(totals[i]), block[i]
    return ExhaustiveResult(list(best_subset), best_value / n)


# --------------------------------------------------------------------------------------------
# values and baselines


def portfolio_value(U: npt.ArrayLike, indices: Sequence[int] | None) -> float:
    """``F(S) = (1 / N) * sum_q max_{r in S} U[q, r]``; ``0.0`` for an empty ``S``.

    ``indices=None`` means every column, which gives :func:`oracle_value`.
    """
    U = as_utility(U)
    idx = None if indices is None else _check_indices(indices, U.shape[1])
    if idx is not None and idx.size == 0:
        return 0.0
    total = 0.0
    for s, e in row_blocks(U.shape[0], BLOCK_ROWS):
        best = widen(U[s:e] if idx is None else U[s:e][:, idx]).max(axis=1)
        check_values(best, f"rows {s}..{e - 1}")
        total += float(best.sum(dtype=np.float64))
    return total / U.shape[0]


def best_of_k_curve(U: npt.ArrayLike, order: Sequence[int]) -> list[float]:
    """``F`` of each prefix of ``order``: entry ``i`` is the value of its first ``i + 1``."""
    U = as_utility(U)
    idx = _check_indices(order, U.shape[1])
    totals = np.zeros(idx.size)
    for s, e in row_blocks(U.shape[0], BLOCK_ROWS):
        block = widen(U[s:e][:, idx])
        check_values(block, f"rows {s}..{e - 1}")
        totals += np.maximum.accumulate(block, axis=1).sum(axis=0, dtype=np.float64)
    return (totals / U.shape[0]).tolist()


def oracle_value(U: npt.ArrayLike) -> float:
    """The best-of-all value ``(1 / N) * sum_q max_r U[q, r]``, an upper bound on any portfolio."""
    return portfolio_value(U, None)


def top_k_by_average(U: npt.ArrayLike, k: int) -> list[int]:
    """The k columns with the highest mean utility, best first (ties: lowest index first)."""
    U = as_utility(U)
    check_k(k, U.shape[1])
    return np.argsort(-column_sums(U), kind="stable")[:k].tolist()


def single_best(U: npt.ArrayLike) -> int:
    """The column with the highest mean utility (ties: lowest index)."""
    return top_k_by_average(U, 1)[0]


def random_k(
    U: npt.ArrayLike, k: int, random_state: int | np.random.Generator | None = None
) -> list[int]:
    """k distinct columns drawn uniformly at random, in draw order: the first k of a random permutation.

    A fixed ``random_state`` repeats them; a ``Generator`` is advanced, so successive calls on one
    generator give independent draws (portfolio selection's ``random_draws``).
    """
    m = as_utility(U).shape[1]
    check_k(k, m)
    return [int(i) for i in np.random.default_rng(random_state).permutation(m)[:k]]


def _check_indices(indices: Sequence[int], m: int) -> npt.NDArray[np.intp]:
    idx = np.asarray(list(indices), dtype=np.intp)
    bad = idx[(idx < 0) | (idx >= m)]
    if bad.size:
        raise ValueError(f"column index {int(bad[0])} is out of range for m={m} columns")
    return idx
