import numpy as np
import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.core.scoring.runners import RunnerConfig
from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, score_candidates
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions


def _prepare(tiny_dir, corpus: str = "union"):
    params = {"raw_dir": str(tiny_dir), "seed": 0, "corpus": corpus}
    questions = load_questions(params)
    return questions, build_corpora(questions, params)


@pytest.fixture
def prepared(tiny_dir):
    return _prepare(tiny_dir)


def _params(score: str) -> dict:
    return {"num_docs": 2, "prefilter_depth": 5, "score": score, "encoders": {},
            "grid": {"bm25": {"k1": [0.9, 1.5], "b": 0.75}}}


@pytest.mark.parametrize("score", ["support_recall", "answer_recall"])
def test_score_candidates_builds_one_matrix_per_dataset(prepared, tmp_path, score) -> None:
    questions, corpora = prepared
    params = _params(score)
    candidates = expand_candidates(params)
    matrices, index = score_candidates(questions, corpora, candidates, ArrayCache(tmp_path), params)
    assert index.score == score and index.num_docs == 2
    assert list(index.candidates) == [c["name"] for c in candidates]
    for dataset, U in matrices.items():
        assert U.shape == (len(index.datasets[dataset].ids), 2)
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


@pytest.mark.parametrize("mode", ["union", "per_dataset"])
def test_one_runner_per_distinct_corpus(tiny_dir, tmp_path, monkeypatch, mode) -> None:
    questions, corpora = _prepare(tiny_dir, mode)
    built, build = [], RunnerConfig.build

    def counting_build(self, titles, texts):  # type: ignore[no-untyped-def]
        built.append(len(texts))
        return build(self, titles, texts)

    monkeypatch.setattr(RunnerConfig, "build", counting_build)
    params = _params("support_recall")
    matrices, index = score_candidates(questions, corpora, expand_candidates(params), ArrayCache(tmp_path), params)
    sets = corpora
    assert set(matrices) == set(sets.datasets) == {"hotpotqa", "musique"}
    assert built == [len(c) for c in sets.corpora.values()] and len(built) == (1 if mode == "union" else 2)
    assert index.corpus == sets.describe() and index.corpus["mode"] == mode


def test_unknown_parameter_is_named() -> None:
    with pytest.raises(ValueError, match="num_doc"):
        expand_candidates({**_params("support_recall"), "num_doc": 3})
