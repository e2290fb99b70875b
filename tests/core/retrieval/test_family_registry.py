"""Retriever families register themselves: a family defined here alone is expanded, prepared and run."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval import family
from ragfolio.core.retrieval.family import Family, Parts, SharedParts, families, get_family, register
from ragfolio.core.retrieval.pool import count_by_family, encoders_used, expand_grid, make_candidate
from ragfolio.core.retrieval.results import RetrievalResult, pad_rows
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

BUILT_INS = ["bm25", "dense", "hybrid", "ds", "mmr", "vendi", "graph", "two_hop", "cross_encoder"]


class ReverseBM25(Family):
    """The shared BM25 base's top ``depth`` passages, worst first (a toy with a known answer)."""

    name = "reverse_bm25"
    params = {"depth": 4}

    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        return SharedParts(bases=("bm25",))

    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], k: int) -> RetrievalResult:
        top = parts.base("bm25", queries).top(params["depth"])
        rows = [[int(d) for d in row[::-1] if d >= 0] for row in top.doc_ids]
        return pad_rows(rows, [[-float(rank) for rank in range(len(row))] for row in rows], k)


class CountingRunner(PoolRunner):
    """Records every first-stage retrieval."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retrievals: list[str] = []

    def retrieve_with(self, base: str, queries: Sequence[str], depth: int) -> RetrievalResult:
        self.retrievals.append(base)
        return super().retrieve_with(base, queries, depth)


@pytest.fixture
def reverse_bm25() -> Iterator[Family]:
    register(ReverseBM25)
    try:
        yield get_family("reverse_bm25")
    finally:
        unregister("reverse_bm25")


def unregister(name: str) -> None:
    """Drop a test's family from the registry (a process that never imported it has only the built-ins)."""
    del family._REGISTRY[name]


@pytest.fixture(autouse=True)
def hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    install_hashing_encoder(monkeypatch)


def test_the_built_ins_are_registered_in_report_order() -> None:
    assert list(families()) == BUILT_INS
    assert get_family("graph").result_version == 2 and get_family("bm25").result_version == 1
    assert [get_family(name).first_stage for name in BUILT_INS] == [
        None, None, None, "prefilter", "prefilter", "prefilter", "seeds", "first", "prefilter"
    ]


def test_a_registered_family_is_expanded_from_a_grid(reverse_bm25) -> None:
    candidates = expand_grid({"bm25": {"k1": 1.2}, "reverse_bm25": {"depth": [4, 6]}})
    assert [c.name for c in candidates[1:]] == ["reverse_bm25(depth=4)", "reverse_bm25(depth=6)"]
    assert candidates[1].family == "reverse_bm25" and candidates[1].params == {"depth": 4}
    assert make_candidate("reverse_bm25", {}).name == "reverse_bm25(depth=4)"
    assert count_by_family(candidates) == {**dict.fromkeys(BUILT_INS, 0), "bm25": 1, "reverse_bm25": 2}
    with pytest.raises(ValueError, match=r"reverse_bm25: unknown parameter\(s\) \['k1'\]"):
        make_candidate("reverse_bm25", {"k1": 1.0})


def test_a_registered_family_runs_through_the_pool_runner(tiny_dir, reverse_bm25) -> None:
    candidate = expand_grid({"reverse_bm25": {"depth": 6}})[0]
    runner, queries = tiny_runner(tiny_dir)
    base = runner.base("bm25", queries)
    result = runner.run(candidate, queries)  # full rows, checked by check_full
    assert result.doc_ids.shape == (len(queries), runner.num_docs)
    for q, row in enumerate(base.doc_ids[:, :6]):
        found = [int(d) for d in row[::-1] if d >= 0]
        assert result.doc_ids[q, : len(found)].tolist() == found[: runner.num_docs], q
    np.testing.assert_array_equal(runner.run(candidate, queries).doc_ids, result.doc_ids)


