"""How routers are judged: best-of-l on test questions, the learned router beside every ablation.

A routing of n queries is an ``(n, k)`` matrix of member indices, best first; its value at ``l``
is the best-of-l utility ``mean_q max_{j in picks[q, :l]} U[q, j]``. :func:`compare_routers` fits
every ablation on a portfolio's train questions and routes its test questions with them and with
the learned router; the oracle reads the test utilities (it bounds what any router can reach).
``gap closed`` at l = 1 is ``(learned - single) / (oracle - single)``, where ``single`` is the
member with the best train mean, scored on test.

**Which routers are judged** is declared by each registered router class (``judged_as``: a list's
name -> the router's place in it), read here through the router registry: ``ablation`` (fitted on
train and compared with the learned router, :func:`ablations`), ``summary`` (the report's
``summary`` scalars, :func:`summarized`) and ``dev_baseline`` (routed on dev beside the servable
routers, :func:`dev_baselines`). A new ablation is its class, registered, with ``judged_as``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.routing.base import LEARNED, Picks, RouteInputs, RouterProtocol
from ragfolio.core.routing.registry import make_router, router_class, router_names, servable_names
from ragfolio.core.routing.routers.baseline_routers import OracleRouter
from ragfolio.core.stats import paired_differences


def judged(role: str) -> list[str]:
    """The registered routers whose class puts them in list ``role`` (``judged_as``), by their place there."""
    places = {name: judged_as[role] for name in router_names()
              if role in (judged_as := getattr(router_class(name), "judged_as", {}))}
    return sorted(places, key=places.__getitem__)


def ablations() -> list[str]:
    """The routers :func:`compare_routers` fits on train beside the learned one, in report order."""
    return judged("ablation")


def compared() -> list[str]:
    """The routers of every comparison, in report order: the learned one, then :func:`ablations`."""
    return [LEARNED, *ablations()]


def summarized() -> list[str]:
    """The routers whose best-of-l at l = 1, 2 the report's ``summary`` holds (for ``dvc metrics``), in order."""
    return judged("summary")


def dev_baselines() -> list[str]:
    """The fixed baselines a dev comparison routes beside the servable routers (fitted on train)."""
    return judged("dev_baseline")


def report_order(*extra: str) -> list[str]:
    """Every router a report may hold, in report order: :func:`compared`, then ``extra`` (e.g. the
    paper's), then the other servable routers (:func:`~ragfolio.core.routing.registry.servable_names`)."""
    return list(dict.fromkeys([*compared(), *extra, *servable_names()]))


@dataclass(frozen=True)
class RoutingSplit:
    """One portfolio's questions of one split: what routers read, and the members' utilities.

    Attributes:
        inputs: The router inputs of the n questions.
        utilities: ``(n, k)`` utility of each portfolio member on each question.
    """

    inputs: RouteInputs
    utilities: npt.NDArray[np.float32]

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.utilities):
            raise ValueError(f"{len(self.inputs)} router inputs for {len(self.utilities)} utility rows")


def per_query_best_of_l(U: npt.NDArray[np.floating[Any]], picks: Picks) -> npt.NDArray[np.float64]:
    """``(n, k)``: entry ``[q, l - 1]`` is query q's best utility among its first l picks."""
    chosen = np.take_along_axis(np.asarray(U, dtype=np.float64), np.asarray(picks, dtype=np.int64), axis=1)
    return np.maximum.accumulate(chosen, axis=1)


def best_of_l(U: npt.NDArray[np.floating[Any]], picks: Picks) -> list[float]:
    """``[value at l = 1, ..., k]``: mean over queries of the best utility among the first l picks."""
    if len(U) == 0:
        return []
    return [float(v) for v in per_query_best_of_l(U, picks).mean(axis=0)]


def gap_closed(router: float, single: float, oracle: float) -> float | None:
    """``(router - single) / (oracle - single)``; None when the oracle leaves no gap to close."""
    gap = oracle - single
    return None if gap <= 1e-12 else float((router - single) / gap)


def fit_ablations(
    train: RoutingSplit, members: Sequence[str], *, seed: int, logistic_c: float
) -> dict[str, RouterProtocol]:
    """Every router of :func:`ablations`, fitted on ``train`` (random ones seeded with ``seed``)."""
    params: dict[str, dict[str, Any]] = {"random": {"random_state": seed}, "logistic": {"C": logistic_c}}
    return {
        name: make_router(name, **params.get(name, {})).fit(train.inputs, train.utilities, members)
        for name in ablations()
    }


