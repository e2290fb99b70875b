"""The logistic-regression routing ablation: the learned router's query features, a linear model.

A multinomial logistic regression from the query's feature blocks (side by side, sorted by name,
as the learned router reads them) to the member that is best on the question. A question with
several tied-best members contributes one row per tied member, weighted ``1 / ties``; questions
with no winner (best utility 0) are left out. Members never seen as best get probability 0.

Saved as ``router.json`` (hyperparameters, members, classes) and ``router.safetensors`` (the
coefficients ``(n_classes or 1, d)`` and intercepts); no pickle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
from scipy.special import expit, softmax
from sklearn.linear_model import LogisticRegression

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    Scores,
    check_training_data,
    member_names,
    ranked,
)
from ragfolio.core.routing.determinism import deterministic_fit
from ragfolio.core.routing.features.query_features import Features, design_matrix
from ragfolio.core.routing.routers.learned import tied_best
from ragfolio.core.routing.routers.saved import SavedRouter


@dataclass
class LogisticRouter(SavedRouter):
    """Multinomial logistic regression from the query features to the best member.

    Attributes:
        C: Inverse regularisation strength of :class:`sklearn.linear_model.LogisticRegression`.
        max_iter: Solver iterations.

    Learned attributes (after ``fit``): ``members_``, ``classes_`` (the members seen as best),
    ``coef_`` ``(len(classes_), d)`` or ``(1, d)`` for two classes, ``intercept_``; with a single
    class seen, ``coef_`` is empty and every query gets that member first.
    """

    name: ClassVar[str] = "logistic"
    judged_as: ClassVar[Mapping[str, int]] = {"ablation": 4, "summary": 4}  # ragfolio.core.routing.judging
    C: float = 1.0
    max_iter: int = 1000
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        U = check_training_data(inputs, U)
        self.members_ = member_names(members, U.shape[1])
        best = tied_best(U) & (U.max(axis=1, keepdims=True) > 0)
        rows, labels = np.nonzero(best)
        if len(rows) == 0:
            raise ValueError("no question has a winning member: nothing to learn")
        self.classes_ = np.unique(labels).astype(np.int64)
        self.coef_, self.intercept_ = np.zeros((0, 0)), np.zeros(0)
        if len(self.classes_) > 1:
            model = LogisticRegression(C=self.C, max_iter=self.max_iter)
            with deterministic_fit():  # fixed BLAS threads: the same coefficients in any process
                model.fit(design_matrix(inputs.query)[rows], labels, sample_weight=1.0 / best.sum(axis=1)[rows])
            self.coef_, self.intercept_ = model.coef_, model.intercept_
        return self

    def _proba(self, features: Features) -> npt.NDArray[np.float64]:
        """``(n, k)`` probability of each member being the best (as ``LogisticRegression.predict_proba``)."""
        X = design_matrix(features)
        proba = np.zeros((X.shape[0], len(self.members_)))
        if len(self.classes_) == 1:
            proba[:, self.classes_[0]] = 1.0
            return proba
        decision = np.asarray(X @ self.coef_.T) + self.intercept_
        if len(self.classes_) == 2:
            positive = expit(decision[:, 0])
            proba[:, self.classes_] = np.stack([1 - positive, positive], axis=1)
        else:
            proba[:, self.classes_] = softmax(decision, axis=1)
        return proba

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """Members by decreasing predicted probability of being the best (the scores)."""
        scores = self._proba(inputs.query)
        return ranked(scores, l), scores

    def _check_fitted(self) -> None:
        if not hasattr(self, "classes_"):
            raise RuntimeError("this LogisticRouter is not fitted: call fit() or load() first")

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        config = {"hyperparameters": {"C": self.C, "max_iter": self.max_iter}, "members": self.members_,
                  "classes": self.classes_.tolist()}
        return config, {"coef": np.ascontiguousarray(self.coef_), "intercept": np.ascontiguousarray(self.intercept_)}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls(**config["hyperparameters"])
        router.members_, router.classes_ = list(config["members"]), np.asarray(config["classes"], dtype=np.int64)
        router.coef_, router.intercept_ = arrays["coef"], arrays["intercept"]
        return router
