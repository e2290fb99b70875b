"""Queries in ONNX Runtime: the same weights, exported once, encoded at up to twice torch's rate.

A served query is encoded by every encoder of the bundle, and on a small CPU that is the service's
limit (docs/benchmarks.md, "The query path"). :class:`OnnxQueries` exports an encoder's
transformers model with its mean pooling (``torch.onnx.export``, the TorchScript exporter) to the
model cache (``$RAGFOLIO_MODEL_CACHE``, else ``~/.cache/ragfolio/models``), once per weights and
package versions, and runs it with ONNX Runtime's CPU provider. The vectors are torch's to float32
rounding (tests check it), so passages keep torch and only queries, which arrive one request at a
time, take this path: ``query_engine: onnxruntime`` of the ``e5_torch`` and mean-pooled
``sentence_transformers`` encoders.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask")
QUERY_ENGINES = ("torch", "onnxruntime")  # what encodes queries: an encoder's ``query_engine``
# Bump when the exported graph computes other vectors: in every export's file name, so a changed export
# is written afresh, and in the identity of the encoders that use it (tests/core/test_cache_versions.py).
EXPORT_VERSION = 1


def weights_digest(model: Any) -> str:
    """16 hex digits of the sha256 of a torch model's state (names and bytes of every tensor)."""
    digest = hashlib.sha256()
    for key, tensor in model.state_dict().items():
        digest.update(key.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def onnx_path(name: str, weights: str, cache_dir: Path | None = None) -> Path:
    """Where the export of model ``name`` with weights ``weights`` (a digest) lives: named by both,
    the versions of the packages that export it and :data:`EXPORT_VERSION`, so other weights, an
    upgrade or a changed export export again."""
    from ragfolio.core.model_cache import model_cache_dir

    versions = "-".join(f"{package}{importlib.metadata.version(package)}" for package in ("torch", "transformers", "onnx"))
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[-60:]
    return (cache_dir or model_cache_dir()) / f"{safe}-{weights}-{versions}-v{EXPORT_VERSION}.onnx"


def export(model: Any, path: Path) -> None:
    """Write ``model`` (a ``BertModel``) followed by mean pooling over real tokens to ``path`` as ONNX
    (written beside it first, then renamed, so a crash leaves no half file)."""
    import torch

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return (hidden * attention_mask[..., None]).sum(1) / attention_mask.sum(1, keepdim=True)

    path.parent.mkdir(parents=True, exist_ok=True)
    example = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.part")
    os.close(fd)
    try:
        with warnings.catch_warnings():  # the TorchScript exporter's deprecation and tracer notes
            warnings.simplefilter("ignore")
            torch.onnx.export(MeanPooled().eval(), (example, example), tmp, input_names=list(_INPUTS),
                              output_names=["pooled"], dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                                                     "pooled": {0: "batch"}}, dynamo=False)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class OnnxQueries:
    """An ONNX Runtime session over an exported encoder: ``pooled(ids)`` gives mean-pooled vectors.

    Args:
        path: The export (:func:`onnx_path`); made on first use by calling ``model()``, so an encoder
            whose export exists never loads its torch model for queries.
        model: Returns the transformers encoder model (``BertModel``: E5's, or a sentence-transformers
            model's ``auto_model``) to export.
        pad_token_id: The token id rows are padded with.
    """

    def __init__(self, path: Path, model: Callable[[], Any], pad_token_id: int) -> None:
        try:
            import onnxruntime
        except ImportError as err:
            raise ImportError("query_engine: onnxruntime needs the onnxruntime and onnx packages "
                              "(in ragfolio's lock: make install)") from err
        if not path.is_file():
            logger.info("exporting a query encoder to ONNX (once): %s", path)
            export(model(), path)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        # No busy-waiting between runs: the service encodes with both encoders while the members and
        # searches run in other threads, and spinning threads took their cores (a lone /retrieve on the
        # full run's bundle, in process: 102 ms with spinning, 52 ms without; docs/benchmarks.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.pad = int(pad_token_id)

    def pooled(self, ids: list[list[int]]) -> npt.NDArray[np.float32]:
        """Mean-pooled last hidden states of token-id rows (padded here), ``(len(ids), hidden)``."""
        batch = np.full((len(ids), max(len(row) for row in ids)), self.pad, dtype=np.int64)
        mask = np.zeros_like(batch)
        for j, row in enumerate(ids):
            batch[j, : len(row)], mask[j, : len(row)] = row, 1
        return np.asarray(self.session.run(None, dict(zip(_INPUTS, (batch, mask), strict=True)))[0], dtype=np.float32)

    def encode(self, ids: list[list[int]], batch_size: int) -> npt.NDArray[np.float32]:
        """L2-normalised vectors of token-id rows, run ``batch_size`` at a time in order of length (so a
        batch pads little) and returned in the rows' order."""
        from ragfolio.core.retrieval.encoders.vectors import l2_normalise

        order = np.argsort([len(row) for row in ids], kind="stable")
        batches = [order[start : start + batch_size] for start in range(0, len(ids), batch_size)]
        pooled = np.concatenate([self.pooled([ids[r] for r in rows]) for rows in batches])
        return l2_normalise(pooled[np.argsort(order, kind="stable")])
