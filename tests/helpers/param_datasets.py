"""The parameter datasets of a Kedro run, for the tests that build their catalog by hand.

A ``kedro run`` gives a node ``params:<group>`` and, for every key under it at any depth,
``params:<group>.<key>`` (Kedro's session adds them; ``packaging`` reads ``params:router_training.bundle``).
:func:`param_datasets` makes the same from a test's blocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kedro.io import MemoryDataset

BASE = Path(__file__).resolve().parents[2] / "conf" / "base"


def param_datasets(params: dict[str, Any]) -> dict[str, MemoryDataset]:
    """``params:<group>`` for each block of ``params`` and ``params:<group>.<key>...`` for each key in it;
    a key a registered pipeline reads on its own that the block leaves out is conf/base's, as in a run
    (whose parameters are conf/base's with the run's over them)."""
    from ragfolio.pipeline_registry import register_pipelines

    out: dict[str, MemoryDataset] = {}

    def add(name: str, value: Any) -> None:
        out[f"params:{name}"] = MemoryDataset(value)
        if isinstance(value, dict):
            for key, inner in value.items():
                add(f"{name}.{key}", inner)

    for group, block in params.items():
        add(group, block)
    base: dict[str, Any] = {}
    for path in sorted(BASE.glob("parameters*.yml")):
        base.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    read = {name for pipe in register_pipelines().values() for name in pipe.inputs() if name.startswith("params:")}
    for name in sorted(read - set(out)):
        group, *keys = name.removeprefix("params:").split(".")
        if group in params and keys:
            value = base[group]
            for key in keys:
                value = value[key]
            out[name] = MemoryDataset(value)
    return out
