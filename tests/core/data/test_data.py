"""Tests for ragfolio.core.data.records: question records, errors, passage ids and the corpus."""

from __future__ import annotations

import dataclasses
import json

import pytest
from records import row

from ragfolio.core.data.passages import Corpus, build_corpus
from ragfolio.core.data.records import Context, DataFormatError, Question, normalize_whitespace, passage_id

# --- records -----------------------------------------------------------------------------------


def test_to_record_round_trips_and_drops_extra_keys() -> None:
    q = Question.from_record(row("q1", sources=["x"]))
    rec = q.to_record()
    assert set(rec) == {"id", "dataset", "question", "answers", "type", "contexts"}
    assert Question.from_record(json.loads(json.dumps(rec))) == q


def test_data_format_error_is_a_value_error() -> None:
    err = DataFormatError("f.jsonl", 4, "answers", "bad")
    assert isinstance(err, ValueError) and str(err) == "f.jsonl:4: field 'answers': bad"


# --- passages and corpus -----------------------------------------------------------------------


def test_passage_id_is_stable_and_content_based() -> None:
    assert passage_id("Title", "Some text.") == "p140634080a578f30"  # sha1("Title\nSome text.")
    assert passage_id("Title", "Some text.") == Context("Title", "Some text.", False).passage_id
    assert passage_id("Title", "Other text.") != passage_id("Title", "Some text.")
    assert passage_id("Other", "Some text.") != passage_id("Title", "Some text.")


def test_passage_id_ignores_whitespace_differences() -> None:
    double = "First sentence.  Second sentence."  # older HotpotQA rows
    assert normalize_whitespace(f"  {double}\n\t") == "First sentence. Second sentence."
    assert passage_id("T", double) == passage_id(" T ", "First sentence. Second sentence.")
    assert passage_id("T", double) == passage_id("T", "First sentence.\nSecond sentence.")
    assert passage_id("T", "First sentence. Second sentence.") != passage_id("T", "First sentence.Second sentence.")


def test_gold_passage_ids_keep_order_and_drop_duplicates() -> None:
    ctx = [
        {"title": "B", "text": "b", "is_supporting": True},
        {"title": "X", "text": "x", "is_supporting": False},
        {"title": "A", "text": "a", "is_supporting": True},
        {"title": "B", "text": "b", "is_supporting": True},
    ]
    q = Question.from_record(row(contexts=ctx))
    assert q.gold_passage_ids() == (passage_id("B", "b"), passage_id("A", "a"))


def test_build_corpus_deduplicates_in_order_of_first_appearance() -> None:
    shared = {"title": "S", "text": "shared", "is_supporting": False}
    a = {"title": "A", "text": "a", "is_supporting": True}
    a2 = {"title": "A", "text": "a2", "is_supporting": False}
    q1 = Question.from_record(row("q1", contexts=[a, shared]))
    q2 = Question.from_record(row("q2", contexts=[{**shared, "is_supporting": True}, a2]))
    corpus = build_corpus([q1, q2])
    assert corpus.texts == ("a", "shared", "a2")
    assert corpus.ids == (passage_id("A", "a"), passage_id("S", "shared"), passage_id("A", "a2"))
    assert len(corpus) == 3
    # every gold passage is in the corpus
    rows = corpus.row_of()
    assert [rows[p] for p in q2.gold_passage_ids()] == [1]
    assert build_corpus([q1, q2]) == corpus  # stable across calls


def test_build_corpus_merges_spacing_variants_and_adds_passages() -> None:
    old = Question.from_record(row("q1", contexts=[{"title": "A", "text": "One.  Two.", "is_supporting": True}]))
    new = Question.from_record(row("q2", contexts=[{"title": "A", "text": "One. Two.", "is_supporting": True}]))
    corpus = build_corpus([old, new], [("A", "One. Two. "), ("C", "Extra passage."), ("C", "Extra  passage.")])
    assert corpus.texts == ("One.  Two.", "Extra passage.")  # the first copy's spacing is kept
    rows = corpus.row_of()
    assert [rows[g] for q in (old, new) for g in q.gold_passage_ids()] == [0, 0]


def test_corpus_fingerprint_names_its_rows_in_order() -> None:
    corpus = Corpus(ids=("p1", "p2"), titles=("A", "B"), texts=("a", "b"))
    assert len(corpus.fingerprint) == 20
    assert corpus.fingerprint == Corpus.from_records(corpus.to_records()).fingerprint
    changed = [
        Corpus(ids=("p2", "p1"), titles=("B", "A"), texts=("b", "a")),  # order
        Corpus(ids=("p1", "p2"), titles=("A", "B"), texts=("a", "b!")),  # a text
        Corpus(ids=("p1", "p3"), titles=("A", "B"), texts=("a", "b")),  # an id
        Corpus(ids=("p1",), titles=("A",), texts=("a",)),  # a passage fewer
    ]
    assert len({corpus.fingerprint, *(c.fingerprint for c in changed)}) == 5


def test_corpus_row_of_is_cached_and_corpus_is_frozen() -> None:
    corpus = Corpus(ids=("p1", "p2"), titles=("A", "B"), texts=("a", "b"))
    assert corpus.row_of() == {"p1": 0, "p2": 1}
    assert corpus.row_of() is corpus.row_of()
    with pytest.raises(dataclasses.FrozenInstanceError):
        corpus.ids = ("x",)  # type: ignore[misc]
    assert corpus == Corpus(ids=("p1", "p2"), titles=("A", "B"), texts=("a", "b"))


def test_corpus_records_round_trip_and_validation() -> None:
    corpus = Corpus(ids=("p1", "p2"), titles=("A", "B"), texts=("a", "b"))
    assert corpus.to_records()[1] == {"id": "p2", "title": "B", "text": "b"}
    assert Corpus.from_records(corpus.to_records()) == corpus
    assert Corpus.from_records([{"title": "T", "text": "x"}]).ids == (passage_id("T", "x"),)
    with pytest.raises(DataFormatError, match=r"record 1: field 'text'"):
        Corpus.from_records([{"title": "T", "text": "x"}, {"title": "U"}])
    with pytest.raises(ValueError, match="occurs more than once"):
        Corpus(ids=("p1", "p1"), titles=("A", "B"), texts=("a", "b"))
    with pytest.raises(ValueError, match="same length"):
        Corpus(ids=("p1",), titles=("A", "B"), texts=("a", "b"))
