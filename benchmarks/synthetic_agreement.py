"""How choices made on written (or judged) questions do on real labelled ones (issue 48).

Reads one run made with ``data_prep.questions: synthetic`` (or ``log``) on a labelled benchmark
folder: its train and dev rows are the written questions, and every labelled question was scored
as test without reaching synthesis, selection or routing. The labelled questions are split again
as a labelled run splits them (``split_train_test(questions, test_fraction, seed)`` then
``split_train_dev``), so that "the portfolio chosen from the real train labels" and "the real test"
are the labelled run's. Nothing is scored again; no model is loaded. Reported, with 95% paired
bootstrap intervals over the real test questions:

* **ranking agreement**: Kendall tau between every candidate's mean utility on the written questions
  (train + dev) and on the real test questions, with a bootstrap interval (both sets resampled);
* **the portfolio**: real-test best-of-k of greedy chosen on N written questions (seeded draws of
  the written train + dev rows, for each N asked) against greedy chosen on the real train labels;
  and greedy-on-written minus top-k-by-average-on-written; per dataset and ``all``. Greedy breaks
  ties by the product's family rule (:func:`ragfolio.core.selection.separation.tie_order`);
* **bias**: the share of test questions each member of the written-question portfolio wins, on the
  written (dev) questions against the real test; the word-trigram overlap of questions with their
  gold passages, written against real (:func:`ragfolio.core.synthesis.checks.copied_share`).

Run from the repository root after the run (see docs/own_data.md for the command)::

    .venv/bin/python benchmarks/synthetic_agreement.py --run-root <root> --labelled ../shared/data \\
        --sizes 100 300 all --out docs/results/synthetic_agreement.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from ragfolio.core.data.loading import load_folder, split_train_dev, split_train_test
from ragfolio.core.data.records import Question
from ragfolio.core.data.sources import LOG, SYNTHETIC
from ragfolio.core.scoring.utility_index import UtilityIndex
from ragfolio.core.selection.baseline_portfolios import top_k_by_average
from ragfolio.core.selection.best_of_k import per_question_best_of_k, win_shares
from ragfolio.core.selection.greedy import select_greedy
from ragfolio.core.selection.separation import tie_order
from ragfolio.core.stats import mean_interval, paired_difference
from ragfolio.core.synthesis.checks import copied_share
from ragfolio.datasets.array_folders import ArrayFolderDataset

MADE = (SYNTHETIC, LOG)


def greedy(U: np.ndarray, names: list[str], k: int) -> list[int]:
    """The product's greedy portfolio of ``k`` on ``U`` (ties by the family rule)."""
    order = np.asarray(tie_order(U, names), dtype=np.int64)
    return [int(order[i]) for i in select_greedy(U[:, order], k).indices]


def kendall(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.kendalltau(a, b).statistic)


def tau_interval(W: np.ndarray, T: np.ndarray, n_resamples: int = 1000, seed: int = 0) -> dict[str, float]:
    """Kendall tau of the column means of ``W`` and ``T``, with a 95% percentile interval (rows of each resampled)."""
    rng = np.random.default_rng(seed)
    taus = [kendall(W[rng.integers(0, len(W), len(W))].mean(0), T[rng.integers(0, len(T), len(T))].mean(0))
            for _ in range(n_resamples)]
    return {"tau": round(kendall(W.mean(0), T.mean(0)), 4), "low": round(float(np.percentile(taus, 2.5)), 4),
            "high": round(float(np.percentile(taus, 97.5)), 4), "n_written": len(W), "n_test": len(T)}


