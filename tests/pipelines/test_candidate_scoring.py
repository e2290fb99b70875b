import numpy as np
import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, score_candidates
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions


@pytest.fixture
def prepared(tiny_dir):
    questions = load_questions({"raw_dir": str(tiny_dir), "seed": 0})
    return questions, build_corpora(questions)


def _params(score: str) -> dict:
    return {"num_docs": 2, "prefilter_depth": 5, "score": score, "encoders": {},
            "grid": {"bm25": {"k1": [0.9, 1.5], "b": 0.75}}}


@pytest.mark.parametrize("score", ["support_recall", "answer_recall"])
def test_score_candidates_builds_one_matrix_per_dataset(prepared, tmp_path, score) -> None:
    questions, corpora = prepared
    params = _params(score)
    candidates = expand_candidates(params)
    matrices, index = score_candidates(questions, corpora, candidates, ArrayCache(tmp_path), params)
    assert index["score"] == score and index["num_docs"] == 2
    assert index["candidates"] == [c["name"] for c in candidates]
    for dataset, U in matrices.items():
        assert U.shape == (len(index["datasets"][dataset]["ids"]), 2)
        assert set(np.unique(U)) <= ({0.0, 1.0} if score == "answer_recall" else {0.0, 0.5, 1.0})


def test_rerun_reads_the_cache(prepared, tmp_path) -> None:
    questions, corpora = prepared
    params = _params("support_recall")
    candidates = expand_candidates(params)
    first, _ = score_candidates(questions, corpora, candidates, ArrayCache(tmp_path), params)
    n_files = len(list(tmp_path.rglob("*.npz")))
    again, _ = score_candidates(questions, corpora, candidates, ArrayCache(tmp_path), params)
    assert len(list(tmp_path.rglob("*.npz"))) == n_files > 0
    for dataset in first:
        np.testing.assert_array_equal(first[dataset], again[dataset])


def test_unknown_parameter_is_named() -> None:
    with pytest.raises(ValueError, match="num_doc"):
        expand_candidates({**_params("support_recall"), "num_doc": 3})
