"""The query-log path: pooling from two retrievers, the judge's verdicts as support, dropped questions,
stored verdicts reused and resumed, and agreement with real labels on a hand-worked case.

The corpus is four made-up passages; BM25 is the real one, the dense retriever a concept encoder
(``car`` and ``automobile`` share a coordinate) so that it finds a passage BM25 cannot, and the
judge a scripted backend that grades a (question, title) pair as its script says."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import Question, passage_id
from ragfolio.core.llm.chat import Completion
from ragfolio.core.retrieval.encoders.kinds import ENCODER_KINDS
from ragfolio.core.synthesis.agreement import judged_agreement
from ragfolio.core.synthesis.judging import LogSettings, judge_log
from ragfolio.core.synthesis.pooling import PoolingSettings, pool_passages
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.core.synthesis.verdicts import GRADE_SCHEMA, VERDICT_SCHEMA, parse_verdict

PASSAGES = [
    {"title": "Karl Benz", "text": "Karl Benz made the car in 1885 in Mannheim."},
    {"title": "Inventor lists", "text": "An inventor list names many people."},
    {"title": "Apple", "text": "An apple is a fruit that grows on trees."},
    {"title": "Rhine", "text": "The Rhine flows through Basel and Cologne."},
]
CORPUS = Corpus.from_records(PASSAGES)
AUTOMOBILE, FRUIT, RHINE = "Who was the automobile inventor?", "Which fruit grows on trees?", "Where does the Rhine flow?"
# The judge's script: the grade of (question, passage title) pairs, 0 for every other pair; asked
# yes or no, it says yes from grade 2.
GRADES = {(AUTOMOBILE, "Karl Benz"): 3, (FRUIT, "Apple"): 2, (AUTOMOBILE, "Inventor lists"): 1}
CONCEPTS = {"automobile": 0, "car": 0, "fruit": 1, "apple": 1, "rhine": 2}


class ConceptEncoder:
    """Counts of each text's concept words (:data:`CONCEPTS`), L2-normalised; no concept: zeros."""

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                if word in CONCEPTS:
                    out[i, CONCEPTS[word]] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    encode_queries = encode_passages = _embed


@pytest.fixture(autouse=True)
def concept_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENCODER_KINDS, "concepts", lambda **options: ConceptEncoder())


