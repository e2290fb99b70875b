"""Routers that see the retrieval: member utilities predicted from first-stage and result-list features.

Two routing modes, one model (a ridge regression of a member's utility on a question):

* ``pre_retrieval`` reads the query blocks ``query_blocks`` (default: ``first_stage``, the
  features of the shared first-stage rankings, :mod:`ragfolio.core.routing.features.retrieval_features`);
  it routes before the members run, so only the l chosen members need to.
* ``post_retrieval`` also reads ``results[results_block]`` (default: ``members``, ``(n, k, d_m)``
  features of each member's own result list); every member runs, and the router picks whose
  passages go to the LLM.

Model: each feature is mapped to its empirical CDF on the train questions (member features per
member, so members' different score scales do not matter), giving ``f_q`` ``(d_f,)`` and ``m_qj``
``(d_m,)`` in [0, 1]. A question-member row is ``x_qj = [m_qj, e_j, e_j (x) f_q, e_j (x) m_qj]``
(``e_j`` the member's one-hot; the pre-retrieval router has no ``m`` parts): shared and per-member
slopes, per-member intercepts. One :class:`sklearn.linear_model.Ridge` predicts ``U[q, j]`` from
``x_qj`` over all ``n * k`` rows.

Routing: the first member is the top-predicted one where its prediction leads the *default*
member's (the best train mean) by more than ``margin_``, else the default. With ``completion =
"greedy"`` the next members are the greedy completion of the first on the train utilities (each
adds the most to train best-of-l given those before it: complementary members, as portfolio
selection picks them); with ``"top"`` they follow by predicted utility.

Model selection on train only: every train question is predicted by models fitted on the other
folds of an ``n_folds`` cross-validation (seeded), so all of them serve as validation questions;
the ridge ``alpha`` and ``margin`` with the best out-of-fold best-of-1 are kept (ties: the larger,
i.e. more conservative), and the model is refitted on every train question. If that best does not
beat the default member's best-of-1 by more than ``min_gain`` and by more than ``min_z`` standard
errors of the per-question gains (or there are fewer than ``min_questions`` train questions), the
router **falls back** (``fallback_``): every query gets the default
member first. That z is a **heuristic**, not a test: it is computed on the same out-of-fold
predictions that chose the best of ``len(alphas) x len(margins)`` settings, so it overstates the
evidence. The test is the do-no-harm rule that decides what is served, on dev questions no router
was fitted or tuned on (:mod:`ragfolio.core.routing.judging.choice`). Saved as ``router.json`` and ``router.safetensors`` (coefficients, CDF knots); no pickle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.linear_model import Ridge

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    Scores,
    check_training_data,
    member_names,
)
from ragfolio.core.routing.determinism import deterministic_fit
from ragfolio.core.routing.routers.saved import SavedRouter

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.float64]


def cdf_knots(X: npt.NDArray[np.floating[Any]], n_knots: int) -> Array:
    """``(n_knots, d)`` quantiles of each column of ``X`` ``(n, d)`` at ``n_knots`` even levels."""
    if len(X) == 0:
        return np.zeros((n_knots, X.shape[1]))
    return np.quantile(np.asarray(X, dtype=np.float64), np.linspace(0, 1, n_knots), axis=0)


def cdf_transform(X: npt.NDArray[np.floating[Any]], knots: Array) -> Array:
    """Each value's mid-rank among its column's knots, in [0, 1] (ties split evenly): ``(n, d)``."""
    X = np.asarray(X, dtype=np.float64)
    out = np.empty_like(X)
    for c in range(X.shape[1]):
        left = np.searchsorted(knots[:, c], X[:, c], side="left")
        right = np.searchsorted(knots[:, c], X[:, c], side="right")
        out[:, c] = (left + right) / (2 * len(knots))
    return out


def greedy_completions(U: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.int64]:
    """``(k, k)``: row j is member j followed by the members greedily adding the most to mean best-of-l on ``U``."""
    U = np.asarray(U, dtype=np.float64)
    k = U.shape[1]
    orders = np.empty((k, k), dtype=np.int64)
    for j in range(k):
        chosen, best = [j], U[:, j].copy()
        while len(chosen) < k:
            value = np.maximum(U, best[:, None]).mean(axis=0) if len(U) else np.zeros(k)
            value[chosen] = -np.inf
            nxt = int(np.argmax(value))  # ties: the lower index
            chosen.append(nxt)
            best = np.maximum(best, U[:, nxt])
        orders[j] = chosen
    return orders


def _finite_or_none(x: float) -> float | None:
    """``x``, or None when it is infinite or NaN (JSON has neither)."""
    return x if np.isfinite(x) else None


def paired_z(gains: npt.NDArray[np.floating[Any]]) -> float:
    """``mean / (std / sqrt(n))`` of per-question gains (inf for a constant positive gain, 0 for none)."""
    gains = np.asarray(gains, dtype=np.float64)
    mean, se = float(gains.mean()), float(gains.std(ddof=1) / np.sqrt(len(gains)))
    if se <= 1e-12:
        return float("inf") if mean > 1e-12 else 0.0
    return mean / se


def switch_first(scores: Array, default: int, margin: float) -> npt.NDArray[np.int64]:
    """The top-scored member where it leads ``default``'s score by more than ``margin``, else ``default``."""
    top = scores.argmax(axis=1)
    lead = scores[np.arange(len(scores)), top] - scores[:, default]
    return np.where(lead > margin, top, default).astype(np.int64)


