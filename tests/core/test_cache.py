import numpy as np

from ragfolio.core.cache import ArrayCache, fingerprint


def test_cache_computes_once_and_keys_by_content(tmp_path) -> None:
    cache = ArrayCache(tmp_path / "c")
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"x": np.arange(3)}

    first = cache.get_or_compute("ns", {"a": 1}, compute)
    again = cache.get_or_compute("ns", {"a": 1}, compute)
    other = cache.get_or_compute("ns", {"a": 2}, compute)
    assert len(calls) == 2
    np.testing.assert_array_equal(first["x"], again["x"])
    np.testing.assert_array_equal(other["x"], [0, 1, 2])
    assert not list((tmp_path / "c").rglob("*.tmp"))


def test_disabled_cache_writes_nothing(tmp_path) -> None:
    cache = ArrayCache(tmp_path / "c", enabled=False)
    cache.get_or_compute("ns", {}, lambda: {"x": np.zeros(1)})
    assert not (tmp_path / "c").exists()


def test_fingerprint_is_order_sensitive() -> None:
    assert fingerprint(["a", "b"]) != fingerprint(["b", "a"])
    assert fingerprint(["ab"]) != fingerprint(["a", "b"])


def test_read_only_view_loads_but_never_writes(tmp_path) -> None:
    cache = ArrayCache(tmp_path / "c")
    cache.get_or_compute("ns", {"a": 1}, lambda: {"x": np.arange(3)})
    reader = cache.reader()
    calls = []
    stored = reader.get_or_compute("ns", {"a": 1}, lambda: calls.append(1) or {"x": np.zeros(3)})
    np.testing.assert_array_equal(stored["x"], np.arange(3))
    assert calls == []
    reader.get_or_compute("ns", {"a": 2}, lambda: {"x": np.ones(2)})
    assert not reader.path_for("ns", {"a": 2}).exists()


def test_corpus_reader_serves_corpus_parts_only(tmp_path) -> None:
    """A timed run reads the stored passage embeddings but computes every query's parts itself."""
    cache = ArrayCache(tmp_path)
    stored = {"emb": np.ones((2, 3), dtype=np.float32)}
    for namespace in ("passage_embeddings", "query_embeddings", "base"):
        cache.get_or_compute(namespace, {"k": 1}, lambda: stored)
    reader = cache.corpus_reader()
    fresh = {"emb": np.zeros((2, 3), dtype=np.float32)}
    assert reader.get_or_compute("passage_embeddings", {"k": 1}, lambda: fresh)["emb"].sum() == 6
    assert reader.get_or_compute("query_embeddings", {"k": 1}, lambda: fresh)["emb"].sum() == 0
    assert reader.get_or_compute("base", {"k": 2}, lambda: fresh)["emb"].sum() == 0
    assert not reader.path_for("base", {"k": 2}).exists()  # and writes nothing
