"""The reader, measured: the same test questions and passages answered by each embedded reader.

For each reader (an embedded model of ``ragfolio.core.llm.models``, run by llama.cpp) this runs the
``answering_evaluation`` pipeline on a finished run's data root (its portfolios, routers and corpus)
with the same systems and questions, keeps each reader's ``answers.jsonl`` and their timings, then
writes a report: per reader and system EM, F1, answer recall (95% intervals), the replies that were
not the JSON asked for, LLM calls, tokens and latency per question; the paired differences of the
first reader minus each other (EM, F1) per system; each routed system minus ``single_best`` and
minus ``single_best_wide`` per reader; and the headroom of routing (how often a system is right
where ``single_best`` is wrong, and the reverse). Answers are resumable (the run's answer store).
Vendi-RAG's loop, answered by the first reader in a run of its own, joins the report from
``answers_vendi_rag_authors.jsonl`` (and ``timings_vendi_rag_authors.jsonl``) in ``--out``.

    .venv/bin/python benchmarks/bench_reader.py --data-root data --questions 30 \\
        --readers qwen2.5-coder-1.5b-instruct gemma-3-270m --out docs/results_issue34/sample
    .venv/bin/python benchmarks/bench_reader.py --out docs/results_issue34/sample --report-only
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

from ragfolio.core.stats import Interval, interval_text, mean_intervals, paired_differences


def iv(interval: Interval) -> str:
    """``+0.012 [-0.010, +0.034]``."""
    return interval_text(interval.to_dict())


# The default systems of answering_evaluation (served_l<l>: what each dataset's bundle serves) and
# post_retrieval_l1, which the measured reports before the bundles were evaluated (docs/results_issue34)
# name; a system a run did not answer is left out of the report.
SYSTEMS = ["no_retrieval", "single_best", "single_best_wide", "served_l1", "served_l2", "post_retrieval_l1",
           "post_retrieval_l2", "vendi_rag_authors"]
VENDI, ROUTED = "vendi_rag_authors", ("served_l1", "served_l2", "post_retrieval_l1", "post_retrieval_l2")
SCORES = ("em", "f1", "answer_recall")


def run_reader(project: Path, data_root: Path, reader: str, questions: int, systems: list[str], out: Path,
               datasets: list[str] | None = None) -> float:
    """Answer with ``reader``; copy its answers and timings into ``out``; returns the wall seconds."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(project)
    params = {"data_root": str(data_root), "answering_evaluation": {
        "max_questions_per_dataset": questions, "systems": systems, "order_check_questions": 0, "datasets": datasets,
        "llm": {"kind": "llama_cpp", "llama_cpp": {"model": reader}}}}
    start = time.perf_counter()
    with KedroSession.create(project_path=project, runtime_params=params) as session:
        session.run(pipeline_names=["answering_evaluation"])
    wall = time.perf_counter() - start
    shutil.copy(data_root / "07_model_output" / "answers.jsonl", out / f"answers_{reader}.jsonl")
    timings = next(data_root.rglob("timings/answers.jsonl"))
    shutil.copy(timings, out / f"timings_{reader}.jsonl")
    return wall


def load(out: Path, reader: str) -> dict[tuple[str, str], dict]:
    """``{(question id, system): row}``, each row with its latency joined."""
    rows = {(r["id"], r["system"]): r for r in map(json.loads, (out / f"answers_{reader}.jsonl").read_text().splitlines())}
    timing_file = out / f"timings_{reader}.jsonl"
    if timing_file.exists():
        for t in map(json.loads, timing_file.read_text().splitlines()):
            if (t["id"], t["system"]) in rows:
                rows[(t["id"], t["system"])].update(latency_ms=t["latency_ms"], retrieval_ms=t["retrieval_ms"])
    return rows


