"""What every encoder does around its model: pick its device, cut a text to its first words, batch texts of one
length together, L2-normalise rows."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

DEVICES = ("auto", "cpu", "cuda")
# Held while an encoder loads its model: transformers' lazy imports are not thread-safe, and two
# encoders first loaded from two threads at once (a pool runner's shared parts) could fail with
# "cannot import name 'BertConfig' from 'transformers'".
MODEL_LOAD_LOCK = threading.Lock()


def resolve_device(device: str) -> str:
    """The torch device an encoder runs on: ``auto`` is ``cuda`` when torch sees a GPU, else ``cpu``.

    Raises:
        ValueError: ``device`` is not one of :data:`DEVICES` (``cuda:1`` and the like pass), or asks
            for CUDA where torch sees none.
    """
    import torch

    kind = device.split(":", 1)[0]
    if kind not in DEVICES or (kind != "cuda" and device != kind):
        raise ValueError(f"device={device!r} must be one of {DEVICES} (or cuda:<n>)")
    if kind == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}, but torch sees no CUDA device (torch {torch.__version__}); "
                         "use device: auto or cpu")
    return device


def first_words(text: str, n: int) -> str:
    """``text`` cut to its first ``n`` whitespace-separated words, joined by single spaces."""
    return " ".join(text.split()[:n])


def l2_normalise(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Rows of ``x`` as float32 scaled to unit L2 norm (all-zero rows stay zero)."""
    rows: npt.NDArray[Any] = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[npt.NDArray[np.intp]]:
    """Row indices in batches of at most ``batch_size`` rows that all have one length, shortest first.

    A transformer encoder pads a batch to its longest text. Attention and pooling mask the padding,
    so in exact arithmetic it changes nothing, but float sums over a longer, zero-filled axis round
    differently: all-MiniLM-L6-v2's vector of a passage moved by up to 8e-8 with the passages batched
    beside it. A batch of one length has no padding, so each text's vector is a function of the text
    alone (measured: bit-identical alone, in other company and at other batch sizes), which is what
    lets a passage's vector be cached on its own
    (:mod:`~ragfolio.core.retrieval.encoders.vector_store`).

    Args:
        lengths: Tokens of each row, padding excluded.
        batch_size: Rows per batch at most.

    Returns:
        Index arrays covering every row once; a length's rows in their original order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    sizes = np.asarray(lengths, dtype=np.int64)
    batches = []
    for length in np.unique(sizes):
        rows = np.flatnonzero(sizes == length)
        batches += [rows[start : start + batch_size] for start in range(0, len(rows), batch_size)]
    return batches
