"""The answer store: a second run reads what the first stored, a stopped run resumes, bad rows fail loudly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragfolio_lab.answering.store import AnswerStore, answer_all, question_digest, settings_hash

SYSTEMS = ("no_retrieval", "single_best")


def keys(settings: str, systems=SYSTEMS) -> dict[str, str]:
    """Every system stored under the same ``settings``."""
    return dict.fromkeys(systems, settings)


@dataclass(frozen=True)
class Q:
    id: str
    question: str
    answers: tuple[str, ...] = ("gold",)


class Counting:
    """Answers a question with one record per system and counts the questions it answered."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.asked: list[str] = []
        self.fail_on = fail_on

    def __call__(self, q: Q, systems: list[str]) -> list[dict]:
        if q.id == self.fail_on:
            raise KeyboardInterrupt  # the run is stopped while answering this question
        self.asked.append(q.id)
        return [{"id": q.id, "system": s, "prediction": f"{q.question}:{s}", "em": 1.0} for s in systems]


QUESTIONS = [Q(f"q{i}", f"question {i}") for i in range(4)]


def test_a_second_run_reads_every_answer_from_the_store(tmp_path: Path) -> None:
    path = tmp_path / "out" / "answer_store.jsonl"
    first = Counting()
    rows, reused = answer_all(QUESTIONS, keys("s1"), AnswerStore(path), first)
    assert first.asked == ["q0", "q1", "q2", "q3"] and reused == 0 and len(rows) == 8
    second = Counting()
    again, reused = answer_all(QUESTIONS, keys("s1"), AnswerStore(path), second)  # a new process reads the file
    assert second.asked == [] and reused == 4 and again == rows
    other = Counting()  # other settings: answered afresh, stored beside the first
    answer_all(QUESTIONS[:1], keys("s2"), AnswerStore(path), other)
    assert other.asked == ["q0"] and len(AnswerStore(path)) == 10


def test_a_stopped_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "answer_store.jsonl"
    with pytest.raises(KeyboardInterrupt):
        answer_all(QUESTIONS, keys("s"), AnswerStore(path), Counting(fail_on="q2"))
    resumed = Counting()
    rows, reused = answer_all(QUESTIONS, keys("s"), AnswerStore(path), resumed)
    assert resumed.asked == ["q2", "q3"] and reused == 2
    assert [r["id"] for r in rows] == ["q0", "q0", "q1", "q1", "q2", "q2", "q3", "q3"]
    fresh = Counting()
    answer_all(QUESTIONS, keys("s"), AnswerStore(path), fresh, resume=False)
    assert fresh.asked == [q.id for q in QUESTIONS]


def test_a_question_missing_a_system_is_answered_by_that_system_alone(tmp_path: Path) -> None:
    path = tmp_path / "answer_store.jsonl"
    store = AnswerStore(path)
    digest = question_digest(QUESTIONS[0])
    store.add([{"id": "q0", "system": "no_retrieval"}], digest, keys("s"))
    assert store.get("q0", digest, "single_best", "s") is None
    assert store.get("q0", digest, "no_retrieval", "s") == {
        "id": "q0", "system": "no_retrieval", "question_digest": digest, "settings": "s"}
    asked: list[tuple[str, list[str]]] = []

    def answer(q: Q, systems: list[str]) -> list[dict]:
        asked.append((q.id, systems))
        return [{"id": q.id, "system": s} for s in systems]

    rows, reused = answer_all(QUESTIONS[:1], keys("s"), AnswerStore(path), answer)
    assert asked == [("q0", ["single_best"])] and reused == 0
    assert [r["system"] for r in rows] == list(SYSTEMS)
    asked.clear()  # a system whose own settings changed is answered again, the others are read back
    rows, reused = answer_all(QUESTIONS[:1], {"no_retrieval": "s", "single_best": "s2"}, AnswerStore(path), answer)
    assert asked == [("q0", ["single_best"])] and rows[1]["settings"] == "s2"


def test_an_answer_lacking_a_system_it_was_asked_for_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"gave no record of \['single_best'\]"):
        answer_all(QUESTIONS[:1], keys("s"), AnswerStore(tmp_path / "s.jsonl"), lambda q, systems: [
            {"id": q.id, "system": "no_retrieval"}])


def test_a_cut_last_line_is_skipped_and_a_bad_line_named(tmp_path: Path) -> None:
    path = tmp_path / "answer_store.jsonl"
    good = json.dumps({"id": "q0", "system": "single_best", "question_digest": "d", "settings": "s"})
    path.write_text(good + "\n" + '{"id": "q1", "sys')  # a write cut short
    assert len(AnswerStore(path)) == 1
    path.write_text('{"id": "q1"}\n' + good + "\n")
    with pytest.raises(ValueError, match=r"answer_store.jsonl:1: not a stored answer"):
        len(AnswerStore(path))


def test_settings_hash_is_order_free_and_sensitive() -> None:
    assert settings_hash({"a": 1, "b": [1, 2]}) == settings_hash({"b": [1, 2], "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})


def test_no_path_keeps_nothing_on_disk(tmp_path: Path) -> None:
    store = AnswerStore(None)
    store.add([{"id": "q0", "system": "x"}], "d", {"x": "s"})
    assert store.get("q0", "d", "x", "s") is not None and list(tmp_path.iterdir()) == []


def test_a_resumed_run_gives_the_rows_of_a_fresh_one_in_the_same_order(tmp_path) -> None:
    from types import SimpleNamespace

    from ragfolio_lab.answering.store import AnswerStore, answer_all

    systems = ["a", "b", "c"]
    questions = [SimpleNamespace(id="q1", question="one", answers=["1"]), SimpleNamespace(id="q2", question="two", answers=["2"])]

    def answer(q, only):  # the systems run in a per-question shuffled order
        return [{"id": q.id, "system": s, "prediction": f"{q.id}-{s}"} for s in (["c", "a", "b"] if q.id == "q1" else ["b", "c", "a"])]

    store = AnswerStore(tmp_path / "store.jsonl")
    fresh, reused = answer_all(questions, dict.fromkeys(systems, "k"), store, answer)
    again, reused_again = answer_all(questions, dict.fromkeys(systems, "k"), AnswerStore(tmp_path / "store.jsonl"), answer)
    assert (reused, reused_again) == (0, 2)
    assert fresh == again and [r["system"] for r in fresh] == systems * 2


def test_an_edited_question_or_gold_is_answered_again(tmp_path: Path) -> None:
    """The store's key holds each question's text and gold (issue 46: the id alone reused stale answers)."""
    path = tmp_path / "answer_store.jsonl"
    answer_all(QUESTIONS, keys("s"), AnswerStore(path), Counting())
    edited = [QUESTIONS[0], Q("q1", "question 1, reworded"), Q("q2", "question 2", ("new gold",)), QUESTIONS[3]]
    again = Counting()
    rows, reused = answer_all(edited, keys("s"), AnswerStore(path), again)
    assert again.asked == ["q1", "q2"] and reused == 2
    assert [r["prediction"] for r in rows if r["id"] == "q1"] == ["question 1, reworded:no_retrieval",
                                                                  "question 1, reworded:single_best"]
