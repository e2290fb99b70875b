"""The ``cross_encoder`` family reranks its prefilter by the cross-encoder's scores, run by a PoolRunner.

A stub stands in for the loaded model (its score of a pair is a fixed function of the passage's
row), so the expected order is known; one test runs a real saved model end to end.
"""

from __future__ import annotations

import numpy as np
import pytest
from cross_encoders import one_thread, save_untrained
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.family import get_family
from ragfolio.core.retrieval.pool import expand_grid, make_candidate
from ragfolio.core.retrieval.reranking.cross_fitting import CrossFittedCrossEncoder, CrossFitting
from ragfolio.core.retrieval.reranking.rerank_quality import reranked_rows
from ragfolio.core.retrieval.running.cross_scores import CrossEncoderPart
from ragfolio.core.routing.features.list_judgements import ListJudge


class StubScorer:
    """Scores pair (query, passage row r) as ``(r * 7 + offset) % 11``, counts the pairs and records the queries scored."""

    def __init__(self, offset: int = 0) -> None:
        self.pairs, self.offset, self.queries = 0, offset, set()

    def score_rows(self, queries, passage_texts, doc_ids):  # noqa: ANN001, ANN201
        self.pairs += int((doc_ids >= 0).sum())
        self.queries |= set(queries)
        return np.where(doc_ids >= 0, (doc_ids * 7 + self.offset) % 11, -np.inf).astype(np.float32)

    def score(self, queries, passages):  # noqa: ANN001, ANN201 - a pair's score: the passage's length mod 11, + offset
        self.pairs += len(passages)
        self.queries |= set(queries)
        return np.array([(len(p) + self.offset) % 11 for p in passages], dtype=np.float32)


class StubPart(CrossEncoderPart):
    """The runner's cross-encoder part over stub models, one per folder of ``models`` (no folder is read):
    the full model's (``full``) scores with offset 0, fold k's with offset k + 3."""

    def __init__(self, models: CrossFittedCrossEncoder | None = None) -> None:
        super().__init__("full")
        self.models = models or CrossFittedCrossEncoder("full")
        self.stubs = {folder: StubScorer(0 if folder == "full" else 3 + i) for i, folder in enumerate(self.models.folds)}
        self.stubs["full"] = self.stub = StubScorer()

    def scorer(self, folder: str | None = None) -> StubScorer:
        return self.stubs[folder or "full"]

    def _digest(self, folder: str) -> str:  # the full model's: d...d; fold_k's: k...k
        return "d" * 64 if folder == "full" else folder[-1] * 64


@pytest.fixture(autouse=True)
def calls(monkeypatch: pytest.MonkeyPatch) -> list:
    return install_hashing_encoder(monkeypatch)


def test_it_reorders_the_prefilters_top_depth_by_score(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.cross_encoder = StubPart()
    deep, shallow = expand_grid({"cross_encoder": {"prefilter": "bm25", "depth": [6, 3]}})
    prefilter = runner.base("bm25", queries)
    for candidate, depth in ((shallow, 3), (deep, 6)):
        result = runner.run(candidate, queries)
        top = prefilter.doc_ids[:, :depth]
        want = reranked_rows(top, (top * 7) % 11)[:, : runner.num_docs]
        np.testing.assert_array_equal(result.doc_ids, want)
        assert (np.diff(result.scores, axis=1) <= 0).all()
    assert not np.array_equal(runner.run(deep, queries).doc_ids, prefilter.doc_ids[:, : runner.num_docs])
    assert runner.cross_encoder.stub.pairs == 6 * len(queries)  # depth 3, then columns 3:6 only


def test_the_list_judge_scores_each_distinct_pair_once_and_caches_them(tiny_dir, tmp_path) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.cross_encoder, runner.cache = StubPart(), ArrayCache(tmp_path)
    ids = np.array([[0, 1, 0, -1], [2, 2, 3, 1]] + [[-1] * 4] * (len(queries) - 2), dtype=np.int64)
    judge = ListJudge(runner)
    got = judge(queries, ids)
    want = [[len(runner.passage_texts[d]) % 11 if d >= 0 else -np.inf for d in row] for row in ids]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))
    assert runner.cross_encoder.stub.pairs == 5  # (q0, 0), (q0, 1), (q1, 2), (q1, 3), (q1, 1)
    np.testing.assert_array_equal(ListJudge(runner)(queries, ids), got)
    assert runner.cross_encoder.stub.pairs == 5  # the second call reads the cache
    with pytest.raises(ValueError, match="doc_ids must be"):
        judge(queries, ids[:1])


