"""The reader and the paper's systems on the 300 test questions of ``../shared/data`` (issue 34), from stored runs.

The first 30 test questions of each dataset were answered at 767325a with every default system
(``docs/results_issue34/full/answers_qwen2.5-coder-1.5b-instruct.jsonl``); questions 31-100 at
6f95c21: ``single_best`` and ``post_retrieval_l1`` in one run (``answers_core_6f95c21.jsonl``),
``no_retrieval``, ``single_best_wide`` and ``post_retrieval_l2`` in another
(``answers_rest_6f95c21.jsonl``), each the answer store's rows. Two questions per dataset were
answered by both commits, to check that the passages and answers agree. Gemma-3-270M's
``single_best`` on the same 300 (767325a) gives the reader comparison. The answer files are not kept in
git: ``git restore --source=b54132d -- docs/results_issue34/full`` puts them back.

Prints ``single_best`` and ``post_retrieval_l1`` over the 300, then every system over the questions
all of them answered (each: all, then per dataset): EM and F1 with 95%
intervals; each system minus ``single_best`` (paired), ``post_retrieval_l2`` also minus
``single_best_wide`` (the same number of passages); the selector's headroom (questions where one
of the two members' answers is right and ``single_best``'s wrong, and how often it picked that
one); and the reader minus Gemma-3-270M.

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
FIRST = "answers_qwen2.5-coder-1.5b-instruct.jsonl"
LATER = ("answers_core_6f95c21.jsonl", "answers_rest_6f95c21.jsonl")
CORE = ("single_best", "post_retrieval_l1")  # answered on all 300
SYSTEMS = ("no_retrieval", "single_best", "single_best_wide", "post_retrieval_l1", "post_retrieval_l2")
BASELINES = {"post_retrieval_l2": ("single_best", "single_best_wide")}  # else single_best only
Rows = dict[tuple[str, str], dict[str, Any]]


def _rows(*names: str) -> Rows:
    """``{(question id, system): row}`` of JSONL files of answers (those present), each row scored afresh."""
    out = {}
    for name in names:
        if not (RESULTS / name).exists():
            continue
        for line in (RESULTS / name).read_text().splitlines():
            row = json.loads(line)
            row["em"], row["f1"] = exact_match(row["prediction"], row["answers"]), f1_score(row["prediction"], row["answers"])
            out[row["id"], row["system"]] = row
    return out


def _scores(rows: Rows, ids: list[str], system: str) -> np.ndarray:
    return np.array([[rows[i, system]["em"], rows[i, system]["f1"]] for i in ids])


def _selector_headroom(rows: Rows, ids: list[str]) -> str:
    """How often one of ``post_retrieval_l2``'s two candidate answers is right where single best's is
    wrong, how often the selector picked a right one then, and how often it lost what single best had."""
    room = found = lost = differ = 0
    for i in ids:
        row, best = rows[i, "post_retrieval_l2"], rows[i, "single_best"]
        right = [exact_match(c, row["answers"]) for c in row["candidates"]]
        differ += len({c.strip().lower() for c in row["candidates"]}) > 1
        if any(right) and not best["em"]:
            room += 1
            found += bool(row["em"])
        lost += bool(best["em"] and not row["em"])
    shown = [rows[i, "post_retrieval_l2"]["selector_position"] for i in ids
             if rows[i, "post_retrieval_l2"]["selector_options"] == 2]
    first = sum(position == 1 for position in shown)
    return (f"selector headroom: a member's answer right where single_best's is wrong on {room} of {len(ids)}; "
            f"picked on {found}; lost {lost} that single_best had right; two different candidates on {differ}; "
            f"the selector chose between two on {len(shown)} and picked the one shown first on {first}")


def _report(rows: Rows, systems: tuple[str, ...]) -> list[str]:
    """Print ``systems`` over the questions each of them answered, all and per dataset; their ids."""
    ids = sorted(set.intersection(*({i for i, s in rows if s == system} for system in systems)))
    datasets = Counter(rows[i, "single_best"]["dataset"] for i in ids)
    print(f"=== {', '.join(systems)}: {len(ids)} questions {dict(sorted(datasets.items()))}")
    for dataset in [None, *sorted(datasets)]:
        chosen = [i for i in ids if dataset is None or rows[i, "single_best"]["dataset"] == dataset]
        print(f"--- {dataset or 'all'} ({len(chosen)})")
        for system in systems:
            em, f1 = mean_intervals(_scores(rows, chosen, system))
            tokens = np.mean([rows[i, system]["tokens"] for i in chosen])
            print(f"{system}: EM {interval_text(em.to_dict())} F1 {interval_text(f1.to_dict())} tokens {tokens:.0f}")
        for system in systems:
            for base in BASELINES.get(system, ("single_best",)):
                if system in (base, "no_retrieval") or base not in systems:
                    continue
                mine, theirs = _scores(rows, chosen, system), _scores(rows, chosen, base)
                em, f1 = paired_differences(mine, theirs)
                same = sum(rows[i, system]["doc_ids"] == rows[i, base]["doc_ids"] for i in chosen)
                print(f"{system} minus {base}: EM {interval_text(em.to_dict())} F1 {interval_text(f1.to_dict())}; "
                      f"right where {base} is wrong on {int((mine[:, 0] > theirs[:, 0]).sum())}, the reverse on "
                      f"{int((mine[:, 0] < theirs[:, 0]).sum())}; other passages on {len(chosen) - same}")
        if "post_retrieval_l2" in systems:
            print(_selector_headroom(rows, chosen))
    return ids


def main() -> None:
    if not (RESULTS / FIRST).exists():
        raise SystemExit(f"{RESULTS / FIRST} is missing: `git restore --source=b54132d -- docs/results_issue34/full`")
    first, later, gemma = _rows(FIRST), _rows(*LATER), _rows("answers_gemma-3-270m.jsonl")
    overlap = [key for key in later if key in first]
    agree = sum(later[k]["prediction"] == first[k]["prediction"] and later[k]["doc_ids"] == first[k]["doc_ids"]
                for k in overlap)
    print(f"answered by both runs: {len(overlap)} (question, system) pairs, the same passages and answer on {agree}")
    rows = {**later, **first}
    ids = _report(rows, CORE)
    _report(rows, SYSTEMS)
    paired = [i for i in ids if (i, "single_best") in gemma]
    em, f1 = paired_differences(_scores(rows, paired, "single_best"), _scores(gemma, paired, "single_best"))
    gemma_em, _ = mean_intervals(_scores(gemma, paired, "single_best"))
    same = sum(rows[i, "single_best"]["doc_ids"] == gemma[i, "single_best"]["doc_ids"] for i in paired)
    print(f"the reader minus Gemma-3-270M, single_best, {len(paired)} questions (the same passages on {same}): "
          f"EM {interval_text(em.to_dict())} F1 {interval_text(f1.to_dict())}; Gemma EM {interval_text(gemma_em.to_dict())}")


if __name__ == "__main__":
    main()
