"""Cache keys hold a declared version of each cached computation, not a digest of its source: this file
fails when a computation's output changes and its version does not.

Every cached computation (``tests/helpers/cache_probes.py``: the shared first-stage rankings, completion,
each retriever family, each encoder kind and the ONNX query export, cross-encoder training, the list
judge, the paper router's Gemma block, each LLM backend kind and the answering code) runs on a tiny
fixed input; its output's fingerprint must equal the one recorded in ``tests/cache_fingerprints.json``
under the same versions. A change that alters an output therefore needs a version bump, which misses
the caches that hold the old output; a change that alters none (a move, a rename, a refactor) keeps
every user's caches.

After bumping a version, record the new fingerprint::

    RAGFOLIO_RECORD_FINGERPRINTS=1 .venv/bin/python -m pytest -n 0 tests/test_cache_versions.py

which rewrites only the entries whose versions changed (or that are new). ``=force`` rewrites every
entry: only for numerics that differ on another machine with no code changed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cache_probes import FAMILY_PARAMS, context, probes

from ragfolio.core.llm import backends
from ragfolio.core.retrieval.family import families

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "cache_fingerprints.json"
RECORD = os.environ.get("RAGFOLIO_RECORD_FINGERPRINTS", "")
PROBES = probes()
# Versions of a stored format, not of a computation's output: a record's schema, the packed e5 file,
# the answer store's rows, an Elasticsearch index's documents.
FORMAT_VERSIONS = {"SCHEMA_VERSION", "FORMAT_VERSION", "STORE_VERSION"}
RTOL, ATOL = 1e-4, 1e-5  # float summaries: the same code on another CPU may round the last bits otherwise


def fingerprint(output: Mapping[str, Any]) -> dict[str, Any]:
    """A short, comparable summary of each output: text and integer arrays by sha256, float arrays by
    shape, where they are finite (sha256) and three sums (plain, absolute, and weighted by fixed
    pseudo-random weights, which catches a permutation)."""
    out: dict[str, Any] = {}
    for name, value in sorted(output.items()):
        if isinstance(value, str):
            out[name] = {"sha256": hashlib.sha256(value.encode()).hexdigest()[:16]}
            continue
        array = np.asarray(value)
        if array.dtype.kind not in "fc":
            out[name] = {"shape": list(array.shape), "sha256": hashlib.sha256(
                np.ascontiguousarray(array.astype(np.int64)).tobytes()).hexdigest()[:16]}
            continue
        finite = np.isfinite(array)
        values = np.where(finite, array, 0.0).astype(np.float64).ravel()
        weights = np.random.default_rng(0).uniform(-1.0, 1.0, values.size)
        out[name] = {"shape": list(array.shape), "finite": hashlib.sha256(finite.tobytes()).hexdigest()[:16],
                     "sums": [float(values.sum()), float(np.abs(values).sum()), float(weights @ values)]}
    return out


def differences(recorded: Mapping[str, Any], now: Mapping[str, Any], atol: float = ATOL) -> list[str]:
    """The outputs whose fingerprints differ (floats within :data:`RTOL` and ``atol`` are equal)."""
    if set(recorded) != set(now):
        return [f"outputs {sorted(recorded)} are now {sorted(now)}"]
    changed = []
    for name in sorted(now):
        was, new = dict(recorded[name]), dict(now[name])
        sums_was, sums_new = was.pop("sums", []), new.pop("sums", [])
        if was != new or not np.allclose(sums_new, sums_was, rtol=RTOL, atol=atol):
            changed.append(f"{name}: {recorded[name]} -> {now[name]}")
    return changed


def _table() -> dict[str, Any]:
    return json.loads(TABLE.read_text()) if TABLE.exists() else {}


def _record(name: str, versions: dict[str, int], printed: dict[str, Any]) -> None:
    """Write ``name``'s entry into :data:`TABLE`, one line per output, so a diff shows what changed."""
    table = {**_table(), name: {"versions": versions, "fingerprint": printed}}
    entries = []
    for key, entry in sorted(table.items()):
        outputs = ",\n".join(f"   {json.dumps(out)}: {json.dumps(value)}" for out, value in entry["fingerprint"].items())
        entries.append(f' {json.dumps(key)}: {{\n  "versions": {json.dumps(entry["versions"])},\n'
                       f'  "fingerprint": {{\n{outputs}\n  }}\n }}')
    TABLE.write_text("{\n" + ",\n".join(entries) + "\n}\n")


