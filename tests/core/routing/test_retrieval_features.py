"""Retrieval features on a hand-worked toy corpus, and on the tiny fixture through a pool runner."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph
from ragfolio.core.retrieval.pool import make_candidate
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.routing.features.retrieval_features import (
    FORM_NAMES,
    RetrievalFeaturizer,
    capitalised_spans,
    question_form,
    rank_correlation,
)

TITLES = ["Ed Wood", "Scott Derrickson", "Ed Wood (film)", "Doctor Strange", "Hollywood", "Tim Burton"]
QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


def _graph() -> PassageGraph:
    edges = [(0, 2), (0, 1), (3, 1)]  # degrees 2, 2, 1, 1, 0, 0
    rows, cols = zip(*[*edges, *[(b, a) for a, b in edges]], strict=True)
    return PassageGraph(sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(6, 6)))


def _result(ids: list[int], scores: list[float]) -> RetrievalResult:
    return RetrievalResult(np.array([ids], dtype=np.int64), np.array([scores], dtype=np.float32))


BASES = {"bm25": _result([1, 0, 3, 4, 5], [10, 8, 5, 4, 1]), "dense:e": _result([0, 2, 1, 5, 4], [0.9, 0.85, 0.5, 0.4, 0.1])}
FEATURIZER = RetrievalFeaturizer(("e",), num_docs=2, agreement_depth=3)


def test_question_spans_and_form() -> None:
    assert capitalised_spans(QUESTION) == ["Scott Derrickson", "Ed Wood"]
    assert capitalised_spans("Who is the president of the Bank of America in 1990?") == ["Bank of America"]
    assert capitalised_spans("Which city is bigger?") == []  # a capitalised first word is not a name
    form = dict(zip(FORM_NAMES, question_form([QUESTION])[0].tolist(), strict=True))
    assert form["form.yes_no"] == 1 and sum(v for k, v in form.items() if k.startswith("form.wh_")) == 0
    assert (form["form.n_words"], form["form.n_spans"], form["form.same"], form["form.or"]) == (10, 2, 1, 0)
    which = dict(zip(FORM_NAMES, question_form(["In which year was the older film released, A or B?"])[0], strict=True))
    assert which["form.wh_which"] == which["form.or"] == which["form.comparative"] == 1 and which["form.other"] == 0


def test_rank_correlation_by_hand() -> None:
    assert rank_correlation([1, 2, 3], [1, 2, 3]) == 1.0
    assert rank_correlation([1, 0, 3], [0, 2, 1]) == pytest.approx(0.0)  # ranks [0,1,2,3] vs [2,0,3,1]
    assert rank_correlation([1, 2], [3, 4]) < 0


def test_first_stage_features_by_hand() -> None:
    names = FEATURIZER.first_stage_names()
    values = FEATURIZER.first_stage([QUESTION], BASES, TITLES, _graph())
    assert values.shape == (1, len(names)) == (1, 2 * 7 + 2 + len(FORM_NAMES)) and values.dtype == np.float32
    got = dict(zip(names, values[0].tolist(), strict=True))
    # bm25's top 2 are Scott Derrickson and Ed Wood: both spans covered, both titles in the question, linked
    assert [got[f"bm25.{m}"] for m in ("top1", "margin2", "margin5")] == [10, 2, 9]
    assert [got[f"bm25.{m}"] for m in ("entity_coverage", "titles_in_question", "seed_degree", "seed_links")] == [1, 1, 2, 1]
    # dense's top 2 are Ed Wood and Ed Wood (film): one span of two, one title of two ("film" is not asked)
    assert [got[f"dense:e.{m}"] for m in ("top1", "margin2", "margin5")] == pytest.approx([0.9, 0.05, 0.8])
    assert [got[f"dense:e.{m}"] for m in ("entity_coverage", "titles_in_question", "seed_degree", "seed_links")] == [
        0.5, 0.5, 1.5, 1.0]
    assert got["agree.bm25~dense:e.overlap"] == pytest.approx(2 / 3)
    assert got["agree.bm25~dense:e.rank_corr"] == pytest.approx(0.0)
    assert got["form.yes_no"] == 1 and got["form.n_spans"] == 2
    assert FEATURIZER.first_stage([QUESTION], BASES, TITLES, None)[0, names.index("bm25.seed_degree")] == 0  # no graph


def test_member_features_by_hand() -> None:
    names = FEATURIZER.member_names()
    members = [_result([1, 0], [3.0, 1.0]), _result([0, 4], [0.5, 0.3])]
    values = FEATURIZER.members([QUESTION], members, BASES, TITLES, _graph())
    assert values.shape == (1, 2, len(names)) == (1, 2, 11)
    m0, m1 = (dict(zip(names, values[0, j].tolist(), strict=True)) for j in range(2))
    assert m0 == pytest.approx({
        "top1": 3.0, "mean": 2.0, "overlap_members": 0.5, "unique": 0.5, "overlap.bm25": 1.0, "overlap.dense:e": 0.5,
        "entity_coverage": 1.0, "titles_in_question": 1.0, "seed_degree": 2.0, "seed_links": 1.0, "distinct_titles": 1.0,
    })
    assert m1 == pytest.approx({
        "top1": 0.5, "mean": 0.4, "overlap_members": 0.5, "unique": 0.5, "overlap.bm25": 0.5, "overlap.dense:e": 0.5,
        "entity_coverage": 0.5, "titles_in_question": 0.5, "seed_degree": 1.0, "seed_links": 0.0, "distinct_titles": 1.0,
    })


def test_list_judgements_by_hand() -> None:
    judging = RetrievalFeaturizer(("e",), num_docs=2, agreement_depth=3, judge=True)
    names = judging.member_names()
    assert names == [*FEATURIZER.member_names(), "judge.max", "judge.mean", "judge.coverage"]
    members = [_result([1, 0], [3.0, 1.0]), _result([4, -1], [0.5, -np.inf])]  # the second list is short
    asked: list = []

    def judge(queries, doc_ids):  # noqa: ANN001, ANN202 - the cross-encoder's probability of row r: r / 5
        asked.append(doc_ids.copy())
        return np.where(doc_ids >= 0, doc_ids / 5, -np.inf).astype(np.float32)

    values = judging.members([QUESTION], members, BASES, TITLES, _graph(), judge)
    np.testing.assert_array_equal(asked[0], [[1, 0, 4, -1]])  # one call: every member's list together
    np.testing.assert_allclose(values[..., :-3], FEATURIZER.members([QUESTION], members, BASES, TITLES, _graph()))
    m0, m1 = (dict(zip(names[-3:], values[0, j, -3:].tolist(), strict=True)) for j in range(2))
    assert m0 == pytest.approx({"judge.max": 0.2, "judge.mean": 0.1, "judge.coverage": 0.0})
    assert m1 == pytest.approx({"judge.max": 0.8, "judge.mean": 0.8, "judge.coverage": 0.5})  # 1 of 2 places
    empty = judging.members([QUESTION], [_result([-1, -1], [-np.inf, -np.inf])] * 2, BASES, TITLES, None, judge)
    np.testing.assert_array_equal(empty[0, :, -3:], 0.0)
    with pytest.raises(ValueError, match="pass the runner's judge"):
        judging.members([QUESTION], members, BASES, TITLES, _graph())


def test_features_through_a_pool_runner(tiny_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    install_hashing_encoder(monkeypatch)
    runner, queries = tiny_runner(tiny_dir)
    members = [make_candidate("bm25", {}), make_candidate("dense", {"encoder": "e5"}),
               make_candidate("graph", {"seeds": "bm25", "n_seeds": 2})]
    featurizer = RetrievalFeaturizer(("minilm", "e5"), num_docs=runner.num_docs)
    first, per_member = featurizer.compute(runner, queries, members)
    n = len(queries)
    assert first.shape == (n, len(featurizer.first_stage_names())) and np.isfinite(first).all()
    assert per_member.shape == (n, 3, len(featurizer.member_names())) and np.isfinite(per_member).all()
    # the bm25 member is the bm25 first stage cut to num_docs: it agrees with it fully
    names = featurizer.member_names()
    np.testing.assert_allclose(per_member[:, 0, names.index("overlap.bm25")], 1.0)
    np.testing.assert_allclose(per_member[:, 0, names.index("top1")], first[:, 0])
    assert ((0 <= per_member[:, :, 2:4]) & (per_member[:, :, 2:4] <= 1)).all()