def interval(x: Any) -> dict[str, Any]:
    d = x.to_dict()
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-root", type=Path, required=True)
    parser.add_argument("--labelled", type=Path, default=Path("../shared/data"))
    parser.add_argument("--test-fraction", type=float, default=0.3)
    parser.add_argument("--dev-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--sizes", nargs="+", default=["100", "300", "all"])
    parser.add_argument("--draws", type=int, default=5, help="seeded draws of N written questions per size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    root = args.run_root
    index = UtilityIndex.from_dict(json.loads((root / "05_model_input/utility_index.json").read_text()))
    matrices = ArrayFolderDataset(str(root / "05_model_input/utility")).load()
    names = list(index.candidates)
    labelled = load_folder(args.labelled)
    train, test = split_train_test(labelled, args.test_fraction, args.seed)
    train, _dev = split_train_dev(train, args.dev_fraction, args.seed)
    real_train, real_test = {q.id for q in train}, {q.id for q in test}

    made = [d for d in index.datasets if d in MADE]
    W = np.concatenate([matrices[d][np.isin(index.datasets[d].split, ["train", "dev"])] for d in made])
    real = {d: rows for d, rows in index.datasets.items() if d not in MADE}
    test_rows = {d: np.flatnonzero(np.isin(rows.ids, list(real_test))) for d, rows in real.items()}
    train_rows = {d: np.flatnonzero(np.isin(rows.ids, list(real_train))) for d, rows in real.items()}
    T = {d: matrices[d][test_rows[d]] for d in real}
    T["all"] = np.concatenate([T[d] for d in real])
    R = np.concatenate([matrices[d][train_rows[d]] for d in real])
    k = args.k

    out: dict[str, Any] = {"run_root": str(root), "written_questions": len(W), "real_train": len(R),
                           "real_test": {d: len(t) for d, t in T.items()}, "n_candidates": len(names), "k": k}
    out["ranking_agreement"] = tau_interval(W, T["all"])
    real_portfolio = greedy(R, names, k)
    out["real_train_portfolio"] = [names[i] for i in real_portfolio]
    rng = np.random.default_rng(args.seed)
    sizes: dict[str, Any] = {}
    for size in args.sizes:
        n = len(W) if size == "all" else min(int(size), len(W))
        draws = 1 if n == len(W) else args.draws
        per_key: dict[str, Any] = {}
        picks = [rng.choice(len(W), n, replace=False) if n < len(W) else np.arange(len(W)) for _ in range(draws)]
        portfolios = [greedy(W[p], names, k) for p in picks]
        averages = [top_k_by_average(W[p], k) for p in picks]
        for key, U in T.items():
            real_curve = per_question_best_of_k(U, real_portfolio)[:, k - 1]
            written = np.mean([per_question_best_of_k(U, s)[:, k - 1] for s in portfolios], axis=0)
            by_avg = np.mean([per_question_best_of_k(U, s)[:, k - 1] for s in averages], axis=0)
            per_key[key] = {
                "greedy_written": round(float(written.mean()), 4), "greedy_real_train": round(float(real_curve.mean()), 4),
                "written_minus_real": interval(paired_difference(written, real_curve)),
                "top_by_average_written": round(float(by_avg.mean()), 4),
                "greedy_minus_top_by_average_written": interval(paired_difference(written, by_avg)),
            }
        sizes[str(n)] = {"draws": draws, "portfolio_first_draw": [names[i] for i in portfolios[0]], "test": per_key}
    out["portfolio"] = sizes

    members = greedy(W, names, k)
    dev_W = np.concatenate([matrices[d][np.asarray(index.datasets[d].split) == "dev"] for d in made])
    out["win_shares"] = {"members": [names[i] for i in members],
                         "written_dev": win_shares(dev_W, members, ["all"] * len(dev_W))["all"],
                         "real_test": win_shares(T["all"], members, ["all"] * len(T["all"]))["all"]}
    questions = json.loads((root / "02_intermediate/questions.json").read_text())
    written_q = [Question.from_record(r, source="q", line=1) for r in questions if r["dataset"] in MADE]
    real_q = [q for q in labelled if q.id in real_test and q.has_contexts]

    def overlap(qs: list[Question]) -> dict[str, Any]:
        shares = [copied_share(q.question, [(c.title, c.text) for c in q.contexts if c.is_supporting]) for q in qs]
        return {"n": len(shares), **interval(mean_interval(np.asarray(shares)))}

    out["trigram_overlap_with_gold"] = {"written": overlap(written_q), "real_test": overlap(real_q)}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
