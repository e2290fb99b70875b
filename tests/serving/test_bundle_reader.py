"""The bundle carries the reader: the service and answering evaluation answer with the bundle's.

The reader was configured twice, in serving.yml and in answering_evaluation's parameters, with
different defaults (timeout 30 vs 60 s, 1 vs 2 retries, 16 vs 64 answer tokens in code): what was
evaluated was not what was served. Now packaging writes ``packaging.reader`` into every bundle, and
serving.yml's ``llm`` and ``answerer`` only override it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import service_client, write_config
from tiny_bundle import questions

from ragfolio.core.bundle import MANIFEST, _manifest_checksum, load_bundle, save_bundle
from ragfolio.core.llm.backend_config import EMBEDDED_LLM
from ragfolio.core.llm.chat import OpenAICompatibleClient
from ragfolio.core.llm.reader import ReaderSettings
from ragfolio.core.routing.judging.splits import TrainedRouters
from ragfolio.serving.config import load_config
from ragfolio.serving.engine import ServingEngine
from ragfolio_lab.pipelines.answering_evaluation import nodes


def _reader(url: str) -> ReaderSettings:
    return ReaderSettings({"kind": "openai", "openai": {"base_url": url, "model": "fake", "api": "completions",
                                                        "timeout_s": 7, "max_retries": 0}},
                          {"max_answer_tokens": 33, "max_selector_tokens": 9, "max_passage_words": 50})


@pytest.fixture(scope="module")
def reader_bundle(tiny_bundle: Path, fake_llm_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bundle, saved with a reader of its own: the fake endpoint, other limits."""
    path = tmp_path_factory.mktemp("reader") / "bundle"
    save_bundle(dataclasses.replace(load_bundle(tiny_bundle), reader=_reader(fake_llm_url)), path)
    return path


def test_the_reader_is_part_of_the_bundle(reader_bundle: Path, fake_llm_url: str) -> None:
    manifest = json.loads((reader_bundle / MANIFEST).read_text())
    assert manifest["reader"] == _reader(fake_llm_url).to_dict()
    assert load_bundle(reader_bundle).reader == _reader(fake_llm_url)


def test_a_bundle_written_before_it_carried_a_reader_has_the_default_one(reader_bundle: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    save_bundle(load_bundle(reader_bundle), old)
    manifest = json.loads((old / MANIFEST).read_text())
    del manifest["reader"]
    manifest["checksum"] = _manifest_checksum(manifest)
    (old / MANIFEST).write_text(json.dumps(manifest))
    assert load_bundle(old).reader == ReaderSettings() and ReaderSettings().llm == EMBEDDED_LLM


def test_the_service_answers_with_the_bundles_reader(reader_bundle: Path, tmp_path: Path) -> None:
    """serving.yml names no LLM: /answer reaches the endpoint the bundle names, with its limits."""
    config = write_config(tmp_path / "serving.yml", reader_bundle, "http://127.0.0.1:9/unused", warm_up=False, llm=None)
    with service_client(config) as client:
        response = client.post("/answer", json={"query": questions()[0], "l": 1})
        assert response.status_code == 200, response.text
        assert client.get("/portfolio").json()["limits"]["llm"] == "openai"
    engine = ServingEngine(load_config(config, env={}))
    try:
        assert engine.reader == load_bundle(reader_bundle).reader
        assert (engine.answerer.max_answer_tokens, engine.answerer.max_selector_tokens) == (33, 9)
        assert isinstance(engine.answerer.backend, OpenAICompatibleClient) and engine.answerer.backend.timeout_s == 7
    finally:
        engine.close()


def test_serving_settings_override_the_bundles_reader_key_by_key(reader_bundle: Path, fake_llm_url: str,
                                                                  tmp_path: Path) -> None:
    config = write_config(tmp_path / "serving.yml", reader_bundle, fake_llm_url, warm_up=False,
                          llm={"openai": {"timeout_s": 3}}, answerer={"max_answer_tokens": 8})
    engine = ServingEngine(load_config(config, env={"RAGFOLIO_LLM__OPENAI__MAX_RETRIES": "1"}))
    try:
        openai = engine.reader.llm["openai"]
        assert (openai["timeout_s"], openai["max_retries"], openai["base_url"]) == (3, 1, fake_llm_url)
        assert (engine.answerer.max_answer_tokens, engine.answerer.max_selector_tokens) == (8, 9)
    finally:
        engine.close()


class _Stop(Exception):
    pass


def test_answering_evaluation_answers_with_the_bundles_reader(reader_bundle: Path, fake_llm_url: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[object, dict[str, object]]] = []

    def answerer(backend: object, **kwargs: object) -> None:
        made.append((backend, kwargs))
        raise _Stop

    monkeypatch.setattr(nodes, "Answerer", answerer)
    with pytest.raises(_Stop):  # stopped before any question
        nodes.answer_test_questions({"tiny": []}, {"tiny": load_bundle(reader_bundle)}, load_bundle(reader_bundle),
                                    TrainedRouters({}, {}), None, {})  # type: ignore[arg-type]
    ((backend, kwargs),) = made
    assert isinstance(backend, OpenAICompatibleClient) and backend.base_url == fake_llm_url and backend.timeout_s == 7
    assert kwargs == {"max_answer_tokens": 33, "max_selector_tokens": 9, "max_passage_words": 50, "seed": 42}
    with pytest.raises(ValueError, match="llm"):  # no reader of its own: the bundle's
        nodes.AnsweringEvaluationParams(llm={"kind": "openai"})
