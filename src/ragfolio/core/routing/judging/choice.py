"""Which trained router to serve: the one that gains most over the default member on dev questions.

``router_training.bundle.router: auto`` serves, of the routers a portfolio trained that can be
served (:func:`~ragfolio.core.routing.registry.servable_names`), the one with the largest **dev gain** ``dev_best_of_1 - dev_default``: its
best-of-1 as it routes on the dev questions (``data_prep.dev_fraction``, carved from train and
never fitted on) minus the default member's (best train mean) on the same questions. Every router
is judged on the same dev questions, so the gains compare directly. Without a dev split
(``dev_fraction: 0``) the rule falls back to the **validation gain** ``val_best_of_1 - val_default``
each router measured inside train while fitting: the learned router on its held-out share of train
(``val_fraction``), the retrieval routers on the out-of-fold predictions of a cross-validation over
all of train, so their values are over different questions and only the gains compare; a router
that fell back gains 0 there. Ties (within ``tolerance``) go to the cheaper router, in
:func:`~ragfolio.core.routing.registry.servable_names` order; a router without the values compared (saved before they were recorded) is
never chosen. Test questions are never read.

**Do no harm.** A point estimate on a few dozen dev questions is not evidence, so ``auto`` routes
at a given l only where the dev **same-budget** check says routing helps there: the paired 95%
interval of (recall of the routed union of l members) minus (recall of the single best member
given ``l * num_docs`` passages) on the dev questions lies above zero
(:func:`~ragfolio.core.routing.judging.budget.same_budget_comparison`). Only routers with such
evidence at some l compete; the chosen one routes at the l's where its own interval is above zero
(``routed_ls``), and every other l is served by the single best member alone at ``l * num_docs``
passages. No such router, or no dev split: routing is off at every l, and the reason says why
with the numbers. A router named in the settings is served at every l, as configured, with the
same evidence in its reason.

**Within a cost.** ``bundle.max_members_run`` (None: no limit, every member may run, as the
post-retrieval router runs them) leaves out of ``auto``'s choice the routers that run more members
for a query routed to one member (l = 1) than it allows: the cascade its shortlist of m, the
post-retrieval router all k, the query-only routers one. The reason names those left out.

The choices are one record, :class:`RouterSelection`, that ``router_training`` writes
(``06_models/router_selection.json``) and the ``packaging`` stage reads to serve the chosen router;
:func:`served_choice` says what is served as the bundle records it, :func:`served_entry` as the router
report does (with its test numbers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragfolio.core.record_checks import checked_fields, read_version
from ragfolio.core.routing.registry import servable_names
from ragfolio.core.stats import interval_text

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RouterChoice:
    """The router to serve and why.

    Attributes:
        router: The chosen router's name.
        requested: What the settings asked for (``auto`` or a router's name).
        reason: One sentence naming the rule and the scores compared.
        validation: Per candidate router: ``val_best_of_1``, ``val_default``, ``val_gain``, ``fallback``,
            and with a dev split ``dev_best_of_1``, ``dev_default``, ``dev_gain``.
        on: ``dev`` or ``validation``: which gain the rule compared.
        routed_ls: The l's at which the router routes (the do-no-harm rule of the module
            docstring); at any other l the single best member serves ``l * num_docs`` passages.
            None: every l (a choice made before the rule existed).
        evidence: Per router, its dev same-budget intervals by ``l<l>`` (``{"estimate", "low",
            "high", "n"}``); empty without dev questions.
    """

    router: str
    requested: str
    reason: str
    validation: dict[str, dict[str, Any]]
    on: str = "validation"
    routed_ls: tuple[int, ...] | None = None
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def routing(self) -> str:
        """``on`` (it routes at every l judged), ``off`` (at none) or ``partial``."""
        if self.routed_ls is None:
            return "on"
        if not self.routed_ls:
            return "off"
        judged = _ls(self.evidence.get(self.router, {}))
        return "on" if all(l in self.routed_ls for l in judged) else "partial"

    def routes_at(self, l: int) -> bool:  # noqa: E741 - the method's name for members per query
        """Whether the router routes a request for ``l`` members (else the single best member serves it)."""
        return self.routed_ls is None or l in self.routed_ls

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RouterChoice:
        """The choice of a :meth:`to_dict` mapping (its ``routing`` is derived, so not read back).

        Raises:
            ValueError: A key is unknown or a required one is missing (the message names them).
        """
        record = checked_fields(cls, {k: v for k, v in data.items() if k != "routing"}, "a router choice")
        if record.get("routed_ls") is not None:
            record["routed_ls"] = tuple(record["routed_ls"])
        return cls(**record)

    def to_dict(self) -> dict[str, Any]:
        return {"router": self.router, "requested": self.requested, "reason": self.reason,
                "on": self.on, "validation": self.validation, "routing": self.routing,
                "routed_ls": None if self.routed_ls is None else list(self.routed_ls), "evidence": self.evidence}


@dataclass(frozen=True)
class RouterSelection:
    """What router training chose: written by its selection node (``router_selection``), read by
    its report and by ``packaging``, which serves ``choices[router_training.bundle.portfolio]``.

    Attributes:
        validation: Per portfolio, per router: its validation (and dev) values and whether it fell back.
        choices: Per portfolio, the router it serves and why.
    """

    validation: Mapping[str, Mapping[str, Any]]
    choices: Mapping[str, RouterChoice]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RouterSelection:
        """The record of a :meth:`to_dict` mapping (a mapping without ``schema_version`` is version 1).

        Raises:
            ValueError: A newer schema, or a key unknown or missing (the message names them).
        """
        record = checked_fields(cls, read_version(data, "a router selection", SCHEMA_VERSION), "a router selection")
        return cls(validation=record["validation"],
                   choices={key: RouterChoice.from_dict(choice) for key, choice in record["choices"].items()})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; :meth:`from_dict` reads it back."""
        return {"schema_version": SCHEMA_VERSION, "validation": self.validation,
                "choices": {key: choice.to_dict() for key, choice in self.choices.items()}}


