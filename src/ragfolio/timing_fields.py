"""The one place that declares which parts of a run's artifacts measure time.

Everything a run writes is a function of its inputs and code, byte for byte, in any process (a
plain ``kedro run``, a Kubeflow step, a Dask worker), except wall-clock measurements. They are
declared here, and only here: :data:`TIMING_FIELDS` names them per file (paths relative to the
data root), :data:`CACHES` the folders that are caches rather than artifacts, and
:func:`without_timing` is what a comparison of two runs strips before comparing whole files
(``tests/test_kubeflow.py``). Moving a timing field into a file of its own (kept out of what DVC
hashes) means moving its entry here from :data:`TIMING_FIELDS` to :data:`TIMING_FILES`.

A field is a dotted path into the JSON document (each line, for ``.jsonl``), where ``*`` matches
every key of an object or item of a list; in a ``.csv`` file it is a column's name.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

_ANSWER_TIMES = ("latency_ms", "retrieval_ms")  # per answered question and system
_SUMMARY_TIMES = tuple(f"datasets.*.*.{field}" for field in (
    "latency_ms_mean", "latency_ms_p95", "retrieval_ms_mean", "retrieval_ms_p95", "retrieval_ms_by_run_half",
))

# File (relative to the data root) -> the timing fields in it (found by comparing a plain `kedro run`
# with the Kubeflow local run of the same inputs: these are every field in which they differed).
TIMING_FIELDS: dict[str, tuple[str, ...]] = {
    "07_model_output/answers.jsonl": _ANSWER_TIMES,
    "07_model_output/answer_store.jsonl": _ANSWER_TIMES,
    "08_reporting/answer_metrics.json": (*_SUMMARY_TIMES, "retrieval_orders"),
    "08_reporting/em_vs_tokens.csv": ("latency_ms_mean",),  # a column
    "08_reporting/router_metrics.json": ("retrieval_features.cost",),
}
# Files that hold nothing but timings (compared by existence only).
TIMING_FILES: tuple[str, ...] = ()
# Folders that are content-keyed caches, not artifacts (their .npz entries carry zip timestamps).
CACHES: tuple[str, ...] = ("04_feature/retrieval_cache",)


def is_compared(relative_path: str) -> bool:
    """Whether two runs must agree on the bytes of ``relative_path`` (less its timing fields)."""
    return relative_path not in TIMING_FILES and not any(
        relative_path == cache or relative_path.startswith(f"{cache}/") for cache in CACHES
    )


def without_timing(relative_path: str, data: bytes) -> bytes:
    """``data`` (the file at ``relative_path``) with its declared timing fields removed.

    A file with none is returned as it is; one with some is parsed (per line for ``.jsonl``) and
    written back as sorted, compact JSON without them (a ``.csv`` without those columns).
    """
    fields = TIMING_FIELDS.get(relative_path)
    if not fields:
        return data
    if relative_path.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        keep = [i for i, name in enumerate(rows[0] if rows else []) if name not in fields]
        return "\n".join(",".join(row[i] for i in keep) for row in rows).encode("utf-8")
    paths = [field.split(".") for field in fields]
    if relative_path.endswith(".jsonl"):
        lines = [_dump(_drop_all(json.loads(line), paths)) for line in data.decode("utf-8").splitlines() if line.strip()]
        return ("\n".join(lines) + "\n").encode("utf-8")
    return _dump(_drop_all(json.loads(data), paths)).encode("utf-8")


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _drop_all(document: Any, paths: Sequence[list[str]]) -> Any:
    for path in paths:
        _drop(document, path)
    return document


def _drop(node: Any, path: list[str]) -> None:
    """Remove ``path`` from ``node`` in place (absent parts are fine: a field may be optional)."""
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys = list(node) if head == "*" else [head] if head in node else []
        for key in keys:
            if rest:
                _drop(node[key], rest)
            else:
                del node[key]
    elif isinstance(node, list) and head == "*":
        for item in node:
            if rest:
                _drop(item, rest)
