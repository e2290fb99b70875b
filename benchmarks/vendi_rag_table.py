"""Vendi-RAG: the authors' loop (``vendi_rag_authors``) beside ragfolio's adaptation (``vendi_rag``).

Reads a run's scored answers (``07_model_output/answers.jsonl``, the records every system wrote
for the same questions, scored; the answer store keeps them unscored) and prints, per dataset and over all: EM, F1, answer recall, empty answers,
rounds per question, the share of judged rounds accepted (``Q >= tau``), tokens and latency per
question; then the paired differences ``vendi_rag_authors - vendi_rag`` with 95% bootstrap
intervals. Run the comparison first, e.g. with ``conf/local/parameters_answering_evaluation.yml``::

    answering_evaluation:
      max_questions_per_dataset: 5
      systems: [single_best, vendi_rag, vendi_rag_authors]
      vendi_rag_authors: {}

    kedro run --pipelines=answering_evaluation --params=data_root=<a copy of data/>
    .venv/bin/python benchmarks/vendi_rag_table.py <that copy>/07_model_output/answers.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ragfolio.core.stats import interval_text, paired_differences

SYSTEMS = ("single_best", "vendi_rag", "vendi_rag_authors")
SCORES = ("em", "f1", "answer_recall")


def load(path: Path) -> list[dict]:
    """The file's records, the last one per (dataset, question, system)."""
    rows: dict[tuple[str, str, str], dict] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        rows[(record["dataset"], record["id"], record["system"])] = record
    return list(rows.values())


def summary_lines(records: list[dict], datasets: list[str]) -> list[str]:
    lines = ["| dataset | system | n | EM | F1 | answer recall | empty answers | rounds | judged rounds accepted "
             "| tokens | latency s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for dataset in [*datasets, "all"]:
        for system in SYSTEMS:
            rows = [r for r in records if r["system"] == system and dataset in ("all", r["dataset"])]
            if not rows:
                continue
            judged = sum(r["judged"] or 0 for r in rows)
            accepted = sum(r["accepted"] or 0 for r in rows)
            rounds = f"{np.mean([r['rounds'] for r in rows]):.1f}" if rows[0]["rounds"] is not None else "-"
            lines.append(
                f"| {dataset} | {system} | {len(rows)} | " + " | ".join(f"{np.mean([r[s] for r in rows]):.3f}" for s in SCORES)
                + f" | {sum(not r['prediction'].strip() for r in rows)} | {rounds} | "
                + (f"{accepted}/{judged}" if judged else "-")
                + f" | {np.mean([r['tokens'] for r in rows]):.0f} | {np.mean([r['latency_ms'] for r in rows]) / 1000:.1f} |"
            )
    return lines


def difference_lines(records: list[dict], datasets: list[str], system: str, baseline: str) -> list[str]:
    lines = [f"| dataset | n | EM {system} - {baseline} [95%] | F1 | answer recall |", "|---|---|---|---|---|"]
    for dataset in [*datasets, "all"]:
        mine = {(r["dataset"], r["id"]): r for r in records if r["system"] == system and dataset in ("all", r["dataset"])}
        base = {(r["dataset"], r["id"]): r for r in records if r["system"] == baseline and dataset in ("all", r["dataset"])}
        ids = sorted(mine.keys() & base.keys())
        if not ids:
            continue
        found = paired_differences([[mine[i][s] for s in SCORES] for i in ids], [[base[i][s] for s in SCORES] for i in ids])
        lines.append(f"| {dataset} | {len(ids)} | " + " | ".join(interval_text(x.to_dict()) for x in found) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="a run's 07_model_output/answers.jsonl")
    records = load(parser.parse_args().store)
    datasets = sorted({r["dataset"] for r in records})
    print("\n".join([*summary_lines(records, datasets), "", *difference_lines(records, datasets, "vendi_rag_authors", "vendi_rag")]))


if __name__ == "__main__":
    main()
