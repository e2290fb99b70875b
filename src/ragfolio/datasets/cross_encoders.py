"""The trained cross-encoder's folder and its fold models (cross-fitting), as Kedro datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, DatasetError

from ragfolio.core.retrieval.reranking import cross_fitting
from ragfolio.core.retrieval.reranking.cross_encoder_folder import MANIFEST, CrossEncoderFolder, TrainedCrossEncoder


class CrossEncoderDataset(AbstractDataset[TrainedCrossEncoder, CrossEncoderFolder]):
    """The trained cross-encoder's folder at ``path`` (``candidate_scoring``'s ``cross_encoder``).

    ``save`` writes the folder (:meth:`~ragfolio.core.retrieval.reranking.cross_encoder_folder.TrainedCrossEncoder.save`:
    safetensors, tokenizer and a manifest of checksums, or the manifest alone saying why none was
    trained); ``load`` gives the :class:`CrossEncoderFolder` (where it is, whether it holds a model),
    which the pool settings record, so runners load the model themselves, where they run.
    """

    _saved: type[Any] = TrainedCrossEncoder
    _loaded: Any = CrossEncoderFolder
    _manifest = MANIFEST

    def __init__(self, path: str) -> None:
        self._path = Path(path)

    def load(self) -> Any:
        try:
            return self._loaded.read(self._path)
        except (FileNotFoundError, ValueError) as e:
            raise DatasetError(str(e)) from e

    def save(self, data: Any) -> None:
        if not isinstance(data, self._saved):
            raise DatasetError(f"{self._path} holds a {self._saved.__name__}, not a {type(data).__name__}")
        data.save(self._path)

    def _exists(self) -> bool:
        return (self._path / self._manifest).is_file()

    def _describe(self) -> dict[str, Any]:
        return {"path": str(self._path)}


class CrossEncoderFoldsDataset(CrossEncoderDataset):
    """Its fold models (``cross_encoder_folds``): saves a ``TrainedCrossFitting``, loads a ``CrossFittingFolder``."""

    _saved, _loaded, _manifest = cross_fitting.TrainedCrossFitting, cross_fitting.CrossFittingFolder, cross_fitting.MANIFEST
