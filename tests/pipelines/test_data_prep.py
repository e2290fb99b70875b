import json
import logging
import shutil

import pytest

from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions


def test_split_without_test_dir_is_seeded_per_dataset(tiny_dir) -> None:
    params = {"raw_dir": str(tiny_dir), "test_fraction": 0.3, "seed": 1}
    first, again = load_questions(params), load_questions(params)
    assert first == again
    for dataset in ("hotpotqa", "musique"):
        splits = {r["split"] for r in first if r["dataset"] == dataset}
        assert splits == {"train", "test"}


def test_dataset_without_contexts_is_logged_and_left_out(tiny_dir, tmp_path, caplog) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(tiny_dir, raw)
    shutil.copy(tiny_dir.parent / "tiny_triviaqa" / "triviaqa.jsonl", raw)
    with caplog.at_level(logging.WARNING):
        corpora = build_corpora(load_questions({"raw_dir": str(raw)}))
    assert set(corpora) == {"hotpotqa", "musique"}
    assert "triviaqa" in caplog.text and "left out of retrieval metrics" in caplog.text


def test_test_dir_makes_every_raw_row_train(tiny_dir, tmp_path) -> None:
    test = tmp_path / "test"
    test.mkdir()
    rows = (tiny_dir / "hotpotqa.jsonl").read_text().splitlines()
    (test / "extra.jsonl").write_text(rows[0].replace('"id": "', '"id": "copy-', 1) + "\n")
    records = load_questions({"raw_dir": str(tiny_dir), "test_dir": str(test)})
    assert [r["id"] for r in records if r["split"] == "test"] == ["copy-" + json.loads(rows[0])["id"]]
    assert sum(r["split"] == "train" for r in records) == 14


def test_same_id_in_raw_and_test_dir_is_an_error(tiny_dir) -> None:
    with pytest.raises(ValueError, match="both raw_dir and test_dir"):
        load_questions({"raw_dir": str(tiny_dir), "test_dir": str(tiny_dir)})


def test_parameter_typo_fails_with_its_name(tiny_dir) -> None:
    with pytest.raises(ValueError, match="test_fractoin"):
        load_questions({"raw_dir": str(tiny_dir), "test_fractoin": 0.2})
