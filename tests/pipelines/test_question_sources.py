"""data_prep with passage files and with written or logged questions: the corpus and the splits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from synthesis_corpus import PASSAGES, write_passage_folder

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.sources import in_log, read_log, source_of
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions
from ragfolio.pipelines.question_synthesis.nodes import synthesize_questions


@pytest.fixture
def mixed(tiny_dir: Path, tmp_path: Path) -> Path:
    """The tiny question files and a passage file in one folder."""
    folder = write_passage_folder(tmp_path / "mixed")
    for path in tiny_dir.glob("*.jsonl"):
        shutil.copy(path, folder)
    return folder


def test_a_folder_of_passages_only_gives_no_labelled_question_and_a_synthetic_corpus(tmp_path: Path) -> None:
    params = {"raw_dir": str(write_passage_folder(tmp_path / "docs"))}
    questions = load_questions(params)
    assert questions == []
    corpora = build_corpora(questions, params)
    assert corpora.mode == "union" and dict(corpora.datasets) == {"synthetic": "union"}
    assert list(corpora.corpora["union"].titles) == [t for t, _ in PASSAGES]


def test_passages_beside_questions_join_the_union_corpus(mixed: Path, tiny_dir: Path) -> None:
    params = {"raw_dir": str(mixed), "test_fraction": 0.3, "seed": 1}
    questions = load_questions(params)
    assert questions == load_questions({**params, "raw_dir": str(tiny_dir)})  # labelled: the passage file is no question
    corpus = build_corpora(questions, params).corpora["union"]
    plain = build_corpora(questions, {**params, "raw_dir": str(tiny_dir)}).corpora["union"]
    assert len(corpus) == len(plain) + len(PASSAGES) and corpus.titles[-len(PASSAGES):] == tuple(t for t, _ in PASSAGES)


def test_with_synthetic_questions_every_labelled_question_is_test(mixed: Path) -> None:
    params = {"raw_dir": str(mixed), "questions": "synthetic"}
    questions = load_questions(params)
    assert len(questions) == 14 and {q["split"] for q in questions} == {"test"}
    corpora = build_corpora(questions, params)
    assert set(corpora.datasets) == {"hotpotqa", "musique", "synthetic"}


def test_with_a_query_log_the_logged_labelled_questions_are_left_out(mixed: Path, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (mixed / "musique.jsonl").read_text().splitlines()]
    log = tmp_path / "log.txt"
    log.write_text(f"{rows[0]['question'].upper()}\nA question nobody labelled?\n")  # case and spacing do not matter
    prep = {"raw_dir": str(mixed), "questions": "log"}
    labelled = load_questions(prep)
    assert len(labelled) == 14 and {q["split"] for q in labelled} == {"test"}
    corpora = build_corpora(labelled, prep)
    assert source_of(corpora.datasets) == "log"
    logged = read_log(log)
    kept = [q for q in labelled if not in_log(q["question"], logged)]
    assert len(kept) == 13 and rows[0]["id"] not in {q["id"] for q in kept}


def test_log_needs_a_log_file_and_synthetic_needs_one_corpus(mixed: Path, tmp_path: Path) -> None:
    prep = {"raw_dir": str(mixed), "questions": "log"}
    labelled = load_questions(prep)
    with pytest.raises(ValueError, match="question_synthesis.log_file"):
        synthesize_questions(labelled, build_corpora(labelled, prep), RecordStore(None), ArrayCache(tmp_path / "c"), {})
    with pytest.raises(ValueError, match="corpus: union"):
        load_questions({"raw_dir": str(mixed), "questions": "synthetic", "corpus": "per_dataset"})


def test_labelled_on_passages_only_fails_naming_the_setting(tmp_path: Path) -> None:
    params = {"raw_dir": str(write_passage_folder(tmp_path / "docs")), "questions": "labelled"}
    with pytest.raises(ValueError, match="data_prep.questions=synthetic"):
        load_questions(params)
