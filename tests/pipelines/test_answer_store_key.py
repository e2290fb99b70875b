"""The answer store cannot serve stale answers: its key holds the code that answers and the LLM's identity."""

from __future__ import annotations

from pathlib import Path

from ragfolio.core.llm import backends
from ragfolio.pipelines.answering_evaluation.nodes import AnsweringEvaluationParams, answer_store_key, system_keys

SETTINGS = {"dataset": "hotpotqa", "corpus": "abc", "members": ["bm25_a", "dense_b"], "params": {"seed": 0}}
LLM = {"kind": "openai", "settings": {"model": "m"}}


def test_the_same_settings_and_code_give_the_same_key(edit_source) -> None:
    assert answer_store_key(SETTINGS, LLM) == answer_store_key(dict(SETTINGS), dict(LLM))
    assert answer_store_key({**SETTINGS, "members": ["bm25_a"]}, LLM) != answer_store_key(SETTINGS, LLM)


def test_editing_a_prompt_template_misses_the_answer_store(edit_source) -> None:
    before = answer_store_key(SETTINGS, LLM)
    edit_source("ragfolio.core.answering.prompts")
    assert answer_store_key(SETTINGS, LLM) != before


def test_editing_a_module_the_answerer_imports_misses_the_answer_store(edit_source) -> None:
    keys = {answer_store_key(SETTINGS, LLM)}
    for module in ("ragfolio.core.answering.vendi_rag", "ragfolio.core.answering.systems", "ragfolio.core.answer_text",
                   "ragfolio.core.llm.embedded", "ragfolio.core.llm.native", "ragfolio.core.retrieval.running.pool_runner",
                   "ragfolio.pipelines.answering_evaluation.nodes"):
        edit_source(module)
        keys.add(answer_store_key(SETTINGS, LLM))
    assert len(keys) == 8


def test_editing_a_metric_rescores_without_answering_again(edit_source) -> None:
    """The store keeps answers, not scores (ragfolio.core.answering.scores scores them as read)."""
    before = answer_store_key(SETTINGS, LLM)
    for module in ("ragfolio.core.metrics", "ragfolio.core.answering.scores", "ragfolio.core.answering.summary"):
        edit_source(module)
        assert answer_store_key(SETTINGS, LLM) == before, module


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

    from ragfolio.core.answering.store import settings_hash
    from ragfolio.core.llm.reader import ReaderSettings
    from ragfolio.pipelines.answering_evaluation.nodes import reader_params
    from ragfolio.pipelines.packaging.nodes import PackagingParams

    conf = Path(__file__).resolve().parents[2] / "conf" / "base"
    evaluation = yaml.safe_load((conf / "parameters_answering_evaluation.yml").read_text())["answering_evaluation"]
    reader = PackagingParams(**yaml.safe_load((conf / "parameters_packaging.yml").read_text())["packaging"]).reader
    params = reader_params(AnsweringEvaluationParams(**evaluation), ReaderSettings(reader.llm, reader.answerer))
    assert settings_hash(params) == "7bd985461248e4d0"  # the same parameters as before the move
    assert params["llm"]["openai"]["timeout_s"] == 60 and params["llm"]["openai"]["max_retries"] == 2