def test_its_cache_key_holds_the_models_digest_and_no_other_familys_does(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.cross_encoder = StubPart()
    reranker = make_candidate("cross_encoder", {"prefilter": "bm25"})
    assert runner.candidate_key(reranker, queries)["cross_encoder"] == "d" * 64
    assert "cross_encoder" not in runner.candidate_key(make_candidate("bm25", {}), queries)
    assert get_family("cross_encoder").first_stage == "prefilter"


def test_without_a_trained_model_it_refuses_naming_the_setting(tiny_dir, tmp_path) -> None:
    runner, queries = tiny_runner(tiny_dir)
    candidate = make_candidate("cross_encoder", {"prefilter": "bm25"})
    with pytest.raises(ValueError, match=r"PoolSettings.cross_encoder"):
        runner.run(candidate, queries)
    runner, _ = tiny_runner(tiny_dir, cross_encoder=str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no trained cross-encoder at"):
        runner.run(candidate, queries)


def test_rrf_fuses_the_prefilters_rank_with_the_cross_encoders(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)  # rank r in both orders adds 1 / (60 + r); ties: the lower row id
    runner.cross_encoder = StubPart()
    plain = make_candidate("cross_encoder", {"prefilter": "bm25", "depth": 6})
    fused = make_candidate("cross_encoder", {"prefilter": "bm25", "depth": 6, "fusion": "rrf"})
    assert "fusion" not in plain.name and "fusion=rrf" in fused.name  # fusion none renames no candidate
    top = runner.base("bm25", queries).doc_ids[:, :6]
    result = runner.run(fused, queries)
    for row, got in zip(top, result.doc_ids, strict=True):
        stub = [(int(d) * 7) % 11 for d in row]
        by_stub = sorted(range(6), key=lambda j: (-stub[j], j))
        rrf = {j: 1 / (60 + j + 1) + 1 / (60 + by_stub.index(j) + 1) for j in range(6)}
        want = [int(row[j]) for j in sorted(range(6), key=lambda j: (-rrf[j], row[j]))][: runner.num_docs]
        assert got.tolist() == want
    assert not np.array_equal(result.doc_ids, runner.run(plain, queries).doc_ids)
    with pytest.raises(ValueError, match="fusion"):
        make_candidate("cross_encoder", {"prefilter": "bm25", "fusion": "max"})


@pytest.mark.slow
def test_a_saved_model_reranks_end_to_end(tiny_dir, tmp_path) -> None:
    with one_thread():
        folder = save_untrained(tmp_path / "ce")
        runner, queries = tiny_runner(tiny_dir, cross_encoder=str(folder))
        candidate = make_candidate("cross_encoder", {"prefilter": "bm25", "depth": 5})
        runner.prepare([candidate], queries)  # loads the model up front
        result = runner.run(candidate, queries)
        top = runner.base("bm25", queries).doc_ids[:, :5]
        scores = runner.cross_encoder.scorer().score_rows(queries, runner.passage_texts, top)
    np.testing.assert_array_equal(result.doc_ids, reranked_rows(top, scores)[:, : runner.num_docs])


def _cross_fitted(queries: list[str]) -> CrossFittedCrossEncoder:
    """The even-numbered queries as train questions cross-fitted in 2 folds; the odd ones dev or test."""
    train = {f"q{i}": q for i, q in enumerate(queries) if i % 2 == 0}
    return CrossFittedCrossEncoder("full", ("fold_0", "fold_1"), CrossFitting.of(train, 2))


def _fold_texts(models: CrossFittedCrossEncoder, fold: int) -> set[str]:
    return {models.fitting.texts[qid] for qid in models.fitting.questions(fold)}


def test_with_cross_fitting_a_train_question_is_reranked_by_its_fold_model_the_rest_by_the_full(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)
    models = _cross_fitted(queries)
    runner.cross_encoder = part = StubPart(models)
    candidate = make_candidate("cross_encoder", {"prefilter": "bm25", "depth": 6})
    result = runner.run(candidate, queries)
    assert part.stubs["full"].queries == set(queries[1::2])  # no train question
    for fold in (0, 1):
        assert part.stubs[f"fold_{fold}"].queries == _fold_texts(models, fold) != set()
    top = runner.base("bm25", queries).doc_ids[:, :6]
    offsets = np.array([[0 if i % 2 else 3 + models.fitting.fold_of[f"q{i}"]] for i in range(len(queries))])
    np.testing.assert_array_equal(result.doc_ids, reranked_rows(top, (top * 7 + offsets) % 11)[:, : runner.num_docs])


def test_with_cross_fitting_the_cache_key_names_the_models_that_scored_the_rows(tiny_dir) -> None:
    runner, queries = tiny_runner(tiny_dir)
    candidate = make_candidate("cross_encoder", {"prefilter": "bm25"})
    runner.cross_encoder = StubPart(_cross_fitted(queries))
    mixed = runner.candidate_key(candidate, queries)["cross_encoder"]
    assert runner.candidate_key(candidate, queries[1::2])["cross_encoder"] == "d" * 64  # the full model's alone
    runner.cross_encoder = StubPart()
    assert mixed != runner.candidate_key(candidate, queries)["cross_encoder"] == "d" * 64
    other = _cross_fitted(queries)
    runner.cross_encoder = StubPart(CrossFittedCrossEncoder("full", other.folds, CrossFitting.of(other.fitting.texts, 2, seed=1)))
    assert runner.candidate_key(candidate, queries)["cross_encoder"] != mixed  # other folds, another key


def test_the_list_judge_judges_a_cross_fitted_question_with_its_fold_model(tiny_dir, tmp_path) -> None:
    runner, queries = tiny_runner(tiny_dir)
    runner.cache = ArrayCache(tmp_path)
    ids = np.tile(np.arange(4), (len(queries), 1))
    runner.cross_encoder = StubPart()
    full = ListJudge(runner)(queries, ids)  # cached under the full model's digest
    models = _cross_fitted(queries)
    runner.cross_encoder = part = StubPart(models)
    got = ListJudge(runner)(queries, ids)  # not read back from the full model's entry
    assert part.stubs["full"].queries == set(queries[1::2])
    for fold in (0, 1):
        assert part.stubs[f"fold_{fold}"].queries == _fold_texts(models, fold)
    np.testing.assert_array_equal(got[1::2], full[1::2])
    for i in range(0, len(queries), 2):
        offset = 3 + models.fitting.fold_of[f"q{i}"]
        assert got[i].tolist() == [(len(runner.passage_texts[d]) + offset) % 11 for d in ids[i]]
