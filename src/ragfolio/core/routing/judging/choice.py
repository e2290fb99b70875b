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
at a given l only where the dev **same-budget** check says routing helps there: the recall of the
routed union of l members minus the recall of the single best member given ``l * num_docs``
passages, per dev question, has a mean above zero. Every servable router at every l is one test,
and the up to 4 x k tests on the same dev questions are **one family under Holm's step-down** at
the one-sided familywise level 2.5% (with a single test, the paired 95% interval above zero):
:func:`~ragfolio.core.routing.judging.budget.same_budget_tests`, whose intervals are each at the
level its Holm step judges it (:mod:`~ragfolio.core.routing.judging.multiplicity` gives the formulas).
The family holds every servable router judged on dev, those ``bundle.max_members_run`` leaves out
included (it is fixed before the choice; conservative). Only routers with a passed test compete
(by their dev gain, as above: Holm bounds the chance that any passed test is wrong, whichever is
chosen after); the chosen one routes at the l's where its
own test passed (``routed_ls``), and every other l is served by the single best member alone at
``l * num_docs`` passages. No such router, or no dev split: routing is off at every l, and the
reason says why with the numbers. A router named in the settings is served at every l, as
configured, with the same evidence in its reason.

**The default l** (members a request gets unless it asks) is chosen with the router: under
``auto`` the smallest l with evidence (``min(routed_ls)``), else ``bundle.default_l`` (2), where the
single best member serves ``default_l * num_docs`` passages; a named router serves at
``bundle.default_l``. The bundle records it (``default_l`` of its manifest).

**Within a cost.** ``bundle.max_members_run`` (None: no limit, every member may run, as the
post-retrieval router runs them) leaves out of ``auto``'s choice the routers that run more members
for a query routed to one member (l = 1) than it allows: the cascade its shortlist of m, the
post-retrieval router all k, the query-only routers one. The reason names those left out.