@dataclass
class _RetrievalRouter(SavedRouter):
    """Ridge regression of member utility on retrieval features (see the module docstring).

    Attributes:
        query_blocks: Query blocks read (``(n, d)`` dense arrays), side by side in this order.
        results_block: The ``(n, k, d_m)`` results block read by the post-retrieval router.
        alphas: Ridge penalties tried on validation.
        margins: Switch margins tried on validation (utility units).
        n_folds: Folds of the cross-validation on train questions that selects the model.
        min_questions: Fewer train questions than this: fall back without trying.
        min_gain: The chosen model must beat the default member on validation by more than this...
        min_z: ...and by more than ``min_z`` standard errors of the per-question gains (a heuristic
            guard against a model that wins on a handful of held-out questions by chance, which the
            search over ``alphas`` x ``margins`` makes likely on noise; measured on the questions
            that chose the settings, so not a significance test).
        completion: ``greedy`` (set-aware, on train utilities) or ``top`` (by predicted utility).
        n_knots: Quantile knots of each feature's CDF.
        random_state: Seed of the validation split.

    Learned attributes: ``members_``, ``default_``, ``fallback_``, ``alpha_``, ``margin_``,
    ``val_best_of_1_``, ``val_default_``, ``val_gain_z_``, ``mean_utility_`` ``(k,)``, ``completion_`` ``(k, k)``,
    ``query_knots_`` ``(n_knots, d_f)``, ``member_knots_`` ``(k, n_knots, d_m)``, ``coef_`` ``(D,)``,
    ``intercept_``.
    """

    name: ClassVar[str]
    reads: ClassVar[Literal["first_stage", "members"]]  # servable (ragfolio.core.routing.registry.READS)
    query_blocks: list[str] = field(default_factory=lambda: ["first_stage"])
    results_block: str = "members"
    alphas: list[float] = field(default_factory=lambda: [1.0, 10.0, 100.0, 1000.0])
    margins: list[float] = field(default_factory=lambda: [0.0, 0.02, 0.05, 0.1, 0.2, 0.3])
    n_folds: int = 5
    min_questions: int = 20
    min_gain: float = 0.0
    min_z: float = 2.0
    completion: Literal["greedy", "top"] = "greedy"
    n_knots: int = 101
    random_state: int = 0
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def _hyperparameters(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.endswith("_")}

    # --- features -----------------------------------------------------------------------------
    def _raw(self, inputs: RouteInputs, k: int) -> tuple[Array, Array]:
        """``(Q (n, d_f), M (n, k, d_m))`` as read from ``inputs`` (``M`` empty for pre-retrieval)."""
        missing = [b for b in self.query_blocks if b not in inputs.query]
        if missing:
            raise ValueError(f"query blocks {missing} are missing; {self.name} reads {self.query_blocks}")
        blocks = [inputs.query[b].toarray() if sp.issparse(inputs.query[b]) else inputs.query[b]
                  for b in self.query_blocks]
        Q = np.concatenate([np.asarray(b, dtype=np.float64).reshape(len(inputs), -1) for b in blocks], axis=1)
        M = np.zeros((len(inputs), k, 0))
        if self.reads == "members":
            block = (inputs.results or {}).get(self.results_block)
            if block is None or np.ndim(block) != 3 or np.shape(block)[1] != k:
                raise ValueError(f"{self.name} reads results[{self.results_block!r}] of shape (n, {k}, d): the "
                                 f"features of each member's result list; got {None if block is None else np.shape(block)}")
            M = np.asarray(block, dtype=np.float64)
        return Q, M

    def _design(self, Q: Array, M: Array) -> Array:
        """``(n, k, D)`` rows ``[m_qj, e_j, e_j (x) f_q, e_j (x) m_qj]`` of CDF-mapped features."""
        n, k = M.shape[:2]
        f = cdf_transform(Q, self.query_knots_)
        m = np.stack([cdf_transform(M[:, j], self.member_knots_[j]) for j in range(k)], axis=1) if k else M
        eye = np.eye(k)
        parts = [m, np.broadcast_to(eye, (n, k, k)), (eye[None, :, :, None] * f[:, None, None, :]).reshape(n, k, -1)]
        if m.shape[2]:
            parts.append((eye[None, :, :, None] * m[:, :, None, :]).reshape(n, k, -1))
        return np.concatenate(parts, axis=2)

    # --- fit and route ------------------------------------------------------------------------
    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        """Select ``alpha``, ``margin`` (or fall back) by cross-validation on the train questions, then refit on all
        (with fixed threads: :func:`~ragfolio.core.routing.determinism.deterministic_fit`)."""
        with deterministic_fit():
            return self._fit(inputs, U, members)

    def _fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None) -> Self:
        U = np.asarray(check_training_data(inputs, U), dtype=np.float64)
        n, k = U.shape
        if self.completion not in ("greedy", "top"):
            raise ValueError(f"completion={self.completion!r} must be 'greedy' or 'top'")
        if self.n_folds < 2:
            raise ValueError(f"n_folds={self.n_folds} must be >= 2")
        self.members_ = member_names(members, k)
        Q, M = self._raw(inputs, k)
        self.query_knots_ = cdf_knots(Q, self.n_knots)
        self.member_knots_ = np.stack([cdf_knots(M[:, j], self.n_knots) for j in range(k)])
        X = self._design(Q, M)
        self.mean_utility_ = U.mean(axis=0)
        self.default_ = int(np.argmax(self.mean_utility_))
        self.completion_ = greedy_completions(U)
        self.val_default_ = float(U[:, self.default_].mean())
        self.alpha_, self.margin_, self.val_best_of_1_ = float(max(self.alphas)), float("inf"), self.val_default_
        self.val_gain_z_ = 0.0
        if n >= max(self.min_questions, self.n_folds):
            chosen = np.full(n, self.default_)
            folds = np.random.default_rng(self.random_state).permutation(n) % self.n_folds
            for alpha in sorted(self.alphas, reverse=True):
                scores = np.empty((n, k))  # out-of-fold predictions
                for fold in range(self.n_folds):
                    held = folds == fold
                    scores[held] = self._ridge(X[~held], U[~held], alpha).predict(
                        X[held].reshape(-1, X.shape[2])).reshape(-1, k)
                for margin in sorted(self.margins, reverse=True):
                    first = switch_first(scores, self.default_, margin)
                    value = float(U[np.arange(n), first].mean())
                    if value > self.val_best_of_1_ + 1e-12:
                        self.alpha_, self.margin_, self.val_best_of_1_, chosen = float(alpha), float(margin), value, first
            self.val_gain_z_ = paired_z(U[np.arange(n), chosen] - U[:, self.default_])
        gain = self.val_best_of_1_ - self.val_default_
        self.fallback_ = not (gain > self.min_gain and self.val_gain_z_ > self.min_z)
        self.coef_, self.intercept_ = np.zeros(X.shape[2]), 0.0
        if not self.fallback_:
            model = self._ridge(X, U, self.alpha_)
            self.coef_, self.intercept_ = np.asarray(model.coef_, dtype=np.float64), float(model.intercept_)
        logger.info("%s: %d train questions, %d-fold validation best-of-1 %.3f vs %.3f for the default member "
                    "%d (z = %.1f): %s", self.name, n, self.n_folds, self.val_best_of_1_, self.val_default_, self.default_,
                    self.val_gain_z_,
                    "falls back to it" if self.fallback_ else f"alpha {self.alpha_:g}, margin {self.margin_:g}")
        return self

    @staticmethod
    def _ridge(X: Array, U: npt.NDArray[np.floating[Any]], alpha: float) -> Ridge:
        """Ridge of the ``(n * k,)`` utilities on the ``(n * k, D)`` rows."""
        return Ridge(alpha=alpha).fit(X.reshape(-1, X.shape[2]), U.reshape(-1))

    def predict(self, inputs: RouteInputs) -> Array:
        """``(n, k)`` predicted utility of each member (the train mean of each when fallen back)."""
        self._check_fitted()
        k = len(self.members_)
        if self.fallback_:
            return np.tile(self.mean_utility_, (len(inputs), 1))
        X = self._design(*self._raw(inputs, k))
        return X @ self.coef_ + self.intercept_

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """``(picks, scores)``: the first member by the switch rule, then its completion; predicted utilities."""
        scores = self.predict(inputs)
        first = (np.full(len(scores), self.default_, dtype=np.int64) if self.fallback_
                 else switch_first(scores, self.default_, self.margin_))
        if self.completion == "greedy":
            return self.completion_[first][:, :l], scores
        ranked = np.argsort(-scores, axis=1, kind="stable")
        picks = np.array([[f, *[j for j in row if j != f]] for f, row in zip(first, ranked, strict=True)],
                         dtype=np.int64).reshape(len(scores), -1)
        return picks[:, :l], scores

    def _check_fitted(self) -> None:
        if not hasattr(self, "fallback_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted: call fit() or load() first")

    # --- persistence --------------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``router.json``: hyperparameters, members, selection, completions; arrays: coefficients, CDF knots."""
        config = {
            "hyperparameters": self._hyperparameters(), "members": self.members_, "default": self.default_,
            "fallback": self.fallback_, "alpha": self.alpha_, "margin": _finite_or_none(self.margin_),
            "val_best_of_1": _finite_or_none(self.val_best_of_1_), "val_default": _finite_or_none(self.val_default_),
            "val_gain_z": _finite_or_none(self.val_gain_z_),
            "mean_utility": self.mean_utility_.tolist(), "completion": self.completion_.tolist(),
            "intercept": self.intercept_,
        }
        arrays = {"coef": self.coef_, "query_knots": self.query_knots_}
        if self.member_knots_.size:
            arrays["member_knots"] = self.member_knots_
        return config, {k: np.ascontiguousarray(v) for k, v in arrays.items()}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls(**config["hyperparameters"])
        router.members_, router.default_ = list(config["members"]), int(config["default"])
        router.fallback_, router.alpha_ = bool(config["fallback"]), float(config["alpha"])
        router.margin_ = float("inf") if config["margin"] is None else float(config["margin"])
        router.intercept_ = float(config["intercept"])
        router.val_best_of_1_, router.val_default_ = (
            float("nan") if config[key] is None else float(config[key]) for key in ("val_best_of_1", "val_default"))
        router.val_gain_z_ = float("inf") if config["val_gain_z"] is None else float(config["val_gain_z"])
        router.mean_utility_ = np.asarray(config["mean_utility"], dtype=np.float64)
        router.completion_ = np.asarray(config["completion"], dtype=np.int64)
        router.coef_, router.query_knots_ = arrays["coef"], arrays["query_knots"]
        k = len(router.members_)
        router.member_knots_ = arrays.get("member_knots", np.zeros((k, router.n_knots, 0)))
        return router

    def selection(self) -> dict[str, Any]:
        """What model selection on the held-out train questions found (for reports)."""
        self._check_fitted()
        return {"fallback": self.fallback_, "val_best_of_1": _finite_or_none(self.val_best_of_1_),
                "val_default": _finite_or_none(self.val_default_), "val_gain_z": _finite_or_none(self.val_gain_z_),
                "default": self.members_[self.default_],
                "alpha": None if self.fallback_ else self.alpha_,
                "margin": None if self.fallback_ else _finite_or_none(self.margin_)}


@dataclass
class PreRetrievalRouter(_RetrievalRouter):
    """Routes from the query blocks only (first-stage features): run only the l chosen members."""

    name: ClassVar[str] = "pre_retrieval"
    reads: ClassVar[Literal["first_stage", "members"]] = "first_stage"


@dataclass
class PostRetrievalRouter(_RetrievalRouter):
    """Routes from the query blocks and every member's result features: all members run, l go to the LLM."""

    name: ClassVar[str] = "post_retrieval"
    reads: ClassVar[Literal["first_stage", "members"]] = "members"
