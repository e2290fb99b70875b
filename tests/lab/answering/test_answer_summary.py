"""The answering summary: intervals, paired differences to single best, selector positions, Vendi-RAG's
rounds and judge acceptance, order halves, on hand-made per-question records."""

from __future__ import annotations

import pytest

from ragfolio_lab.answering.summary import selector_positions, summarize


def record(qid: str, system: str, em: float, **extra) -> dict:
    return {"id": qid, "dataset": "d", "system": system, "em": em, "f1": em, "answer_recall": em,
            "latency_ms": 10.0, "retrieval_ms": 1.0, "tokens": 5, "fallback": None, **extra}


def test_summary_gives_intervals_and_paired_differences_to_single_best() -> None:
    ids = [f"q{i}" for i in range(40)]
    records = [record(q, "single_best", float(i < 20)) for i, q in enumerate(ids)]
    records += [record(q, "routed_l1", float(i < 28)) for i, q in enumerate(ids)]  # right on 8 more
    records += [record(q, "no_retrieval", float(i < 2)) for i, q in enumerate(ids[:39])]  # one question missing
    summary = summarize(records)["d"]
    assert list(summary) == ["no_retrieval", "single_best", "routed_l1"]  # report order
    routed = summary["routed_l1"]
    for score in ("em", "f1", "answer_recall"):
        assert routed[f"{score}_interval"]["estimate"] == pytest.approx(0.7)
        assert routed[f"{score}_interval"]["low"] < 0.7 < routed[f"{score}_interval"]["high"]
        diff = routed["minus_single_best"][score]
        assert diff["estimate"] == pytest.approx(0.2) and 0 < diff["low"] < 0.2 < diff["high"]
    assert routed["em_minus_single_best"] == routed["minus_single_best"]["em"]
    # paired: the 8 extra wins are the only differences, so the interval is narrower than EM's own
    diff = routed["minus_single_best"]["em"]
    assert diff["high"] - diff["low"] < routed["em_interval"]["high"] - routed["em_interval"]["low"]
    assert "minus_single_best" not in summary["single_best"]
    assert summary["no_retrieval"]["minus_single_best"]["n"] == 39  # paired on the questions both answered


def test_selector_positions_vendi_rounds_and_order_halves() -> None:
    records = [
        record("q0", "routed_l2", 1.0, selector_position=1, selector_options=2, run_position=0, retrieval_ms=9.0),
        record("q1", "routed_l2", 0.0, selector_position=2, selector_options=2, run_position=3, retrieval_ms=3.0),
        record("q2", "routed_l2", 0.0, selector_position=None, selector_options=2, fallback=True, run_position=1),
        record("q0", "routed_l3", 1.0, selector_position=3, selector_options=3, run_position=2),
        record("q0", "vendi_rag", 1.0, rounds=1, judged=1, accepted=1, run_position=0),
        record("q1", "vendi_rag", 0.0, rounds=5, judged=5, accepted=0, run_position=3),
    ]
    summary = summarize(records)["d"]
    routed = summary["routed_l2"]
    assert routed["selector_positions"] == {"1": 1, "2": 1} and routed["selector_fallbacks"] == 1
    assert routed["selector_calls"] == 3
    assert routed["retrieval_ms_by_run_half"] == {"first_half": pytest.approx(5.0), "second_half": 3.0}
    vendi = summary["vendi_rag"]
    assert vendi["rounds_mean"] == 3.0 and vendi["judge_calls"] == 6
    assert vendi["judge_acceptance_rate"] == pytest.approx(1 / 6) and vendi["accepted_share"] == 0.5
    assert "rounds_mean" not in routed
    assert selector_positions(records) == {"2": {"1": 1, "2": 1}, "3": {"3": 1}}


def test_routed_systems_are_also_compared_with_the_wide_single_best_and_vendi_rag() -> None:
    ids = [f"q{i}" for i in range(30)]
    records = [record(q, "single_best_wide", float(i < 10)) for i, q in enumerate(ids)]
    records += [record(q, "vendi_rag", float(i < 18)) for i, q in enumerate(ids)]
    records += [record(q, "post_retrieval_l2", float(i < 15)) for i, q in enumerate(ids)]
    records += [record(q, "portfolio_all", float(i < 15)) for i, q in enumerate(ids)]
    summary = summarize(records)["d"]
    versus = summary["post_retrieval_l2"]["minus"]
    assert versus["single_best_wide"]["f1"]["estimate"] == pytest.approx(5 / 30)
    assert versus["vendi_rag"]["em"]["estimate"] == pytest.approx(-3 / 30)
    assert versus["vendi_rag"]["em"]["low"] < versus["vendi_rag"]["em"]["high"] <= 0  # never better than Vendi-RAG
    assert "minus" not in summary["portfolio_all"] and "minus" not in summary["vendi_rag"]  # routed systems only


def test_a_baseline_run_on_fewer_questions_is_paired_on_those() -> None:
    """Vendi-RAG as its authors run it costs ~20 calls a question: it answers a subset of the questions."""
    ids = [f"q{i}" for i in range(40)]
    records = [record(q, "post_retrieval_l1", float(i % 2 == 0)) for i, q in enumerate(ids)]
    records += [record(q, "vendi_rag_authors", 0.0) for q in ids[:10]]
    versus = summarize(records)["d"]["post_retrieval_l1"]["minus"]["vendi_rag_authors"]
    assert versus["n"] == 10 and versus["em"]["estimate"] == pytest.approx(0.5)


def test_headroom_counts_what_a_selector_could_find_and_did() -> None:
    rows = [  # (single best right?, candidates, the selector's pick)
        (0, ["Paris", "Lyon"], "Paris"),  # single best wrong, a candidate right, found
        (0, ["Lyon", "Paris"], "Lyon"),  # single best wrong, a candidate right, missed
        (0, ["Lyon", "Nice"], "Lyon"),  # no candidate right
        (1, ["Paris", "Lyon"], "Lyon"),  # lost what single best had
    ]
    records = []
    for i, (base, candidates, pick) in enumerate(rows):
        records.append(record(f"q{i}", "single_best", float(base), answers=["Paris"]))
        records.append(record(f"q{i}", "post_retrieval_l2", float(pick == "Paris"), answers=["Paris"], prediction=pick,
                              candidates=candidates))
    room = summarize(records)["d"]["post_retrieval_l2"]["headroom"]
    assert room == {"n": 4, "baseline_wrong_candidate_right": 2, "selector_found": 1, "baseline_right_system_wrong": 1}
