"""What every router is: fitted on train questions, it orders a portfolio's k members per query.

A router is fitted on :class:`RouteInputs` of n train questions and their ``(n, k)`` member
utilities, then routes queries: ``route(inputs, l)`` returns the ``(n, l)`` members to run, best
first, and the ``(n, k)`` scores they were ranked by. :class:`RouteInputs` carries the queries'
features and, optionally, features of each member's retrieval results, so a router that looks at
what the members found (post-retrieval routing) fits the same contract as one that reads the query
only; routers ignore the blocks they do not read.

A router saves itself to a folder holding at least ``router.json``, whose ``name`` field names the
router class (:func:`ragfolio.core.routing.registry.load_router` dispatches on it). A
``router.json`` without ``name`` was written before routers had names, by the learned router.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

import numpy as np
import numpy.typing as npt

from ragfolio.core.routing.features.query_features import Features, n_rows, take_rows

CONFIG_FILE = "router.json"
LEARNED = "learned"  # the name of a saved router whose router.json names none

Picks = npt.NDArray[np.int64]  # (n_queries, l) member indices, best first
Scores = npt.NDArray[np.floating[Any]]  # (n_queries, k) the router's score of every member, higher first


@dataclass(frozen=True)
class RouteInputs:
    """What a router may read about n queries.

    Attributes:
        query: The queries' feature blocks, each ``(n, d)`` (dense array or CSR matrix;
            :func:`ragfolio.core.routing.features.query_features.query_features`).
        results: Feature blocks of every member's retrieval results for each query, each
            ``(n, k)`` or ``(n, k, d)``; None before retrieval. The oracle reads
            ``results["utility"]``, each member's true utility on the query (evaluation only).
    """

    query: Features
    results: Features | None = None

    def __post_init__(self) -> None:
        n = n_rows(self.query)
        for name, block in (self.results or {}).items():
            if block.shape[0] != n:
                raise ValueError(f"results[{name!r}] has {block.shape[0]} rows for {n} queries")

    def __len__(self) -> int:
        return n_rows(self.query)

    def take(self, rows: npt.NDArray[np.int64] | Sequence[int]) -> RouteInputs:
        """The same inputs restricted to ``rows``."""
        results = None if self.results is None else take_rows(self.results, rows)
        return RouteInputs(take_rows(self.query, rows), results)


class RouterProtocol(Protocol):
    """A router over k portfolio members (see the module docstring).

    Attributes:
        name: The registry name, written to ``router.json`` (class attribute).
        members_: The members' names, in utility-column order (set by ``fit`` and ``load``).
    """

    name: ClassVar[str]
    members_: list[str]

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        """Learn from n train questions and their ``(n, k)`` member utilities ``U``; returns self."""
        ...

    def route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """``(picks, scores)``: ``(n, l)`` member indices, best first, and ``(n, k)`` scores."""
        ...

    def save(self, folder: str | Path) -> None:
        """Write the fitted router to ``folder`` (``router.json`` naming it, and any weights)."""
        ...

    @classmethod
    def load(cls, folder: str | Path) -> Self:
        """The router :meth:`save` wrote to ``folder``."""
        ...


def member_names(members: Sequence[str] | None, k: int) -> list[str]:
    """``members`` as a list (``m0 .. m{k-1}`` when None), checked against the k utility columns."""
    names = list(members) if members is not None else [f"m{j}" for j in range(k)]
    if len(names) != k:
        raise ValueError(f"{len(names)} member names for {k} utility columns")
    return names


def check_training_data(inputs: RouteInputs, U: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """``U`` as float32 ``(n, k)``, after checking it has one row per query of ``inputs``."""
    U = np.asarray(U, dtype=np.float32)
    if U.ndim != 2 or U.shape[1] < 1:
        raise ValueError(f"utilities must be (n_questions, k) with k >= 1, got shape {U.shape}")
    if len(inputs) != len(U):
        raise ValueError(f"features have {len(inputs)} rows for {len(U)} utility rows")
    return U


def check_l(l: int, k: int) -> None:
    """Raise unless ``1 <= l <= k``."""
    if not 1 <= l <= k:
        raise ValueError(f"l={l} must be in 1..{k}")


def ranked(scores: Scores, l: int) -> Picks:
    """``(n, l)`` members by decreasing score (ties: the lower index first)."""
    return np.argsort(-np.asarray(scores), axis=1, kind="stable")[:, :l].astype(np.int64)


def write_config(folder: str | Path, name: str, config: dict[str, Any]) -> Path:
    """Write ``router.json`` (``{"name": name, **config}``) into ``folder``, created if needed; returns the folder."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_FILE).write_text(json.dumps({"name": name, **config}, indent=1))
    return path


def saved_name(folder: str | Path) -> str:
    """The name of the router saved in ``folder`` (:data:`LEARNED` when its ``router.json`` names none).

    Raises:
        FileNotFoundError: ``folder`` holds no ``router.json``.
    """
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: not a saved router folder")
    return str(json.loads(path.read_text()).get("name", LEARNED))


def read_config(folder: str | Path, name: str) -> dict[str, Any]:
    """The ``router.json`` of ``folder``, after checking it names router ``name``.

    Raises:
        FileNotFoundError: ``folder`` holds no ``router.json``.
        ValueError: ``router.json`` names another router.
    """
    found = saved_name(folder)
    if found != name:
        raise ValueError(f"{Path(folder) / CONFIG_FILE} holds a {found!r} router, not a {name!r} one")
    config: dict[str, Any] = json.loads((Path(folder) / CONFIG_FILE).read_text())
    return config
