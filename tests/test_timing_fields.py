"""The declared timing fields are all that a comparison of two runs strips; everything else counts."""

from __future__ import annotations

import json

from ragfolio import timing_fields
from ragfolio.timing_fields import is_compared, without_timing


def test_json_jsonl_and_csv_lose_only_their_timing_fields() -> None:
    a = {"datasets": {"musique": {"routed_l1": {"em": 0.5, "latency_ms_mean": 10.0}}}, "retrieval_orders": {"x": 1}}
    b = {"datasets": {"musique": {"routed_l1": {"em": 0.5, "latency_ms_mean": 99.0}}}, "retrieval_orders": {"x": 2}}
    name = "08_reporting/answer_metrics.json"
    assert without_timing(name, json.dumps(a).encode()) == without_timing(name, json.dumps(b, indent=1).encode())
    b["datasets"]["musique"]["routed_l1"]["em"] = 1.0
    assert without_timing(name, json.dumps(a).encode()) != without_timing(name, json.dumps(b).encode())

    lines = [{"id": "q", "em": 1.0, "latency_ms": t, "retrieval_ms": t} for t in (1.0, 2.0)]
    name = "07_model_output/answers.jsonl"
    assert without_timing(name, (json.dumps(lines[0]) + "\n").encode()) == without_timing(name, json.dumps(lines[1]).encode())

    name = "08_reporting/em_vs_tokens.csv"
    one, two = b"system,em,latency_ms_mean\na,0.5,12.0\n", b"system,em,latency_ms_mean\na,0.5,80.1\n"
    assert without_timing(name, one) == without_timing(name, two) == b"system,em\na,0.5"
    assert without_timing(name, one) != without_timing(name, b"system,em,latency_ms_mean\na,0.75,12.0\n")


def test_other_files_are_compared_whole_and_caches_not_at_all() -> None:
    assert without_timing("06_models/routers/all/router.safetensors", b"\x00\x01") == b"\x00\x01"
    assert is_compared("06_models/portfolios.json") and is_compared("08_reporting/best_of_k.png")
    assert not is_compared("04_feature/retrieval_cache/base/abc.npz")
    assert set(timing_fields.TIMING_FIELDS) >= {"08_reporting/router_metrics.json", "08_reporting/answer_metrics.json"}
