"""Every bad row of a read is reported in one error (up to a limit), and a cut-short last row says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragfolio.core.data.loading import load_folder, load_jsonl, load_passage_file, load_passage_folder
from ragfolio.core.data.records import DataFormatError
from ragfolio.core.data.row_errors import MAX_LISTED, DataFormatErrors, raise_collected

ROW = {"id": "q1", "dataset": "teamwiki", "question": "Who?", "answers": ["A"], "type": None,
       "contexts": [{"title": "T", "text": "A did it.", "is_supporting": True}]}


def _row(**over: object) -> str:
    return json.dumps({**ROW, **over})


def test_every_bad_row_of_a_file_is_listed_in_reading_order(tmp_path: Path) -> None:
    path = tmp_path / "teamwiki.jsonl"
    lines = [_row(), "not json", _row(id="q2"), _row(id="q3", answers="A"), _row(id="q2"), _row(id="q4")]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatErrors) as info:
        load_jsonl(path)
    error = info.value
    assert [(e.line, e.field) for e in error.errors] == [(2, "<row>"), (4, "answers"), (5, "id")]
    assert (error.path, error.line, error.field) == (str(path), 2, "<row>")  # the first bad row's, as before
    assert str(error) == (
        f"3 bad rows: {path}:2: field '<row>': invalid JSON at column 1: Expecting value; "
        f"{path}:4: field 'answers': expected a list, got str; "
        f"{path}:5: field 'id': duplicate id 'q2' (first on line 3)"
    )
    assert isinstance(error, DataFormatError) and "\n" not in str(error)  # still one line for `kedro run`


def test_the_list_stops_at_the_limit_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "teamwiki.jsonl"
    path.write_text("".join(_row(id=f"q{i}", question="") + "\n" for i in range(MAX_LISTED + 5)))
    with pytest.raises(DataFormatErrors) as info:
        load_jsonl(path)
    message = str(info.value)
    assert len(info.value.errors) == MAX_LISTED + 5 and message.startswith(f"{MAX_LISTED + 5} bad rows: ")
    assert message.count("field 'question'") == MAX_LISTED and message.endswith("; and 5 more")


def test_a_last_row_cut_short_says_it_looks_truncated(tmp_path: Path) -> None:
    path = tmp_path / "teamwiki.jsonl"
    path.write_text(_row() + "\n" + _row(id="q2")[:40])
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert str(info.value).startswith(f"{path}:2: field '<row>': the row looks truncated (the file's last line, "
                                      "without a newline): invalid JSON at column")
    path.write_text(_row() + "\n" + '{"id": "q2", "question": "tab\there"}\n')  # a bad row with its newline
    with pytest.raises(DataFormatError, match="Invalid control character") as info:
        load_jsonl(path)
    assert "truncated" not in str(info.value)
    path.write_text(_row() + "\n" + _row(id="q2"))  # a whole last row without a newline is fine
    assert [q.id for q in load_jsonl(path)] == ["q1", "q2"]


def test_a_folder_reports_the_bad_rows_of_all_its_files(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(_row() + "\n" + _row(id="q2", contexts={}) + "\n")
    (tmp_path / "b.jsonl").write_text(_row() + "\n" + "[1, 2]\n")
    with pytest.raises(DataFormatErrors) as info:
        load_folder(tmp_path)
    assert [(Path(e.path).name, e.line, e.field) for e in info.value.errors] == [
        ("a.jsonl", 2, "contexts"), ("b.jsonl", 1, "id"), ("b.jsonl", 2, "<row>"),
    ]
    assert f"duplicate id 'q1' (first at {tmp_path / 'a.jsonl'}:1)" in str(info.value)


def test_passage_files_report_every_bad_line(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"title": "T", "text": "ok"}\n{"title": "T"}\n{"title": 3, "text": "x"}\n')
    (tmp_path / "b.jsonl").write_text('{"title": "T", "text": ""}\n{"title": "T", "te')
    with pytest.raises(DataFormatErrors) as info:
        load_passage_file(tmp_path / "a.jsonl")
    assert [(e.line, e.field) for e in info.value.errors] == [(2, "text"), (3, "title")]
    with pytest.raises(DataFormatErrors) as info:
        load_passage_folder(tmp_path)
    assert [(Path(e.path).name, e.line) for e in info.value.errors] == [("a.jsonl", 2), ("a.jsonl", 3), ("b.jsonl", 1), ("b.jsonl", 2)]
    assert "looks truncated" in info.value.errors[-1].reason


def test_raise_collected_raises_nothing_one_error_as_it_is_or_all_as_one() -> None:
    raise_collected([])
    one = DataFormatError("f.jsonl", 3, "answers", "expected a list, got str")
    with pytest.raises(DataFormatError) as info:
        raise_collected([one])
    assert info.value is one
    with pytest.raises(DataFormatErrors, match=r"^2 bad rows: f.jsonl:3: .*; f.jsonl:4: field 'id': missing$"):
        raise_collected([one, DataFormatError("f.jsonl", 4, "id", "missing")])
