"""Nodes of ``data_prep``: raw JSONL folder(s) -> split question records -> one corpus a dataset."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragfolio.core.data import Question, build_corpus
from ragfolio.core.loading import load_folder, split_train_test

logger = logging.getLogger(__name__)


class DataPrepParams(BaseModel):
    """``data_prep`` parameters (conf/base/parameters_data_prep.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw_dir: str
    test_dir: str | None = None
    test_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    seed: int = 42


def load_questions(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Read ``raw_dir`` (and ``test_dir``), assign each question a split, return JSON records.

    Without ``test_dir`` each dataset is split with a seeded ``test_fraction``; with it, every row
    of ``raw_dir`` is train and every row of ``test_dir`` is test.
    """
    p = DataPrepParams(**params)
    questions = load_folder(p.raw_dir)
    if p.test_dir:
        train, test = questions, load_folder(p.test_dir)
        clash = {q.id for q in train} & {q.id for q in test}
        if clash:
            raise ValueError(f"{len(clash)} question id(s) are in both raw_dir and test_dir, e.g. {sorted(clash)[:3]}")
    else:
        train, test = split_train_test(questions, p.test_fraction, p.seed)
    records = [{**q.to_record(), "split": "train"} for q in train] + [
        {**q.to_record(), "split": "test"} for q in test
    ]
    counts = Counter((r["dataset"], r["split"]) for r in records)
    for dataset in sorted({d for d, _ in counts}):
        logger.info("%s: %d train, %d test questions", dataset, counts[dataset, "train"], counts[dataset, "test"])
    return records


def build_corpora(questions: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
    """One corpus per dataset: the pooled, de-duplicated contexts of all its questions.

    A dataset whose questions carry no contexts (open-domain TriviaQA, say) has nothing to retrieve
    from and no gold passages to score: it is logged and left out of retrieval.
    """
    by_dataset: dict[str, list[Question]] = defaultdict(list)
    for line, record in enumerate(questions, start=1):
        by_dataset[record["dataset"]].append(Question.from_record(record, source="questions", line=line))
    corpora = {}
    for dataset, qs in sorted(by_dataset.items()):
        if not any(q.has_contexts for q in qs):
            logger.warning(
                "%s: its %d questions have no contexts, so support recall cannot score them; "
                "left out of retrieval metrics",
                dataset,
                len(qs),
            )
            continue
        # Built in id order, so passage rows (and the caches keyed on them) do not depend on the split.
        corpus = build_corpus(sorted(qs, key=lambda q: q.id))
        logger.info("%s: corpus of %d unique passages from %d questions", dataset, len(corpus), len(qs))
        corpora[dataset] = corpus.to_records()
    if not corpora:
        raise ValueError("no dataset has contexts to build a retrieval corpus from")
    return corpora
