"""The living corpus: updates applied by id, replayed from the log into the same state, encoded once."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ragfolio.core.corpus.filters import parse_filter
from ragfolio.core.corpus.live_corpus import DocumentError, LiveCorpus
from ragfolio.core.corpus.wal import UpdateLog
from ragfolio.core.data.passages import Corpus

BASE = Corpus(("p0", "p1", "p2"), ("A", "B", "C"), ("alpha text", "beta text", "gamma text"),
              ({"team": "hr"}, None, {"team": "it"}))


class Encoder:
    """Vectors from a text's crc32 (a vector depends on its text only); records every call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        self.calls.append(len(texts))
        return {"e": np.array([[zlib.crc32(t.encode()) % 97, len(t)] for t in texts], dtype=np.float32)}


def _updates(corpus: LiveCorpus) -> None:
    corpus.upsert([{"id": "n1", "title": "N", "text": "new one", "metadata": {"team": "hr"}},
                   {"id": "n2", "text": "new two"}])
    corpus.upsert([{"id": "p1", "title": "B", "text": "beta replaced"}])  # a base passage replaced
    corpus.upsert([{"id": "n1", "title": "N", "text": "new one again"}])  # an added passage replaced
    corpus.delete(["n2"])
    corpus.delete(["p2"])


def test_updates_apply_by_id_and_rows_keep_their_meaning(tmp_path) -> None:
    corpus = LiveCorpus(BASE, Encoder(), UpdateLog.open(tmp_path / "log.jsonl", BASE.fingerprint))
    _updates(corpus)
    snap = corpus.snapshot()
    assert snap.version == 5 and snap.n_rows == 3 + 4
    assert [snap.row_of(pid) for pid in ("p0", "p1", "p2", "n1", "n2")] == [0, 5, None, 6, None]
    assert snap.passage(1)[2] == "beta text" and snap.passage(5)[2] == "beta replaced"  # old row still readable
    assert snap.live.tolist() == [True, False, False, False, False, True, True]
    assert snap.status()["added"] == 2 and snap.status()["removed_from_base"] == 2
    hr = snap.allowed(parse_filter({"team": "hr"}))
    assert np.flatnonzero(hr).tolist() == [0]  # n1's replacement dropped the metadata; p0 is hr
    with pytest.raises(KeyError):
        corpus.delete(["n2"])


def test_a_restart_replays_the_log_into_the_same_state_encoding_once(tmp_path) -> None:
    first = LiveCorpus(BASE, Encoder(), UpdateLog.open(tmp_path / "log.jsonl", BASE.fingerprint))
    _updates(first)
    encoder = Encoder()
    again = LiveCorpus(BASE, encoder, UpdateLog.open(tmp_path / "log.jsonl", BASE.fingerprint))
    a, b = first.snapshot(), again.snapshot()
    assert encoder.calls == [4]  # every logged passage in one call
    assert (a.version, a.n_rows, a.live.tolist(), dict(a.rows)) == (b.version, b.n_rows, b.live.tolist(), dict(b.rows))
    np.testing.assert_array_equal(a.vectors["e"], b.vectors["e"])
    assert [d.to_record() for d in a.added] == [d.to_record() for d in b.added]


def test_a_bad_batch_applies_nothing_and_logs_nothing(tmp_path) -> None:
    log = UpdateLog.open(tmp_path / "log.jsonl", BASE.fingerprint)
    corpus = LiveCorpus(BASE, Encoder(), log)
    with pytest.raises(DocumentError, match=r"documents\[1\]\.text"):
        corpus.upsert([{"id": "x", "text": "fine"}, {"id": "y", "text": " "}])
    with pytest.raises(DocumentError, match=r"documents\[1\]\.id: repeats documents\[0\]\.id"):
        corpus.upsert([{"id": "x", "text": "a"}, {"id": "x", "text": "b"}])
    assert corpus.snapshot().version == 0 and log.replay() == []