def _ids(data: dict[str, dict[tuple[str, str], dict]], readers: list[str], system: str) -> list[str]:
    """The questions every one of ``readers`` answered with ``system`` (a reader may have answered
    fewer questions, or fewer systems, than another: comparisons are paired on what both did)."""
    sets = [{qid for qid, s in data[r] if s == system} for r in readers]
    return sorted(set.intersection(*sets)) if sets else []


def report(out: Path, readers: list[str], walls: dict[str, float]) -> str:
    data = {reader: load(out, reader) for reader in readers}
    if (out / f"answers_{VENDI}.jsonl").exists():  # the authors' loop answered in a run of its own, by the first reader
        data[readers[0]].update(load(out, VENDI))
    answered = {r: {qid for qid, _ in rows} for r, rows in data.items()}
    lines = ["Questions answered (test, every dataset of the run): "
             + ", ".join(f"{r} {len(answered[r])}" for r in readers) + ".", ""]
    if walls:
        lines += ["Wall time of each reader's answering run: "
                  + ", ".join(f"{r} {walls[r] / 60:.1f} min" for r in readers if r in walls), ""]
    lines += ["| reader | system | n | EM [95%] | F1 [95%] | answer recall | not JSON | LLM calls / q | tokens / q "
              "| latency s / q (mean, p95) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for reader in readers:
        for system in SYSTEMS:
            ids = _ids(data, [reader], system)
            if not ids:
                continue
            rows = [data[reader][(i, system)] for i in ids]
            scores = np.array([[float(r[s]) for s in SCORES] for r in rows])
            em, f1, _ = mean_intervals(scores)
            latency = np.array([r.get("latency_ms", np.nan) for r in rows]) / 1000
            lines.append(
                f"| {reader} | {system} | {len(ids)} | {iv(em)} | {iv(f1)} | {scores[:, 2].mean():.3f} "
                f"| {sum(int(r.get('parse_failures', 0)) for r in rows)} "
                f"| {np.mean([r.get('n_calls', 0) for r in rows]):.2f} | {np.mean([r['tokens'] for r in rows]):.0f} "
                f"| {np.nanmean(latency):.1f}, {np.nanpercentile(latency, 95):.1f} |")
    if len(readers) > 1:
        first = readers[0]
        lines += ["", f"**{first} minus each other reader, same questions and passages** (paired 95% intervals):", "",
                  "| other reader | system | n | EM | F1 | answer recall |", "|---|---|---|---|---|---|"]
        for other in readers[1:]:
            for system in SYSTEMS:
                ids = _ids(data, [first, other], system)
                if not ids:
                    continue
                a = [[float(data[first][(i, system)][s]) for s in SCORES] for i in ids]
                b = [[float(data[other][(i, system)][s]) for s in SCORES] for i in ids]
                em, f1, recall = paired_differences(a, b)
                lines.append(f"| {other} | {system} | {len(ids)} | {iv(em)} | {iv(f1)} | {iv(recall)} |")
    lines += ["", "**Each system minus single_best (and minus single_best_wide), per reader** (paired 95% intervals; "
              "headroom: questions where the system is right and single_best wrong / the reverse):", "",
              "| reader | system | n | EM minus single_best | F1 minus single_best | EM minus single_best_wide "
              "| right where single_best wrong | wrong where single_best right |", "|---|---|---|---|---|---|---|---|"]
    for reader in readers:
        for system in SYSTEMS:
            ids = [i for i in _ids(data, [reader], system) if (i, "single_best") in data[reader]]
            if system in ("single_best", "no_retrieval") or not ids:
                continue
            a = [[float(data[reader][(i, system)][s]) for s in ("em", "f1")] for i in ids]
            base = [[float(data[reader][(i, "single_best")][s]) for s in ("em", "f1")] for i in ids]
            em, f1 = paired_differences(a, base)
            wide = "n/a"
            if system != "single_best_wide" and all((i, "single_best_wide") in data[reader] for i in ids):
                (wide_iv,) = paired_differences([[x[0]] for x in a],
                                                [[float(data[reader][(i, "single_best_wide")]["em"])] for i in ids])
                wide = iv(wide_iv)
            gained = sum(x[0] > y[0] for x, y in zip(a, base, strict=True))
            lost = sum(x[0] < y[0] for x, y in zip(a, base, strict=True))
            lines.append(f"| {reader} | {system} | {len(ids)} | {iv(em)} | {iv(f1)} | {wide} | {gained} | {lost} |")
    for reader in readers:
        lines += vendi_lines(data[reader], reader)
    return "\n".join(lines) + "\n"


def vendi_lines(rows: dict[tuple[str, str], dict], reader: str) -> list[str]:
    """The Vendi-RAG authors' loop against each routed system on the questions both answered: its
    rounds, judge calls and acceptance; EM and F1 differences (routed minus Vendi-RAG, paired 95%
    intervals); the routed system's tokens and latency as shares of Vendi-RAG's (the issue's target:
    EM at least Vendi-RAG's at no more than a third of its tokens and latency)."""
    vendi = {qid: r for (qid, s), r in rows.items() if s == VENDI}
    if not vendi:
        return []
    v = list(vendi.values())
    judged, accepted = sum(int(r.get("judged") or 0) for r in v), sum(int(r.get("accepted") or 0) for r in v)
    lines = ["", f"**{reader}: Vendi-RAG as its authors run it** ({len(v)} questions): rounds "
             f"{np.mean([r.get('rounds') or 0 for r in v]):.2f} a question, judge calls {judged / len(v):.2f}, "
             f"rounds the judge accepted {accepted} of {judged} judged; {np.mean([r.get('n_calls', 0) for r in v]):.1f} "
             f"LLM calls, {np.mean([r['tokens'] for r in v]):.0f} tokens and "
             f"{np.nanmean([r.get('latency_ms', np.nan) for r in v]) / 1000:.1f} s a question.", "",
             "| routed system | n | EM minus Vendi-RAG | F1 minus Vendi-RAG | tokens, share of Vendi-RAG's "
             "| latency, share of Vendi-RAG's |", "|---|---|---|---|---|---|"]
    for system in ROUTED:
        ids = sorted(qid for qid in vendi if (qid, system) in rows)
        if not ids:
            continue
        a = [[float(rows[(i, system)][s]) for s in ("em", "f1")] for i in ids]
        b = [[float(vendi[i][s]) for s in ("em", "f1")] for i in ids]
        em, f1 = paired_differences(a, b)
        tokens = sum(rows[(i, system)]["tokens"] for i in ids) / max(1, sum(vendi[i]["tokens"] for i in ids))
        latency = (np.nansum([rows[(i, system)].get("latency_ms", np.nan) for i in ids])
                   / np.nansum([vendi[i].get("latency_ms", np.nan) for i in ids]))
        lines.append(f"| {system} | {len(ids)} | {iv(em)} | {iv(f1)} | {tokens:.2f} | {latency:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("data"), help="a finished run's data root")
    parser.add_argument("--questions", type=int, default=30, help="test questions per dataset")
    parser.add_argument("--readers", nargs="+", default=["qwen2.5-coder-1.5b-instruct", "gemma-3-270m"])
    parser.add_argument("--systems", nargs="+", default=SYSTEMS)
    parser.add_argument("--datasets", nargs="+", help="the datasets answered (default: every one of the run)")
    parser.add_argument("--out", type=Path, required=True, help="folder of the answers and the report (report.md)")
    parser.add_argument("--report-only", action="store_true", help="write the report from answers already in --out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    walls_file = args.out / "walls.json"
    walls = json.loads(walls_file.read_text()) if walls_file.exists() else {}
    if not args.report_only:
        project = Path(__file__).resolve().parents[1]
        for reader in args.readers:
            walls[reader] = run_reader(project, args.data_root.resolve(), reader, args.questions, args.systems, args.out,
                                       args.datasets)
            walls_file.write_text(json.dumps(walls, indent=1))
    text = report(args.out, args.readers, walls)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
