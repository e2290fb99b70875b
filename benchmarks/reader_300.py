"""The reader and the router at l = 1 on the 300 test questions of ``../shared/data`` (issue 34), from two runs.

The first 30 test questions of each dataset were answered at 767325a with every default system
(``docs/results_issue34/full/answers_qwen2.5-coder-1.5b-instruct.jsonl``); questions 31-100 at
6f95c21 with ``single_best`` and ``post_retrieval_l1`` only (``answers_core_6f95c21.jsonl``, the
answer store's rows), two questions per dataset answered by both runs to check that the passages
and answers agree. Gemma-3-270M's ``single_best`` on the same 300 (767325a) gives the reader
comparison. Prints EM and F1 with 95% intervals per dataset, ``post_retrieval_l1`` minus
``single_best`` (paired) and the reader minus Gemma-3-270M (paired).

    .venv/bin/python benchmarks/reader_300.py
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.metrics import exact_match, f1_score
from ragfolio.core.stats import interval_text, mean_intervals, paired_differences

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results_issue34" / "full"
SYSTEMS = ("single_best", "post_retrieval_l1")
Rows = dict[tuple[str, str], dict[str, Any]]


def _rows(name: str) -> Rows:
    """``{(question id, system): row}`` of a JSONL file of answers, each row scored afresh."""
    out = {}
    for line in (RESULTS / name).read_text().splitlines():
        row = json.loads(line)
        row["em"], row["f1"] = exact_match(row["prediction"], row["answers"]), f1_score(row["prediction"], row["answers"])
        out[row["id"], row["system"]] = row
    return out


def _scores(rows: Rows, ids: list[str], system: str) -> np.ndarray:
    return np.array([[rows[i, system]["em"], rows[i, system]["f1"]] for i in ids])


def main() -> None:
    first, later = _rows("answers_qwen2.5-coder-1.5b-instruct.jsonl"), _rows("answers_core_6f95c21.jsonl")
    gemma = _rows("answers_gemma-3-270m.jsonl")
    overlap = [key for key in later if key in first]
    agree = sum(later[k]["prediction"] == first[k]["prediction"] and later[k]["doc_ids"] == first[k]["doc_ids"]
                for k in overlap)
    print(f"answered by both runs: {len(overlap)} (question, system) pairs, the same passages and answer on {agree}")
    rows = {**later, **first}
    ids = sorted(set.intersection(*({i for i, s in rows if s == system} for system in SYSTEMS)))
    datasets = Counter(rows[i, "single_best"]["dataset"] for i in ids)
    print(f"questions: {len(ids)} {dict(sorted(datasets.items()))}")
    for dataset in [None, *sorted(datasets)]:
        chosen = [i for i in ids if dataset is None or rows[i, "single_best"]["dataset"] == dataset]
        print(f"--- {dataset or 'all'} ({len(chosen)})")
        for system in SYSTEMS:
            em, f1 = mean_intervals(_scores(rows, chosen, system))
            tokens = np.mean([rows[i, system]["tokens"] for i in chosen])
            print(f"{system}: EM {interval_text(em.to_dict())} F1 {interval_text(f1.to_dict())} tokens {tokens:.0f}")
        routed, best = _scores(rows, chosen, "post_retrieval_l1"), _scores(rows, chosen, "single_best")
        em, f1 = paired_differences(routed, best)
        same = sum(rows[i, "post_retrieval_l1"]["doc_ids"] == rows[i, "single_best"]["doc_ids"] for i in chosen)
        print(f"post_retrieval_l1 minus single_best: EM {interval_text(em.to_dict())} F1 {interval_text(f1.to_dict())}; "
              f"right where single_best is wrong on {int((routed[:, 0] > best[:, 0]).sum())}, the reverse on "
              f"{int((routed[:, 0] < best[:, 0]).sum())}; another list than single_best's on {len(chosen) - same}")
    paired = [i for i in ids if (i, "single_best") in gemma]
    em, f1 = paired_differences(_scores(rows, paired, "single_best"), _scores(gemma, paired, "single_best"))
    gemma_em, _ = mean_intervals(_scores(gemma, paired, "single_best"))
    same = sum(rows[i, "single_best"]["doc_ids"] == gemma[i, "single_best"]["doc_ids"] for i in paired)
    print(f"the reader minus Gemma-3-270M, single_best, {len(paired)} questions (the same passages on {same}): "
          f"EM {interval_text(em.to_dict())} F1 {interval_text(f1.to_dict())}; Gemma EM {interval_text(gemma_em.to_dict())}")


if __name__ == "__main__":
    main()
