"""The candidate pool: a YAML grid expanded into named retriever candidates.

A grid maps a family to one block (or a list of blocks) of ``parameter: value-or-list``; each block
expands to the Cartesian product of its lists. A candidate's name is its family and parameters,
e.g. ``bm25(k1=1.2,b=0.75)``, so names are stable and readable in reports. A grid may also be
named by a preset (:func:`resolve_grid`; ``default`` and ``paper`` in conf/base/parameters_candidate_grids.yml).

Families, their parameters and defaults come from the registry of
:mod:`ragfolio.core.retrieval.family` (the built-ins: :mod:`ragfolio.core.retrieval.families`).
A family's optional parameter appears in a candidate's name and parameters only when it differs
from its default, so adding one renames no existing candidate and invalidates no cached result.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragfolio.core.retrieval.family import base_parts, families, get_family


@dataclass(frozen=True)
class CandidateSpec:
    """One candidate retriever: a family and its full parameter set (defaults filled in)."""

    name: str
    family: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "params": dict(self.params)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CandidateSpec:
        return cls(name=record["name"], family=record["family"], params=dict(record["params"]))


def make_candidate(family: str, params: Mapping[str, Any]) -> CandidateSpec:
    """Validate ``params`` against the registered ``family``, fill defaults and name the candidate."""
    spec = get_family(family)
    defaults = {**spec.params, **spec.optional}
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"{family}: unknown parameter(s) {unknown}; allowed: {sorted(defaults)}")
    for key, allowed in spec.choices.items():
        if (value := params.get(key, defaults[key])) not in allowed:
            raise ValueError(f"{family}: {key}={value!r} must be one of {allowed}")
    full = {key: params.get(key, default) for key, default in spec.params.items()}
    full.update({key: params[key] for key, default in spec.optional.items() if params.get(key, default) != default})
    # None is a value only of a parameter whose default is None and that is not required
    missing = [k for k, v in full.items() if v is None and (k in spec.required or defaults[k] is not None)]
    if missing:
        raise ValueError(f"{family}: missing required parameter(s) {sorted(missing)}")
    shown = {k: v for k, v in full.items() if v is not None}
    name = f"{family}(" + ",".join(f"{k}={v}" for k, v in shown.items()) + ")"
    return CandidateSpec(name=name, family=family, params=full)


def encoders_used(candidates: Sequence[CandidateSpec]) -> list[str]:
    """Encoders whose embeddings some candidate reads: its ``encoder``, or the encoder of a base it
    names (``dense:<enc>``, ``hybrid:<enc>``: :func:`~ragfolio.core.retrieval.family.base_parts`)."""
    names: dict[str, None] = {}  # a dict as an ordered set
    for candidate in candidates:
        for key, value in candidate.params.items():
            if key == "encoder" and value:
                names[str(value)] = None
            elif isinstance(value, str):
                names.update(dict.fromkeys(base_parts(value).query_encoders))
    return list(names)


Grid = Mapping[str, Mapping[str, Any] | Sequence[Mapping[str, Any]]]


def resolve_grid(grid: str | Grid, presets: Mapping[str, Grid]) -> Grid:
    """``grid`` itself when it is written out, else the preset it names.

    Raises:
        ValueError: ``grid`` names no preset (naming the presets).
    """
    if not isinstance(grid, str):
        return grid
    if grid not in presets:
        raise ValueError(f"grid={grid!r} is not a preset; presets: {sorted(presets)}")
    return presets[grid]


def expand_grid(grid: Grid) -> list[CandidateSpec]:
    """Expand ``{family: block | [blocks]}`` into candidates, in grid order, names unique."""
    candidates: list[CandidateSpec] = []
    for family, blocks in grid.items():
        for block in [blocks] if isinstance(blocks, Mapping) else blocks:
            keys = list(block)
            values = [v if isinstance(v, list) else [v] for v in block.values()]
            for combo in itertools.product(*values):
                candidates.append(make_candidate(family, dict(zip(keys, combo, strict=True))))
    duplicates = [name for name, n in Counter(c.name for c in candidates).items() if n > 1]
    if duplicates:
        raise ValueError(f"the grid declares these candidates more than once: {duplicates[:5]}")
    if not candidates:
        raise ValueError("the candidate grid is empty")
    return candidates


def count_by_family(candidates: Sequence[CandidateSpec]) -> dict[str, int]:
    """Number of candidates of each registered family, in registration order (zeros kept)."""
    counts = Counter(c.family for c in candidates)
    return {family: counts.get(family, 0) for family in families()}
