"""Does vendirag's VRS pick what ragfolio's own code picked? The port's old copy and the ``vendi`` family.

For each test question of a run, over the same candidate pool (the ``dense:<encoder>`` ranking
the bundle's runner gives) and embeddings, counts the questions where ``vendirag.retriever.vrs_select``
picks the same passages, in the same order, as

- the hand-written ``greedy_vrs`` the Vendi-RAG port used before it called vendirag (read from
  git at ``--old-rev``, the last commit that had it), and
- the ``vendi`` candidate family (:func:`ragfolio.core.retrieval.ranking.diversification.vendi`).

    .venv/bin/python benchmarks/vendi_selection_agreement.py --bundle data/06_models/served.json \\
        --questions data/02_intermediate/questions.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from vendirag.retriever import vrs_select

from ragfolio.core.bundle import load_bundle, resolve_bundle
from ragfolio.core.retrieval.ranking.diversification import vendi

ROOT = Path(__file__).resolve().parents[1]
OLD_PORT = "src/ragfolio_lab.answering.vendi_rag.py"


def old_greedy_vrs(rev: str) -> Any:
    """``greedy_vrs`` as the port had it at ``rev`` (its two functions only, run on their own)."""
    source = subprocess.run(["git", "show", f"{rev}:{OLD_PORT}"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    start, end = source.index("def vendi_score_normalised("), source.index("def judge_messages(")
    namespace: dict[str, Any] = {"np": np, "npt": np.typing, "Sequence": list}
    exec(compile("from __future__ import annotations\n" + source[start:end], OLD_PORT, "exec"), namespace)
    return namespace["greedy_vrs"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "data/06_models/served.json")
    parser.add_argument("--questions", type=Path, default=ROOT / "data/02_intermediate/questions.json")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--s", type=float, nargs="+", default=[0.3, 0.5, 0.8])
    parser.add_argument("--old-rev", default="82e648a")
    args = parser.parse_args()
    runner = load_bundle(resolve_bundle(args.bundle)).runner()
    questions = [q["question"] for q in json.loads(args.questions.read_text()) if q.get("split") == "test"]
    pool = runner.base(f"dense:{args.encoder}", questions)
    q_emb, p_emb = runner.query_embeddings(args.encoder, questions), runner.passage_embeddings(args.encoder)
    greedy_vrs = old_greedy_vrs(args.old_rev)
    print("| s | questions | pool | vrs_select = old greedy_vrs | vrs_select = vendi family |\n|---|---|---|---|---|")
    for s in args.s:
        family = vendi(pool, q_emb, p_emb, args.k, s=s).doc_ids
        same_old = same_family = 0
        for i in range(len(questions)):
            rows = [int(r) for r in pool.doc_ids[i] if r >= 0]
            theirs = [rows[j] for j in vrs_select(p_emb[rows], q_emb[i], k=args.k, s=s)]
            same_old += theirs == greedy_vrs(rows, q_emb[i], p_emb, args.k, s)
            same_family += theirs == [int(x) for x in family[i]]
        print(f"| {s} | {len(questions)} | {pool.doc_ids.shape[1]} | {same_old} | {same_family} |")


if __name__ == "__main__":
    main()
