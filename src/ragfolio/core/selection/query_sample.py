"""The train questions each portfolio is selected on: one frozen record, written by ``portfolio_selection``.

:class:`QuerySample` is Algorithm 1's "sample queries" as a record: per selection key (each dataset
and ``all``) a :class:`Draw` of the rows greedy selects on. Stages read attributes
(``sample.draw("all").rows``), never keys; :meth:`QuerySample.to_dict` writes the JSON that
``data/06_models/query_sample.json`` holds and :meth:`QuerySample.from_dict` reads it back, checking
every key (a misspelt or missing one fails at load, naming it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Self

from ragfolio.core.record_checks import checked_fields


@dataclass(frozen=True)
class Draw:
    """One selection key's drawn train questions.

    Attributes:
        n_train: Train questions of the key (drawn from).
        n: Questions drawn.
        rows: Positions of the drawn questions among the key's train rows, ascending.
        ids: The drawn questions as ``"<dataset>/<id>"``, in ``rows`` order.
    """

    n_train: int
    n: int
    rows: list[int]
    ids: list[str]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**checked_fields(cls, data, "a query sample's draw"))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class QuerySample:
    """Every selection key's :class:`Draw`, and what drew them.

    Attributes:
        n_queries: Questions asked for per key (None: every train question).
        seed: The seed of the draws (each key draws with its own seed derived from it).
        samples: ``{key: Draw}``.
    """

    n_queries: int | None
    seed: int
    samples: dict[str, Draw]

    def draw(self, key: str) -> Draw:
        """The draw of selection key ``key``.

        Raises:
            ValueError: ``key`` was not drawn (the message names those that were).
        """
        if key not in self.samples:
            raise ValueError(f"the query sample has no draw for {key!r}; it has {sorted(self.samples)}")
        return self.samples[key]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record of a :meth:`to_dict` mapping.

        Raises:
            ValueError: A key is unknown or missing (the message names them).
        """
        data = checked_fields(cls, data, "the query sample")
        data["samples"] = {key: Draw.from_dict(d) for key, d in data["samples"].items()}
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; :meth:`from_dict` reads it back."""
        return {"n_queries": self.n_queries, "seed": self.seed,
                "samples": {key: d.to_dict() for key, d in self.samples.items()}}
