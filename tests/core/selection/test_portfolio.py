"""Known answers for portfolio selection: greedy vs exhaustive, lazy vs naive, the certificate."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ragfolio.core.selection.baseline_portfolios import (
    best_of_k_curve,
    oracle_value,
    portfolio_value,
    random_k,
    select_exhaustive,
    single_best,
    top_k_by_average,
)
from ragfolio.core.selection.certificate import certificate
from ragfolio.core.selection.greedy import select_greedy, select_lazy_greedy, select_stochastic_greedy

SEEDS = range(30)


def reference_greedy(U: np.ndarray, k: int) -> list[int]:
    """Algorithm 1 written as plainly as possible (float64, ties to the lowest index)."""
    best = np.zeros(U.shape[0])
    picks: list[int] = []
    for _ in range(k):
        gains = np.maximum(U - best[:, None], 0).sum(axis=0, dtype=np.float64)
        gains[picks] = -np.inf
        p = int(np.argmax(gains))
        picks.append(p)
        best = np.maximum(best, U[:, p])
    return picks


def random_utility(seed: int, shape: tuple[int, int] = (40, 12)) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def tied_utility(seed: int, shape: tuple[int, int] = (40, 12)) -> np.ndarray:
    """Support-recall-like values with many exact ties, plus a duplicated column."""
    U = np.random.default_rng(seed).choice([0.0, 0.5, 1.0], size=shape, p=[0.5, 0.3, 0.2])
    U[:, -1] = U[:, 0]
    return U.astype(np.float32)


def thirds_utility(seed: int, shape: tuple[int, int] = (40, 12)) -> np.ndarray:
    """Support recall with three gold passages: 0, 1/3, 2/3, 1 (inexact in binary), with ties."""
    rng = np.random.default_rng(seed)
    U = rng.choice(np.array([0, 1, 2, 3], dtype=np.float32) / 3, size=shape, p=[0.4, 0.3, 0.2, 0.1])
    U[:, -1] = U[rng.permutation(shape[0]), 0]  # the same values as column 0 in another order
    return U


def test_marginal_gains_by_hand() -> None:
    U = np.array([[0.2, 0.5], [0.9, 0.1], [0.4, 0.4]])
    result = select_greedy(U, 2)
    # column sums 1.5 and 1.0: column 0 first, gain 1.5 / 3; then b = (0.2, 0.9, 0.4) and
    # column 1 gains max(0, 0.5 - 0.2) + 0 + 0 = 0.3, i.e. 0.1 per query.
    assert result.indices == [0, 1]
    assert result.gains == pytest.approx([0.5, 0.1])
    assert result.values == pytest.approx([0.5, 0.6])
    assert portfolio_value(U, [0, 1]) == pytest.approx((0.5 + 0.9 + 0.4) / 3)


def test_greedy_is_optimal_on_disjoint_supports() -> None:
    # Each column serves its own queries, so F is additive and greedy is exact.
    U = np.zeros((24, 6))
    for r, (rows, value) in enumerate([(3, 0.5), (2, 1.0), (1, 0.9), (4, 0.3), (2, 0.8), (0, 0.0)]):
        U[4 * r : 4 * r + rows, r] = value  # column totals 1.5, 2.0, 0.9, 1.2, 1.6, 0
    for k in range(1, 7):
        greedy, best = select_greedy(U, k), select_exhaustive(U, k)
        assert greedy.value == pytest.approx(best.value)
    assert select_greedy(U, 3).indices == [1, 4, 0]
    assert select_greedy(U, 3).values == pytest.approx([2.0 / 24, 3.6 / 24, 5.1 / 24])


@pytest.mark.parametrize("seed", SEEDS)
def test_k1_greedy_is_single_best(seed: int) -> None:
    U = random_utility(seed)
    assert select_greedy(U, 1).indices == [single_best(U)] == select_exhaustive(U, 1).indices


@pytest.mark.parametrize("seed", SEEDS)
def test_greedy_within_1_minus_1_over_e_of_exhaustive(seed: int) -> None:
    U = random_utility(seed)
    greedy, best = select_greedy(U, 3), select_exhaustive(U, 3)
    assert greedy.value >= (1 - 1 / math.e) * best.value
    assert greedy.value <= best.value + 1e-12
    assert portfolio_value(U, best.indices) == pytest.approx(best.value)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("make", [random_utility, tied_utility, thirds_utility])
def test_greedy_and_lazy_pick_what_naive_greedy_picks(seed: int, make) -> None:
    U = make(seed)
    for k in (1, 3, 6, 12):
        expected = reference_greedy(U, k)
        assert select_greedy(U, k).indices == expected
        assert select_lazy_greedy(U, k).indices == expected
        assert select_lazy_greedy(U, k, batch_size=1).indices == expected


def test_ties_go_to_the_lowest_index() -> None:
    U = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]], dtype=np.float32)
    assert select_greedy(U, 2).indices == [0, 1]
    assert select_lazy_greedy(U, 2).indices == [0, 1]
    # Once every query is served, the remaining gains are all 0: lowest unpicked index next.
    assert select_greedy(U, 4).indices == [0, 1, 2, 3]
    assert select_exhaustive(U, 2).indices == [0, 1]


@pytest.mark.parametrize("seed", range(5))
def test_blocks_and_threads_do_not_change_the_result(seed: int) -> None:
    U = tied_utility(seed, (500, 20))
    base = select_greedy(U, 6)
    for block_rows, n_threads in [(7, 1), (7, 2), (64, 3), (10_000, 2)]:
        other = select_greedy(U, 6, block_rows=block_rows, n_threads=n_threads)
        assert other.indices == base.indices
        assert other.values == base.values  # exact: the values lie on a 1/2 grid
        lazy = select_lazy_greedy(U, 6, block_rows=block_rows, n_threads=n_threads)
        assert lazy.indices == base.indices


def test_lazy_evaluates_fewer_columns_when_gains_differ() -> None:
    rng = np.random.default_rng(0)
    U = (rng.random((300, 50)) * np.linspace(0.05, 1, 50)).astype(np.float32)
    naive, lazy = select_greedy(U, 5), select_lazy_greedy(U, 5, batch_size=1)
    assert lazy.indices == naive.indices
    assert lazy.n_evaluations < naive.n_evaluations


@pytest.mark.parametrize("seed", range(10))
def test_stochastic_greedy_is_seeded_and_reasonable(seed: int) -> None:
    U = random_utility(seed, (200, 30))
    first = select_stochastic_greedy(U, 5, epsilon=0.1, random_state=seed)
    again = select_stochastic_greedy(U, 5, epsilon=0.1, random_state=seed)
    assert first.indices == again.indices
    assert len(set(first.indices)) == 5
    assert first.value >= 0.9 * select_greedy(U, 5).value
    assert first.value == pytest.approx(portfolio_value(U, first.indices))
    # A sample as large as the pool makes it naive greedy.
    full = select_stochastic_greedy(U, 5, epsilon=1e-9, random_state=seed)
    assert full.indices == select_greedy(U, 5).indices


@pytest.mark.parametrize("seed", SEEDS)
def test_certificate_bounds_the_optimum(seed: int) -> None:
    U = random_utility(seed) if seed % 2 else tied_utility(seed)
    best = select_exhaustive(U, 3).value
    for result in (
        select_greedy(U, 3),
        select_lazy_greedy(U, 3),
        select_stochastic_greedy(U, 3, random_state=seed),
    ):
        cert = certificate(U, result, 3)
        assert cert.upper_bound >= best - 1e-12
        assert cert.upper_bound <= oracle_value(U) + 1e-12
        assert 0 < cert.ratio <= 1
        assert cert.ratio == pytest.approx(result.value / cert.upper_bound)
    # Stored gains and gains recomputed from U give the same bound.
    greedy = select_greedy(U, 3)
    recomputed = certificate(U, dataclasses.replace(greedy, gain_bounds=None), 3)
    assert recomputed.upper_bound == pytest.approx(certificate(U, greedy, 3).upper_bound)


def test_certificate_is_tight_when_greedy_covers_everything() -> None:
    U = np.eye(4, dtype=np.float32)
    cert = certificate(U, select_greedy(U, 4))
    assert cert.upper_bound == pytest.approx(1.0)
    assert cert.ratio == pytest.approx(1.0)
    assert certificate(np.zeros((3, 2)), select_greedy(np.zeros((3, 2)), 1)).ratio == 1.0


@pytest.mark.parametrize("seed", range(10))
def test_values_are_monotone_and_match_portfolio_value(seed: int) -> None:
    U = random_utility(seed, (100, 15))
    for result in (select_greedy(U, 8), select_lazy_greedy(U, 8)):
        assert all(b >= a for a, b in zip(result.values, result.values[1:], strict=False))
        assert result.values[-1] == pytest.approx(portfolio_value(U, result.indices))
        assert best_of_k_curve(U, result.indices) == pytest.approx(result.values)
        assert sum(result.gains) == pytest.approx(result.value)
    assert portfolio_value(U, []) == 0.0


def test_memmap_input_gives_identical_picks(tmp_path) -> None:
    U = tied_utility(3, (3000, 25))
    np.save(tmp_path / "U.npy", U)
    mapped = np.load(tmp_path / "U.npy", mmap_mode="r")
    assert isinstance(mapped, np.memmap)
    for kwargs in ({}, {"block_rows": 256, "n_threads": 2}):
        in_memory, on_disk = select_greedy(U, 7, **kwargs), select_greedy(mapped, 7, **kwargs)
        assert on_disk.indices == in_memory.indices
        assert on_disk.values == in_memory.values
        assert select_lazy_greedy(mapped, 7, **kwargs).indices == in_memory.indices
    assert portfolio_value(mapped, [0, 1]) == pytest.approx(portfolio_value(U, [0, 1]))
    assert certificate(mapped, on_disk).upper_bound == pytest.approx(
        certificate(U, in_memory).upper_bound
    )


def test_baselines_by_hand() -> None:
    U = np.array([[0.9, 0.0, 0.5], [0.1, 1.0, 0.5], [0.2, 0.0, 0.5]])
    assert top_k_by_average(U, 2) == [2, 0]  # means 0.4, 1/3, 0.5
    assert single_best(U) == 2
    assert oracle_value(U) == pytest.approx((0.9 + 1.0 + 0.5) / 3)
    assert best_of_k_curve(U, [2, 0, 1]) == pytest.approx([0.5, 1.9 / 3, 2.4 / 3])
    picks = random_k(U, 2, random_state=7)
    assert picks == random_k(U, 2, random_state=7)
    assert len(set(picks)) == 2 and all(0 <= p < 3 for p in picks)


def test_random_k_is_a_permutation_prefix_and_advances_a_generator() -> None:
    """Portfolio selection's random orders are random_k on one seeded generator, one call per draw."""
    U = np.zeros((4, 9))
    rng, reference = np.random.default_rng(3), np.random.default_rng(3)
    draws = [random_k(U, 5, rng) for _ in range(4)]
    assert draws == [reference.permutation(9)[:5].tolist() for _ in range(4)]
    assert len({tuple(d) for d in draws}) == 4  # each call draws afresh


