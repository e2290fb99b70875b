"""Summaries of the end-to-end answers: per dataset and system, with paired-bootstrap intervals.

Input: the per-question records of :meth:`ragfolio_lab.answering.systems.SystemAnswer.record`. For
each dataset and system: the means of EM, F1 and the answer recall of the passages handed to the
LLM, each with a 95% bootstrap interval, and for every system but ``single_best`` the paired
interval of its per-question score minus single best's (:func:`ragfolio.core.stats.paired_differences`,
left out unless both answered the same questions); for each routed system the same against the
issue's other baselines (:data:`ROUTED_BASELINES`: one retriever given more passages in one prompt,
and Vendi-RAG); latency and retrieval latency (mean, p95, and
the mean retrieval latency when the system ran in the first or the second half of its question's
order, which differ if caches leak between systems); tokens; the selector's fallbacks and a
histogram of the position it picked; Vendi-RAG's rounds and judge acceptance; and for each system
with a selector the headroom over single best (:func:`headroom`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragfolio.core.metrics import exact_match
from ragfolio.core.stats import mean_intervals, paired_differences
from ragfolio_lab.answering.scores import SCORES
from ragfolio_lab.answering.systems import SYSTEMS

# The baselines each routed system is compared with besides single_best: the same retriever with
# l x num_docs passages in one prompt (is the gain complementarity or only more passages?) and the
# iterative Vendi-RAG (is it as accurate at fewer tokens?).
ROUTED_BASELINES = ("single_best_wide", "vendi_rag", "vendi_rag_authors")
ROUTED = re.compile(r"_l\d+$")  # routed_l<l>, <router kind>_l<l>: the systems that route to l members


def _order(systems: Sequence[str]) -> dict[str, int]:
    known = {name: i for i, name in enumerate(SYSTEMS)}
    return {s: known.get(s, len(known) + i) for i, s in enumerate(sorted(set(systems)))}


def _position_histogram(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """``{"1": count, "2": count, ...}`` of the selector's picked positions (calls that named one)."""
    counts = Counter(int(r["selector_position"]) for r in rows if r.get("selector_position") is not None)
    return {str(p): counts[p] for p in sorted(counts)}


def _system_summary(rows: list[dict[str, Any]], n_systems: int) -> dict[str, Any]:
    latency = np.array([r["latency_ms"] for r in rows], dtype=np.float64)
    retrieval = np.array([r.get("retrieval_ms", 0.0) for r in rows], dtype=np.float64)
    scores = np.array([[float(r[s]) for s in SCORES] for r in rows], dtype=np.float64)
    intervals = mean_intervals(scores)
    selected = [r["fallback"] for r in rows if r.get("fallback") is not None]
    out: dict[str, Any] = {"n": len(rows)}
    for j, score in enumerate(SCORES):
        out[score] = float(scores[:, j].mean())
        out[f"{score}_interval"] = intervals[j].to_dict()
    out.update({
        "latency_ms_mean": float(latency.mean()), "latency_ms_p95": float(np.percentile(latency, 95)),
        "retrieval_ms_mean": float(retrieval.mean()), "retrieval_ms_p95": float(np.percentile(retrieval, 95)),
        "tokens_mean": float(np.mean([r["tokens"] for r in rows])),
        "selector_fallbacks": int(sum(selected)), "selector_calls": sum(r.get("selector_options", 0) > 0 for r in rows),
        "selector_positions": _position_histogram(rows),
        "foreign_query_hits": int(sum(r.get("foreign_query_hits", 0) for r in rows)),
        # reader and selector replies that were not the JSON asked for, and the LLM calls made
        "parse_failures": int(sum(r.get("parse_failures", 0) for r in rows)),
        "llm_calls": int(sum(r.get("n_calls", 0) for r in rows)),
    })
    halves: dict[str, list[float]] = {"first_half": [], "second_half": []}
    for r, ms in zip(rows, retrieval, strict=True):
        if "run_position" in r:
            halves["first_half" if r["run_position"] < n_systems / 2 else "second_half"].append(float(ms))
    out["retrieval_ms_by_run_half"] = {h: float(np.mean(v)) for h, v in halves.items() if v}
    judged = [r for r in rows if r.get("judged") is not None]
    if judged:
        n_judged = sum(int(r["judged"]) for r in judged)
        out["rounds_mean"] = float(np.mean([r["rounds"] for r in judged]))
        out["judge_calls"] = n_judged
        out["judge_acceptance_rate"] = sum(int(r["accepted"]) for r in judged) / n_judged if n_judged else None
        out["accepted_share"] = float(np.mean([int(r["accepted"]) > 0 for r in judged]))
    return out


