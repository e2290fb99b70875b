"""The question writer with a scripted backend: what is kept, why the rest is dropped, what is reused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.records import Question
from ragfolio.core.llm.chat import Completion
from ragfolio.core.synthesis.checks import REASONS
from ragfolio.core.synthesis.seeds import Seed
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.core.synthesis.writer import CheckSettings, QuestionWriter, write_questions

# title -> (text, the question written from it, its answer, the closed-book answer, the answer from the passage)
SCRIPT: dict[str, tuple[str, Any, str, str, str]] = {
    "Harbour Works": ("Harbour Works is a brick factory on the west quay of Norrvik, opened in 1996.",
                      "In which year did the quayside brick plant start work?", "1996", "guess", "1996"),
    "Quill Sensor": ("The Quill Sensor measures the turbidity of river water every ten seconds.",
                     "How often does Larkspur's murkiness probe take a reading?", "every ten seconds", "guess",
                     "every ten seconds"),
    "Garbled": ("A passage the writer answers without JSON.", None, "", "", ""),
    "Copied": ("The Heron Buoy carries three sensors and radios its readings to shore.",
               "The Heron Buoy carries three sensors and radios its readings to shore?", "yes", "no", "yes"),
    "Invented": ("Omar Rask became chief executive in 2011.", "When did Larkspur's boss take over?", "2012",
                 "guess", "2012"),
    "Famous": ("Paris is the capital of France.", "What is the French capital city?", "Paris", "Paris", "Paris"),
    "Unanswerable": ("Dunmere Laboratory is a research site by the Aske river.",
                     "Which river runs past the flood researchers' site?", "Aske", "guess", "guess"),
    "Twin": ("Harbour Works, the brick factory on the quay, opened in 1996.",
             "In which year did the quayside brick plant start work?", "1996", "guess", "1996"),
    "Partial": ("The Lisbon Office opened in 2014 with nineteen staff.",
                "How many people worked at the Portuguese branch at first?", "nineteen", "guess", "nineteen staff"),
}
TITLES = list(SCRIPT)
CORPUS = Corpus(tuple(f"p{i}" for i in range(len(TITLES))), tuple(TITLES), tuple(SCRIPT[t][0] for t in TITLES))


class ScriptedBackend:
    """Writes, and answers, as :data:`SCRIPT` says; counts the calls of each step."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []  # (step, title or question)

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        prompt = messages[-1]["content"]
        if prompt.startswith("Passage:"):  # the writer
            title = next(t for t in TITLES if f"[1] {t}:" in prompt)
            self.calls.append(("write", title))
            _, question, answer, _, _ = SCRIPT[title]
            text = "Sure! here is one" if question is None else json.dumps({"question": question, "answer": answer})
            return Completion(text, 50, 20, 10.0)
        question = prompt.rsplit("Question: ", 1)[1]
        row = next(SCRIPT[t] for t in TITLES if SCRIPT[t][1] == question)
        step = "closed_book" if prompt.startswith("Answer the question. ") else "from_gold"
        self.calls.append((step, question))
        answer = row[3] if step == "closed_book" else row[4]
        return Completion(json.dumps({"answer": answer, "explanation": "it says so"}), 40, 8, 5.0)


def _writer(backend: ScriptedBackend, **checks: float) -> QuestionWriter:
    return QuestionWriter(backend, Answerer(backend, max_answer_tokens=24), checks=CheckSettings(**checks),
                          identity={"kind": "scripted"})


def _seeds(*titles: str) -> list[Seed]:
    return [Seed("single", (TITLES.index(t),)) for t in titles]


def test_a_kept_question_is_a_synthetic_row_with_its_passage_as_support() -> None:
    backend = ScriptedBackend()
    rows, stats = write_questions(_writer(backend), _seeds("Harbour Works"), CORPUS, RecordStore(None), 1,
                                  progress=False)
    (row,) = rows
    q = Question.from_record(row)  # the row format every later stage reads
    assert (q.dataset, q.question, q.answers, q.type) == (
        "synthetic", "In which year did the quayside brick plant start work?", ("1996",), "single")
    assert [(c.title, c.text, c.is_supporting) for c in q.contexts] == [("Harbour Works", SCRIPT["Harbour Works"][0], True)]
    assert row["id"].startswith("syn-") and row["synthetic"] == {"seed": "single:p0", "link": "", "copied": 0.0}
    assert [step for step, _ in backend.calls] == ["write", "closed_book", "from_gold"]
    assert (stats.tried, stats.kept, stats.calls, stats.tokens) == (1, 1, 3, 70 + 48 + 48)
    assert stats.llm_s == pytest.approx(0.02) and stats.to_dict()["kept_share"] == 1.0