@pytest.mark.parametrize(
    ("U", "k", "match"),
    [
        (np.ones(5), 1, r"2-d"),
        (np.ones((0, 3)), 1, r"2-d"),
        (np.ones((4, 3)), 0, r"k=0 must be an integer between 1 and m=3"),
        (np.ones((4, 3)), 4, r"k=4 must be an integer between 1 and m=3"),
        (np.ones((4, 3)), 2.0, r"k=2.0"),
        (np.array([[0.5, np.nan], [0.1, 0.2]]), 1, r"finite and >= 0"),
        (np.array([[0.5, -0.1], [0.1, 0.2]]), 1, r"finite and >= 0"),
        (np.array([[0.5, np.inf], [0.1, 0.2]]), 1, r"finite"),
    ],
)
def test_invalid_inputs_name_the_value(U: np.ndarray, k, match: str) -> None:
    for select in (select_greedy, select_lazy_greedy, select_stochastic_greedy, select_exhaustive):
        with pytest.raises(ValueError, match=match):
            select(U, k)


def test_other_argument_checks() -> None:
    U = random_utility(0)
    with pytest.raises(ValueError, match="max_subsets"):
        select_exhaustive(np.ones((2, 40)), 10)
    with pytest.raises(ValueError, match="column index 12 is out of range for m=12"):
        portfolio_value(U, [0, 12])
    with pytest.raises(ValueError, match="epsilon=1.5"):
        select_stochastic_greedy(U, 2, epsilon=1.5)
    with pytest.raises(ValueError, match="n_threads=0"):
        select_greedy(U, 2, n_threads=0)
    with pytest.raises(ValueError, match="block_rows=0"):
        select_greedy(U, 2, block_rows=0)
    with pytest.raises(ValueError, match="batch_size=0"):
        select_lazy_greedy(U, 2, batch_size=0)


def test_certificate_of_a_longer_run_bounds_the_first_k_picks() -> None:
    rng = np.random.default_rng(7)
    for _ in range(10):
        U = rng.random((40, 10)).astype(np.float32)
        longer, exact = select_greedy(U, 6), select_greedy(U, 3)
        assert longer.indices[:3] == exact.indices
        cert_long, cert_exact = certificate(U, longer, 3), certificate(U, exact, 3)
        opt = select_exhaustive(U, 3).value
        assert cert_long.upper_bound >= opt - 1e-9
        assert cert_long.upper_bound <= cert_exact.upper_bound + 1e-9  # more prefixes, tighter bound
        assert cert_long.ratio == pytest.approx(exact.values[-1] / cert_long.upper_bound)
