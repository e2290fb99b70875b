"""The ``cross_encoder`` family as the pool scored it: each candidate against its first stage, and the
portfolio with the family against without it.

Reads a run's candidate scoring and portfolio selection outputs (no model is loaded, nothing is
scored again):

* each ``cross_encoder`` candidate's mean utility (the pool's score, e.g. support recall@4) on dev
  and test beside the pool candidate that ranks as its prefilter does (``bm25``: the pool's BM25 at
  ``pool_settings.bm25_base``; ``dense:<e>`` and ``hybrid:<e>``: those families at their defaults, a flat index and RRF of the
  two with equal weights), with the paired 95% bootstrap interval of the difference;
* per selection key (each dataset and ``all``), the greedy portfolio of ``k`` selected on the train
  rows as ``portfolio_selection`` selects it (every train row), with the family's columns and
  without them: the members, where the family lands, and the test best-of-k of both with the
  paired interval.

Run from the repository root after ``kedro run --pipelines=portfolio --params candidate_scoring.grid=cross_encoder``::

    .venv/bin/python benchmarks/cross_encoder_in_pool.py [--data-root data] [--k 5]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ragfolio.core.retrieval.families.dense import DenseFamily
from ragfolio.core.retrieval.families.hybrid import HybridFamily
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.scoring.utility_index import UtilityIndex, stacked
from ragfolio.core.selection.best_of_k import per_question_best_of_k
from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.stats import interval_text, paired_difference
from ragfolio.datasets import ArrayFolderDataset

FAMILY = "cross_encoder"


def first_stage_name(prefilter: str, specs: list[CandidateSpec], bm25_base: dict) -> str:
    """The pool candidate whose ranking is the prefilter ``prefilter``'s (top ``num_docs``)."""
    family, _, encoder = prefilter.partition(":")
    # The family's defaults rank as the base does: a flat index; RRF of BM25 and dense with equal weights.
    wanted = {"bm25": bm25_base, "dense": {**DenseFamily.params, "encoder": encoder},
              "hybrid": {**HybridFamily.params, "encoder": encoder}}[family]
    for spec in specs:
        if spec.family == family and all(spec.params.get(p) == v for p, v in wanted.items()):
            return spec.name
    raise ValueError(f"no pool candidate ranks as the prefilter {prefilter!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    root = args.data_root
    index = UtilityIndex.from_dict(json.loads((root / "05_model_input/utility_index.json").read_text()))
    matrices = ArrayFolderDataset(str(root / "05_model_input/utility")).load()
    specs = [CandidateSpec.from_record(c) for c in json.loads((root / "03_primary/candidates.json").read_text())]
    settings = json.loads((root / "05_model_input/pool_settings.json").read_text())
    names = list(index.candidates)
    if [s.name for s in specs] != names:
        raise ValueError("candidates.json and the utility index name different candidates: rerun candidate_scoring")
    family = [i for i, s in enumerate(specs) if s.family == FAMILY]
    if not family:
        raise SystemExit(f"the pool holds no {FAMILY} candidate (candidate_scoring.grid=cross_encoder)")
    report: dict = {"score": index.score, "num_docs": index.num_docs, "candidates": {}, "portfolios": {}}

    print(f"{index.score} of the top {index.num_docs}; each cross-encoder candidate minus its first stage [95%]")
    for split in ("dev", "test"):
        U = stacked(matrices, index, split)["all"]
        for i in family:
            base = names.index(first_stage_name(specs[i].params["prefilter"], specs, settings["bm25_base"]))
            diff = paired_difference(U[:, i], U[:, base])
            report["candidates"].setdefault(names[i], {})[split] = {
                "first_stage": names[base], "n": int(len(U)), "reranked": float(U[:, i].mean()),
                "first_stage_mean": float(U[:, base].mean()), "minus_first_stage": diff.to_dict()}
            print(f"  {split:4s} n={len(U)} {names[i]}: {U[:, base].mean():.3f} -> {U[:, i].mean():.3f}, "
                  f"{interval_text(diff)}")

    others = [i for i in range(len(names)) if i not in set(family)]
    print(f"\ngreedy portfolio of {args.k} on train, with the family and without; test best-of-{args.k}")
    train, test = stacked(matrices, index, "train"), stacked(matrices, index, "test")
    for key in train:
        with_family = [int(i) for i in select_greedy(train[key], args.k).indices]
        without = [others[int(i)] for i in select_greedy(train[key][:, others], args.k).indices]
        a, b = per_question_best_of_k(test[key], with_family)[:, -1], per_question_best_of_k(test[key], without)[:, -1]
        diff = paired_difference(a, b)
        places = [p + 1 for p, i in enumerate(with_family) if i in set(family)]
        report["portfolios"][key] = {
            "with_family": [names[i] for i in with_family], "without_family": [names[i] for i in without],
            "family_places": places, "n_test": int(len(a)), "test_with": float(a.mean()),
            "test_without": float(b.mean()), "with_minus_without": diff.to_dict()}
        print(f"  {key}: family at places {places or 'none'}; test {b.mean():.3f} -> {a.mean():.3f}, "
              f"{interval_text(diff)} (n={len(a)})")
        for p, i in enumerate(with_family, start=1):
            print(f"    {p}. {names[i]}")
    out = root / "08_reporting" / "cross_encoder_in_pool.json"
    out.write_text(json.dumps(report, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
