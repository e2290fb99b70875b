"""The paper's answer curves, as the paper draws them, on the 300 test questions of ``../shared/data``.

From issue 34's stored answers (``docs/results_issue34/full``; restore them with
``git restore --source=b54132d -- docs/results_issue34/full``): per dataset and over all 300, the EM of

- **router top-1**: the answer from the post-retrieval router's top member's 4 passages;
- **max of router top-2**: right when either of the top two routed members' answers is right, the
  paper's plotted top-l value (the official code's "Max of router top-2"): an **oracle**, since no
  deployed system knows which answer is right;
- **first member**: the portfolio's first (greedy's first pick, the single best member), 4 passages;
- **single best, wide**: the same member's 8 passages in one prompt;
- **served**: what the bundle served (issue 34: router top-1 at l = 1, routing on by do no harm on
  support recall; at l = 2 the single best's wide prompt) and, at l = 2, the routed answer the LLM
  judge picked;

each with its 95% bootstrap interval, and each minus the first member with the paired interval.

    .venv/bin/python benchmarks/paper_curves.py > docs/results_issue50/paper_curves.md
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.metrics import exact_match
from ragfolio.core.stats import interval_text, mean_interval, paired_difference

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "docs" / "results_issue34" / "full"
FILES = ("answers_qwen2.5-coder-1.5b-instruct.jsonl", "answers_core_6f95c21.jsonl", "answers_rest_6f95c21.jsonl")


def stored() -> dict[tuple[str, str], dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for name in FILES:
        if not (STORED / name).exists():
            sys.exit(f"{STORED / name} is missing: git restore --source=b54132d -- docs/results_issue34/full")
        for line in (STORED / name).read_text().splitlines():
            row = json.loads(line)
            rows.setdefault((row["id"], row["system"]), row)
    return rows


def curves(rows: dict[tuple[str, str], dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per curve, per question id, its EM."""
    ids = sorted(i for i, s in rows if s == "post_retrieval_l2")

    def em(i: str, system: str) -> float:
        row = rows[i, system]
        return exact_match(row["prediction"], row["answers"])

    out: dict[str, dict[str, float]] = {
        "router top-1 (= served at l = 1)": {i: em(i, "post_retrieval_l1") for i in ids},
        "max of router top-2 (oracle)": {
            i: max(exact_match(c, rows[i, "post_retrieval_l2"]["answers"]) for c in rows[i, "post_retrieval_l2"]["candidates"])
            for i in ids},
        "routed l = 2, the LLM judge's pick": {i: em(i, "post_retrieval_l2") for i in ids},
        "first member (single best)": {i: em(i, "single_best") for i in ids},
        "single best, wide (= served at l = 2)": {i: em(i, "single_best_wide") for i in ids},
        "no retrieval": {i: em(i, "no_retrieval") for i in ids},
    }
    return out


def report() -> str:
    rows = stored()
    by_curve = curves(rows)
    ids = sorted(next(iter(by_curve.values())))
    dataset = {i: rows[i, "single_best"]["dataset"] for i in ids}
    groups = {"all": ids, **{d: [i for i in ids if dataset[i] == d] for d in sorted(set(dataset.values()))}}
    base = by_curve["first member (single best)"]
    lines = [f"# The paper's curves on the 300 test questions ({time.strftime('%Y-%m-%d')}; "
             "`benchmarks/paper_curves.py`)", "",
             "Issue 34's stored answers (Qwen2.5-Coder-1.5B-Instruct, 4 passages a member, the union corpus of "
             "`../shared/data`, the post-retrieval router). EM [95%]; below each, minus the first member "
             "(paired). Max over the top 3 routed members, max over all members and a random member are **not "
             "measured**: they need every member's answer to each question (about 12 calls a question).", "",
             "| curve | " + " | ".join(f"{g} (n={len(v)})" for g, v in groups.items()) + " |",
             "|---|" + "---|" * len(groups)]
    for name, em in by_curve.items():
        cells = []
        for members in groups.values():
            x = np.array([em[i] for i in members])
            b = np.array([base[i] for i in members])
            diff = "" if em is base else f"<br>{interval_text(paired_difference(x, b))}"
            cells.append(f"{interval_text(mean_interval(x))}{diff}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(report())
