"""What answering evaluation keys stored answers on changes with the bundle's corpus (issue 46)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tiny_bundle import write_tiny_bundle

from ragfolio.core.bundle import load_bundle, save_bundle
from ragfolio_lab.pipelines.answering_evaluation.nodes import answer_store_key, served_identity

LLM = {"kind": "openai", "settings": {"model": "m"}}


def _key(path: Path) -> str:
    bundle = load_bundle(path)
    return answer_store_key({"dataset": "tiny", **served_identity(bundle, bundle.runner())}, LLM)


def test_an_edited_corpus_passage_misses_the_answer_store(tmp_path: Path) -> None:
    write_tiny_bundle(tmp_path / "a")
    first = _key(tmp_path / "a")
    assert _key(tmp_path / "a") == first  # the same bundle, loaded again: the same key

    bundle = load_bundle(tmp_path / "a")
    texts = list(bundle.corpus.texts)
    texts[0] += " An edited sentence."
    save_bundle(dataclasses.replace(bundle, corpus=dataclasses.replace(bundle.corpus, texts=tuple(texts))), tmp_path / "b")
    assert _key(tmp_path / "b") != first


def test_the_identity_names_the_encoders_and_the_bundle() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        write_tiny_bundle(Path(folder) / "a")
        bundle = load_bundle(Path(folder) / "a")
        identity = served_identity(bundle, bundle.runner())
    assert identity["bundle"] == bundle.checksum and len(identity["bundle"]) == 64
    assert identity["encoders"] == bundle.runner().encoder_ids and identity["cross_encoder"] is None
