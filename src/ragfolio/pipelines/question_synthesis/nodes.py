"""The node of ``question_synthesis``: the questions every later stage reads.

With ``data_prep.questions: labelled`` it passes ``data_prep``'s split rows through. With
``synthetic`` the reader writes questions from the corpus's passages (:mod:`ragfolio.core.synthesis`)
and they are split into train and dev, plus a synthetic test when no labelled question was given;
with ``log`` a team's questions are labelled by judged pooling
(:mod:`ragfolio.core.synthesis.judging`). Labelled questions given beside either are the test.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import UNION, Corpora
from ragfolio.core.data.loading import split_train_dev, split_train_test
from ragfolio.core.data.records import Question
from ragfolio.core.data.sources import SYNTHETIC, in_log, read_log, source_of
from ragfolio.core.llm.backend_config import EMBEDDED_LLM
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.core.synthesis.writer import CheckSettings

logger = logging.getLogger(__name__)


class SynthesisParams(BaseModel):
    """``question_synthesis`` parameters (conf/base/parameters_question_synthesis.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_questions: int = Field(100, ge=1)
    mix: dict[str, float] = Field(default_factory=lambda: {"single": 0.5, "bridge": 0.3, "comparison": 0.2})
    max_seeds_factor: float = Field(4.0, ge=1.0)
    seed: int = 42
    dev_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    max_copied: float = Field(0.5, ge=0.0, le=1.0)
    min_answer_f1: float = Field(0.5, ge=0.0, le=1.0)
    max_passage_words: int = Field(100, ge=1)
    llm: dict[str, Any] = Field(default_factory=lambda: dict(EMBEDDED_LLM))
    max_answer_tokens: int = Field(24, ge=1)
    progress: bool = True
    log_file: str | None = None  # data_prep.questions: log: a .txt (one question a line) or JSONL file
    log: dict[str, Any] = Field(default_factory=dict)


def synthesize_questions(labelled: list[dict[str, Any]], corpora: Corpora, store: RecordStore, cache: ArrayCache,
                         params: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The run's questions and a report of how they were made.

    The source is the one data_prep built the corpora for (:func:`~ragfolio.core.data.sources.source_of`).

    ``cache`` is the run's retrieval cache: a query log's pool is ranked with candidate scoring's
    first stages, so the corpus is encoded once for both.

    Returns:
        ``(questions, report)``: question records with their ``split``; the report names the
        source, the counts per split and, for written questions, what was kept and why the rest was not.
    """
    source = source_of(corpora.datasets)
    p = SynthesisParams(**params)
    if source == "labelled":
        return labelled, {"source": "labelled", "test": "labelled", **_counts(labelled)}
    started = time.perf_counter()
    if source == SYNTHETIC:
        written, report = write_from_corpus(corpora.corpora[UNION], store, p)
    else:
        from ragfolio.core.synthesis.judging import judge_log  # the log path only

        if not p.log_file:
            raise ValueError("data_prep.questions: log needs question_synthesis.log_file, a file of your users' questions")
        written, report = judge_log(p.log_file, corpora, store, p, cache=cache)
        logged = read_log(p.log_file)
        kept = [q for q in labelled if not in_log(q["question"], logged)]
        if len(kept) < len(labelled):  # their text was judged: not unseen
            logger.info("%d labelled questions are in the query log: left out of test", len(labelled) - len(kept))
        labelled = kept
    questions = _split(written, p, has_test=bool(labelled)) + labelled
    report |= {"source": source, "test": "labelled" if labelled else "synthetic", **_counts(questions),
               "wall_s": round(time.perf_counter() - started, 1)}
    if not labelled:
        logger.warning("no labelled question was given: the test questions are synthetic too, and every test "
                       "figure of this run is on synthetic questions")
    return questions, report


def write_from_corpus(corpus: Any, store: RecordStore, p: SynthesisParams) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Questions the reader writes from ``corpus`` (:func:`~ragfolio.core.synthesis.writer.write_questions`)."""
    from ragfolio.core.answering.answerer import Answerer
    from ragfolio.core.llm.backends import backend_identity, make_backend
    from ragfolio.core.synthesis.seeds import plan_seeds
    from ragfolio.core.synthesis.writer import QuestionWriter, write_questions

    seeds = plan_seeds(corpus, round(p.num_questions * p.max_seeds_factor), p.mix, p.seed)
    backend = make_backend(p.llm)
    writer = QuestionWriter(backend, Answerer(backend, max_answer_tokens=p.max_answer_tokens),
                            checks=CheckSettings(p.max_copied, p.min_answer_f1), max_passage_words=p.max_passage_words,
                            identity=backend_identity(p.llm))
    rows, stats = write_questions(writer, seeds, corpus, store, p.num_questions, progress=p.progress)
    copied = sorted(r["synthetic"]["copied"] for r in rows)
    minutes = stats.llm_s / 60
    report = {"written": stats.to_dict(), "kinds": dict(Counter(r["type"] for r in rows)),
              "links": dict(Counter(r["synthetic"]["link"] or "single" for r in rows)),
              "copied_trigram_share": {"mean": round(sum(copied) / len(copied), 4) if copied else None,
                                       "max": copied[-1] if copied else None},
              "per_minute": {"tried": round(stats.tried / minutes, 2) if minutes else None,
                             "kept": round(stats.kept / minutes, 2) if minutes else None}}
    logger.info("wrote %d questions (%d seeds tried, %d read back); dropped: %s", stats.kept, stats.tried,
                stats.reused, {k: v for k, v in (stats.dropped or {}).items() if v})
    return rows, report


def _split(rows: list[dict[str, Any]], p: SynthesisParams, *, has_test: bool) -> list[dict[str, Any]]:
    """Written or judged questions split into train and dev (and test, when no labelled test exists)."""
    questions = [Question.from_record(r, source="synthesis", line=i) for i, r in enumerate(rows, start=1)]
    extra = {r["id"]: {k: v for k, v in r.items() if k == "synthetic"} for r in rows}
    if len(questions) < 3:
        raise ValueError(f"only {len(questions)} usable question(s) were made: too few to split into train, dev "
                         "and test (raise question_synthesis.num_questions, or check the report's drop reasons)")
    train, test = (questions, []) if has_test else split_train_test(questions, p.test_fraction, p.seed)
    train, dev = split_train_dev(train, p.dev_fraction, p.seed)
    return [{**q.to_record(), **extra[q.id], "split": split}
            for split, qs in (("train", train), ("dev", dev), ("test", test)) for q in qs]


def _counts(questions: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(q["split"] for q in questions)
    return {"questions": {s: counts.get(s, 0) for s in ("train", "dev", "test")}}
