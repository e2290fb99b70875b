"""Timing fields: split off reports and rows by the one declared list, and laid back exactly."""

from __future__ import annotations

import pandas as pd

from ragfolio.core.timings import TIMING_KEYS, merge_timings, split_row_timings, split_timings


def test_timings_are_split_off_wherever_they_nest_and_merge_back() -> None:
    report = {
        "k": 3,
        "datasets": {"all": {"routed_l2": {"em": 0.5, "latency_ms_mean": 12.0, "latency_ms_p95": 20.0},
                             "no_retrieval": {"em": 0.1}}},
        "retrieval_features": {"names": ["a"], "cost": {"n_queries": 3, "first_stage_ms_per_query": 0.5}},
        "retrieval_orders": {"all": {"n": 1}},
    }
    without, timings = split_timings(report)
    assert without == {"k": 3, "datasets": {"all": {"routed_l2": {"em": 0.5}, "no_retrieval": {"em": 0.1}}},
                       "retrieval_features": {"names": ["a"]}}
    assert timings == {"datasets": {"all": {"routed_l2": {"latency_ms_mean": 12.0, "latency_ms_p95": 20.0}}},
                       "retrieval_features": {"cost": {"n_queries": 3, "first_stage_ms_per_query": 0.5}},
                       "retrieval_orders": {"all": {"n": 1}}}
    assert merge_timings(without, timings) == report
    assert report["datasets"]["all"]["routed_l2"]["latency_ms_mean"] == 12.0  # the input is left as it was


def test_rows_keep_their_names_beside_their_timings() -> None:
    rows = pd.DataFrame({"id": ["q1", "q2"], "dataset": ["h", "h"], "system": ["a", "b"], "em": [1.0, 0.0],
                         "latency_ms": [5.0, 6.0], "retrieval_ms": [1.0, 2.0]})
    without, timings = split_row_timings(rows)
    assert list(without.columns) == ["id", "dataset", "system", "em"]
    assert list(timings.columns) == ["id", "dataset", "system", "latency_ms", "retrieval_ms"]
    assert timings["latency_ms"].tolist() == [5.0, 6.0] and "latency_ms" in rows  # the input is left as it was
    assert {"latency_ms", "retrieval_ms", "latency_ms_mean", "cost"} <= TIMING_KEYS
