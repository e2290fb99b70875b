"""The answer store cannot serve stale answers: its key holds the answering code's version, the members'
rankings' versions and the LLM's identity (tests/test_cache_versions.py checks that answers change only
with ANSWERS_VERSION)."""

from __future__ import annotations

from pathlib import Path

from ragfolio.core.llm import backends
from ragfolio.core.retrieval.family import get_family
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running import pool_runner
from ragfolio_lab.pipelines.answering_evaluation import nodes
from ragfolio_lab.pipelines.answering_evaluation.nodes import AnsweringEvaluationParams, answer_store_key, system_keys

SETTINGS = {"dataset": "hotpotqa", "corpus": "abc", "members": ["bm25_a", "dense_b"], "params": {"seed": 0}}
LLM = {"kind": "openai", "settings": {"model": "m"}}


def test_the_same_settings_and_versions_give_the_same_key() -> None:
    assert answer_store_key(SETTINGS, LLM) == answer_store_key(dict(SETTINGS), dict(LLM))
    assert answer_store_key({**SETTINGS, "members": ["bm25_a"]}, LLM) != answer_store_key(SETTINGS, LLM)


def test_a_new_answering_or_store_version_misses_the_answer_store(monkeypatch) -> None:
    keys = {answer_store_key(SETTINGS, LLM)}
    monkeypatch.setattr(nodes, "ANSWERS_VERSION", nodes.ANSWERS_VERSION + 1)
    keys.add(answer_store_key(SETTINGS, LLM))
    monkeypatch.setattr(nodes, "STORE_VERSION", nodes.STORE_VERSION + 1)
    keys.add(answer_store_key(SETTINGS, LLM))
    assert len(keys) == 3


def test_new_ranking_or_backend_versions_miss_the_answer_store(monkeypatch) -> None:
    class Bundle:  # what served_identity reads of a bundle
        checksum = "c"
        members = [CandidateSpec("graph_a", "graph", {})]
        scoring = type("Scoring", (), {"cross_encoder": None})()

    runner = type("Runner", (), {"encoder_ids": {}})()
    served = nodes.served_identity(Bundle(), runner)  # type: ignore[arg-type]
    assert served["rankings"]["families"] == {"graph": 2}
    monkeypatch.setattr(get_family("graph"), "result_version", 3)
    monkeypatch.setattr(nodes, "BASE_VERSION", 2)
    assert nodes.served_identity(Bundle(), runner)["rankings"] == {  # type: ignore[arg-type]
        "families": {"graph": 3}, "base": 2, "completion": pool_runner.COMPLETION_VERSION}
    llm = backends.backend_identity({"kind": "openai", "model": "m"})
    bumped = backends.BACKEND_VERSIONS["openai"] + 1
    monkeypatch.setitem(backends.BACKEND_VERSIONS, "openai", bumped)
    assert backends.backend_identity({"kind": "openai", "model": "m"})["version"] == bumped != llm["version"]


def test_the_llm_identity_names_the_model_file_and_the_converter(tmp_path, monkeypatch) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights v1")
    config = {"kind": "transformers", "transformers": {"model_path": str(model), "n_ctx": 2048}}
    first = backends.backend_identity(config)
    assert first["model"]["name"] == "model.gguf" and set(first["packages"]) >= {"transformers", "gguf", "torch"}
    model.write_bytes(b"weights v2")
    backends.model_sha256.cache_clear()  # a new process would hash the file again
    assert backends.backend_identity(config)["model"] != first["model"]
    monkeypatch.setattr(backends, "package_versions", lambda names: dict.fromkeys(names, "9.9"))
    assert backends.backend_identity(config)["packages"]["transformers"] == "9.9"
    assert answer_store_key(SETTINGS, backends.backend_identity(config)) != answer_store_key(SETTINGS, first)


def test_a_system_s_own_parameters_change_only_that_system_s_key() -> None:
    base = AnsweringEvaluationParams(systems=["single_best", "single_best_wide", "vendi_rag_authors"])
    first = system_keys("common", base.systems, base)
    with_loop = system_keys("common", base.systems, base.model_copy(update={"vendi_rag_authors": {"tau": 0.9}}))
    wider = system_keys("common", base.systems, base.model_copy(update={"wide_factor": 3}))
    assert {s for s in first if first[s] != with_loop[s]} == {"vendi_rag_authors"}
    assert {s for s in first if first[s] != wider[s]} == {"single_best_wide"}
    assert system_keys("other", base.systems, base)["single_best"] != first["single_best"]


def test_the_reader_moved_into_the_bundle_keeps_the_sample_s_stored_answers() -> None:
    """The reader is the bundle's now (packaging.reader), no longer answering_evaluation's own llm and
    answerer: with the same reader, the parameters in the store key are what they were (the sample's
    answering_evaluation parameters before, by their hash), so no stored answer is thrown away for it."""
    import yaml

    from ragfolio.core.llm.reader import ReaderSettings
    from ragfolio.pipelines.packaging.nodes import PackagingParams
    from ragfolio_lab.answering.store import settings_hash
    from ragfolio_lab.pipelines.answering_evaluation.nodes import reader_params

    conf = Path(__file__).resolve().parents[3] / "conf" / "base"
    evaluation = yaml.safe_load((conf / "parameters_answering_evaluation.yml").read_text())["answering_evaluation"]
    reader = PackagingParams(**yaml.safe_load((conf / "parameters_packaging.yml").read_text())["packaging"]).reader
    params = reader_params(AnsweringEvaluationParams(**evaluation), ReaderSettings(reader.llm, reader.answerer))
    # "7bd985461248e4d0" before the move and until the reader took abstain and min_confidence (issue 50),
    # "22ebfa1f630a6429" until it took select_mode
    assert settings_hash(params) == "8d0e27421eea0dd2"
    assert params["llm"]["openai"]["timeout_s"] == 60 and params["llm"]["openai"]["max_retries"] == 2
