"""The portfolios a run selected: one frozen record, written by ``portfolio_selection``, read by every later stage.

:class:`Portfolios` holds the portfolio size ``k``, the candidates' names (utility-matrix column
order) and one :class:`Selection` per selection key (each dataset and ``all``): greedy's picks in
order, the baselines' orders and the certificate. Stages read attributes
(``portfolios.members("all")``), never keys; :meth:`Portfolios.to_dict` writes the JSON that
``data/06_models/portfolios.json`` holds and :meth:`Portfolios.from_dict` reads it back, checking
every key (a misspelt or missing one fails at load, naming it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

from ragfolio.core.record_checks import checked_fields, read_version

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Selection:
    """What portfolio selection chose on one key's sampled train questions.

    Attributes:
        n_train: Train questions selected on (the sample).
        n_train_available: Train questions of the key.
        greedy: Candidate indices in greedy's pick order, ``k_max`` long.
        greedy_train_values: Best-of-j train value after each greedy pick.
        portfolio: The first ``k`` greedy picks, by name.
        top_by_average: Candidate indices by decreasing train mean, ``k_max`` long.
        random: Random orders (``random_draws`` of them), each ``k_max`` long.
        certificate: ``{"upper_bound", "ratio"}``: the submodularity certificate at ``k``.
        required_sample_size: The sample size DESIGN.md's bound asks for (epsilon = delta = 0.05).
        separation: Whether the questions separate the candidates
            (:meth:`~ragfolio.core.selection.separation.Separation.to_dict`); empty in records
            written before it was kept.
    """

    n_train: int
    n_train_available: int
    greedy: list[int]
    greedy_train_values: list[float]
    portfolio: list[str]
    top_by_average: list[int]
    random: list[list[int]]
    certificate: dict[str, float]
    required_sample_size: int
    separation: dict[str, Any] = field(default_factory=dict)

    @property
    def single_best(self) -> int:
        """The candidate with the best train mean."""
        return self.top_by_average[0]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**checked_fields(cls, data, "a portfolio selection"))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Portfolios:
    """Every key's :class:`Selection`, the portfolio size and the candidates they index.

    Attributes:
        k: Portfolio size (members of every portfolio).
        k_max: Length of the pick orders (greedy, top-by-average, random).
        n_queries: Train questions drawn per key (None: all).
        candidates: Candidate names, in utility-matrix column order.
        selections: Selection key (dataset or ``all``) -> its selection, in the order selected.
    """

    k: int
    k_max: int
    n_queries: int | None
    candidates: list[str]
    selections: dict[str, Selection]

    def __post_init__(self) -> None:
        if not 1 <= self.k <= self.k_max:
            raise ValueError(f"k={self.k} must be in 1..k_max={self.k_max}")

    @property
    def keys(self) -> list[str]:
        """The selection keys, in the order selected."""
        return list(self.selections)

    def selection(self, key: str) -> Selection:
        """Key ``key``'s selection.

        Raises:
            KeyError: No portfolio was selected for ``key`` (the message names those that were).
        """
        if key not in self.selections:
            raise KeyError(f"no portfolio for {key!r}; portfolios are {sorted(self.selections)}")
        return self.selections[key]

    def members(self, key: str) -> list[int]:
        """Candidate indices of ``key``'s portfolio members, in greedy order."""
        return list(self.selection(key).greedy[: self.k])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record of a :meth:`to_dict` mapping (a mapping without ``schema_version`` is version 1).

        Raises:
            ValueError: A newer schema, or a key unknown or missing (the message names them).
        """
        data = checked_fields(cls, read_version(data, "portfolios", SCHEMA_VERSION), "portfolios")
        data["selections"] = {key: Selection.from_dict(s) for key, s in data["selections"].items()}
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; :meth:`from_dict` reads it back."""
        return {
            "schema_version": SCHEMA_VERSION, "k": self.k, "k_max": self.k_max, "n_queries": self.n_queries,
            "candidates": list(self.candidates),
            "selections": {key: s.to_dict() for key, s in self.selections.items()},
        }
