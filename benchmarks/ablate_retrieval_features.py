"""Which retrieval features carry a retrieval router's gain: refit without each group, judge on dev.

Loads a finished run through the Kedro catalog (``--data-root``: the run's ``data_root``, default
the project's ``data/``), rebuilds the router inputs the pipeline builds (query features and the
retrieval features; the rankings are read from the run's retrieval cache), and for each portfolio
asked (``--portfolios``, default ``all``) refits the ``--mode`` router (default
``post_retrieval``, with the run's hyperparameters) with every feature, without each feature
group and without each whole block (:mod:`ragfolio_lab.judging.feature_ablation`), and
judges each on the ``--split`` questions (default ``dev``: choosing features is a choice, and
choices are read on dev; ``test`` only to report). Prints a markdown table per portfolio
(best-of-1, gap closed, paired intervals minus the single best member and minus the router with
every feature, Bonferroni-corrected over the table's intervals so that the table as a whole is at
95%; headroom captured) and writes it to ``--out``. Run from the repository root::

    .venv/bin/python benchmarks/ablate_retrieval_features.py --out docs/ablation_sample.md
    .venv/bin/python benchmarks/ablate_retrieval_features.py --data-root /tmp/full-run/data \\
        --portfolios all hotpotqa --out docs/results_issue22/ablation_full.md
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project
from service_harness import machine

from ragfolio.core.routing.judging.splits import retrieval_split
from ragfolio.core.scoring.runners import ScoredPool
from ragfolio.core.stats import interval_text
from ragfolio.pipelines.router_training.nodes import build_query_features
from ragfolio.pipelines.router_training.retrieval_nodes import build_retrieval_features
from ragfolio_lab.judging.feature_ablation import ablate_features

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ("questions", "corpora", "candidates", "utility_index", "utility_matrices", "portfolios",
          "pool_settings", "router_features", "retrieval_cache")


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def table(key: str, out: dict[str, Any]) -> list[str]:
    lines = [
        f"### {key}: {out['n_test']} {out['split']} questions ({out['n_train']} train); single best member "
        f"{out['single_best_member']:.3f}, oracle {out['oracle']:.3f}; a member beats the default on "
        f"{_share(out['headroom_share'])} of them",
        "",
        "| features | n features | falls back | best-of-1 | gap closed | minus single best | minus all features "
        "| headroom captured | made worse |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, v in out["variants"].items():
        lines.append(
            f"| {label} | {v['n_features']} | {'yes' if v['fallback'] else 'no'} | {v['best_of_1']:.3f} | "
            f"{_share(v['gap_closed_l1'])} | {interval_text(v['minus_single_best'])} | "
            f"{interval_text(v.get('minus_all_features'))} | {_share(v['captured'])} | {_share(v['worse'])} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", default=None, help="the run's data_root (default: the project's data/)")
    parser.add_argument("--mode", default="post_retrieval", choices=["pre_retrieval", "post_retrieval"])
    parser.add_argument("--portfolios", nargs="+", default=["all"])
    parser.add_argument("--split", default="dev", choices=["dev", "test"], help="the questions judged on")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    runtime = {"data_root": args.data_root} if args.data_root else {}
    bootstrap_project(ROOT)
    with KedroSession.create(project_path=ROOT, runtime_params=runtime) as session:
        context = session.load_context()
        catalog, params = context.catalog, context.params["router_training"]
        data = {name: catalog.load(name) for name in INPUTS}
    start = time.perf_counter()
    router_inputs = build_query_features(data["questions"], data["corpora"], data["utility_index"],
                                         data["pool_settings"], data["router_features"], data["retrieval_cache"])
    pool = ScoredPool.of(data["corpora"], data["candidates"], data["pool_settings"], data["retrieval_cache"])
    retrieval_inputs, _ = build_retrieval_features(data["questions"], data["utility_index"], data["portfolios"], pool,
                                                   params)
    features_s = time.perf_counter() - start
    hyper = params["retrieval_routing"][args.mode]
    lines = [
        f"# Retrieval-feature ablation of the {args.mode} router",
        "",
        f"Command: `.venv/bin/python benchmarks/ablate_retrieval_features.py {' '.join(sys.argv[1:])}`",
        f"Machine: {machine()}; features rebuilt in {features_s:.0f} s (rankings from the run's cache)",
        "",
        "Each row refits the router on the train questions (the same hyperparameters and model selection) "
        f"with the named features left out, and routes the {args.split} questions. Intervals: paired bootstrap "
        "at l = 1, each at the Bonferroni level over the table's intervals (the table as a whole at 95%).",
        "",
    ]
    for key in args.portfolios:
        train, judged = (retrieval_split(router_inputs, retrieval_inputs, data["utility_matrices"],
                                         data["utility_index"], data["portfolios"], key, split)
                         for split in ("train", args.split))
        if not len(judged.utilities):
            raise SystemExit(f"portfolio {key!r} has no {args.split} questions (data_prep.dev_fraction: 0?): "
                             "use --split test, and read the table as a report, not a choice")
        members = data["portfolios"].selection(key).portfolio
        out = ablate_features(args.mode, {"random_state": params["seed"], **hyper}, train, judged, members,
                              retrieval_inputs.names)
        lines += table(key, {**out, "split": args.split})
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
