"""What ``dvc metrics show`` and ``dvc plots show`` print of the router report (``router_metrics``):
its headline numbers (``router_headline``) and its best-of-l curves (``router_plot``)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ragfolio.core.routing.registry import servable_names
from ragfolio.core.scoring.utility_index import ALL
from ragfolio.plotting import subplots
from ragfolio_lab.pipelines.router_evaluation.nodes import routed


def headline_routers(metrics: dict[str, Any]) -> dict[str, Any]:
    """The few numbers ``dvc metrics show`` prints for routing: test best-of-1 on ``all`` of each router.

    Returns:
        ``{"best_of_1": {"single_best_member", <router>..., "oracle"}, "gap_closed_l1": {<router>: ...}}``
        for the ``all`` portfolio (or the first, without one); every curve is in ``router_metrics.json``.
    """
    entry: dict[str, Any] = metrics["datasets"].get(ALL) or next(iter(metrics["datasets"].values()), {})
    routers = [name for name in servable_names() if name in entry]
    headline: dict[str, Any] = {
        "best_of_1": {"single_best_member": entry.get("single_best_member"),
                      **{name: entry[name]["best_of_l"][0] for name in (*routers, "oracle") if name in entry}},
        "gap_closed_l1": {name: entry[name].get("gap_closed_l1") for name in routers},
    }
    if (served := metrics.get("served")) is not None:
        headline["served"] = served_headline(served)
    return headline

def served_headline(served: Mapping[str, Any]) -> dict[str, Any]:
    """What is served, in ``dvc metrics show``'s terms: its default l, and per l of the dev evidence,
    whether the router routes there (``routes_l<l>``) and the ends of the interval at its Holm level
    (``dev_low_l<l>``, ``dev_high_l<l>``)."""
    evidence = (served.get("evidence") or {}).get(served["router"], {})
    routed = served.get("routed_ls")
    out: dict[str, Any] = {"router": served["router"], "routing": served.get("routing", "on"),
                           "default_l": served.get("default_l")}
    for key, interval in sorted(evidence.items(), key=lambda item: int(item[0][1:])):
        out[f"routes_{key}"] = routed is None or int(key[1:]) in routed
        out[f"dev_low_{key}"], out[f"dev_high_{key}"] = interval.get("low"), interval.get("high")
    return out

# A marker and a dash per router (eleven before one repeats: every router of a report has a line).
_LINE_STYLES = ("o-", "x:", "s--", "d--", "v-.", "k-", "^-", "P-", "h:", "<--", ">-.")

def plot_router_curves(metrics: dict[str, Any]) -> Figure:
    """One panel per dataset: test best-of-l of every router, and the same-budget single best."""
    keys = list(metrics["datasets"])
    fig, axes = subplots(1, max(len(keys), 1), figsize=(4.2 * max(len(keys), 1), 3.6), sharey=True)
    for ax, key in zip(axes[0], keys, strict=False):
        entry = metrics["datasets"][key]
        ls = np.arange(1, metrics["k"] + 1)
        for name, style in zip(routed(entry), itertools.cycle(_LINE_STYLES)):
            ax.plot(ls, entry[name]["best_of_l"], style, label=name, lw=1.2, ms=4)
        ax.plot(ls, entry["same_budget"]["single_best_recall"], "*:", color="grey", label="single best, l x num_docs")
        ax.set_title(f"{key} (n={entry['n_test']} test)")
        ax.set_xlabel("routed members l")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("best-of-l support recall")
    axes[0][-1].legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    return fig