def test_prepare_computes_what_a_registered_family_needs(tiny_dir, reverse_bm25) -> None:
    candidate = expand_grid({"reverse_bm25": {"depth": 4}})[0]
    runner, queries = tiny_runner(tiny_dir, CountingRunner)
    runner.prepare([candidate], queries)
    assert runner.retrievals == ["bm25"]
    fresh, _ = tiny_runner(tiny_dir)
    np.testing.assert_array_equal(runner.run(candidate, queries).doc_ids, fresh.run(candidate, queries).doc_ids)
    assert runner.retrievals.count("bm25") == 1  # the run read the prepared base


def test_an_unregistered_family_is_named_with_the_registered_ones() -> None:
    register(ReverseBM25)
    assert list(families()) == [*BUILT_INS, "reverse_bm25"]
    unregister("reverse_bm25")
    assert list(families()) == BUILT_INS
    with pytest.raises(ValueError, match="family='reverse_bm25' is not one of"):
        make_candidate("reverse_bm25", {})


def test_registering_a_taken_name_raises(reverse_bm25) -> None:
    with pytest.raises(ValueError, match="family 'reverse_bm25' is already registered"):
        register(ReverseBM25)

    class AnotherBM25(ReverseBM25):
        name = "bm25"

    with pytest.raises(ValueError, match="family 'bm25' is already registered"):
        register(AnotherBM25)
    assert type(get_family("bm25")).__name__ == "BM25Family"


def test_contradictory_declarations_raise_naming_them() -> None:
    class Broken(ReverseBM25):
        name = "broken"
        params = {"depth": 4, "base": None}
        required = ("depth",)
        optional = {"depth": 3}
        first_stage = "seeds"

    with pytest.raises(ValueError, match="broken: required parameter 'depth' .*; parameter 'depth' is in both"):
        register(Broken)
    assert "broken" not in families()


class ReverseBase(ReverseBM25):
    """A base of its own, named ``reverse_base:<encoder>``: the encoder's dense base, worst first."""

    name = "reverse_base"
    base = True
    base_encoder = True

    def base_needs(self, encoder: str) -> SharedParts:
        return SharedParts(query_encoders=(encoder,), bases=(f"dense:{encoder}",))

    def rank_base(self, parts, encoder, queries, depth, inputs) -> RetrievalResult:  # type: ignore[no-untyped-def]
        rows = [[int(d) for d in row[::-1] if d >= 0] for row in inputs[0].doc_ids]
        return pad_rows(rows, [[-float(rank) for rank in range(len(row))] for row in rows], depth)


def test_the_bases_are_what_the_families_declare() -> None:
    assert [name for name, f in families().items() if f.base] == ["bm25", "dense", "hybrid"]
    assert family.base_family("dense:e5")[1] == "e5" and family.base_parts("hybrid:e5").bases == ("bm25", "dense:e5")
    assert family.base_parts("bm25") == SharedParts() and family.base_parts("dense") == SharedParts()  # no encoder
    with pytest.raises(ValueError, match=r"base='nope' must be 'bm25', 'dense:<encoder>' or 'hybrid:<encoder>'"):
        family.base_family("nope")


def test_a_registered_base_is_ranked_prepared_and_named_like_the_built_ins(tiny_dir) -> None:
    register(ReverseBase)
    try:
        runner, queries = tiny_runner(tiny_dir, CountingRunner)
        mmr = make_candidate("mmr", {"prefilter": "reverse_base:minilm", "encoder": "minilm"})
        assert encoders_used([mmr]) == ["minilm"]
        runner.prepare([mmr], queries)
        assert runner.retrievals == ["dense:minilm"]  # the base it fuses, computed once, in prepare
        dense = runner.base("dense:minilm", queries)
        mine = runner.base("reverse_base:minilm", queries)
        assert mine.doc_ids[0, 0] == [d for d in dense.doc_ids[0] if d >= 0][-1] and runner.retrievals == ["dense:minilm"]
        fresh = runner.retrieve_with("reverse_base:minilm", queries, 5)
        assert fresh.doc_ids[0].tolist() == dense.doc_ids[0, :5][::-1].tolist()
        with pytest.raises(ValueError, match=r"'hybrid:<encoder>' or 'reverse_base:<encoder>'"):
            runner.retrieve_with("reverse_base", queries, 5)  # its name needs an encoder
    finally:
        unregister("reverse_base")


