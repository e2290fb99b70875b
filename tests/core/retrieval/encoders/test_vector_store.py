"""The passage vector store: vectors by passage key and encoder identity, shards written whole, merged past a limit."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.encoders import vector_store
from ragfolio.core.retrieval.encoders.vector_store import PassageVectorStore, encode_missing, passage_key, passage_store

IDENTITY = {"spec": {"kind": "hashing", "dim": 4}, "packages": {}, "version": [0]}


def vectors_of(texts: list[str]) -> np.ndarray:
    """A deterministic 4-d vector per text (its length and three hashed bytes)."""
    return np.array([[len(t), *passage_key(t).encode()[:3]] for t in texts], dtype=np.float32)


class Counting:
    """An encoder function that records every text it is asked for."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return vectors_of(texts)


def test_add_then_find_returns_stored_rows_at_their_positions(tmp_path) -> None:
    store = PassageVectorStore(tmp_path, IDENTITY)
    store.add([passage_key("a"), passage_key("b")], vectors_of(["a", "b"]))
    store.add([passage_key("c")], vectors_of(["c"]))
    positions, found = store.find([passage_key(t) for t in ["x", "c", "a", "y"]])
    assert positions.tolist() == [1, 2]
    np.testing.assert_array_equal(found, vectors_of(["c", "a"]))
    assert len(store) == 3 and len(store.shards()) == 2
    assert sorted(p.suffix for p in store.folder.iterdir()) == [".json", ".keys", ".keys", ".npy", ".npy"]


def test_nothing_stored_finds_nothing_and_creates_no_folder(tmp_path) -> None:
    store = PassageVectorStore(tmp_path / "store", IDENTITY)
    positions, found = store.find([passage_key("a")])
    assert positions.tolist() == [] and found is None
    assert not (tmp_path / "store").exists()


def test_another_identity_sees_nothing_of_this_ones(tmp_path) -> None:
    PassageVectorStore(tmp_path, IDENTITY).add([passage_key("a")], vectors_of(["a"]))
    other = PassageVectorStore(tmp_path, {**IDENTITY, "packages": {"torch": "9.9"}})
    assert other.find([passage_key("a")])[1] is None


def test_keys_already_stored_or_repeated_are_written_once(tmp_path) -> None:
    store = PassageVectorStore(tmp_path, IDENTITY)
    store.add([passage_key("a")], vectors_of(["a"]))
    store.add([passage_key(t) for t in ["a", "b", "b"]], vectors_of(["a", "b", "b"]))
    store.add([passage_key("a")], vectors_of(["a"]))  # nothing new: no shard
    assert len(store.shards()) == 2
    keys = [line for shard in store.shards() for line in (store.folder / f"{shard}.keys").read_text().split()]
    assert sorted(keys) == sorted([passage_key("a"), passage_key("b")])


def test_a_shard_without_its_keys_file_is_not_read(tmp_path) -> None:
    """The keys file is written last: a shard interrupted before it is invisible."""
    store = PassageVectorStore(tmp_path, IDENTITY)
    store.add([passage_key("a")], vectors_of(["a"]))
    (shard,) = store.shards()
    (store.folder / f"{shard}.keys").unlink()
    assert store.find([passage_key("a")])[1] is None


def test_past_max_shards_a_write_merges_them_into_one(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(vector_store, "MAX_SHARDS", 3)
    store = PassageVectorStore(tmp_path, IDENTITY)
    texts = [f"passage {i}" for i in range(5)]
    for text in texts[:3]:
        store.add([passage_key(text)], vectors_of([text]))
    assert len(store.shards()) == 3
    store.add([passage_key(texts[3]), passage_key(texts[4])], vectors_of(texts[3:]))
    assert len(store.shards()) == 1 and len(list(store.folder.glob("*.npy"))) == 1
    positions, found = store.find([passage_key(t) for t in texts])
    assert positions.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(found, vectors_of(texts))


def test_a_read_only_store_writes_nothing(tmp_path) -> None:
    PassageVectorStore(tmp_path, IDENTITY, read_only=True).add([passage_key("a")], vectors_of(["a"]))
    assert not any(tmp_path.iterdir())


def test_add_refuses_rows_that_do_not_match_the_keys(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"shape \(1, 4\) for 2 keys"):
        PassageVectorStore(tmp_path, IDENTITY).add([passage_key("a"), passage_key("b")], vectors_of(["a"]))


def test_encode_missing_encodes_only_what_the_store_lacks_each_text_once(tmp_path, caplog) -> None:
    store = PassageVectorStore(tmp_path, IDENTITY)
    first = Counting()
    np.testing.assert_array_equal(encode_missing(["a", "b"], first, store, "enc"), vectors_of(["a", "b"]))
    again = Counting()
    texts = ["c", "a", "d", "c", "b"]
    with caplog.at_level(logging.INFO, logger=vector_store.__name__):
        got = encode_missing(texts, again, store, "enc")
    assert again.seen == ["c", "d"]
    assert "encoding 2 of 5 passages with enc (2 cached)" in caplog.text  # "c" twice: encoded once
    np.testing.assert_array_equal(got, vectors_of(texts))
    last = Counting()
    np.testing.assert_array_equal(encode_missing(texts[::-1], last, store, "enc"), vectors_of(texts[::-1]))
    assert last.seen == []


def test_encode_missing_without_a_store_encodes_everything(tmp_path) -> None:
    counting = Counting()
    np.testing.assert_array_equal(encode_missing(["a", "b"], counting, None, "enc"), vectors_of(["a", "b"]))
    assert counting.seen == ["a", "b"] and not any(tmp_path.iterdir())


def test_the_store_follows_the_caches_settings(tmp_path) -> None:
    assert passage_store(ArrayCache(tmp_path, enabled=False), IDENTITY) is None
    assert passage_store(ArrayCache(tmp_path, namespaces=["candidates"]), IDENTITY) is None
    assert passage_store(ArrayCache(tmp_path), None) is None
    assert passage_store(ArrayCache(tmp_path).reader(), IDENTITY).read_only
    store = passage_store(ArrayCache(tmp_path).corpus_reader(), IDENTITY)
    assert store.read_only and store.folder.parent == tmp_path / "passage_vectors"
