"""Print the markdown tables of a run's reports (portfolio, router and answering metrics).

Reads ``<project>/data/08_reporting/{portfolio,router,answer}_metrics.json`` (whichever exist) and,
with ``--answers``, merges several ``answers.jsonl`` files (runs split by dataset) into one
``answer_metrics.json`` first, with the same summary the pipeline computes::

    .venv/bin/python benchmarks/report_tables.py --project /tmp/ragfolio-work
    .venv/bin/python benchmarks/report_tables.py --project /tmp/ragfolio-work \\
        --answers /tmp/a/data/07_model_output/answers.jsonl /tmp/b/data/07_model_output/answers.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from ragfolio.core.routing.judging.evaluation import report_order
from ragfolio.core.stats import interval_text
from ragfolio_lab.answering.answer_reports import plot_em_vs_tokens, summarize_answers


def portfolio_table(metrics: dict) -> list[str]:
    lines = ["| dataset | n test | greedy@1 | greedy@3 | avg@3 | greedy@5 | avg@5 | single best | oracle |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, entry in metrics["datasets"].items():
        t = entry["test"]
        g, a = t["greedy_at_k"], t["top_by_average_at_k"]
        lines.append(f"| {key} | {t['n']} | {g[0]:.3f} | {g[2]:.3f} | {a[2]:.3f} | **{g[4]:.3f}** | {a[4]:.3f} | "
                     f"{t['single_best']:.3f} | {t['oracle_all']:.3f} |")
    return lines


def router_table(metrics: dict) -> list[str]:
    k = metrics["k"]
    head = " | ".join(f"l={l}" for l in range(1, k + 1))
    lines = []
    for key, entry in metrics["datasets"].items():
        gap = entry["gap_closed_l1"]
        lines += [f"**{key}** (n = {entry['n_test']} test; gap closed at l = 1: "
                  f"{'n/a' if gap is None else f'{100 * gap:.0f}%'})", "",
                  f"| router | {head} | l=1 minus single best [95%] | l=2 minus greedy pair [95%] |",
                  "|---|" + "---|" * (k + 2)]
        for name in [n for n in report_order() if n in entry]:
            lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in entry[name]["best_of_l"])
                         + f" | {interval_text(entry[name].get('minus_single_best', {}).get('l1'))}"
                         + f" | {interval_text(entry[name].get('minus_greedy_prefix', {}).get('l2'))} |")
        budget = entry["same_budget"]
        lines.append("| routed union (same budget) | " + " | ".join(f"{v:.3f}" for v in budget["routed_union_recall"]) + " |")
        lines.append("| single best, l x num_docs | " + " | ".join(f"{v:.3f}" for v in budget["single_best_recall"]) + " |")
        lines.append("")
    return lines


def answer_table(metrics: dict) -> list[str]:
    lines = ["| dataset | system | n | EM | F1 | answer recall of passages | latency mean ms | p95 ms | retrieval ms "
             "| tokens/query | EM minus single best [95%] | F1 minus single best [95%] |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for dataset, systems in metrics["datasets"].items():
        for system, m in systems.items():
            diff = m.get("minus_single_best", {})
            lines.append(f"| {dataset} | {system} | {m['n']} | {m['em']:.3f} | {m['f1']:.3f} | {m['answer_recall']:.3f} | "
                         f"{m['latency_ms_mean']:.0f} | {m['latency_ms_p95']:.0f} | {m.get('retrieval_ms_mean', 0):.1f} | "
                         f"{m['tokens_mean']:.0f} | {interval_text(diff.get('em'))} | {interval_text(diff.get('f1'))} |")
    return lines


def versus_table(metrics: dict) -> list[str]:
    """Each routed system against one retriever given more passages in one prompt and against Vendi-RAG."""
    lines = ["| dataset | system | F1 minus single_best_wide [95%] | EM minus vendi_rag [95%] "
             "| F1 minus vendi_rag [95%] | vendi_rag tokens / its tokens | vendi_rag latency / its latency |",
             "|---|---|---|---|---|---|---|"]
    for dataset, systems in metrics["datasets"].items():
        vendi = systems.get("vendi_rag")
        for system, m in systems.items():
            if "minus" not in m:
                continue
            wide, v = m["minus"].get("single_best_wide", {}), m["minus"].get("vendi_rag", {})
            ratios = (f"{vendi['tokens_mean'] / m['tokens_mean']:.1f}x | "
                      f"{vendi['latency_ms_mean'] / m['latency_ms_mean']:.1f}x") if vendi else "- | -"
            lines.append(f"| {dataset} | {system} | {interval_text(wide.get('f1'))} | {interval_text(v.get('em'))} | "
                         f"{interval_text(v.get('f1'))} | {ratios} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=Path("."))
    parser.add_argument("--answers", type=Path, nargs="*", help="answers.jsonl files to merge into answer_metrics.json")
    parser.add_argument("--plot", type=Path, help="also draw EM against tokens per query of the merged answers here")
    args = parser.parse_args()
    reporting = args.project / "data" / "08_reporting"
    if args.answers:
        frames = [pd.read_json(path, lines=True) for path in args.answers]
        merged = pd.concat(frames, ignore_index=True)
        out = args.project / "data" / "07_model_output" / "answers.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        merged.to_json(out, orient="records", lines=True)
        metrics = summarize_answers(merged, {})
        (reporting / "answer_metrics.json").write_text(json.dumps(metrics, indent=1))
        if args.plot:
            plot_em_vs_tokens(metrics).savefig(args.plot, dpi=120, bbox_inches="tight")
    for name, table in (("portfolio_metrics", portfolio_table), ("router_metrics", router_table),
                        ("answer_metrics", answer_table), ("answer_metrics", versus_table)):
        path = reporting / f"{name}.json"
        if path.exists():
            print(f"### {name}\n")
            print("\n".join(table(json.loads(path.read_text()))), "\n")


if __name__ == "__main__":
    main()
