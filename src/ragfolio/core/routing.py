"""Routing baselines and the measures a router is judged by.

A routing is an ``(n, k)`` matrix of member indices per query, best first; its value at ``l`` is
the best-of-l utility ``mean_q max_{j in picks[q, :l]} U[q, j]``. Besides the learned router
(:mod:`ragfolio.core.router`) the ablations are: a random router, always the top-l members by
train average, always the first l greedy members (a fixed sub-portfolio), a logistic regression
on the same features, and the oracle (each query's members by its own utilities).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from ragfolio.core.features import Features, n_rows
from ragfolio.core.router import tied_best

Picks = npt.NDArray[np.int64]  # (n_queries, k) member indices, best first


def best_of_l(U: npt.NDArray[np.floating[Any]], picks: Picks) -> list[float]:
    """``[value at l = 1, ..., k]``: mean over queries of the best utility among the first l picks."""
    U = np.asarray(U, dtype=np.float64)
    if len(U) == 0:
        return []
    chosen = np.take_along_axis(U, np.asarray(picks, dtype=np.int64), axis=1)
    return [float(v) for v in np.maximum.accumulate(chosen, axis=1).mean(axis=0)]


def fixed_picks(order: Sequence[int], n: int) -> Picks:
    """Every query gets the same members in ``order`` (top-by-average, greedy prefix)."""
    return np.tile(np.asarray(order, dtype=np.int64), (n, 1))


def random_picks(n: int, k: int, rng: np.random.Generator) -> Picks:
    """An independent random order of the k members for each query."""
    return np.argsort(rng.random((n, k)), axis=1).astype(np.int64)


def oracle_picks(U: npt.NDArray[np.floating[Any]]) -> Picks:
    """Each query's members by decreasing utility (the per-query best possible routing)."""
    return np.argsort(-np.asarray(U), axis=1, kind="stable").astype(np.int64)


def gap_closed(router: float, single: float, oracle: float) -> float | None:
    """``(router - single) / (oracle - single)``; None when the oracle leaves no gap to close."""
    gap = oracle - single
    return None if gap <= 1e-12 else float((router - single) / gap)


def _design_matrix(features: Features) -> sp.csr_matrix:
    """All blocks side by side (sorted by name, as the learned router reads them)."""
    return sp.hstack([sp.csr_matrix(features[name]) for name in sorted(features)], format="csr")


@dataclass
class LogisticRouter:
    """Multinomial logistic regression from the router's features to the best member.

    A question with several tied-best members contributes one row per tied member, weighted
    ``1 / ties``; questions with no winner (best utility 0) are left out. Members never seen as
    best get probability 0.

    Attributes:
        C: Inverse regularisation strength of :class:`sklearn.linear_model.LogisticRegression`.
        max_iter: Solver iterations.
    """

    C: float = 1.0
    max_iter: int = 1000

    def fit(self, features: Features, U: npt.NDArray[np.floating[Any]]) -> LogisticRouter:
        U = np.asarray(U, dtype=np.float32)
        if n_rows(features) != len(U):
            raise ValueError(f"features have {n_rows(features)} rows for {len(U)} utility rows")
        self.k_ = U.shape[1]
        best = tied_best(U) & (U.max(axis=1, keepdims=True) > 0)
        rows, labels = np.nonzero(best)
        if len(rows) == 0:
            raise ValueError("no question has a winning member: nothing to learn")
        weights = 1.0 / best.sum(axis=1)[rows]
        self.constant_ = int(labels[0]) if len(set(labels.tolist())) == 1 else None
        if self.constant_ is None:
            X = _design_matrix(features)[rows]
            self.model_ = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(X, labels, sample_weight=weights)
        return self

    def predict_topl(self, features: Features, l: int) -> Picks:
        """``(n, l)`` members by decreasing predicted probability of being the best."""
        n = n_rows(features)
        proba = np.zeros((n, self.k_))
        if self.constant_ is not None:
            proba[:, self.constant_] = 1.0
        else:
            proba[:, self.model_.classes_] = self.model_.predict_proba(_design_matrix(features))
        return np.argsort(-proba, axis=1, kind="stable")[:, :l].astype(np.int64)
