"""A trained cross-encoder as an inspectable folder, and the scorer read from it.

The folder is what sentence-transformers' ``CrossEncoder.save_pretrained`` writes (``model.safetensors``,
the tokenizer, ``config.json``; with the mean-pooled head also ``modules.json``, ``1_Pooling/`` and
``2_Dense/`` with the head's weights) plus ``ragfolio_cross_encoder.json``: the sha256 of every
file, the package versions, and what the training recorded (settings, pairs, dev MRR by epoch).
The model's identity in cache keys is a sha256 over its weight files (:func:`cross_encoder_digest`),
so retrained weights miss the cached rankings of the ``cross_encoder`` family. A folder written for a run that
trains no cross-encoder holds the manifest alone, ``"trained": false`` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import file_sha256
from ragfolio.core.code_identity import package_versions
from ragfolio.core.folder_swap import replace_folder
from ragfolio.core.retrieval.encoders.vectors import resolve_device

MANIFEST = "ragfolio_cross_encoder.json"
WEIGHTS = "model.safetensors"
FORMAT = 1
PACKAGES = ("sentence-transformers", "transformers", "torch")


class CrossEncoderScorer:
    """Scores (question, passage) pairs with a sentence-transformers ``CrossEncoder`` (one output).

    Safe to call from several threads: one forward pass at a time (fast tokenizers are not thread-safe).

    Args:
        model: A ``sentence_transformers.CrossEncoder`` with ``num_labels == 1``.
        batch_size: Pairs per forward pass.
        show_progress: Show a progress bar while scoring.
    """

    def __init__(self, model: Any, *, batch_size: int = 32, show_progress: bool = False) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.model, self.batch_size, self.show_progress = model, batch_size, show_progress
        self._lock = threading.Lock()

    def score(self, queries: Sequence[str], passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(n_pairs,)`` scores in (0, 1) (sigmoid of the logit) of ``queries[i]`` with ``passages[i]``."""
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries for {len(passages)} passages")
        if not queries:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            self.model.eval()
            scores = self.model.predict(list(zip(queries, passages, strict=True)), batch_size=self.batch_size,
                                        show_progress_bar=self.show_progress, convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float32).reshape(-1)

    def score_rows(
        self, queries: Sequence[str], passage_texts: Sequence[str], doc_ids: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        """``(n_queries, depth)`` scores of each query with the corpus rows ``doc_ids`` (``-inf`` on ``-1``)."""
        doc_ids = np.asarray(doc_ids)
        if doc_ids.ndim != 2 or len(doc_ids) != len(queries):
            raise ValueError(f"doc_ids must be (n_queries={len(queries)}, depth), got {doc_ids.shape}")
        scores = np.full(doc_ids.shape, -np.inf, dtype=np.float32)
        rows, cols = np.nonzero(doc_ids >= 0)
        scores[rows, cols] = self.score([queries[int(i)] for i in rows], [passage_texts[int(d)] for d in doc_ids[rows, cols]])
        return scores


@dataclass(frozen=True)
class TrainedCrossEncoder:
    """What training hands on: the scorer and what its training recorded, or why none was trained.

    Attributes:
        scorer: The trained scorer; None when the run trains none.
        info: The training's record (settings, pairs, dev MRR by epoch, the train question ids), or
            ``{"reason": ...}`` when there is no scorer.
    """

    scorer: CrossEncoderScorer | None
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model_path(self) -> str | None:
        """None: no model was trained (what an in-memory catalog hands on). A trained one has no
        folder until it is saved, and the pool runners load it from one: that raises ValueError."""
        if self.scorer is None:
            return None
        raise ValueError("the trained cross-encoder is in memory only; save it to a folder (the catalog's "
                         "cross_encoder, ragfolio.datasets.cross_encoders.CrossEncoderDataset) for the pool runners to load")

    def save(self, path: str | Path) -> dict[str, Any]:
        """Write the folder ``path`` (:func:`save_cross_encoder` or :func:`save_untrained`); the manifest."""
        if self.scorer is None:
            return save_untrained(path, str(self.info.get("reason", "")))
        return save_cross_encoder(self.scorer, path, self.info)


@dataclass(frozen=True)
class CrossEncoderFolder:
    """A cross-encoder folder as later steps see it: where it is and whether it holds a model."""

    path: str
    trained: bool

    @classmethod
    def read(cls, path: str | Path) -> CrossEncoderFolder:
        """The folder ``path`` (its manifest read; raises FileNotFoundError without one)."""
        return cls(str(path), bool(read_manifest(path)["trained"]))

    @property
    def model_path(self) -> str | None:
        """The folder when it holds a model, else None (what ``PoolSettings.cross_encoder`` records)."""
        return self.path if self.trained else None


def save_cross_encoder(scorer: CrossEncoderScorer, path: str | Path, info: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``scorer``'s model to the folder ``path`` (replacing it) with its manifest; return the manifest.

    Written beside ``path`` and renamed into place, so a reader never sees half a model.
    """

    def write(tmp: Path) -> dict[str, Any]:
        scorer.model.save_pretrained(str(tmp), safe_serialization=True)
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        checksums = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in files}
        if WEIGHTS not in checksums:
            raise FileNotFoundError(f"save_pretrained wrote no {WEIGHTS} in {tmp}: {sorted(checksums)}")
        return {"format": FORMAT, "trained": True, "digest": weights_digest(checksums), "files": checksums,
                "batch_size": scorer.batch_size, "packages": package_versions(PACKAGES), "training": dict(info)}

    return _replace_folder(Path(path), write)


def weights_digest(checksums: Mapping[str, str]) -> str:
    """One sha256 over the sha256 of every ``*.safetensors`` file (the encoder's and the head's)."""
    lines = "".join(f"{name} {sha}\n" for name, sha in sorted(checksums.items()) if name.endswith(".safetensors"))
    return hashlib.sha256(lines.encode()).hexdigest()


def save_untrained(path: str | Path, reason: str) -> dict[str, Any]:
    """Write a folder that holds no model, only a manifest saying why (``"trained": false``)."""
    return _replace_folder(Path(path), lambda tmp: {"format": FORMAT, "trained": False, "reason": reason})


def _replace_folder(target: Path, write: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """:func:`~ragfolio.core.folder_swap.replace_folder` with ``write``'s manifest written into the folder."""

    def with_manifest(tmp: Path) -> dict[str, Any]:
        manifest = write(tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return manifest

    return replace_folder(target, with_manifest)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the cross-encoder folder ``path``.

    Raises:
        FileNotFoundError: ``path`` holds no manifest (naming the folder and how to train one).
    """
    manifest_file = Path(path) / MANIFEST
    if not manifest_file.is_file():
        raise FileNotFoundError(
            f"no trained cross-encoder at {path} (missing {MANIFEST}); train one with `kedro run "
            f"--pipelines=candidate_scoring` and a grid with the cross_encoder family"
        )
    manifest: dict[str, Any] = json.loads(manifest_file.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_file}: format {manifest.get('format')!r}, this ragfolio reads {FORMAT}")
    return manifest


def cross_encoder_digest(path: str | Path) -> str:
    """The digest of the weights in folder ``path`` (:func:`weights_digest`), as its manifest records it.

    Raises:
        FileNotFoundError: The folder holds no trained model (the reason it was not trained included).
    """
    manifest = read_manifest(path)
    if not manifest["trained"]:
        raise FileNotFoundError(f"{path} holds no trained cross-encoder: {manifest.get('reason', '')}")
    return str(manifest["digest"])


def load_cross_encoder(path: str | Path, *, verify: bool = True, device: str = "auto") -> CrossEncoderScorer:
    """The scorer saved in folder ``path`` (:func:`save_cross_encoder`).

    Args:
        path: The folder.
        verify: Check every file against its sha256 first.
        device: ``auto`` (CUDA when torch sees a GPU), ``cpu`` or ``cuda``.

    Raises:
        FileNotFoundError: The folder holds no trained model.
        ValueError: A file does not match its checksum (naming it).
    """
    folder, digest = Path(path), cross_encoder_digest(path)
    manifest = read_manifest(folder)
    if verify:
        for name, expected in manifest["files"].items():
            if not (folder / name).is_file() or file_sha256(folder / name) != expected:
                raise ValueError(f"{folder / name} is missing or does not match its sha256 in {MANIFEST}")
    from sentence_transformers import CrossEncoder  # heavy: only when a model is loaded

    model = CrossEncoder(str(folder), device=resolve_device(device))
    if model.num_labels != 1:
        raise ValueError(f"{folder}: the cross-encoder has {model.num_labels} outputs, expected 1 ({digest[:12]})")
    return CrossEncoderScorer(model, batch_size=int(manifest["batch_size"]))
