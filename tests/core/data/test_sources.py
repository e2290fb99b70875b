"""Where a run's questions come from: ``auto`` read from the folder, the passages-only error, query logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from synthesis_corpus import write_passage_folder

from ragfolio.core.data.loading import file_kind, split_folder
from ragfolio.core.data.records import DataFormatError
from ragfolio.core.data.sources import read_log, resolve_source


def test_file_kind_and_split_folder_tell_passage_files_from_question_files(tiny_dir: Path, tmp_path: Path) -> None:
    folder = write_passage_folder(tmp_path / "mixed")
    shutil.copy(tiny_dir / "musique.jsonl", folder)
    (folder / "aa_blank_first.jsonl").write_text('\n{"title": "T", "text": "x", "id": "p1", "metadata": {}}\n')
    assert file_kind(folder / "company.jsonl") == "passages" and file_kind(folder / "musique.jsonl") == "questions"
    assert file_kind(folder / "aa_blank_first.jsonl") == "passages"  # the first non-blank row decides
    questions, passages = split_folder(folder)
    assert [p.name for p in questions] == ["musique.jsonl"]
    assert [p.name for p in passages] == ["aa_blank_first.jsonl", "company.jsonl"]


def test_auto_is_synthetic_on_passages_and_labelled_on_questions(tiny_dir: Path, tmp_path: Path) -> None:
    passages = write_passage_folder(tmp_path / "docs")
    assert resolve_source("auto", passages) == "synthetic"
    assert resolve_source("auto", tiny_dir) == "labelled"
    assert resolve_source("synthetic", tiny_dir) == "synthetic"  # asked for: written beside the labelled ones
    assert resolve_source("log", passages) == "log"


def test_labelled_on_a_folder_of_passages_says_which_setting_writes_questions(tmp_path: Path) -> None:
    passages = write_passage_folder(tmp_path / "docs")
    with pytest.raises(ValueError, match=r"1 passage file\(s\).*data_prep\.questions=synthetic"):
        resolve_source("labelled", passages)
    with pytest.raises(ValueError, match="must be one of"):
        resolve_source("generated", passages)


def test_read_log_reads_text_lines_once_each(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("Who founded Larkspur?\n\n  who   founded Larkspur? \nWhen did Harbour Works open?\n")
    assert read_log(log) == [{"id": "log-1", "question": "Who founded Larkspur?"},
                             {"id": "log-4", "question": "When did Harbour Works open?"}]


def test_read_log_reads_jsonl_with_optional_ids(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    rows = [{"question": "Who founded Larkspur?", "id": 7}, {"question": "When did Harbour Works open?"}]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert read_log(log) == [{"id": "7", "question": "Who founded Larkspur?"},
                             {"id": "log-2", "question": "When did Harbour Works open?"}]


@pytest.mark.parametrize(("line", "field"), [("{not json", "<row>"), ('{"q": "x"}', "question"),
                                             ('{"question": ""}', "question"), ('["x"]', "question")])
def test_a_bad_jsonl_row_of_a_log_names_its_file_and_line(tmp_path: Path, line: str, field: str) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "Who founded Larkspur?"}) + "\n" + line + "\n")
    with pytest.raises(DataFormatError, match=rf"{log}:2: field '{field}'"):
        read_log(log)


def test_an_empty_log_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "log.txt").write_text("\n\n")
    with pytest.raises(DataFormatError, match="no question"):
        read_log(tmp_path / "log.txt")
    with pytest.raises(FileNotFoundError):
        read_log(tmp_path / "missing.txt")