def _served(portfolio: str, choice: RouterChoice, default_l: int, num_docs: int) -> dict[str, Any]:
    return {"portfolio": portfolio, **choice.to_dict(), "default_l": default_l, "num_docs": num_docs}


def served_choice(portfolio: str, choice: RouterChoice, *, default_l: int, num_docs: int,
                  dev: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What is served, as the bundle records it (``selection.served_router``): the choice and what
    router training measured of it, no test number (those are the router report's, :func:`served_entry`).

    Args:
        portfolio: The served portfolio's key (``router_training.bundle.portfolio``).
        choice: Its router choice (``RouterSelection.choices[portfolio]``).
        default_l: Members a request gets unless it asks (``router_training.bundle.default_l``).
        num_docs: Passages each member returns.
        dev: The portfolio's dev report (``RoutingComparison.dev_report()`` of its dev routings):
            its entry of the chosen router gives ``dev_best_of_l`` and ``dev_gap_closed_l1``; None
            (no dev questions): both None.

    Returns:
        ``{"portfolio", **choice.to_dict(), "default_l", "num_docs", "dev_best_of_l", "dev_gap_closed_l1"}``.
    """
    on_dev = (dev or {}).get(choice.router, {})
    return {**_served(portfolio, choice, default_l, num_docs),
            "dev_best_of_l": on_dev.get("best_of_l"), "dev_gap_closed_l1": on_dev.get("gap_closed_l1")}


def served_entry(portfolio: str, choice: RouterChoice, measured: Mapping[str, Any], *, default_l: int,
                 num_docs: int, corpus: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What is served, as the router report's ``served`` says it: :func:`served_choice` and what the
    report measured of the router on test.

    Args:
        portfolio: The served portfolio's key (``router_training.bundle.portfolio``).
        choice: Its router choice (``RouterSelection.choices[portfolio]``).
        measured: The router report's entry of the portfolio: per router its test ``best_of_l``,
            ``minus_single_best`` and ``gap_closed_l1``, ``dev`` (the same on dev questions),
            ``n_test`` and ``chosen_same_budget``; empty: nothing measured.
        default_l: Members a request gets unless it asks (``router_training.bundle.default_l``).
        num_docs: Passages each member returns.
        corpus: The corpus description the report names (left out when None).

    Returns:
        ``{"portfolio", **choice.to_dict(), "default_l", "num_docs", ["corpus"], "n_test", "dev_best_of_l",
        "dev_gap_closed_l1", "test_best_of_l", "test_minus_single_best", "test_gap_closed_l1", "same_budget"}``.
    """
    name = choice.router
    on_test, on_dev = measured.get(name, {}), measured.get("dev", {}).get(name, {})
    return {
        **_served(portfolio, choice, default_l, num_docs),
        **({} if corpus is None else {"corpus": corpus}), "n_test": measured.get("n_test", 0),
        "dev_best_of_l": on_dev.get("best_of_l"), "dev_gap_closed_l1": on_dev.get("gap_closed_l1"),
        "test_best_of_l": on_test.get("best_of_l"), "test_minus_single_best": on_test.get("minus_single_best"),
        "test_gap_closed_l1": on_test.get("gap_closed_l1"), "same_budget": measured.get("chosen_same_budget"),
    }


def _gain(entry: Mapping[str, Any], on: str = "val") -> float:
    """``<on>_best_of_1 - <on>_default`` (``on``: ``val`` or ``dev``); NaN when either is unknown.

    On validation a router that fell back gains 0 (its validation best-of-1 is of the routing it
    declined); on dev every router is measured as it routes, fallback included.
    """
    if on == "val" and entry.get("fallback"):
        return 0.0
    best, default = entry.get(f"{on}_best_of_1"), entry.get(f"{on}_default")
    if best is None or default is None or not (math.isfinite(best) and math.isfinite(default)):
        return float("nan")
    return float(best) - float(default)


def choose_router(validation: Mapping[str, Mapping[str, Any]], requested: str = "auto",
                  *, evidence: Mapping[str, Mapping[str, Any]] | None = None, ls: Sequence[int] = (1,),
                  members_ran: Mapping[str, int] | None = None, max_members_run: int | None = None,
                  tolerance: float = 1e-9) -> RouterChoice:
    """The router to serve among ``validation``'s (router name -> its validation values).

    Args:
        validation: Per trained router (those not servable are ignored): ``val_best_of_1`` (validation best-of-1
            as routed), ``val_default`` (the default member's on the same questions), ``fallback``,
            and with a dev split ``dev_best_of_1`` and ``dev_default`` (the rule then compares
            dev gains, when every router has them).
        requested: ``auto`` (the rule of the module docstring) or a router's name (served as asked,
            at every l; the validation values and the evidence are still reported).
        evidence: Per router, its dev same-budget intervals by ``l<l>`` (the routed union at l minus
            the single best member at ``l * num_docs`` passages); None or empty: no dev questions,
            so ``auto`` does not route.
        ls: The l's a request may ask for (``1..k``): a named router routes at all of them.
        members_ran: Per router, the members it runs for a query routed to one member (l = 1);
            a router missing here counts as within any budget.
        max_members_run: ``auto`` chooses only among routers with ``members_ran`` at most this
            (None: no limit); a named router is served as asked.
        tolerance: Gains within this of the best count as tied.

    Raises:
        ValueError: ``requested`` names no router of ``validation``, or ``auto`` finds none with
            validation values.
    """
    table: dict[str, dict[str, Any]] = {}
    servable = servable_names()
    for name, entry in validation.items():
        if name in servable:
            row: dict[str, Any] = {}
            for on in ("val", "dev"):
                if on == "val" or f"{on}_best_of_1" in entry:
                    gain = _gain(entry, on)
                    row.update({f"{on}_best_of_1": entry.get(f"{on}_best_of_1"),
                                f"{on}_default": entry.get(f"{on}_default"),
                                f"{on}_gain": gain if math.isfinite(gain) else None})
            table[name] = {**row, "fallback": bool(entry.get("fallback", False))}
    on = "dev" if table and all("dev_gain" in e for e in table.values()) else "val"
    label, where = _RULES[on]
    scores = ", ".join(f"{name} {_fmt(e[f'{on}_gain'])}" for name, e in table.items())
    judged: dict[str, dict[str, Any]] = {name: dict(e) for name, e in (evidence or {}).items() if name in table}
    if requested != "auto":
        if requested not in table:
            raise ValueError(f"router_training.bundle.router={requested!r} was not trained; trained: {sorted(table)}")
        return RouterChoice(requested, requested, f"served as configured (bundle.router: {requested}) at every l; "
                            f"{where}: {scores}{_evidence_note(judged.get(requested))}", table, label,
                            tuple(ls), judged)
    over = {name: n for name, n in (members_ran or {}).items()
            if name in table and max_members_run is not None and n > max_members_run}
    known = {name: e[f"{on}_gain"] for name, e in table.items() if e[f"{on}_gain"] is not None and name not in over}
    if not known:
        raise ValueError(f"no router of {sorted(table)} has {label} values to choose by"
                         + (f" within bundle.max_members_run={max_members_run}" if over else ""))
    supported = {name: gain for name, gain in known.items() if _supported_ls(judged.get(name))}
    pool = supported or known
    best = max(pool.values())
    chosen = next(name for name in servable if name in pool and pool[name] >= best - tolerance)
    budget = "" if not over else (f"; left out above bundle.max_members_run={max_members_run}: "
                                  + ", ".join(f"{name} (runs {n} members)" for name, n in over.items()))
    choice = RouterChoice(chosen, "auto", f"largest {where}; ties to the cheaper router: {scores}{budget}", table,
                          label, _supported_ls(judged.get(chosen)), judged)
    return replace(choice, reason=f"{choice.reason}; {_routing_note(choice)}")


def _ls(intervals: Mapping[str, Any]) -> list[int]:
    """The l's of a router's intervals (keys ``l1``, ``l2``, ...), ascending."""
    return sorted(int(key[1:]) for key in intervals if key.startswith("l") and key[1:].isdigit())


def _supported_ls(intervals: Mapping[str, Any] | None) -> tuple[int, ...]:
    """The l's at which ``intervals`` (a router's dev same-budget intervals) lie above zero."""
    if not intervals:
        return ()
    return tuple(l for l in _ls(intervals) if (low := intervals[f"l{l}"].get("low")) is not None and low > 0)


def _evidence_note(intervals: Mapping[str, Any] | None) -> str:
    if not intervals:
        return "; no dev same-budget evidence"
    return "; dev same-budget evidence: " + ", ".join(
        f"l = {l} {interval_text(intervals[f'l{l}'], with_n=True)}" for l in _ls(intervals))


def _routing_note(choice: RouterChoice) -> str:
    """Where ``choice`` routes and why not elsewhere, with the numbers."""
    intervals = choice.evidence.get(choice.router)
    if not intervals:
        return ("routing off: no dev questions to judge routing by (data_prep.dev_fraction: 0), so the single "
                "best member serves l x num_docs passages")
    off = [l for l in _ls(intervals) if l not in (choice.routed_ls or ())]
    parts = []
    if choice.routed_ls:
        parts.append("routing on at l = " + ", ".join(
            f"{l} (dev evidence {interval_text(intervals[f'l{l}'], with_n=True)})" for l in choice.routed_ls))
    if off:
        parts.append(("routing off" if not choice.routed_ls else "off") + " at l = " + ", ".join(
            f"{l}: dev evidence {interval_text(intervals[f'l{l}'], with_n=True)} is not enough" for l in off)
            + " (the 95% interval of the routed union minus the single best member given the same passages "
              "must be above zero), so the single best member serves l x num_docs passages there")
    return "; ".join(parts)


_RULES = {  # prefix of the values compared -> (RouterChoice.on, what the reason calls the gain)
    "dev": ("dev", "dev gain over the default member (dev questions, carved from train and not fitted on)"),
    "val": ("validation", "validation gain over the default member (train questions only)"),
}


def _fmt(x: float | None) -> str:
    return "unknown" if x is None else f"{x:+.4f}"
