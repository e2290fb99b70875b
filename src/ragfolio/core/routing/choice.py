"""Which trained router to serve: the one whose validation on train questions gains most over the default member.

``router_training.bundle.router: auto`` serves, of the routers a portfolio trained
(:data:`SERVABLE`), the one with the largest **validation gain** ``val_best_of_1 - val_default``:
its best-of-1 as it would route (tuned margin, fallback included) minus the default member's
(best train mean) on the same validation questions, both from train questions only. The learned
router validates on its held-out share of train (``val_fraction``), the retrieval routers on the
out-of-fold predictions of a cross-validation over all of train, so their best-of-1 values are
over different questions; the gain over the default member on each router's own questions is what
compares them (on shared questions the two orders agree). A router that fell back gains 0; ties
(within ``tolerance``) go to the cheaper router, in :data:`SERVABLE` order; a router without its
validation values (saved before they were recorded) is never chosen. Test questions are never read.
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
        validation: Per candidate router: ``val_best_of_1``, ``val_default``, ``val_gain``, ``fallback``.
    """

    router: str
    requested: str
    reason: str
    validation: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"router": self.router, "requested": self.requested, "reason": self.reason,
                "validation": self.validation}


def _gain(entry: Mapping[str, Any]) -> float:
    """``val_best_of_1 - val_default`` (0 for a router that fell back; NaN when either is unknown)."""
    if entry.get("fallback"):
        return 0.0
    best, default = entry.get("val_best_of_1"), entry.get("val_default")
    if best is None or default is None or not (math.isfinite(best) and math.isfinite(default)):
        return float("nan")
    return float(best) - float(default)


def choose_router(validation: Mapping[str, Mapping[str, Any]], requested: str = "auto",
                  *, tolerance: float = 1e-9) -> RouterChoice:
    """The router to serve among ``validation``'s (router name -> its validation values).

    Args:
        validation: Per trained router of :data:`SERVABLE`: ``val_best_of_1`` (validation best-of-1
            as routed), ``val_default`` (the default member's on the same questions), ``fallback``.
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
            gain = _gain(entry)
            table[name] = {"val_best_of_1": entry.get("val_best_of_1"), "val_default": entry.get("val_default"),
                           "val_gain": gain if math.isfinite(gain) else None,
                           "fallback": bool(entry.get("fallback", False))}
    scores = ", ".join(f"{name} {_fmt(e['val_gain'])}" for name, e in table.items())
    if requested != "auto":
        if requested not in table:
            raise ValueError(f"router_training.bundle.router={requested!r} was not trained; trained: {sorted(table)}")
        return RouterChoice(requested, requested, f"served as configured (bundle.router: {requested}); "
                            f"validation gain over the default member: {scores}", table)
    known = {name: e["val_gain"] for name, e in table.items() if e["val_gain"] is not None}
    if not known:
        raise ValueError(f"no router of {sorted(table)} has validation values to choose by")
    best = max(known.values())
    chosen = next(name for name in SERVABLE if name in known and known[name] >= best - tolerance)
    return RouterChoice(chosen, "auto", f"largest validation gain over the default member (train questions "
                        f"only; ties to the cheaper router): {scores}", table)


def _fmt(x: float | None) -> str:
    return "unknown" if x is None else f"{x:+.4f}"
