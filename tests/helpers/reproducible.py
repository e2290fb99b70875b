"""Which files of a run must reproduce to the byte: all but the timings and the two caches."""

from __future__ import annotations

UNTRACKED = ("04_feature/retrieval_cache", "07_model_output/answer_store.jsonl", "08_reporting/timings")
"""Paths under a run's data root that neither git nor DVC tracks and where two runs on the same inputs
may differ: the timings ragfolio.core.timings splits off, and the two caches (the retrieval cache's ``.npz`` entries
carry zip timestamps; the answer store keeps the latencies it was answered with). Every other file a
run writes is a function of its inputs and code, byte for byte, in any process."""


def is_tracked(relative_path: str) -> bool:
    """Whether ``relative_path`` (under a data root) is an artifact that must reproduce to the byte."""
    return not any(relative_path == p or relative_path.startswith(f"{p}/") for p in UNTRACKED)
