"""Nodes of ``data_prep``: raw JSONL folder(s) -> labelled question records -> the retrieval corpora.

``corpus: union`` (the default) pools every dataset's contexts, plus the passage files of
``raw_dir`` and ``corpus_dir``, into one corpus that every question retrieves from; ``corpus:
per_dataset`` builds one corpus a dataset. Either way the output is
:meth:`ragfolio.core.data.corpora.Corpora.to_json`.

``questions`` says where the questions come from (:mod:`ragfolio.core.data.sources`): with
``labelled`` the rows are split here; with ``synthetic`` or ``log`` every labelled row is test,
and ``question_synthesis`` writes (or labels) the train and dev questions.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragfolio.core.data.corpora import UNION, Corpora, Mode
from ragfolio.core.data.loading import (
    load_folder,
    load_passage_files,
    load_passage_folder,
    load_question_files,
    split_folder,
    split_train_dev,
    split_train_test,
)
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.data.records import Question
from ragfolio.core.data.sources import LOG, SYNTHETIC, Source, resolve_source

logger = logging.getLogger(__name__)


class DataPrepParams(BaseModel):
    """``data_prep`` parameters (conf/base/parameters_data_prep.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw_dir: str
    test_dir: str | None = None
    test_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    dev_fraction: float = Field(0.0, ge=0.0, lt=1.0)  # conf/base sets 0.2; 0: no dev split
    seed: int = 42
    corpus: Mode = UNION
    corpus_dir: str | None = None
    questions: Source = "auto"

    @model_validator(mode="after")
    def _corpus_dir_needs_union(self) -> DataPrepParams:
        if self.corpus_dir and self.corpus != UNION:
            raise ValueError(f"corpus_dir={self.corpus_dir!r} is only read with corpus: union "
                             f"(got corpus: {self.corpus})")
        if self.questions in ("synthetic", "log") and self.corpus != UNION:
            raise ValueError(f"questions: {self.questions} writes questions about one corpus: it needs corpus: union")
        return self

    @property
    def source(self) -> str:
        """``questions`` with ``auto`` resolved from ``raw_dir`` (:func:`~ragfolio.core.data.sources.resolve_source`)."""
        return resolve_source(self.questions, self.raw_dir)


def load_questions(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Read ``raw_dir`` (and ``test_dir``), assign each question a split, return JSON records.

    Without ``test_dir`` each dataset is split with a seeded ``test_fraction``; with it, every row
    of ``raw_dir`` is train and every row of ``test_dir`` is test. Then a seeded ``dev_fraction``
    of each dataset's train questions becomes ``dev`` (carved from train; the test split is the
    same whatever ``dev_fraction`` is). Stages that fit read ``train`` rows only; ``dev`` rows are
    for the choices made during development and are reported beside ``test``.
    """
    p = DataPrepParams(**params)
    source = p.source
    questions = load_question_files(split_folder(p.raw_dir)[0])
    if source != "labelled":
        return _labelled_as_test(questions + (load_folder(p.test_dir) if p.test_dir else []), source)
    if p.test_dir:
        train, test = questions, load_folder(p.test_dir)
        clash = {q.id for q in train} & {q.id for q in test}
        if clash:
            raise ValueError(f"{len(clash)} question id(s) are in both raw_dir and test_dir, e.g. {sorted(clash)[:3]}")
    else:
        train, test = split_train_test(questions, p.test_fraction, p.seed)
    train, dev = split_train_dev(train, p.dev_fraction, p.seed)
    records = [{**q.to_record(), "split": split} for split, qs in (("train", train), ("dev", dev), ("test", test))
               for q in qs]
    counts = Counter((r["dataset"], r["split"]) for r in records)
    for dataset in sorted({d for d, _ in counts}):
        logger.info("%s: %d train, %d dev, %d test questions", dataset, counts[dataset, "train"],
                    counts[dataset, "dev"], counts[dataset, "test"])
    return records


def _labelled_as_test(questions: list[Question], source: str) -> list[dict[str, Any]]:
    """Labelled questions beside written or judged ones: all test (question_synthesis leaves out
    those whose text is in a query log)."""
    logger.info("questions: %s; %d labelled questions, all test (none reaches synthesis, selection or routing)",
                source, len(questions))
    return [{**q.to_record(), "split": "test"} for q in questions]


def _retrievable(questions: list[dict[str, Any]]) -> dict[str, list[Question]]:
    """``{dataset: questions}`` in id order, for the datasets whose questions carry contexts.

    A dataset whose questions carry no contexts (open-domain TriviaQA, say) has nothing to retrieve
    from and no gold passages to score: it is logged and left out of retrieval. Questions are in id
    order, so passage rows (and the caches keyed on them) do not depend on the split.
    """
    by_dataset: dict[str, list[Question]] = defaultdict(list)
    for line, record in enumerate(questions, start=1):
        by_dataset[record["dataset"]].append(Question.from_record(record, source="questions", line=line))
    kept = {}
    for dataset, qs in sorted(by_dataset.items()):
        if not any(q.has_contexts for q in qs):
            logger.warning(
                "%s: its %d questions have no contexts, so support recall cannot score them; "
                "left out of retrieval metrics",
                dataset,
                len(qs),
            )
            continue
        kept[dataset] = sorted(qs, key=lambda q: q.id)
    return kept


def build_corpora(questions: list[dict[str, Any]], params: dict[str, Any]) -> Corpora:
    """The retrieval corpora and the corpus of each dataset (a record; :meth:`Corpora.to_dict` is its JSON).

    ``union``: one corpus of every dataset's contexts (train and test questions pooled; datasets
    in name order, questions in id order), then ``corpus_dir``'s passages, de-duplicated on
    whitespace-normalised title and text; a passage-file row's ``id`` and ``metadata`` are kept
    (:func:`~ragfolio.core.data.records.build_corpus`). ``per_dataset``: each dataset's own contexts.
    """
    p = DataPrepParams(**params)
    by_dataset = _retrievable(questions)
    passage_files = split_folder(p.raw_dir)[1]
    if not by_dataset and not passage_files:
        raise ValueError("no dataset has contexts to build a retrieval corpus from, and raw_dir holds no passage file")
    if p.corpus == UNION:
        extra = load_passage_files(passage_files) + (load_passage_folder(p.corpus_dir) if p.corpus_dir else [])
        union = build_corpus((q for qs in by_dataset.values() for q in qs), extra)
        written = {SYNTHETIC: [SYNTHETIC], LOG: [LOG]}.get(p.source, [])
        corpora = Corpora.union(union, [*by_dataset, *written])
        logger.info("union corpus of %d unique passages from %d questions of %s and %d passage-file rows "
                    "(fingerprint %s)", len(union), sum(map(len, by_dataset.values())), sorted(by_dataset),
                    len(extra), union.fingerprint)
    else:
        corpora = Corpora.per_dataset({d: build_corpus(qs) for d, qs in by_dataset.items()})
        for dataset, qs in by_dataset.items():
            corpus = corpora.corpus_for(dataset)
            logger.info("%s: corpus of %d unique passages from %d questions (fingerprint %s)",
                        dataset, len(corpus), len(qs), corpus.fingerprint)
    return corpora
