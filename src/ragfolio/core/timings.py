"""Which fields of a report or a row are wall-clock timings: the one place that says so.

Every other field a pipeline writes is a function of its inputs and code, so two runs on the same
inputs write the same bytes and DVC sees nothing to redo. Timings differ on every run. They are
split off here, by key, into files of their own (``08_reporting/timings/``) that neither git nor
DVC tracks; the reports and rows that DVC hashes and git keeps hold none. The run's log tables and
MLflow still show them (the tracking hook logs the timings files beside the reports).
:class:`Stopwatch` measures such times, per named stage.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pandas as pd

TIMING_KEYS = frozenset({
    # answering: one row per question and system (answers.jsonl) and their summaries
    "latency_ms", "retrieval_ms",
    "latency_ms_mean", "latency_ms_p95", "retrieval_ms_mean", "retrieval_ms_p95", "retrieval_ms_by_run_half",
    "retrieval_orders",  # every system's retrieval latency in the fixed and the reversed order
    # router_training's retrieval features: their cost per query (router_metrics.retrieval_features.cost)
    "cost",
})
"""Keys whose values (leaves or whole sub-trees) are measured times, wherever they occur."""

ROW_KEYS = ("id", "dataset", "system")
"""The columns that name a row of ``answers.jsonl``, kept beside its timings."""


def split_timings(report: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``report`` less every :data:`TIMING_KEYS` entry, and those entries alone in the same nesting.

    Returns:
        ``(without, timings)``: two new dicts; ``timings`` holds only the paths that lead to a timing
        (empty sections are left out), so ``merge_timings(without, timings) == report``.
    """
    without: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    for key, value in report.items():
        if key in TIMING_KEYS:
            timings[key] = value
        elif isinstance(value, Mapping):
            without[key], inner = split_timings(value)
            if inner:
                timings[key] = inner
        else:
            without[key] = value
    return without, timings


def merge_timings(report: Mapping[str, Any], timings: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`split_timings`: ``timings`` laid back into ``report`` (new dict)."""
    merged = dict(report)
    for key, value in timings.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping) and key not in TIMING_KEYS:
            merged[key] = merge_timings(merged[key], value)
        else:
            merged[key] = value
    return merged


def split_row_timings(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``rows`` less their timing columns, and ``(id, dataset, system, <timings>)`` of each row.

    Returns:
        ``(without, timings)``: new frames with ``rows``'s index and order.
    """
    timed = [c for c in rows.columns if c in TIMING_KEYS]
    named = [c for c in ROW_KEYS if c in rows.columns]
    return rows.drop(columns=timed), rows[named + timed].copy()


class Stopwatch:
    """Seconds spent per named stage: ``with clock("fetch"): ...`` adds the block's time to ``fetch``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start
