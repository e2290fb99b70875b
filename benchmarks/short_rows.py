"""How many result rows each family leaves short before completion, on a run's own data.

Before full lists were enforced, a candidate that found fewer than ``num_docs`` passages for a
query returned a ``-1``-padded row and support recall divided by the passages it did return, so
such rows scored as if the list had been shorter. This script reruns every candidate of the
pool without the completion step (``PoolRunner._compute``), over the questions and corpora of a
finished ``kedro run`` (``data/02_intermediate/questions.json``, ``data/03_primary/corpora.json``;
embeddings and first-stage rankings come from the run's retrieval cache), and counts per family
the rows with padding, i.e. the utility-matrix rows that were short under the old rule.

Run from the repository root after ``make run`` (or a run on other data)::

    .venv/bin/python benchmarks/short_rows.py [--data-root data]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import yaml
from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.records import Question
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.ranking.completion import short_rows
from ragfolio.core.retrieval.running.pool_runner import PoolRunner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--params", type=Path, default=Path("conf/base/parameters_candidate_scoring.yml"))
    args = parser.parse_args()
    params = yaml.safe_load(args.params.read_text())["candidate_scoring"]
    root = args.data_root
    records = json.loads((root / "02_intermediate/questions.json").read_text())
    corpora = Corpora.from_dict(json.loads((root / "03_primary/corpora.json").read_text()))
    candidates = [CandidateSpec.from_record(c) for c in json.loads((root / "03_primary/candidates.json").read_text())]
    cache = ArrayCache(root / "04_feature/retrieval_cache", read_only=True)
    short: Counter[str] = Counter()
    rows: Counter[str] = Counter()
    for name in corpora.names_for(sorted({r["dataset"] for r in records if r["dataset"] in corpora.datasets})):
        corpus = corpora.corpora[name]
        queries = [
            Question.from_record(r, source="questions").question
            for r in records
            if r["dataset"] in corpora.datasets and corpora.name_for(r["dataset"]) == name
        ]
        runner = PoolRunner(
            corpus.titles, corpus.texts, params["encoders"], cache, num_docs=params["num_docs"],
            prefilter_depth=params["prefilter_depth"], bm25_params=params["bm25_base"],
            graph_max_degree=params["graph_max_degree"],
        )
        for candidate in tqdm(candidates, desc=f"{name}: candidates", unit="cand"):
            result = runner._compute(candidate, queries)
            short[candidate.family] += short_rows(result)
            rows[candidate.family] += len(queries)
    print("| family | short rows | rows | share |\n|---|---|---|---|")
    for family in rows:
        print(f"| {family} | {short[family]} | {rows[family]} | {short[family] / rows[family]:.2%} |")
    total_short, total = sum(short.values()), sum(rows.values())
    print(f"| all | {total_short} | {total} | {total_short / max(total, 1):.2%} |")


if __name__ == "__main__":
    main()