def test_each_drop_reason_is_counted_and_free_checks_spare_the_readers_calls() -> None:
    backend = ScriptedBackend()
    rows, stats = write_questions(_writer(backend), _seeds(*TITLES), CORPUS, RecordStore(None), 100, progress=False)
    assert [r["question"] for r in rows] == [SCRIPT[t][1] for t in ("Harbour Works", "Quill Sensor", "Partial")]
    dropped = {"unparsed": 1, "copied": 1, "answer_not_in_passages": 1, "answered_closed_book": 1,
               "not_answered_from_gold": 1, "duplicate": 1}
    assert {reason: n for reason, n in (stats.dropped or {}).items() if n} == dropped
    assert set(stats.dropped or {}) == set(REASONS) >= set(dropped) and (stats.tried, stats.kept) == (9, 3)
    steps = {title: [step for step, what in backend.calls if what in (title, SCRIPT[title][1])] for title in TITLES}
    for title in ("Garbled", "Copied", "Invented"):  # a free check failed: no closed-book call, no call from gold
        assert steps[title] == ["write"], title
    assert steps["Famous"] == ["write", "closed_book"]  # answered closed-book: no need to ask from the passage
    assert steps["Unanswerable"] == ["write", "closed_book", "from_gold"]
    assert stats.calls == len(backend.calls) and stats.to_dict()["kept_share"] == round(3 / 9, 4)


def test_writing_stops_once_enough_questions_are_kept() -> None:
    backend = ScriptedBackend()
    rows, stats = write_questions(_writer(backend), _seeds(*TITLES), CORPUS, RecordStore(None), 2, progress=False)
    assert len(rows) == 2 and stats.tried == 2 and len(backend.calls) == 6


def test_a_second_run_over_the_store_makes_no_call(tmp_path: Path) -> None:
    path = tmp_path / "store.jsonl"
    first, stats = write_questions(_writer(ScriptedBackend()), _seeds(*TITLES), CORPUS, RecordStore(path), 100,
                                   progress=False)
    backend = ScriptedBackend()
    again, restats = write_questions(_writer(backend), _seeds(*TITLES), CORPUS, RecordStore(path), 100, progress=False)
    assert backend.calls == [] and again == first
    assert (restats.reused, restats.calls_now) == (9, 0) and restats.dropped == stats.dropped
    assert (restats.calls, restats.tokens) == (stats.calls, stats.tokens)  # what the questions cost, made earlier
    other = QuestionWriter(backend, Answerer(backend, max_answer_tokens=24), identity={"kind": "another model"})
    write_questions(other, _seeds("Harbour Works"), CORPUS, RecordStore(path), 1, progress=False)
    assert len(backend.calls) == 3  # another backend's questions are written afresh


def test_changing_the_thresholds_reuses_every_call_but_changes_the_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "store.jsonl"
    loose, _ = write_questions(_writer(ScriptedBackend(), min_answer_f1=0.5), _seeds(*TITLES), CORPUS,
                               RecordStore(path), 100, progress=False)
    assert "Partial" in {r["contexts"][0]["title"] for r in loose}  # "nineteen staff" for "nineteen": F1 0.67
    backend = ScriptedBackend()
    strict, stats = write_questions(_writer(backend, min_answer_f1=0.8), _seeds(*TITLES), CORPUS, RecordStore(path),
                                    100, progress=False)
    assert backend.calls == [] and stats.calls_now == 0
    assert "Partial" not in {r["contexts"][0]["title"] for r in strict}
    assert stats.dropped["not_answered_from_gold"] == 2
    copied, stats = write_questions(_writer(backend, max_copied=1.0), _seeds("Copied"), CORPUS, RecordStore(path), 1,
                                    progress=False)
    assert [step for step, _ in backend.calls] == ["closed_book", "from_gold"]  # only the calls it lacked
    assert stats.calls_now == 2 and stats.calls == 3 and len(copied) == 1 and copied[0]["synthetic"]["copied"] == 1.0
