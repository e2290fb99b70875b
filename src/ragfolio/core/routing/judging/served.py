"""What is served, as the bundle and the router report record it: the router choice and its figures.

A :class:`~ragfolio.core.routing.judging.choice.RouterChoice` routes at its ``routed_ls`` only; a
request for any other l is served by the single best member alone at ``l * num_docs`` passages. So
the served figures are the router's at the l's it routes and the single best member's elsewhere:

* ``*_best_of_l[l - 1]``: the router's best-of-l where it routes, else the single best member's
  utility (``single_best_member``: the one member that serves, as the best-of-l of its routing);
* ``test_minus_single_best["l<l>"]``: the router's paired interval where it routes, else exactly
  ``0 [0, 0]`` (the single best member against itself);
* ``*_gap_closed_l1``: the router's where it routes at l = 1, else 0;
* ``test_served_recall[l - 1]``: the recall of the ``l * num_docs`` passages the reader gets (the
  same-budget check's): the routed union where it routes, the single best member's where not.

The router's own figures at every l, routed or not, stay in the report's per-router entries
(``datasets[<portfolio>][<router>]``) and in ``same_budget`` (its same-budget check on test).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragfolio.core.routing.judging.choice import RouterChoice


def served_figures(choice: RouterChoice, entry: Mapping[str, Any], single: float | None,
                   n: int) -> dict[str, Any]:
    """The router's figures (``entry``) at the l's ``choice`` routes, the single best member's elsewhere.

    Args:
        choice: The served choice (its :meth:`~RouterChoice.routes_at`).
        entry: The router's report entry: ``best_of_l`` (l = 1..k), ``minus_single_best``
            (``{"l1": interval, ...}``), ``gap_closed_l1``; a key may be absent.
        single: The single best member's value on the same questions (``single_best_member``).
        n: Questions the figures are over (the zero intervals' ``n``).

    Returns:
        ``{"best_of_l", "minus_single_best", "gap_closed_l1"}`` as served (None where ``entry`` has none).
    """
    curve, minus, gap = entry.get("best_of_l"), entry.get("minus_single_best"), entry.get("gap_closed_l1")
    zero = {"estimate": 0.0, "low": 0.0, "high": 0.0, "n": n}
    return {
        "best_of_l": None if curve is None else [v if choice.routes_at(l) else single for l, v in enumerate(curve, 1)],
        "minus_single_best": None if minus is None else {
            key: interval if choice.routes_at(int(key[1:])) else zero for key, interval in minus.items()},
        "gap_closed_l1": gap if gap is None or choice.routes_at(1) else 0.0,
    }


def served_recall(choice: RouterChoice, same_budget: Mapping[str, Any] | None) -> list[float] | None:
    """Per l = 1..k, the recall of the passages served: ``routed_union_recall`` where ``choice``
    routes, ``single_best_recall`` (the single best member at ``l * num_docs``) where not; None
    without a same-budget check."""
    if not same_budget:
        return None
    return [union if choice.routes_at(l) else alone for l, (union, alone) in
            enumerate(zip(same_budget["routed_union_recall"], same_budget["single_best_recall"], strict=True), 1)]


def _served(portfolio: str, choice: RouterChoice, default_l: int, num_docs: int) -> dict[str, Any]:
    return {"portfolio": portfolio, **choice.to_dict(), "default_l": choice.served_default_l(default_l),
            "num_docs": num_docs}


def served_choice(portfolio: str, choice: RouterChoice, *, default_l: int, num_docs: int,
                  dev: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What is served, as the bundle records it (``selection.served_router``): the choice and what
    router training measured of it, no test number (those are the router report's, :func:`served_entry`).

    Args:
        portfolio: The served portfolio's key (``router_training.bundle.portfolio``).
        choice: Its router choice (``RouterSelection.choices[portfolio]``).
        default_l: ``router_training.bundle.default_l``, the default l of a choice that holds none
            (:meth:`~RouterChoice.served_default_l`).
        num_docs: Passages each member returns.
        dev: The portfolio's dev report (``RoutingComparison.dev_report()`` of its dev routings):
            its entry of the chosen router gives ``dev_best_of_l`` and ``dev_gap_closed_l1``, as
            served (module docstring); None (no dev questions): both None.

    Returns:
        ``{"portfolio", **choice.to_dict(), "default_l", "num_docs", "dev_best_of_l", "dev_gap_closed_l1"}``.
    """
    dev = dev or {}
    on_dev = served_figures(choice, dev.get(choice.router, {}), dev.get("single_best_member"), dev.get("n_dev", 0))
    return {**_served(portfolio, choice, default_l, num_docs),
            "dev_best_of_l": on_dev["best_of_l"], "dev_gap_closed_l1": on_dev["gap_closed_l1"]}


def served_entry(portfolio: str, choice: RouterChoice, measured: Mapping[str, Any], *, default_l: int,
                 num_docs: int, corpus: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What is served, as the router report's ``served`` says it: :func:`served_choice` and what the
    report measured on test of what is served (module docstring).

    Args:
        portfolio: The served portfolio's key (``router_training.bundle.portfolio``).
        choice: Its router choice (``RouterSelection.choices[portfolio]``).
        measured: The router report's entry of the portfolio: per router its test ``best_of_l``,
            ``minus_single_best`` and ``gap_closed_l1``, ``single_best_member``, ``dev`` (the same
            on dev questions), ``n_test`` and ``chosen_same_budget``; empty: nothing measured.
        default_l: ``router_training.bundle.default_l``, the default l of a choice that holds none.
        num_docs: Passages each member returns.
        corpus: The corpus description the report names (left out when None).

    Returns:
        ``{"portfolio", **choice.to_dict(), "default_l", "num_docs", ["corpus"], "n_test", "dev_best_of_l",
        "dev_gap_closed_l1", "test_best_of_l", "test_minus_single_best", "test_gap_closed_l1",
        "test_served_recall", "same_budget"}``; ``same_budget`` is the router's same-budget check at
        l = 1, 2 as if it routed there (``chosen_same_budget``).
    """
    n_test = measured.get("n_test", 0)
    on_test = served_figures(choice, measured.get(choice.router, {}), measured.get("single_best_member"), n_test)
    same_budget = measured.get("chosen_same_budget")
    return {
        **served_choice(portfolio, choice, default_l=default_l, num_docs=num_docs, dev=measured.get("dev")),
        **({} if corpus is None else {"corpus": corpus}), "n_test": n_test,
        "test_best_of_l": on_test["best_of_l"], "test_minus_single_best": on_test["minus_single_best"],
        "test_gap_closed_l1": on_test["gap_closed_l1"], "test_served_recall": served_recall(choice, same_budget),
        "same_budget": same_budget,
    }