@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.slow] if probe.slow else [])
                                  for name, probe in sorted(PROBES.items())])
def test_an_output_changes_only_with_its_version(name: str, tmp_path: Path) -> None:
    probe = PROBES[name]
    versions = dict(probe.versions())
    with context(tmp_path) as ctx:
        printed = fingerprint(probe.compute(ctx))
    recorded = _table().get(name)
    if RECORD == "force" or (RECORD and (recorded is None or recorded["versions"] != versions)):
        _record(name, versions, printed)
        return
    fix = "RAGFOLIO_RECORD_FINGERPRINTS=1 .venv/bin/python -m pytest -n 0 tests/test_cache_versions.py"
    assert recorded is not None, f"{name} has no recorded fingerprint: record it with {fix}"
    assert recorded["versions"] == versions, (
        f"{name}'s versions are now {versions}, its fingerprint was recorded under {recorded['versions']}: "
        f"record the new one with {fix}")
    changed = differences(recorded["fingerprint"], printed, probe.atol or ATOL)
    assert changed == [], (
        f"{name}'s output changed but its versions {versions} did not: bump the version of what changed "
        f"(so caches holding the old output miss), then record the new fingerprint with {fix}. Changed: {changed}")


def test_a_changed_output_is_told_apart_from_float_noise() -> None:
    rows = np.array([[3, 1, 0], [2, 0, 1]])
    scores = np.array([[0.9, 0.5, -np.inf], [0.7, 0.3, 0.1]], dtype=np.float32)
    base = fingerprint({"doc_ids": rows, "scores": scores, "text": "Paris"})
    assert differences(base, fingerprint({"doc_ids": rows, "scores": scores * (1 + 1e-6), "text": "Paris"})) == []
    for changed in ({"doc_ids": rows[:, ::-1]}, {"scores": scores[::-1]}, {"scores": scores + 0.01},
                    {"scores": np.where(np.isfinite(scores), scores, 0.0)}, {"text": "Lyon"}):
        assert differences(base, fingerprint({"doc_ids": rows, "scores": scores, "text": "Paris", **changed})), changed


def test_every_family_encoder_kind_and_llm_kind_has_a_probe() -> None:
    assert set(FAMILY_PARAMS) == set(families()), "give each registered family a candidate in FAMILY_PARAMS"
    from ragfolio.core.retrieval.encoders.kinds import ENCODER_KINDS

    kinds = {kind for kind, cls in ENCODER_KINDS.items() if cls.__module__.startswith("ragfolio.")}
    assert {f"encoder.{kind}" for kind in kinds} <= set(PROBES)
    from ragfolio.core.llm import backend_config

    assert set(backends.BACKEND_VERSIONS) == set(backend_config._BACKEND_KEYS)  # noqa: SLF001 - the kinds make_backend knows


def _declared_versions() -> set[str]:
    """The dotted names of the versions declared in ``src/ragfolio``: module constants ``*_VERSION(S)``
    and class attributes ``version`` / ``result_version`` (stored formats' versions aside)."""
    src = ROOT / "src"
    names = set()
    for path in sorted((src / "ragfolio").rglob("*.py")):
        module = ".".join(path.relative_to(src).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            for target in _assigned(node):
                if target.endswith(("_VERSION", "_VERSIONS")) and target not in FORMAT_VERSIONS:
                    names.add(f"{module}.{target}")
            if isinstance(node, ast.ClassDef):
                names |= {f"{module}.{node.name}.{t}" for item in node.body for t in _assigned(item)
                          if t in ("version", "result_version")}
    return names


def _assigned(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [node.target.id]
    return []


def test_every_declared_version_has_a_probe() -> None:
    """A version no probe reads is one that nothing checks: a new cached computation needs a probe."""
    covered = {name.split("[")[0] for probe in PROBES.values() for name, _ in probe.versions()}
    declared = _declared_versions()
    assert "ragfolio.core.retrieval.running.pool_runner.BASE_VERSION" in declared  # the scan sees them
    assert declared - covered == set(), "add a probe to tests/helpers/cache_probes.py for each"