@dataclass(frozen=True)
class RoutingComparison:
    """Every router's full routing of a portfolio's test questions, and its best-of-l curve.

    Attributes:
        picks: Router name -> ``(n_test, k)`` routing, in :func:`compared` order.
        utilities: ``(n_test, k)`` the members' test utilities.
    """

    picks: dict[str, Picks]
    utilities: npt.NDArray[np.float32]

    def with_routings(self, picks: Mapping[str, Picks]) -> RoutingComparison:
        """The same comparison with more routers' ``(n_test, k)`` routings, reported after these."""
        for name, p in picks.items():
            if np.shape(p) != self.utilities.shape:
                raise ValueError(f"routing {name!r} has shape {np.shape(p)}, expected {self.utilities.shape}")
        return RoutingComparison({**self.picks, **picks}, self.utilities)

    @property
    def curves(self) -> dict[str, list[float]]:
        """Router name -> best-of-l at l = 1..k."""
        return {name: best_of_l(self.utilities, picks) for name, picks in self.picks.items()}

    def report(self) -> dict[str, Any]:
        """``<router>.best_of_l``, ``<router>.minus_single_best`` and ``<router>.minus_greedy_prefix``
        (95% paired-bootstrap intervals at l = 1, 2, :mod:`ragfolio.core.stats`; see
        :meth:`differences`), ``single_best_member``, ``gap_closed_l1``, ``learned_minus_single_best``
        (the learned router's entry, kept at the top) and ``summary``."""
        curves = self.curves
        single = curves["top_average"][0]  # the member with the best train mean, on test
        k = self.utilities.shape[1]
        to_single, to_prefix = self.differences("top_average", fixed=True), self.differences("greedy_prefix")
        entries: dict[str, dict[str, Any]] = {}
        for name, curve in curves.items():
            entries[name] = {"best_of_l": curve}
            if name in to_single:
                entries[name]["minus_single_best"] = to_single[name]
            if name in to_prefix:
                entries[name]["minus_greedy_prefix"] = to_prefix[name]
        return {
            **entries,
            "single_best_member": single,
            "gap_closed_l1": gap_closed(curves["learned"][0], single, curves["oracle"][0]),
            "learned_minus_single_best": to_single.get("learned", {}),
            "summary": {  # scalars for `dvc metrics show/diff`, which skips lists
                f"{name}_l{l}": curves[name][l - 1] for name in summarized() for l in (1, 2) if l <= k
            },
        }

    def dev_report(self) -> dict[str, Any]:
        """``n_dev`` and, per router, ``best_of_l``, ``gap_closed_l1`` and ``minus_single_best`` (paired
        intervals at l = 1, 2): the report of a routing of dev questions (the servable routers and
        the fixed baselines)."""
        curves, to_single = self.curves, self.differences("top_average", fixed=True)
        single, oracle = curves["top_average"][0], curves["oracle"][0]
        out: dict[str, Any] = {"n_dev": len(self.utilities), "single_best_member": single}
        for name, curve in curves.items():
            out[name] = {"best_of_l": curve}
            if name != "oracle":
                out[name]["gap_closed_l1"] = gap_closed(curve[0], single, oracle)
            if name in to_single:
                out[name]["minus_single_best"] = to_single[name]
        return out

    def differences(
        self, baseline: str, ls: Sequence[int] = (1, 2), *, fixed: bool = False, confidence: float = 0.95
    ) -> dict[str, dict[str, dict[str, Any]]]:
        """``{router: {"l1": interval, "l2": ...}}``: every other router's best-of-l minus ``baseline``'s,
        per query, paired (one shared bootstrap resampling for all routers and l).

        Args:
            baseline: A router of :attr:`picks` (``top_average``'s first pick is the single best member,
                ``greedy_prefix`` the fixed greedy members).
            ls: The l compared (those above k are left out).
            fixed: Compare every l with the baseline at l = 1 (a single member, not a growing set).
            confidence: Two-sided level of each interval (lower it for a multiplicity correction).
        """
        if len(self.utilities) == 0 or baseline not in self.picks:
            return {}
        k = self.utilities.shape[1]
        ls = [l for l in ls if l <= k]
        base = per_query_best_of_l(self.utilities, self.picks[baseline])
        names = [name for name in self.picks if name != baseline]
        if not names or not ls:
            return {}
        A = np.concatenate([per_query_best_of_l(self.utilities, self.picks[n])[:, [l - 1 for l in ls]] for n in names],
                           axis=1)
        B = np.tile(base[:, [0] * len(ls) if fixed else [l - 1 for l in ls]], len(names))
        found = iter(paired_differences(A, B, confidence=confidence))
        return {name: {f"l{l}": next(found).to_dict() for l in ls} for name in names}

    def differences_to_single_best(self, ls: Sequence[int] = (1, 2)) -> dict[str, dict[str, Any]]:
        """``{"l1": interval, "l2": ...}``: learned best-of-l minus the single best member, per query, paired."""
        return self.differences("top_average", ls, fixed=True).get("learned", {})


def compare_routers(
    learned: RouterProtocol, train: RoutingSplit, test: RoutingSplit, *, seed: int, logistic_c: float,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> RoutingComparison:
    """Route ``test`` with the ``learned`` router and every ablation fitted on ``train``, and with
    each ``extra`` router (registry name -> hyperparameters, e.g. ``{"paper": {...}}``) fitted there too."""
    routers = {LEARNED: learned, **fit_ablations(train, learned.members_, seed=seed, logistic_c=logistic_c)}
    for name, params in (extra or {}).items():
        routers[name] = make_router(name, **{"random_state": seed, **params}).fit(
            train.inputs, train.utilities, learned.members_)
    return RoutingComparison(route_all(routers, test), test.utilities)


def route_all(routers: Mapping[str, RouterProtocol], test: RoutingSplit) -> dict[str, Picks]:
    """Each router's ``(n_test, k)`` routing of ``test``; only the oracle is shown the test utilities."""
    k = test.utilities.shape[1]
    with_utility = RouteInputs(test.inputs.query, {**(test.inputs.results or {}), "utility": test.utilities})
    return {
        name: router.route(with_utility if isinstance(router, OracleRouter) else test.inputs, k)[0]
        for name, router in routers.items()
    }