def _minus(records: Sequence[dict[str, Any]], system: str, baseline: str) -> dict[str, Any] | None:
    """``{score: interval, "n": questions}`` of ``system`` minus ``baseline`` on the questions both
    answered, paired by id; None when they share none (or are one system)."""
    mine = {r["id"]: r for r in records if r["system"] == system}
    base = {r["id"]: r for r in records if r["system"] == baseline}
    ids = sorted(mine.keys() & base.keys())
    if system == baseline or not ids:
        return None
    found = paired_differences([[float(mine[i][s]) for s in SCORES] for i in ids],
                               [[float(base[i][s]) for s in SCORES] for i in ids])
    return {"n": len(ids), **{score: interval.to_dict() for score, interval in zip(SCORES, found, strict=True)}}


def headroom(records: Sequence[dict[str, Any]], system: str, baseline: str = "single_best") -> dict[str, Any] | None:
    """What a selector could gain and what it found, on the questions ``system`` and ``baseline`` both answered.

    Returns:
        ``{"n", "baseline_wrong_candidate_right", "selector_found", "baseline_right_system_wrong"}``:
        the questions where ``baseline``'s answer is not an exact match but one of ``system``'s
        candidates is; of those, how many the selector picked a right one on; and the questions
        ``system`` lost that ``baseline`` had right. None when ``system`` never had two candidates.
    """
    mine = {r["id"]: r for r in records if r["system"] == system}
    base = {r["id"]: r for r in records if r["system"] == baseline}
    ids = sorted(mine.keys() & base.keys())
    if not any(mine[i].get("candidates") for i in ids):
        return None
    open_, found, lost = 0, 0, 0
    for i in ids:
        r, b = mine[i], base[i]
        if not b["em"] and any(exact_match(c, r["answers"]) for c in r.get("candidates") or [r["prediction"]]):
            open_ += 1
            found += bool(r["em"])
        lost += bool(b["em"]) and not r["em"]
    return {"n": len(ids), "baseline_wrong_candidate_right": open_, "selector_found": found,
            "baseline_right_system_wrong": lost}


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{dataset: {system: summary}}`` (see the module docstring); systems in report order.

    Every system but ``single_best`` gets ``minus_single_best`` (``{em, f1, answer_recall}``
    paired intervals) when it answered the same questions; ``em_minus_single_best`` repeats its EM.
    Routed systems (``routed_l<l>``, ``<router kind>_l<l>``) also get
    ``minus: {baseline: {n, em, f1, answer_recall}}`` for each of :data:`ROUTED_BASELINES` that ran
    (on the questions both answered), and those with a selector ``headroom`` (:func:`headroom`).
    """
    out: dict[str, Any] = {}
    for dataset in sorted({r["dataset"] for r in records}):
        rows = [r for r in records if r["dataset"] == dataset]
        rank = _order([r["system"] for r in rows])
        systems = sorted({r["system"] for r in rows}, key=rank.__getitem__)
        out[dataset] = {}
        for system in systems:
            summary = _system_summary([r for r in rows if r["system"] == system], len(systems))
            diff = _minus(rows, system, "single_best")
            if diff is not None:
                summary["minus_single_best"] = diff
                summary["em_minus_single_best"] = diff["em"]
            if ROUTED.search(system):
                versus = {b: _minus(rows, system, b) for b in ROUTED_BASELINES}
                if versus := {b: d for b, d in versus.items() if d is not None}:
                    summary["minus"] = versus
                if (room := headroom(rows, system)) is not None:
                    summary["headroom"] = room
            out[dataset][system] = summary
    return out


def selector_positions(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{n shown: {position: count}}``: where the selector's pick sat, by how many candidates it saw.

    Under no position bias each position of an ``n``-candidate prompt gets about ``1/n`` of the picks
    (the order shown is a seeded random permutation).
    """
    by_n: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("selector_options"):
            by_n.setdefault(int(r["selector_options"]), []).append(r)
    return {str(n): _position_histogram(rows) for n, rows in sorted(by_n.items())}
