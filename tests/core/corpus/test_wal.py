"""The update log: what append acknowledges, replay returns, whole batches only, across kills and restarts."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ragfolio.core.corpus.wal import Update, UpdateLog, UpdateLogError, fold

SRC = Path(__file__).resolve().parents[3] / "src"


def _doc(doc_id: str, text: str = "some text", **metadata: str) -> dict:
    record = {"id": doc_id, "title": f"title of {doc_id}", "text": text}
    return record | ({"metadata": dict(metadata)} if metadata else {})


def test_append_then_replay_returns_the_same_batches(tmp_path: Path) -> None:
    log = UpdateLog.open(tmp_path / "updates.jsonl", "corpus-a")
    first = log.append("upsert", documents=[_doc("p1", "héllo\nwörld \u2028"), _doc("p2", year="2024")])
    second = log.append("delete", ids=["p1"])
    assert (first.seq, second.seq) == (1, 2)
    assert isinstance(first.time, str) and first.time.endswith("+00:00")
    replayed = UpdateLog(tmp_path / "updates.jsonl").replay()
    assert replayed == [first, second]
    assert replayed[0].documents[0]["text"] == "héllo\nwörld \u2028" and replayed[0].documents[1]["metadata"] == {
        "year": "2024"}
    lines = (tmp_path / "updates.jsonl").read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[-1] == b""  # header, two batches, one line each


def test_seq_keeps_rising_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    log = UpdateLog.open(path, "corpus-a")
    for i in range(3):
        log.append("upsert", documents=[_doc(f"p{i}")])
    reopened = UpdateLog.open(path, "corpus-a")
    assert reopened.base_corpus == "corpus-a"
    assert reopened.append("delete", ids=["p0"]).seq == 4
    assert UpdateLog(path).append("delete", ids=["p1"]).seq == 5  # append reads the file first
    assert [u.seq for u in UpdateLog(path).replay()] == [1, 2, 3, 4, 5]


def test_a_torn_last_line_is_dropped_and_cut_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "updates.jsonl"
    log = UpdateLog.open(path, "corpus-a")
    log.append("upsert", documents=[_doc("p1")])
    good_size = path.stat().st_size
    whole = UpdateLog(tmp_path / "other.jsonl").append("upsert", documents=[_doc("p2"), _doc("p3")])
    line = (tmp_path / "other.jsonl").read_bytes()
    with open(path, "ab") as f:  # a kill in the middle of writing the second batch
        f.write(line[: len(line) // 2])
    with caplog.at_level(logging.WARNING, logger="ragfolio.core.corpus.wal"):
        replayed = UpdateLog(path).replay()
    assert [u.seq for u in replayed] == [1]
    assert path.stat().st_size == good_size
    assert str(path) in caplog.text and f"byte offset {good_size}" in caplog.text
    again = UpdateLog(path)
    assert again.append("upsert", documents=list(whole.documents)).seq == 2
    assert [len(u.documents) for u in UpdateLog(path).replay()] == [1, 2]


def test_a_last_line_cut_just_before_its_newline_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    log = UpdateLog.open(path, "corpus-a")
    log.append("upsert", documents=[_doc("p1")])
    log.append("upsert", documents=[_doc("p2")])
    path.write_bytes(path.read_bytes()[:-1])  # the batch was never acknowledged: its write had not returned
    assert [u.seq for u in UpdateLog(path).replay()] == [1]
    assert UpdateLog(path).append("delete", ids=["p1"]).seq == 2


def test_a_garbled_whole_last_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    UpdateLog.open(path, "corpus-a").append("upsert", documents=[_doc("p1")])
    size = path.stat().st_size
    with open(path, "ab") as f:  # what a power cut can leave: a line of zeros
        f.write(b"\0" * 40 + b"\n")
    assert len(UpdateLog(path).replay()) == 1 and path.stat().st_size == size


def test_a_corrupt_middle_line_raises_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    log = UpdateLog.open(path, "corpus-a")
    for i in range(3):
        log.append("upsert", documents=[_doc(f"p{i}")])
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:20]  # the first batch's line (line 1 is the header)
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(UpdateLogError, match=rf"{re.escape(str(path))}: line 2 is corrupt"):
        UpdateLog(path).replay()
    assert path.read_bytes() == b"\n".join(lines)  # real corruption: nothing cut


def test_a_checksum_mismatch_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    log = UpdateLog.open(path, "corpus-a")
    log.append("upsert", documents=[_doc("p1", "original text")])
    log.append("delete", ids=["p1"])
    path.write_bytes(path.read_bytes().replace(b"original text", b"tampered text"))  # still valid JSON
    with pytest.raises(UpdateLogError, match=r"line 2 is corrupt \(checksum mismatch\)"):
        UpdateLog(path).replay()
    lines = path.read_bytes().split(b"\n")
    entry = json.loads(lines[2])
    entry["seq"] = 7  # a changed seq is caught too: the checksum covers the whole entry
    path.write_bytes(b"\n".join([lines[0], lines[1].replace(b"tampered", b"original"), json.dumps(entry).encode(), b""]))
    assert [u.seq for u in UpdateLog(path).replay()] == [1]  # the last line: dropped as torn


def test_a_log_of_another_corpus_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "updates.jsonl"
    UpdateLog.open(path, "corpus-a").append("upsert", documents=[_doc("p1")])
    old = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="ragfolio.core.corpus.wal"):
        log = UpdateLog.open(path, "corpus-b")
    stale = list(tmp_path.glob("updates.jsonl.*.stale"))
    assert len(stale) == 1 and stale[0].read_bytes() == old
    assert "corpus-a" in caplog.text and stale[0].name in caplog.text
    assert log.base_corpus == "corpus-b" and log.replay() == []
    assert json.loads(path.read_text()) == {"header": {"base_corpus": "corpus-b", "format": 1}}
    assert log.append("delete", ids=["p1"]).seq == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["updates.jsonl", stale[0].name])  # no temp file


def test_a_misplaced_or_unknown_header_raises(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    path.write_text(json.dumps({"header": {"base_corpus": "a", "format": 2}}) + "\n")
    with pytest.raises(UpdateLogError, match="line 1: a header must be line 1 with format 1"):
        UpdateLog(path).replay()


def test_malformed_batches_are_refused_naming_the_field(tmp_path: Path) -> None:
    log = UpdateLog(tmp_path / "updates.jsonl")
    with pytest.raises(ValueError, match="op='replace'"):
        log.append("replace", documents=[_doc("p1")])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"documents\[1\]\.text must be a string"):
        log.append("upsert", documents=[_doc("p1"), {"id": "p2", "title": "t"}])
    with pytest.raises(ValueError, match=r"documents\[0\] has unknown keys \['body'\]"):
        log.append("upsert", documents=[_doc("p1") | {"body": "x"}])
    with pytest.raises(ValueError, match="a delete needs ids"):
        log.append("delete")
    assert not (tmp_path / "updates.jsonl").exists()  # nothing written


def test_concurrent_appends_get_distinct_seqs_in_order(tmp_path: Path) -> None:
    log = UpdateLog.open(tmp_path / "updates.jsonl", "corpus-a")
    acked: list[Update] = []

    def writer(t: int) -> None:
        for i in range(50):
            acked.append(log.append("upsert", documents=[_doc(f"t{t}-{i}")]))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    replayed = UpdateLog(tmp_path / "updates.jsonl").replay()
    assert [u.seq for u in replayed] == list(range(1, 401))
    assert sorted(acked, key=lambda u: u.seq) == replayed
    for t in range(8):  # each thread's batches in the order it appended them
        mine = [u.documents[0]["id"] for u in replayed if u.documents[0]["id"].startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}" for i in range(50)]


def test_fold_gives_the_net_state_by_id() -> None:
    def up(seq: int, *ids: str) -> Update:
        return Update(seq, "upsert", tuple(_doc(i, f"v{seq}") for i in ids), (), "")

    updates = [up(1, "a", "b"), up(2, "c"), Update(3, "delete", (), ("a",), ""), up(4, "b")]
    assert fold(updates) == {"c": _doc("c", "v2"), "a": None, "b": _doc("b", "v4")}
    assert list(fold(updates)) == ["c", "a", "b"]  # ordered by each id's last change
    assert fold([]) == {}


CHILD = """
import sys
from ragfolio.core.corpus.wal import UpdateLog
log = UpdateLog.open(sys.argv[1], "corpus-a")
i = 0
while True:
    docs = [{"id": f"b{i}-{j}", "title": "t", "text": "x" * 3000} for j in range(5)]
    update = log.append("upsert", documents=docs)
    print(update.seq, i, flush=True)
    i += 1
"""


def test_a_sigkill_loses_no_acknowledged_batch_and_applies_no_half_one(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    env = os.environ | {"PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = child.stdout.readline() if child.stdout else ""  # the child is running and appending
        assert first, f"the child wrote nothing: {child.stderr.read() if child.stderr else ''}"
        time.sleep(0.5)
    finally:
        child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=5)
    assert child.returncode == -signal.SIGKILL
    printed = (first + rest).split("\n")[:-1]  # only whole lines: the last print may itself be cut
    acked = {int(seq): int(batch) for seq, batch in (line.split() for line in printed)}
    assert len(acked) >= 2

    replayed = UpdateLog(path).replay()
    by_seq = {u.seq: u for u in replayed}
    assert [u.seq for u in replayed] == list(range(1, len(replayed) + 1))
    assert set(acked) <= set(by_seq) and len(replayed) <= max(acked) + 1  # at most one batch unacknowledged
    for seq, update in by_seq.items():
        batch = seq - 1
        assert [d["id"] for d in update.documents] == [f"b{batch}-{j}" for j in range(5)]
        assert all(d["text"] == "x" * 3000 for d in update.documents)
    assert all(by_seq[seq].documents[0]["id"] == f"b{batch}-0" for seq, batch in acked.items())
