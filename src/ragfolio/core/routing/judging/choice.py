"""Which trained router to serve: the one that gains most over the default member on dev questions.

``router_training.bundle.router: auto`` serves, of the routers a portfolio trained
(:data:`SERVABLE`), the one with the largest **dev gain** ``dev_best_of_1 - dev_default``: its
best-of-1 as it routes on the dev questions (``data_prep.dev_fraction``, carved from train and
never fitted on) minus the default member's (best train mean) on the same questions. Every router
is judged on the same dev questions, so the gains compare directly. Without a dev split
(``dev_fraction: 0``) the rule falls back to the **validation gain** ``val_best_of_1 - val_default``
each router measured inside train while fitting: the learned router on its held-out share of train
(``val_fraction``), the retrieval routers on the out-of-fold predictions of a cross-validation over
all of train, so their values are over different questions and only the gains compare; a router
that fell back gains 0 there. Ties (within ``tolerance``) go to the cheaper router, in
:data:`SERVABLE` order; a router without the values compared (saved before they were recorded) is
never chosen. Test questions are never read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SERVABLE = ("learned", "pre_retrieval", "post_retrieval")  # cheapest first: the order ties are broken in


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
    """

    router: str
    requested: str
    reason: str
    validation: dict[str, dict[str, Any]]
    on: str = "validation"

    def to_dict(self) -> dict[str, Any]:
        return {"router": self.router, "requested": self.requested, "reason": self.reason,
                "on": self.on, "validation": self.validation}


@dataclass(frozen=True)
class RouterSelection:
    """What router training chose, handed from its selection node to its report (in memory).

    Attributes:
        features: The retrieval features' column ``names`` per block and their ``cost``.
        validation: Per portfolio, per router: its validation (and dev) values and whether it fell back.
        choices: Per portfolio, the router it serves and why.
    """

    features: Mapping[str, Any]
    validation: Mapping[str, Mapping[str, Any]]
    choices: Mapping[str, RouterChoice]


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
                  *, tolerance: float = 1e-9) -> RouterChoice:
    """The router to serve among ``validation``'s (router name -> its validation values).

    Args:
        validation: Per trained router of :data:`SERVABLE`: ``val_best_of_1`` (validation best-of-1
            as routed), ``val_default`` (the default member's on the same questions), ``fallback``,
            and with a dev split ``dev_best_of_1`` and ``dev_default`` (the rule then compares
            dev gains, when every router has them).
        requested: ``auto`` (the rule of the module docstring) or a router's name (served as asked;
            the validation values are still reported).
        tolerance: Gains within this of the best count as tied.

    Raises:
        ValueError: ``requested`` names no router of ``validation``, or ``auto`` finds none with
            validation values.
    """
    table: dict[str, dict[str, Any]] = {}
    for name, entry in validation.items():
        if name in SERVABLE:
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
    if requested != "auto":
        if requested not in table:
            raise ValueError(f"router_training.bundle.router={requested!r} was not trained; trained: {sorted(table)}")
        return RouterChoice(requested, requested, f"served as configured (bundle.router: {requested}); "
                            f"{where}: {scores}", table, label)
    known = {name: e[f"{on}_gain"] for name, e in table.items() if e[f"{on}_gain"] is not None}
    if not known:
        raise ValueError(f"no router of {sorted(table)} has {label} values to choose by")
    best = max(known.values())
    chosen = next(name for name in SERVABLE if name in known and known[name] >= best - tolerance)
    return RouterChoice(chosen, "auto", f"largest {where}; ties to the cheaper router: {scores}", table, label)


_RULES = {  # prefix of the values compared -> (RouterChoice.on, what the reason calls the gain)
    "dev": ("dev", "dev gain over the default member (dev questions, carved from train and not fitted on)"),
    "val": ("validation", "validation gain over the default member (train questions only)"),
}


def _fmt(x: float | None) -> str:
    return "unknown" if x is None else f"{x:+.4f}"
