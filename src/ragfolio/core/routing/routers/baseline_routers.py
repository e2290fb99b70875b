"""Routing ablations that read no query features: fixed orders, random orders and the oracle.

* ``top_average``: every query gets the members by decreasing mean train utility.
* ``greedy_prefix``: every query gets the members in portfolio (greedy pick) order, i.e. the first
  l greedy picks: a fixed sub-portfolio.
* ``random``: an independent uniformly random order of the members for each query.
* ``oracle``: each query's members by decreasing utility on that query, read from
  ``RouteInputs.results["utility"]``; the best any router can do, for evaluation only.

Each saves ``router.json`` only (its name, members and, for fixed orders, the k member scores).
``judged_as`` places each in the lists of routers the reports judge
(:mod:`ragfolio.core.routing.judging.evaluation`: ``ablation``, ``summary``, ``dev_baseline``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    Scores,
    check_training_data,
    member_names,
    ranked,
)
from ragfolio.core.routing.routers.saved import SavedRouter


class _ConfigOnly(SavedRouter):
    """A router whose ``router.json`` is all it holds (no arrays): fitted once it knows its members."""

    tensors: ClassVar[Literal["numpy", "torch", "none"]] = "none"
    members_: list[str]

    def _check_fitted(self) -> None:
        if not self.members_:
            raise RuntimeError(f"this {type(self).__name__} is not fitted: call fit() or load() first")


@dataclass
class _FixedOrderRouter(_ConfigOnly):
    """Routes every query to the same members, by decreasing ``scores_`` ``(k,)`` (set by ``fit``)."""

    name: ClassVar[str]
    members_: list[str] = field(default_factory=list, init=False, repr=False)
    scores_: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32), init=False, repr=False)

    @abstractmethod
    def _member_scores(self, U: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``(k,)`` scores of the members from the ``(n, k)`` train utilities."""

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        U = check_training_data(inputs, U)
        self.members_ = member_names(members, U.shape[1])
        self.scores_ = self._member_scores(U)
        return self

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        scores = np.tile(self.scores_, (len(inputs), 1))
        return ranked(scores, l), scores

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"members": self.members_, "scores": self.scores_.tolist()}, {}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls()
        router.members_, router.scores_ = list(config["members"]), np.asarray(config["scores"], dtype=np.float32)
        return router


@dataclass
class TopAverageRouter(_FixedOrderRouter):
    """Every query gets the members by decreasing mean train utility (``scores_``: those means)."""

    name: ClassVar[str] = "top_average"
    judged_as: ClassVar[Mapping[str, int]] = {"ablation": 2, "summary": 3, "dev_baseline": 1}

    def _member_scores(self, U: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return U.mean(axis=0)


@dataclass
class GreedyPrefixRouter(_FixedOrderRouter):
    """Every query gets the members in portfolio order (``scores_``: ``(k - j) / k`` for member j)."""

    name: ClassVar[str] = "greedy_prefix"
    judged_as: ClassVar[Mapping[str, int]] = {"ablation": 3, "summary": 2, "dev_baseline": 2}

    def _member_scores(self, U: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        k = U.shape[1]
        return ((k - np.arange(k)) / k).astype(np.float32)


@dataclass
class RandomRouter(_ConfigOnly):
    """An independent random order of the members for each query.

    Attributes:
        random_state: Seed of the scores; routing the same queries again gives the same picks.
    """

    name: ClassVar[str] = "random"
    judged_as: ClassVar[Mapping[str, int]] = {"ablation": 1}
    random_state: int = 0
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        self.members_ = member_names(members, check_training_data(inputs, U).shape[1])
        return self

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """Scores uniform in [0, 1), drawn afresh from ``random_state`` on every call."""
        scores = np.random.default_rng(self.random_state).random((len(inputs), len(self.members_)))
        return ranked(scores, l), scores

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"hyperparameters": {"random_state": self.random_state}, "members": self.members_}, {}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls(**config["hyperparameters"])
        router.members_ = list(config["members"])
        return router


@dataclass
class OracleRouter(_ConfigOnly):
    """Each query's members by decreasing utility on that query (needs ``results["utility"]``)."""

    name: ClassVar[str] = "oracle"
    judged_as: ClassVar[Mapping[str, int]] = {"ablation": 6, "dev_baseline": 3}
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        self.members_ = member_names(members, check_training_data(inputs, U).shape[1])
        return self

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """Scores: the ``(n, k)`` utilities of ``inputs.results["utility"]``.

        Raises:
            ValueError: ``inputs`` carry no ``utility`` results block of shape ``(n, k)``.
        """
        k = len(self.members_)
        utility = (inputs.results or {}).get("utility")
        if utility is None or np.shape(utility) != (len(inputs), k):
            raise ValueError(f"the oracle routes by each member's utility on the query: pass "
                             f"RouteInputs(query, results={{'utility': U}}) with U of shape ({len(inputs)}, {k})")
        scores = np.asarray(utility)
        return ranked(scores, l), scores

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"members": self.members_}, {}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls()
        router.members_ = list(config["members"])
        return router
