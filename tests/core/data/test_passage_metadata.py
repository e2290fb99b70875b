"""Passage ids and metadata: read from passage files, kept by the corpus, fingerprinted only when present."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragfolio.core.data.loading import load_passage_file, load_passage_files
from ragfolio.core.data.metadata import MetadataError, canonical_json, validate_metadata
from ragfolio.core.data.passages import Corpus, PassageRow, build_corpus
from ragfolio.core.data.records import Context, DataFormatError, Question, passage_id
from ragfolio.core.data.row_errors import DataFormatErrors

META = {"source": "handbook", "year": 2021, "score": 0.5, "public": True, "updated": "2024-05-01", "tags": ["hr", 3]}


def _write(path: Path, *rows: object) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def _old_fingerprint(ids: tuple[str, ...], titles: tuple[str, ...], texts: tuple[str, ...]) -> str:
    """The fingerprint as it was computed before metadata: sha256 over id, title, text, each NUL-ended."""
    digest = hashlib.sha256()
    for row in zip(ids, titles, texts, strict=True):
        for value in row:
            digest.update(value.encode("utf-8") + b"\x00")
    return digest.hexdigest()[:20]


def _question(*texts: str) -> Question:
    return Question("q1", "d", "Q?", ("a",), None, tuple(Context(f"T{i}", x, True) for i, x in enumerate(texts)))


# --- metadata rules


def test_valid_metadata_is_copied_with_its_lists() -> None:
    checked = validate_metadata(META)
    assert checked == META and checked is not META and checked["tags"] is not META["tags"]
    assert validate_metadata({"tags": ("a", "b")}) == {"tags": ["a", "b"]}
    assert canonical_json({"b": 1, "a": [True, "é"]}) == canonical_json({"a": [True, "é"], "b": 1}) == '{"a":[true,"é"],"b":1}'


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ([1, 2], "metadata", "expected an object, got list"),
        ({"": 1}, "metadata", "keys must be non-empty strings"),
        ({1: "x"}, "metadata", "keys must be non-empty strings"),
        ({"year": None}, "metadata.year", "null is not allowed"),
        ({"owner": {"name": "x"}}, "metadata.owner", "got an object"),
        ({"tags": ["a", ["b"]]}, "metadata.tags[1]", "got list"),
        ({"tags": ["a", None]}, "metadata.tags[1]", "null is not allowed"),
        ({"score": float("nan")}, "metadata.score", "must be a finite float64 number"),
        ({"score": 10**400}, "metadata.score", "must be a finite float64 number"),
        ({"id": "x"}, "metadata.id", "the key 'id' is reserved"),
        ({"title": "x"}, "metadata.title", "the key 'title' is reserved"),
    ],
)
def test_bad_metadata_names_the_key(value: object, field: str, reason: str) -> None:
    with pytest.raises(MetadataError) as info:
        validate_metadata(value)
    assert info.value.field == field and reason in info.value.reason


# --- passage files


def test_passage_file_keeps_ids_and_metadata(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "a.jsonl",
        {"title": "T", "text": "one", "id": "doc-1", "metadata": META},
        {"title": "T", "text": "two"},
        {"title": "T", "text": "three", "id": None, "metadata": None},
        {"title": "T", "text": "four", "metadata": {}},
    )
    rows = load_passage_file(path)
    assert rows == [PassageRow("T", "one", "doc-1", META), PassageRow("T", "two"), PassageRow("T", "three"),
                    PassageRow("T", "four")]
    assert (rows[0].source, rows[0].line, rows[1].line) == (str(path), 1, 2)


@pytest.mark.parametrize(
    ("row", "field", "reason"),
    [
        ({"title": "T", "text": "x", "id": 7}, "id", "expected a string, got int"),
        ({"title": "T", "text": "x", "id": " "}, "id", "must be a non-empty string"),
        ({"title": "T", "text": "x", "metadata": "public"}, "metadata", "expected an object, got str"),
        ({"title": "T", "text": "x", "metadata": {"year": None}}, "metadata.year", "null is not allowed"),
        ({"title": "T", "text": "x", "metadata": {"a": {"b": 1}}}, "metadata.a", "got an object"),
        ({"title": "T", "text": "x", "metadata": {"tags": [[1]]}}, "metadata.tags[0]", "got list"),
        ('{"title": "T", "text": "x", "metadata": {"score": NaN}}', "metadata.score", "finite float64 number"),
    ],
)
def test_a_bad_id_or_metadata_names_file_line_and_field(tmp_path: Path, row: object, field: str, reason: str) -> None:
    path = _write(tmp_path / "a.jsonl", {"title": "T", "text": "fine", "id": "ok"}, row)
    with pytest.raises(DataFormatError) as info:
        load_passage_file(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, field)
    assert reason in info.value.reason and f"a.jsonl:2: field '{field}'" in str(info.value)


def test_every_bad_metadata_line_is_reported(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", {"title": "T", "text": "x", "metadata": {"k": None}})
    b = _write(tmp_path / "b.jsonl", {"title": "T", "text": "y"}, {"title": "T", "text": "z", "id": ""})
    with pytest.raises(DataFormatErrors) as info:
        load_passage_files([a, b])
    assert [(Path(e.path).name, e.line, e.field) for e in info.value.errors] == [("a.jsonl", 1, "metadata.k"),
                                                                                 ("b.jsonl", 2, "id")]


# --- build_corpus


def test_passages_without_ids_or_metadata_build_the_corpus_they_built_before() -> None:
    corpus = build_corpus([_question("Gold.")], [PassageRow("E", "Extra."), ("E", "Extra. "), PassageRow("F", "Other.")])
    assert corpus.ids == (passage_id("T0", "Gold."), passage_id("E", "Extra."), passage_id("F", "Other."))
    assert corpus.metadata == () and corpus == build_corpus([_question("Gold.")], [("E", "Extra."), ("F", "Other.")])


def test_a_user_id_names_its_row_and_metadata_rides_along() -> None:
    corpus = build_corpus([], [PassageRow("A", "a", "doc-a", {"year": 2020}), PassageRow("B", "b")])
    assert corpus.ids == ("doc-a", passage_id("B", "b")) and corpus.metadata == ({"year": 2020}, None)
    again = build_corpus([], [PassageRow("B", "b"), PassageRow("A", "a", "doc-a", {"year": 2020})])
    assert again.row_of()["doc-a"] == 1  # the id does not depend on the order, only the row does


def test_a_context_keeps_its_content_id_and_takes_the_metadata() -> None:
    question = _question("Gold text.")
    corpus = build_corpus([question], [PassageRow("T0", "Gold  text.", "doc-gold", {"k": "v"})])
    assert corpus.ids == question.gold_passage_ids() and corpus.metadata == ({"k": "v"},)


def test_copies_without_an_id_join_the_user_id_row_whatever_their_order() -> None:
    for passages in ([("A", "a"), PassageRow("A", "a", "doc-a", {"k": 1})],
                     [PassageRow("A", "a", "doc-a", {"k": 1}), ("A", " a ")]):
        corpus = build_corpus([], passages)
        assert corpus.ids == ("doc-a",) and corpus.metadata == ({"k": 1},)


def test_repeats_of_an_id_must_be_the_same_passage(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", {"title": "A", "text": "a", "id": "doc-1"})
    b = _write(tmp_path / "b.jsonl", {"title": "B", "text": "b"}, {"title": "A", "text": "not a", "id": "doc-1"})
    with pytest.raises(DataFormatError) as info:
        build_corpus([], load_passage_files([a, b]))
    assert (info.value.path, info.value.line, info.value.field) == (str(b), 2, "id")
    assert f"'doc-1' is also given to a different passage at {a}:1" in str(info.value)
    same = build_corpus([], load_passage_files([a, a]))
    assert same.ids == ("doc-1",)
    with pytest.raises(ValueError, match=r"<passages>:passage 1: field 'id': passage id 'x' is also given"):
        build_corpus([], [PassageRow("A", "a", "x"), PassageRow("B", "b", "x")])


def test_an_id_given_to_a_context_and_to_another_passage_is_caught() -> None:
    with pytest.raises(DataFormatError, match="'doc' is also given to a different passage"):
        build_corpus([_question("Gold.")], [PassageRow("T0", "Gold.", "doc"), PassageRow("X", "x", "doc")])
    taken = passage_id("T0", "Gold.")
    with pytest.raises(DataFormatError, match=f"'{taken}' is also the id of a different passage"):
        build_corpus([_question("Gold.")], [PassageRow("X", "x", taken)])


def test_one_passage_given_two_metadata_objects_is_caught() -> None:
    rows = [PassageRow("A", "a", "doc", {"k": 1, "j": 2}, "a.jsonl", 1), PassageRow("A", "a", "doc", {"j": 2, "k": 1})]
    assert build_corpus([], rows).metadata == ({"k": 1, "j": 2},)  # the same object, keys in another order
    with pytest.raises(DataFormatError, match=r"field 'metadata': differs from the metadata given .* at a\.jsonl:1"):
        build_corpus([], [rows[0], PassageRow("A", "a", "doc", {"k": 2}, "b.jsonl", 4)])


def test_two_ids_with_the_same_text_stay_two_rows() -> None:
    assert build_corpus([], [PassageRow("A", "a", "x"), PassageRow("A", "a", "y")]).ids == ("x", "y")


# --- Corpus


def test_fingerprint_without_metadata_is_the_old_one() -> None:
    ids, titles, texts = ("p1", "p2"), ("A", "B"), ("a", "b")
    plain = Corpus(ids, titles, texts)
    assert plain.fingerprint == _old_fingerprint(ids, titles, texts) == "f7567038ac56c0e23ac0"  # as the code before metadata gave it
    assert Corpus(ids, titles, texts, (None, None)).fingerprint == plain.fingerprint
    assert Corpus(ids, titles, texts, (None, {})) == plain and Corpus(ids, titles, texts, (None, {})).metadata == ()


def test_metadata_enters_the_fingerprint_canonically() -> None:
    ids, titles, texts = ("p1", "p2"), ("A", "B"), ("a", "b")
    tagged = Corpus(ids, titles, texts, ({"k": 1, "j": [1, "x"]}, None))
    assert tagged.fingerprint != Corpus(ids, titles, texts).fingerprint
    assert tagged.fingerprint == Corpus(ids, titles, texts, ({"j": [1, "x"], "k": 1}, None)).fingerprint
    assert tagged.fingerprint != Corpus(ids, titles, texts, ({"k": 2, "j": [1, "x"]}, None)).fingerprint
    assert tagged.fingerprint != Corpus(ids, titles, texts, (None, {"k": 1, "j": [1, "x"]})).fingerprint
    assert tagged.fingerprint != Corpus(ids, titles, texts, ({"k": True, "j": [1, "x"]}, None)).fingerprint
    hash(tagged)  # still hashable: metadata is left out of the hash


def test_records_round_trip_with_metadata_on_the_rows_that_have_it() -> None:
    corpus = Corpus(("p1", "p2"), ("A", "B"), ("a", "b"), (None, META))
    records = corpus.to_records()
    assert records == [{"id": "p1", "title": "A", "text": "a"}, {"id": "p2", "title": "B", "text": "b", "metadata": META}]
    records[1]["metadata"]["tags"].append("changed")  # the records are copies
    assert corpus.metadata[1]["tags"] == ["hr", 3]
    back = Corpus.from_records(json.loads(json.dumps(corpus.to_records())))
    assert back == corpus and back.fingerprint == corpus.fingerprint
    assert "metadata" not in Corpus(("p1",), ("A",), ("a",)).to_records()[0]


def test_from_records_names_the_record_and_key_of_bad_metadata() -> None:
    good = {"title": "A", "text": "a"}
    with pytest.raises(DataFormatError) as info:
        Corpus.from_records([good, {"title": "B", "text": "b", "metadata": {"owner": {"name": "x"}}}])
    assert (info.value.line, info.value.field) == ("record 1", "metadata.owner")
    assert Corpus.from_records([{**good, "metadata": None}]).metadata == ()


def test_the_constructor_checks_metadata() -> None:
    with pytest.raises(ValueError, match=r"metadata \(1\) must have one entry per passage \(2\)"):
        Corpus(("p1", "p2"), ("A", "B"), ("a", "b"), ({"k": 1},))
    with pytest.raises(ValueError, match=r"row 1 \(passage id 'p2'\): field 'metadata.k': null"):
        Corpus(("p1", "p2"), ("A", "B"), ("a", "b"), (None, {"k": None}))
