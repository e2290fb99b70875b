"""Replacing a folder as a whole: the new one in place, or the old one untouched and nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragfolio.core.folder_swap import replace_folder


def _write(text: str):
    def write(folder: Path) -> str:
        (folder / "file.txt").write_text(text)
        return text
    return write


def test_the_new_folder_replaces_the_old_one_whole(tmp_path: Path) -> None:
    target = tmp_path / "models" / "bundle"
    assert replace_folder(target, _write("one")) == "one"
    (target / "stale.txt").write_text("from the old folder")
    assert replace_folder(target, _write("two")) == "two"
    assert sorted(p.name for p in target.iterdir()) == ["file.txt"] and (target / "file.txt").read_text() == "two"
    assert target.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in target.parent.iterdir()] == ["bundle"]


def test_a_failing_writer_leaves_the_old_folder_and_no_half_written_one(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    replace_folder(target, _write("one"))

    def fail(folder: Path) -> None:
        (folder / "file.txt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        replace_folder(target, fail)
    assert (target / "file.txt").read_text() == "one" and [p.name for p in tmp_path.iterdir()] == ["bundle"]
