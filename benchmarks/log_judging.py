"""The query-log path, measured: judged pooling's support against real labels on ``../shared/data``.

Takes a seeded sample of ``--n`` questions with gold support from the *train* split of
``split_train_test(questions, 0.3, 42)`` (the split ``data_prep`` makes; test stays untouched),
builds the union corpus exactly as ``data_prep`` does (every dataset's contexts, train and test,
plus ``--corpus-dir``'s passages), and judges the sample's question text as an unlabelled log
(:func:`ragfolio.core.synthesis.judging.judge_questions`: the pool's top ``--depth`` passages per
retriever, each judged by the reader). Then it reports the agreement of the judged support with
the gold one (:func:`ragfolio.core.synthesis.agreement.judged_agreement`: precision, recall and F1
of judged-relevant passage ids against gold ids, and pooled recall, the share of gold passages
the pool reached at all), overall and per dataset, with judgements per question and seconds per
judgement. Verdicts are stored (``--store``), so a rerun reads them back and a stopped one resumes,
and ``--min-grade`` can be changed without a call (``--verdict yes_no`` judges afresh); passage
embeddings persist in ``--cache-dir``.

    .venv/bin/python benchmarks/log_judging.py --n 40 --out docs/results_issue48/log_judging.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import UNION
from ragfolio.core.data.loading import load_folder, split_train_test
from ragfolio.core.data.records import Question, normalize_whitespace
from ragfolio.core.llm.backend_config import EMBEDDED_LLM
from ragfolio.core.synthesis.agreement import judged_agreement
from ragfolio.core.synthesis.judging import LogSettings, judge_questions, judging_report
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.core.synthesis.verdicts import STYLES
from ragfolio.pipelines.data_prep.nodes import build_corpora
from ragfolio.pipelines.question_synthesis.nodes import SynthesisParams


def sample_train(questions: list[Question], n: int, seed: int) -> list[Question]:
    """``n`` train questions with gold support (seeded), in the train split's order."""
    train, _ = split_train_test(questions, 0.3, 42)
    labelled = [q for q in train if q.gold_passage_ids()]
    if n > len(labelled):
        raise SystemExit(f"--n {n}: the train split has only {len(labelled)} questions with gold support")
    picked = np.sort(np.random.default_rng(seed).choice(len(labelled), size=n, replace=False))
    return [labelled[i] for i in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="a folder of labelled JSONL files")
    parser.add_argument("--corpus-dir", type=Path, help="passage files added to the union (default: <data>/corpus)")
    parser.add_argument("--no-corpus-dir", action="store_true", help="the union of the questions' contexts only")
    parser.add_argument("--n", type=int, default=40, help="logged questions (train questions with gold support)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--retrievers", nargs="+", default=["bm25", "dense:minilm"])
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--verdict", choices=STYLES, default="grade", help="the judge's reply: a 0-3 grade or yes/no")
    parser.add_argument("--min-grade", type=int, default=2, help="grade: the lowest grade that counts as support")
    parser.add_argument("--llm", type=json.loads, default=EMBEDDED_LLM, help="the judge's backend config (JSON)")
    parser.add_argument("--store", type=Path, default=Path("data/05_model_input/log_judging_verdicts.jsonl"))
    parser.add_argument("--cache-dir", type=Path, default=Path("data/04_feature/retrieval_cache"))
    parser.add_argument("--out", type=Path, help="write the JSON report here too")
    args = parser.parse_args()

    questions = load_folder(args.data)
    corpus_dir = args.corpus_dir or (args.data / "corpus")
    use_dir = corpus_dir.is_dir() and not args.no_corpus_dir
    corpora = build_corpora([q.to_record() for q in questions],
                            {"raw_dir": str(args.data), "corpus_dir": str(corpus_dir) if use_dir else None})
    corpus = corpora.corpora[UNION]
    sample = sample_train(questions, args.n, args.seed)
    log = [{"id": q.id, "question": normalize_whitespace(q.question)} for q in sample]  # as read_log folds it
    p = SynthesisParams(llm=args.llm, log={"retrievers": args.retrievers, "depth": args.depth,
                                                  "verdict": args.verdict, "min_grade": args.min_grade})
    started = time.perf_counter()
    rows, stats = judge_questions(log, corpus, RecordStore(args.store), p, cache=ArrayCache(args.cache_dir))
    wall_s = time.perf_counter() - started
    by_dataset: dict[str, list[Question]] = defaultdict(list)
    for q in sample:
        by_dataset[q.dataset].append(q)
    report: dict[str, Any] = {
        "data": str(args.data), "questions": f"{args.n} train questions with gold support of split_train_test(0.3, 42), "
                                             f"sampled with seed {args.seed}",
        "corpus": corpora.describe(), "llm": args.llm,
        "agreement": judged_agreement(rows, sample).summary(),
        "agreement_per_dataset": {d: judged_agreement(rows, qs).summary() for d, qs in sorted(by_dataset.items())},
        "judging": judging_report(rows, stats, LogSettings.from_dict(p.log)),
        "wall_s": round(wall_s, 1),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