The choices are one record, :class:`RouterSelection`, that ``router_training`` writes
(``06_models/router_selection.json``) and the ``packaging`` stage reads to serve the chosen router;
:func:`~ragfolio.core.routing.judging.served.served_choice` says what is served as the bundle records
it, :func:`~ragfolio.core.routing.judging.served.served_entry` as the router report does (with its
test numbers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragfolio.core.record_checks import checked_fields, read_version
from ragfolio.core.routing.registry import servable_names
from ragfolio.core.stats import interval_text

SCHEMA_VERSION = 2  # 2: evidence holds Holm's tests, choices their default_l (1 is still read)


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
        evidence: Per router, its dev same-budget tests by ``l<l>`` (``{"estimate", "low",
            "high", "n", "confidence", "p", "p_holm", "passed", "m"}``,
            :func:`~ragfolio.core.routing.judging.budget.same_budget_tests`); empty without dev questions.
        default_l: Members a request gets unless it asks (the module docstring's rule). None: a
            choice recorded before it was chosen here; :meth:`served_default_l` then gives the setting.
    """

    router: str
    requested: str
    reason: str
    validation: dict[str, dict[str, Any]]
    on: str = "validation"
    routed_ls: tuple[int, ...] | None = None
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    default_l: int | None = None

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

    def served_default_l(self, configured: int) -> int:
        """The default l served: :attr:`default_l`, or ``configured`` (``bundle.default_l``) for a choice without one."""
        return configured if self.default_l is None else self.default_l

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
                "routed_ls": None if self.routed_ls is None else list(self.routed_ls), "evidence": self.evidence,
                "default_l": self.default_l}


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
        """The record of a :meth:`to_dict` mapping (a mapping without ``schema_version`` is version 1;
        a version-1 record reads with its choices' ``default_l`` None and its evidence uncorrected).

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
                  default_l: int = 2, tolerance: float = 1e-9) -> RouterChoice:
    """The router to serve among ``validation``'s (router name -> its validation values).

    Args:
        validation: Per trained router (those not servable are ignored): ``val_best_of_1`` (validation best-of-1
            as routed), ``val_default`` (the default member's on the same questions), ``fallback``,
            and with a dev split ``dev_best_of_1`` and ``dev_default`` (the rule then compares
            dev gains, when every router has them).
        requested: ``auto`` (the rule of the module docstring) or a router's name (served as asked,
            at every l; the validation values and the evidence are still reported).
        evidence: Per router, its dev same-budget tests by ``l<l>`` (the routed union at l minus
            the single best member at ``l * num_docs`` passages, every router and l one family under
            Holm: :func:`~ragfolio.core.routing.judging.budget.same_budget_tests`); ``auto`` routes
            where ``passed``. None or empty: no dev questions, so ``auto`` does not route.
        ls: The l's a request may ask for (``1..k``): a named router routes at all of them.
        members_ran: Per router, the members it runs for a query routed to one member (l = 1);
            a router missing here counts as within any budget.
        max_members_run: ``auto`` chooses only among routers with ``members_ran`` at most this
            (None: no limit); a named router is served as asked.
        default_l: ``bundle.default_l``: a named router's default l, and ``auto``'s where no l has evidence.
        tolerance: Gains within this of the best count as tied.

    Raises:
        ValueError: ``requested`` names no router of ``validation``, ``auto`` finds none with
            validation values, or a test of ``evidence`` has no ``passed`` (not corrected for multiplicity).
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
    _check_tests(judged)
    if requested != "auto":
        if requested not in table:
            raise ValueError(f"router_training.bundle.router={requested!r} was not trained; trained: {sorted(table)}")
        return RouterChoice(requested, requested, f"served as configured (bundle.router: {requested}) at every l, "
                            f"default l = {default_l} (bundle.default_l); {where}: {scores}"
                            f"{_evidence_note(judged.get(requested))}", table, label, tuple(ls), judged, default_l)
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
    routed = _supported_ls(judged.get(chosen))
    choice = RouterChoice(chosen, "auto", f"largest {where}; ties to the cheaper router: {scores}{budget}", table,
                          label, routed, judged, min(routed) if routed else default_l)
    return replace(choice, reason=f"{choice.reason}; {_routing_note(choice)}")


def _ls(intervals: Mapping[str, Any]) -> list[int]:
    """The l's of a router's intervals (keys ``l1``, ``l2``, ...), ascending."""
    return sorted(int(key[1:]) for key in intervals if key.startswith("l") and key[1:].isdigit())


def _check_tests(evidence: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise unless every test of ``evidence`` says whether it ``passed`` Holm's step-down."""
    for name, tests in evidence.items():
        if bad := [key for key in tests if "passed" not in tests[key]]:
            raise ValueError(f"dev evidence of {name} at {bad} has no 'passed': the do-no-harm rule reads tests "
                             "corrected for multiplicity (ragfolio.core.routing.judging.budget.same_budget_tests)")


def _supported_ls(tests: Mapping[str, Any] | None) -> tuple[int, ...]:
    """The l's at which ``tests`` (a router's dev same-budget tests) passed Holm's step-down."""
    return tuple(l for l in _ls(tests or {}) if tests and tests[f"l{l}"]["passed"])


def _test_text(test: Mapping[str, Any]) -> str:
    """``+0.030 [+0.012, +0.049] on 400 questions (99.8% interval, Holm-adjusted p 0.0025)``."""
    return (f"{interval_text(test, with_n=True)} ({100 * test['confidence']:.3g}% interval, "
            f"Holm-adjusted p {test['p_holm']:.2g})")


def _evidence_note(tests: Mapping[str, Any] | None) -> str:
    if not tests:
        return "; no dev same-budget evidence"
    return "; dev same-budget evidence: " + ", ".join(
        f"l = {l} {_test_text(tests[f'l{l}'])}{'' if tests[f'l{l}']['passed'] else ' not'} passed" for l in _ls(tests))


def _routing_note(choice: RouterChoice) -> str:
    """Where ``choice`` routes and why not elsewhere, with the numbers."""
    tests = choice.evidence.get(choice.router)
    default = (f"default l = {choice.default_l}: the smallest l with evidence" if choice.routed_ls else
               f"default l = {choice.default_l} (bundle.default_l): no l has evidence")
    if not tests:
        return ("routing off: no dev questions to judge routing by (data_prep.dev_fraction: 0), so the single "
                f"best member serves l x num_docs passages; {default}")
    off = [l for l in _ls(tests) if l not in (choice.routed_ls or ())]
    parts = []
    if choice.routed_ls:
        parts.append("routing on at l = " + ", ".join(
            f"{l} (dev evidence {_test_text(tests[f'l{l}'])})" for l in choice.routed_ls))
    if off:
        first = next(iter(tests.values()))
        parts.append(("routing off" if not choice.routed_ls else "off") + " at l = " + ", ".join(
            f"{l}: dev evidence {_test_text(tests[f'l{l}'])} is not enough" for l in off)
            + f" (the routed union must beat the single best member given the same passages under Holm's "
              f"step-down over the {first['m']} router x l tests, familywise {100 * first['alpha']:.3g}% one-sided), "
              "so the single best member serves l x num_docs passages there")
    return "; ".join([*parts, default])


_RULES = {  # prefix of the values compared -> (RouterChoice.on, what the reason calls the gain)
    "dev": ("dev", "dev gain over the default member (dev questions, carved from train and not fitted on)"),
    "val": ("validation", "validation gain over the default member (train questions only)"),
}


def _fmt(x: float | None) -> str:
    return "unknown" if x is None else f"{x:+.4f}"
