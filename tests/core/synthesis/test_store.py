"""The resumable record store: last record per key wins, read back from disk, a killed run's line skipped."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ragfolio.core.synthesis.store import RecordStore, settings_hash


def test_put_get_and_the_last_record_of_a_key_wins(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "deep" / "store.jsonl")
    assert store.get("a") is None and len(store) == 0 and not (tmp_path / "deep").exists()  # nothing made until a put
    store.put({"key": "a", "v": 1})
    store.put({"key": "b", "v": 2})
    store.put({"key": "a", "v": 3})
    assert store.get("a") == {"key": "a", "v": 3} and len(store) == 2
    again = RecordStore(tmp_path / "deep" / "store.jsonl")  # read back from disk
    assert again.get("a") == {"key": "a", "v": 3} and again.get("b") == {"key": "b", "v": 2} and len(again) == 2
    assert len((tmp_path / "deep" / "store.jsonl").read_text().splitlines()) == 3  # appended, never rewritten


def test_no_path_keeps_records_in_memory_only(tmp_path: Path) -> None:
    store = RecordStore(None)
    store.put({"key": "a"})
    assert store.get("a") == {"key": "a"} and list(tmp_path.iterdir()) == []


def test_a_truncated_last_line_is_skipped_with_a_warning_and_cut_before_the_next_record(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "store.jsonl"
    path.write_text(json.dumps({"key": "a", "v": 1}) + "\n" + '{"key": "b", "v"')  # killed mid-write
    store = RecordStore(path)
    with caplog.at_level(logging.WARNING):
        assert store.get("a") == {"key": "a", "v": 1} and store.get("b") is None
    assert f"{path}:2 is incomplete" in caplog.text
    store.put({"key": "b", "v": 2})  # made again; it must not run on from the cut line
    again = RecordStore(path)
    assert again.get("b") == {"key": "b", "v": 2} and len(again) == 2
    assert path.read_text().splitlines() == [json.dumps({"key": "a", "v": 1}), json.dumps({"key": "b", "v": 2})]


def test_a_whole_last_record_without_its_newline_is_kept_and_ended(tmp_path: Path) -> None:
    path = tmp_path / "store.jsonl"
    path.write_text(json.dumps({"key": "a", "v": 1}))
    store = RecordStore(path)
    assert store.get("a") == {"key": "a", "v": 1}
    store.put({"key": "b", "v": 2})
    assert len(RecordStore(path)) == 2


def test_a_bad_line_before_the_last_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "store.jsonl"
    path.write_text("\n".join([json.dumps({"key": "a"}), "not json", json.dumps({"no_key": 1}),
                               json.dumps({"key": "c"})]) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:2: not a stored record"):
        RecordStore(path).get("a")
    path.write_text("\n".join([json.dumps({"key": "a"}), json.dumps({"no_key": 1}), json.dumps({"key": "c"})]) + "\n")
    with pytest.raises(ValueError, match=rf"{path}:2: not a stored record"):
        len(RecordStore(path))


def test_settings_hash_is_order_free_and_tells_settings_apart() -> None:
    assert settings_hash({"a": 1, "b": [1, 2]}) == settings_hash({"b": [1, 2], "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})
    assert len(settings_hash({"path": Path("x")})) == 16  # non-JSON values by str