def test_a_base_declaration_without_its_ranking_is_refused() -> None:
    class Unnamed(ReverseBM25):
        name = "unnamed"
        base_encoder = True  # but not a base

    class Unranked(ReverseBM25):
        name = "unranked"
        base = True  # but no rank_base

    with pytest.raises(ValueError, match="unnamed: base_encoder=True needs base=True"):
        register(Unnamed)
    with pytest.raises(ValueError, match="unranked: base=True needs rank_base"):
        register(Unranked)
    assert "unnamed" not in families() and "unranked" not in families()


def test_an_unknown_family_in_a_grid_names_the_registered_ones() -> None:
    with pytest.raises(ValueError, match=r"family='sparse' is not one of \['bm25', 'cross_encoder', 'dense', 'ds', 'graph'"):
        expand_grid({"bm25": {"k1": 1.2}, "sparse": {"k1": 1.0}})


FAMILY_MODULE = '''
from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.results import RetrievalResult, pad_rows
from ragfolio.core.retrieval.family import Family, SharedParts, register


@register
class FirstPassages(Family):
    """The corpus's first k passages for every query (a toy a YAML grid can name)."""

    name = "first_passages"
    params = {"offset": 0}

    def needs(self, params):
        return SharedParts()

    def run(self, parts, params, queries, k):
        rows = [list(range(params["offset"], params["offset"] + k)) for _ in queries]
        return pad_rows(rows, [[-float(r) for r in range(k)] for _ in queries], k)
'''


@pytest.fixture
def family_module(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A family in a module of its own, importable as ``my_families`` (as a user's project would have)."""
    (tmp_path / "my_families.py").write_text(FAMILY_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield "my_families"
    finally:
        if "first_passages" in families():
            unregister("first_passages")
        import sys

        sys.modules.pop("my_families", None)


def test_a_family_module_named_in_the_parameters_is_used_from_yaml_alone(family_module, tiny_dir) -> None:
    """``candidate_scoring.family_modules`` + a grid block: no Python edit in ragfolio or the caller."""
    from ragfolio.core.scoring.runners import PoolSettings
    from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, pool_settings

    params = {
        "encoders": {}, "grid": {"bm25": {}, "first_passages": {"offset": [0, 1]}},
        "family_modules": [family_module],
    }
    assert "first_passages" not in families()
    records = expand_candidates(params)
    assert [r["family"] for r in records] == ["bm25", "first_passages", "first_passages"]

    settings = pool_settings(params)
    assert settings.family_modules == [family_module]
    unregister("first_passages")  # a later stage, in a fresh process, has only the built-ins ...
    __import__("sys").modules.pop(family_module)
    corpus = build_corpus(load_folder(tiny_dir))
    runner = PoolSettings.from_dict(settings.to_dict()).runner(corpus, ArrayCache(tiny_dir / "unused", enabled=False))  # ... until it reads them
    result = runner.run(make_candidate("first_passages", {"offset": 1}), ["anything"])
    assert result.doc_ids.tolist() == [[1, 2, 3, 4]]


def test_settings_without_family_modules_read_as_before() -> None:
    from ragfolio.core.scoring.runners import PoolSettings

    old = {"num_docs": 4, "prefilter_depth": 50, "bm25_base": {}, "graph_max_degree": 50, "encoders": {},
           "score": "support_recall"}
    assert PoolSettings.from_dict(old).to_dict() == old


def test_an_unimportable_family_module_is_named() -> None:
    from ragfolio.core.retrieval.family import import_families

    with pytest.raises(ImportError, match="cannot import the family module 'no_such_families'"):
        import_families(["no_such_families"])
