"""The answering summary's intervals, on hand-made per-question records."""

from __future__ import annotations

import pytest

from ragfolio.core.answer_eval import summarize


def record(qid: str, system: str, em: float) -> dict:
    return {"id": qid, "dataset": "d", "system": system, "em": em, "f1": em, "answer_recall": em,
            "latency_ms": 10.0, "tokens": 5, "fallback": None}


def test_summary_gives_em_intervals_and_paired_differences_to_single_best() -> None:
    ids = [f"q{i}" for i in range(40)]
    records = [record(q, "single_best", float(i < 20)) for i, q in enumerate(ids)]
    records += [record(q, "routed_l1", float(i < 28)) for i, q in enumerate(ids)]  # right on 8 more
    records += [record(q, "no_retrieval", float(i < 2)) for i, q in enumerate(ids[:39])]  # one question missing
    summary = summarize(records)["d"]
    routed = summary["routed_l1"]
    assert routed["em_interval"]["estimate"] == pytest.approx(0.7)
    assert routed["em_interval"]["low"] < 0.7 < routed["em_interval"]["high"]
    diff = routed["em_minus_single_best"]
    assert diff["estimate"] == pytest.approx(0.2) and 0 < diff["low"] < 0.2 < diff["high"]
    # paired: the 8 extra wins are the only differences, so the interval is narrower than EM's own
    assert diff["high"] - diff["low"] < routed["em_interval"]["high"] - routed["em_interval"]["low"]
    assert "em_minus_single_best" not in summary["single_best"]
    assert "em_minus_single_best" not in summary["no_retrieval"]  # not the same questions
