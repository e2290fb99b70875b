"""A runner over a view of its corpus: added passages ranked beside the indexed ones, a row mask
kept by every member of the default grid, and nothing else changed."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.retrieval.pool import CandidateSpec, expand_grid, make_candidate, resolve_grid
from ragfolio.core.retrieval.running.view_runner import CorpusView, runner_over

GRIDS = yaml.safe_load(open("conf/base/parameters_candidate_grids.yml"))["candidate_grids"]
NEW_TITLE, NEW_TEXT = "Zorblax Quintavelle", "Zorblax Quintavelle is a glassblower who founded the Quintavelle works."


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    return install_hashing_encoder(monkeypatch)


def _candidates() -> list[CandidateSpec]:
    """The default grid's candidates that run in process without a trained cross-encoder."""
    return [c for c in expand_grid(resolve_grid("default", GRIDS))
            if c.family != "cross_encoder" and c.params.get("backend", "inprocess") == "inprocess"]


def _added(runner, titles=(NEW_TITLE,), texts=(NEW_TEXT,), allowed=None) -> CorpusView:
    body = [f"{t}. {x}" for t, x in zip(titles, texts, strict=True)]
    vectors = {name: runner._encode(name, body, queries=False) for name in runner.encoder_specs}
    return CorpusView(len(runner.texts), tuple(titles), tuple(texts), vectors, allowed)


def test_a_view_of_every_row_ranks_as_the_runner_does(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    viewed = runner_over(runner, CorpusView(len(runner.texts), allowed=np.ones(len(runner.texts), bool)))
    for candidate in _candidates():
        expected, got = runner.run(candidate, queries), viewed.run(candidate, queries)
        np.testing.assert_array_equal(got.doc_ids, expected.doc_ids, err_msg=candidate.name)


def test_every_member_keeps_to_the_allowed_rows_and_fills_its_list(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    n = len(runner.texts)
    allowed = np.zeros(n, bool)
    allowed[np.random.default_rng(0).choice(n, size=max(runner.num_docs + 1, n // 3), replace=False)] = True
    viewed = runner_over(runner, CorpusView(n, allowed=allowed))
    for candidate in _candidates():
        got = viewed.run(candidate, queries).doc_ids
        assert (got >= 0).all(), candidate.name  # enough rows are allowed: every list is full
        assert allowed[got].all(), candidate.name
        assert all(len(set(row)) == len(row) for row in got.tolist()), candidate.name


def test_a_list_is_short_only_when_fewer_rows_are_allowed(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    allowed = np.zeros(len(runner.texts), bool)
    allowed[[2, 5]] = True
    viewed = runner_over(runner, CorpusView(len(runner.texts), allowed=allowed))
    for candidate in _candidates()[:20]:
        got = viewed.run(candidate, queries).doc_ids
        assert sorted(set(got[got >= 0].tolist())) == [2, 5], candidate.name
        assert ((got >= 0).sum(axis=1) == 2).all(), candidate.name


def test_an_added_passage_is_found_by_its_own_words_and_moves_no_other_list(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    n = len(runner.texts)
    viewed = runner_over(runner, _added(runner))
    question = ["Who founded the Quintavelle works?"]
    bm25 = make_candidate("bm25", {})
    assert viewed.run(bm25, question).doc_ids[0, 0] == n  # the added row, found by a word no indexed row has
    dense = next(c for c in _candidates() if c.family == "dense")
    assert viewed.run(dense, question).doc_ids[0, 0] == n
    graph = next(c for c in _candidates() if c.family == "graph" and c.params["seeds"] == "bm25")
    assert n in viewed.run(graph, question).doc_ids[0].tolist()  # its seeds rank the added row first
    assert viewed.titles[n] == NEW_TITLE and viewed.texts[n] == NEW_TEXT
    for candidate in (bm25, dense):  # the sample's questions: each list is the old one, the added row let in
        got, before = viewed.run(candidate, queries).doc_ids, runner.run(candidate, queries).doc_ids
        for row, old in zip(got.tolist(), before.tolist(), strict=True):
            kept = [d for d in row if d != n]
            assert kept == old[: len(kept)], candidate.name


def test_a_deleted_row_is_returned_by_no_member(tiny_dir, calls) -> None:
    runner, queries = tiny_runner(tiny_dir)
    n = len(runner.texts)
    top = int(runner.run(make_candidate("bm25", {}), queries[:1]).doc_ids[0, 0])
    allowed = np.ones(n + 1, bool)
    allowed[top] = False  # replaced by the added row
    viewed = runner_over(runner, _added(runner, allowed=allowed))
    for candidate in _candidates():
        got = viewed.run(candidate, queries[:1]).doc_ids
        assert top not in got, candidate.name
        assert (got >= 0).all(), candidate.name
        if candidate.family == "graph":  # its graph links the indexed rows only: added rows come from its seeds
            seeds = viewed.base(candidate.params["seeds"], queries[:1]).doc_ids[0, : viewed.num_docs]
            assert set(got[got >= n].tolist()) == set(seeds[seeds >= n].tolist()), candidate.name


class _RecordingRemote:
    """Stands in for an index on an Elasticsearch cluster (none runs here; tests/integration runs the
    real one): records what a search was asked with, and returns row 0."""

    def __init__(self) -> None:
        self.asked: list[dict] = []

    def retrieve(self, queries, k, *, filter_clause=None, exclude_rows=()):
        from ragfolio.core.retrieval.results import RetrievalResult

        self.asked.append({"filter_clause": filter_clause, "exclude_rows": tuple(exclude_rows)})
        return RetrievalResult(np.zeros((len(queries), k), np.int64), np.ones((len(queries), k), np.float32))


def test_an_index_on_a_cluster_is_asked_with_the_views_filter_and_dead_rows(tiny_dir, calls, monkeypatch) -> None:
    runner, queries = tiny_runner(tiny_dir)
    remote = _RecordingRemote()
    clause = {"bool": {"filter": [{"term": {"metadata.source": "wiki"}}]}}
    view = CorpusView(len(runner.texts), allowed=np.ones(len(runner.texts), bool), remote_filter=clause, dead=(3, 7))
    viewed = runner_over(runner, view)
    monkeypatch.setattr(runner, "bm25", lambda params: remote)  # the parent's index: on a cluster
    viewed.bm25({}).retrieve(queries[:1], 2)
    assert remote.asked == [{"filter_clause": clause, "exclude_rows": (3, 7)}]
