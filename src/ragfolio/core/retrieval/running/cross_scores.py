"""The pool runner's cross-encoder: loaded once from its folder, its pair scores kept per query batch.

:class:`CrossEncoderPart` holds the folder that ``PoolSettings.cross_encoder`` names and loads the
scorer on first use; its weights' sha256 goes into the cache key of every candidate that reads it,
so retrained weights recompute those rankings (and only those). :class:`ColumnScores` holds one
query batch's scores with one base's passages, the first columns first: a candidate that scores
the top 10 and one that scores the top 20 of the same base score the top 10 once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.reranking.cross_encoder_folder import (
    CrossEncoderScorer,
    cross_encoder_digest,
    load_cross_encoder,
)

Scores = npt.NDArray[np.float32]


class CrossEncoderPart:
    """The trained cross-encoder in folder ``folder`` (None: none configured), loaded on first use.

    Raises (on use, not construction):
        ValueError: No folder is configured (the family is in the grid but nothing trained it).
        FileNotFoundError: The folder holds no trained model.
    """

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self._scorer: CrossEncoderScorer | None = None
        self._lock = threading.Lock()

    def _folder(self) -> str:
        if self.folder is None:
            raise ValueError(
                "the cross_encoder family needs a trained cross-encoder, and these pool settings name none "
                "(PoolSettings.cross_encoder); candidate scoring trains one when the grid holds the family"
            )
        return self.folder

    @cached_property
    def digest(self) -> str:
        """The sha256 of the model's weights (its identity in cache keys)."""
        return cross_encoder_digest(self._folder())

    def scorer(self) -> CrossEncoderScorer:
        """The scorer, loaded (and its files checked) on the first call."""
        with self._lock:
            if self._scorer is None:
                self._scorer = load_cross_encoder(self._folder())
            return self._scorer


class ColumnScores:
    """``(n_queries, depth)`` scores of a query batch with a ranking's passages, grown column-wise on demand."""

    def __init__(self) -> None:
        self._scores: Scores | None = None
        self._lock = threading.Lock()

    def upto(self, depth: int, compute: Callable[[int, int], Scores]) -> Scores:
        """The first ``depth`` columns; ``compute(lo, hi)`` scores columns ``lo:hi`` not held yet."""
        with self._lock:
            held = self._scores
            if held is None or depth > held.shape[1]:
                new = compute(0 if held is None else held.shape[1], depth)
                held = self._scores = new if held is None else np.hstack([held, new])
            return held[:, :depth]