class ScriptedJudge:
    """Replies with the schema's JSON from :data:`GRADES`; raises on call ``fail_at`` (1-based), as a stopped run."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.schemas: list[Any] = []
        self.fail_at = fail_at

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        if self.fail_at is not None and len(self.calls) + 1 == self.fail_at:
            raise KeyboardInterrupt("stopped")
        prompt = messages[-1]["content"]
        title = prompt.split("Passage:\n", 1)[1].split(":", 1)[0]
        question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
        self.calls.append((question, title))
        self.schemas.append(json_schema)
        grade = GRADES.get((question, title), 0)
        reply = {"grade": grade} if json_schema is GRADE_SCHEMA else {"relevant": grade >= 2}
        return Completion(json.dumps(reply), 60, 6, 250.0)


@dataclass(frozen=True)
class Params:
    """The parameters judging reads (``SynthesisParams``' ``log``, ``llm`` and ``progress``)."""

    log: dict[str, Any] = field(default_factory=lambda: {
        "retrievers": ["bm25", "dense:minilm"], "depth": 1, "encoders": {"minilm": {"kind": "concepts"}}})
    llm: dict[str, Any] = field(default_factory=lambda: {
        "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "scripted-judge"})
    progress: bool = False


def write_log(tmp_path: Path) -> Path:
    path = tmp_path / "log.txt"
    path.write_text(f"{AUTOMOBILE}\n\n{FRUIT}\n{RHINE}\n{FRUIT}\n", encoding="utf-8")  # a repeat is kept once
    return path


def run(tmp_path: Path, backend: ScriptedJudge, **log: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    store = RecordStore(tmp_path / "verdicts.jsonl")  # a new object each run: what is on disk is read back
    params = Params(log={**Params().log, **log})
    return judge_log(str(write_log(tmp_path)), Corpora.union(CORPUS, ["log"]), store, params, backend=backend)


def row_of(title: str) -> int:
    return CORPUS.titles.index(title)


def test_the_pool_unites_both_retrievers_top_passages() -> None:
    settings = PoolingSettings(retrievers=("bm25", "dense:minilm"), depth=1, encoders={"minilm": {"kind": "concepts"}})
    pool = pool_passages(CORPUS, [AUTOMOBILE, FRUIT], settings, ArrayCache("unused", enabled=False))
    # BM25 matches "inventor" only; the concept encoder maps "automobile" to "car"
    assert pool.rows == ((row_of("Inventor lists"), row_of("Karl Benz")), (row_of("Apple"),))
    assert pool.found_by == ((("bm25",), ("dense:minilm",)), (("bm25", "dense:minilm"),))


def test_relevant_verdicts_become_supporting_contexts_and_a_question_without_one_is_dropped(tmp_path) -> None:
    backend = ScriptedJudge()
    rows, report = run(tmp_path, backend)
    assert sorted(backend.calls) == sorted([(AUTOMOBILE, "Inventor lists"), (AUTOMOBILE, "Karl Benz"),
                                            (FRUIT, "Apple"), (RHINE, "Rhine")])
    assert backend.schemas == [GRADE_SCHEMA] * 4  # the default verdict: a grade, relevant from 2
    assert [r["question"] for r in rows] == [AUTOMOBILE, FRUIT]  # the Rhine question: nothing relevant, dropped
    first = rows[0]
    assert {k: first[k] for k in ("id", "dataset", "answers", "type")} == {
        "id": "log-1", "dataset": "log", "answers": [], "type": None}
    assert first["contexts"] == [{**PASSAGES[1], "is_supporting": False}, {**PASSAGES[0], "is_supporting": True}]
    assert Question.from_record(first).gold_passage_ids() == (passage_id(**PASSAGES[0]),)
    assert report["log_questions"] == 3 and report["kept"] == 2 and report["dropped_no_relevant"] == 1
    assert report["judgements"] | {} == {"pairs": 4, "made": 4, "reused": 0, "unparsed": 0, "tokens": 4 * 66,
                                         "llm_s": 1.0}
    assert report["per_question"] == {"judged": round(4 / 3, 3), "relevant": round(2 / 3, 3)}
    assert report["judgements_per_minute"] == 240.0 and report["seconds_per_judgement"] == 0.25
    assert report["pool"] == {"retrievers": ["bm25", "dense:minilm"], "depth": 1}
    assert (report["verdict"], report["min_grade"]) == ("grade", 2)


def test_a_stopped_run_resumes_and_a_rerun_makes_no_call(tmp_path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, ScriptedJudge(fail_at=3))  # two verdicts stored, then stopped
    resumed = ScriptedJudge()
    rows, report = run(tmp_path, resumed)
    assert len(resumed.calls) == 2 and report["judgements"]["reused"] == 2
    again = ScriptedJudge()
    rows_again, report_again = run(tmp_path, again)
    assert again.calls == [] and report_again["judgements"]["made"] == 0 and report_again["judgements"]["reused"] == 4
    assert rows_again == rows and report_again["judgements_per_minute"] is None


def test_a_new_threshold_reuses_every_grade_and_a_new_style_judges_afresh(tmp_path) -> None:
    run(tmp_path, ScriptedJudge())
    lenient = ScriptedJudge()
    rows, _ = run(tmp_path, lenient, min_grade=1)  # "related" now counts: the inventor list becomes support
    assert lenient.calls == []
    assert [c["is_supporting"] for c in rows[0]["contexts"]] == [True, True]
    asked = ScriptedJudge()
    rows, report = run(tmp_path, asked, verdict="yes_no")
    assert len(asked.calls) == 4 and asked.schemas == [VERDICT_SCHEMA] * 4 and report["judgements"]["reused"] == 0
    assert [c["is_supporting"] for c in rows[0]["contexts"]] == [False, True] and report["min_grade"] is None


def test_unknown_log_settings_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['dept'\]"):
        LogSettings.from_dict({"dept": 3})
    with pytest.raises(ValueError, match="verdict='score' must be one of"):
        LogSettings.from_dict({"verdict": "score"})
    with pytest.raises(ValueError, match="needs encoder 'e5'"):
        LogSettings.from_dict({"retrievers": ["dense:e5"]})
    assert LogSettings.from_dict({"depth": 5}).pooling.depth == 5


def test_a_reply_that_is_not_the_verdict_reads_as_none() -> None:
    assert parse_verdict('{"relevant": true}') == 1 and parse_verdict('{"relevant": false}') == 0
    assert parse_verdict("yes") is None and parse_verdict('{"relevant": "yes"}') is None
    assert parse_verdict('{"grade": 2}', "grade") == 2 and parse_verdict('{"relevant": true}', "grade") is None
    assert parse_verdict('{"grade": 4}', "grade") is None and parse_verdict('{"grade": true}', "grade") is None


def context(name: str, supporting: bool) -> dict[str, Any]:
    return {"title": name, "text": f"{name} text.", "is_supporting": supporting}


def test_agreement_on_a_hand_worked_case() -> None:
    # q1: gold {g1, g2}; judged relevant {g1, n1}, pooled {g1, n1, n2}: P 1/2, R 1/2, pooled R 1/2, judge R 1/1.
    # q2: gold {g3}; pooled {g3}, judged relevant none: P undefined, R 0, F1 0, pooled R 1, judge R 0.
    # q3: labelled, never judged: left out.
    labelled = [
        Question.from_record({"id": "q1", "dataset": "d", "question": "First  question?", "answers": [], "type": None,
                              "contexts": [context("g1", True), context("g2", True), context("n1", False)]}),
        Question.from_record({"id": "q2", "dataset": "d", "question": "Second question?", "answers": [], "type": None,
                              "contexts": [context("g3", True)]}),
        Question.from_record({"id": "q3", "dataset": "d", "question": "Third?", "answers": [], "type": None,
                              "contexts": [context("g4", True)]}),
    ]
    judged = [{"question": "first question?", "contexts": [context("g1", True), context("n1", True),
                                                           context("n2", False)]},
              {"question": "Second question?", "contexts": [context("g3", False)]}]
    agreement = judged_agreement(judged, labelled)
    assert agreement.ids == ("q1", "q2")
    np.testing.assert_allclose(agreement.recall, [0.5, 0.0])
    assert agreement.precision[0] == 0.5 and np.isnan(agreement.precision[1])
    assert agreement.summary() == {
        "questions": 2, "precision": 0.5, "recall": 0.25, "f1": 0.25, "pooled_recall": 0.75, "judge_recall": 0.5,
        "micro": {"precision": 0.5, "recall": round(1 / 3, 4)}, "gold_per_question": 1.5, "gold_in_pool": 2,
        "gold_judged_relevant": 1}
