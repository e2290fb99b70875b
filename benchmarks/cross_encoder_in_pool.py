"""The ``cross_encoder`` family as the pool scored it: each candidate against its first stage, and the
portfolio with the family against without it.

Reads a run's candidate scoring and portfolio selection outputs (no model is loaded, nothing is
scored again):

* each ``cross_encoder`` candidate's mean utility (the pool's score, e.g. support recall@4) on dev
  and test beside the pool candidate that ranks as its prefilter does (``bm25``: the pool's BM25 at
  ``pool_settings.bm25_base``; ``dense:<e>`` and ``hybrid:<e>``: those families at their defaults, a flat index and RRF of the
  two with equal weights), with the paired 95% bootstrap interval of the difference;
* the train-minus-test gap of each ``cross_encoder`` candidate (mean utility on train rows minus
  on test rows) and of its first stage, and the family's excess gap: its rerank gain on train minus
  its rerank gain on test, with a 95% bootstrap interval (train and test resampled apart). A model
  that scores its own training questions shows a positive excess on train; cross-fitted train rows
  (``candidate_scoring.cross_encoder.folds``, recorded in ``pool_settings``) should show none;
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

import numpy as np
from scipy import stats

from ragfolio.core.retrieval.families.dense import DenseFamily
from ragfolio.core.retrieval.families.hybrid import HybridFamily
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.scoring.utility_index import UtilityIndex, stacked
from ragfolio.core.selection.best_of_k import per_question_best_of_k
from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.stats import Interval, interval_text, paired_difference
from ragfolio.datasets.array_folders import ArrayFolderDataset

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


def excess_gap(train: np.ndarray, test: np.ndarray) -> Interval:
    """``mean(train) - mean(test)`` of two independent samples (per-question rerank gains), with a 95%
    percentile-bootstrap interval that resamples each apart."""
    result = stats.bootstrap((train, test), lambda a, b, axis: a.mean(axis) - b.mean(axis), vectorized=True,
                             paired=False, n_resamples=2000, method="percentile", rng=np.random.default_rng(0))
    low, high = result.confidence_interval
    return Interval(float(train.mean() - test.mean()), float(low), float(high), len(train) + len(test))


def train_minus_test(matrices: dict, index: UtilityIndex, specs: list[CandidateSpec], family: list[int],
                     settings: dict) -> dict:
    """Per ``cross_encoder`` candidate and for the family's mean: train and test means of it and of its
    first stage, their train-minus-test gaps, and the excess gap (rerank gain on train minus on test)."""
    names = [s.name for s in specs]
    train, test = stacked(matrices, index, "train")["all"], stacked(matrices, index, "test")["all"]
    folds = settings.get("cross_encoder_folds")
    print(f"\ntrain-minus-test gap of the family's utility (train rows {len(train)}, test rows {len(test)}; "
          f"train rows cross-fitted: {'yes, ' + folds if folds else 'no'})")
    bases = [names.index(first_stage_name(specs[i].params["prefilter"], specs, settings["bm25_base"])) for i in family]
    columns = [(names[i], [i], [b]) for i, b in zip(family, bases, strict=True)]
    columns.append(("family mean", family, bases))
    out: dict = {"cross_fitted": bool(folds), "n_train": int(len(train)), "n_test": int(len(test)), "candidates": {}}
    for name, mine, theirs in columns:
        ce_train, ce_test = train[:, mine].mean(axis=1), test[:, mine].mean(axis=1)
        fs_train, fs_test = train[:, theirs].mean(axis=1), test[:, theirs].mean(axis=1)
        excess = excess_gap(ce_train - fs_train, ce_test - fs_test)
        out["candidates"][name] = {
            "train": float(ce_train.mean()), "test": float(ce_test.mean()), "gap": float(ce_train.mean() - ce_test.mean()),
            "first_stage_train": float(fs_train.mean()), "first_stage_test": float(fs_test.mean()),
            "first_stage_gap": float(fs_train.mean() - fs_test.mean()), "excess_gap": excess.to_dict()}
        print(f"  {name}: gap {ce_train.mean() - ce_test.mean():+.3f} (train {ce_train.mean():.3f}, test "
              f"{ce_test.mean():.3f}); first stage {fs_train.mean() - fs_test.mean():+.3f}; excess {interval_text(excess)}")
    return out


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

    report["train_minus_test"] = train_minus_test(matrices, index, specs, family, settings)

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
    out.parent.mkdir(parents=True, exist_ok=True)  # a run of candidate scoring alone has no reports yet
    out.write_text(json.dumps(report, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
