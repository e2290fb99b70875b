"""The candidate pool: a YAML grid expanded into named retriever candidates.

A grid maps a family to one block (or a list of blocks) of ``parameter: value-or-list``; each block
expands to the Cartesian product of its lists. A candidate's name is its family and parameters,
e.g. ``bm25(k1=1.2,b=0.75)``, so names are stable and readable in reports.

Families and their parameters (``base`` names a shared first-stage ranking: ``bm25``,
``dense:<encoder>`` or ``hybrid:<encoder>``):

========  ===========================================================================
bm25      k1, b, method, stopwords
dense     encoder, index_type
hybrid    encoder, method (rrf | score), rrf_k, weight (of the dense side)
ds        prefilter (a base), encoder, gamma, r
mmr       prefilter, encoder, lambda
vendi     prefilter, encoder, s
graph     seeds (a base), n_seeds, hops, rank (ppr | dense), damping, encoder
two_hop   first (a base), append (title | text), second (bm25 | dense:<encoder>), merge
========  ===========================================================================

``bm25`` and ``dense`` also take ``backend``: ``inprocess`` (bm25s, FAISS; the default) or
``elasticsearch`` (a cluster, see :mod:`ragfolio.core.retrievers.elasticsearch`). A parameter of
:data:`OPTIONAL_PARAMS` appears in a candidate's name and parameters only when it differs from its
default, so adding one renames no existing candidate and invalidates no cached result.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FAMILY_PARAMS: dict[str, dict[str, Any]] = {
    # parameter -> default (None: required)
    "bm25": {"k1": 1.2, "b": 0.75, "method": "lucene", "stopwords": "english"},
    "dense": {"encoder": None, "index_type": "flat"},
    "hybrid": {"encoder": None, "method": "rrf", "rrf_k": 60, "weight": 0.5},
    "ds": {"prefilter": None, "encoder": None, "gamma": 1.0, "r": 0.5},
    "mmr": {"prefilter": None, "encoder": None, "lambda": 0.5},
    "vendi": {"prefilter": None, "encoder": None, "s": 0.5},
    "graph": {"seeds": None, "n_seeds": 2, "hops": 1, "rank": "ppr", "damping": 0.85, "encoder": None},
    "two_hop": {"first": None, "append": "title", "second": None, "merge": "interleave"},
}

# Parameters added after the grid was in use: left out of names and params while at their default.
OPTIONAL_PARAMS: dict[str, dict[str, Any]] = {
    "bm25": {"backend": "inprocess"},
    "dense": {"backend": "inprocess"},
}
BACKENDS = ("inprocess", "elasticsearch")


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
    """Validate ``params`` against ``family``, fill defaults and name the candidate."""
    if family not in FAMILY_PARAMS:
        raise ValueError(f"family={family!r} is not one of {sorted(FAMILY_PARAMS)}")
    allowed, optional = FAMILY_PARAMS[family], OPTIONAL_PARAMS.get(family, {})
    unknown = sorted(set(params) - set(allowed) - set(optional))
    if unknown:
        raise ValueError(f"{family}: unknown parameter(s) {unknown}; allowed: {sorted({**allowed, **optional})}")
    if params.get("backend", "inprocess") not in BACKENDS:
        raise ValueError(f"{family}: backend={params['backend']!r} must be one of {BACKENDS}")
    full = {key: params.get(key, default) for key, default in allowed.items()}
    full.update({key: params[key] for key, default in optional.items() if params.get(key, default) != default})
    missing = [key for key, value in full.items() if value is None and key != "encoder"]
    if family in ("dense", "hybrid", "ds", "mmr", "vendi") and full.get("encoder") is None:
        missing.append("encoder")
    if missing:
        raise ValueError(f"{family}: missing required parameter(s) {sorted(missing)}")
    shown = {k: v for k, v in full.items() if v is not None}
    name = f"{family}(" + ",".join(f"{k}={v}" for k, v in shown.items()) + ")"
    return CandidateSpec(name=name, family=family, params=full)


def encoders_used(candidates: Sequence[CandidateSpec]) -> list[str]:
    """Encoders whose embeddings some candidate reads: its ``encoder``, or a ``dense:<enc>`` / ``hybrid:<enc>`` base."""
    names: dict[str, None] = {}  # a dict as an ordered set
    for candidate in candidates:
        for key, value in candidate.params.items():
            if key == "encoder" and value:
                names[str(value)] = None
            elif isinstance(value, str) and value.partition(":")[0] in ("dense", "hybrid") and ":" in value:
                names[value.partition(":")[2]] = None
    return list(names)


def expand_grid(grid: Mapping[str, Mapping[str, Any] | Sequence[Mapping[str, Any]]]) -> list[CandidateSpec]:
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
    """Number of candidates of each family, in :data:`FAMILY_PARAMS` order (zeros kept)."""
    counts = Counter(c.family for c in candidates)
    return {family: counts.get(family, 0) for family in FAMILY_PARAMS}
