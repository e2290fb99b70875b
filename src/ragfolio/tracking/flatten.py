"""Flatten nested reports and parameters into MLflow's flat ``a.b.c`` keys."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator, Mapping
from typing import Any

MAX_PARAM_CHARS = 6000  # MLflow's limit on a parameter value


def _indexed_name(key: str, i: int) -> str:
    """``greedy_at_k`` -> ``greedy_at_5`` for the 5th entry; ``best_of_l`` -> ``best_of_l_5`` ... (1-based)."""
    if key.endswith(("_at_k", "_at_l")):
        return f"{key[:-1]}{i + 1}"
    return f"{key}_{i + 1}"


def flatten_metrics(report: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a report as ``{dotted key: value}``.

    A top-level ``datasets`` level is dropped, so ``{"datasets": {"hotpotqa": {"test":
    {"greedy_at_k": [...]}}}}`` gives ``hotpotqa.test.greedy_at_1`` ... ``greedy_at_8``; lists of
    numbers are indexed from 1; strings, booleans and non-finite numbers are left out.
    """
    out: dict[str, float] = {}

    def walk(node: Any, key: str) -> None:
        if isinstance(node, Mapping):
            for name, value in node.items():
                walk(value, f"{key}.{name}" if key else str(name))
        elif isinstance(node, list | tuple):
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in node):
                head, _, last = key.rpartition(".")
                for i, value in enumerate(node):
                    walk(value, f"{head}.{_indexed_name(last, i)}" if head else _indexed_name(last, i))
        elif isinstance(node, int | float) and not isinstance(node, bool) and math.isfinite(node):
            out[key] = float(node)

    body = dict(report)
    datasets = body.pop("datasets", None)
    walk(body, prefix)
    if datasets is not None:
        walk(datasets, prefix)
    return out


def _leaves(node: Any, key: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping) and node:
        for name, value in node.items():
            yield from _leaves(value, f"{key}.{name}" if key else str(name))
    else:
        yield key, node


def flatten_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Every parameter leaf as ``{dotted key: value}``; lists and empty dicts as JSON, cut to MLflow's limit."""
    out = {}
    for key, value in _leaves(params, ""):
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out[key] = text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."
    return out


def knob_params(params: Mapping[str, Any], groups: Collection[str] | None = None) -> dict[str, str]:
    """The run's knobs as :func:`flatten_params` writes them: each top-level scalar (``run_name``) and each
    non-mapping value of a parameter group (``portfolio_selection.k``, ``candidate_scoring.grid``), of the
    ``groups`` given (all when None). Nested blocks (encoders, the router's hyperparameters, the grid
    presets, a grid written out) are left to the run's ``params.json``."""
    knobs: dict[str, Any] = {}
    for group, block in params.items():
        if not isinstance(block, Mapping):
            knobs[group] = block
        elif groups is None or group in groups:
            knobs.update({f"{group}.{key}": value for key, value in block.items() if not isinstance(value, Mapping)})
    return flatten_params(knobs)
