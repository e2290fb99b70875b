"""The pool runner's cross-encoder: loaded once from its folder, its pair scores kept per query batch.

:class:`CrossEncoderPart` holds the folder that ``PoolSettings.cross_encoder`` names (the full
model) and, with cross-fitting, the folder of fold models ``PoolSettings.cross_encoder_folds``
names (:mod:`ragfolio.core.retrieval.reranking.cross_fitting`). It scores each query with the model
that did not train on it (:meth:`CrossEncoderPart.folder_for`) and loads each model on first use.
The digest of the models that scored a batch's queries (:meth:`CrossEncoderPart.digest_for`) goes
into the cache key of every candidate that reads it, so retrained weights recompute those rankings
(and only those). :class:`ColumnScores` holds one query batch's scores with one base's passages,
the first columns first: a candidate that scores the top 10 and one that scores the top 20 of the
same base score the top 10 once.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.reranking.cross_encoder_folder import (
    CrossEncoderScorer,
    cross_encoder_digest,
    load_cross_encoder,
)
from ragfolio.core.retrieval.reranking.cross_fitting import CrossFittedCrossEncoder

Scores = npt.NDArray[np.float32]


class CrossEncoderPart:
    """The trained cross-encoder in folder ``folder`` (None: none configured), with the fold models
    in folder ``folds`` (None: no cross-fitting), each loaded on first use.

    Raises (on use, not construction):
        ValueError: No folder is configured (the family is in the grid but nothing trained it).
        FileNotFoundError: A folder holds no trained model.
    """

    def __init__(self, folder: str | None, folds: str | None = None) -> None:
        if folds is not None and folder is None:
            raise ValueError(f"cross-encoder fold models at {folds} without the full model")
        self.folder, self.folds = folder, folds
        self._scorers: dict[str, CrossEncoderScorer] = {}
        self._digests: dict[str, str] = {}
        self._lock = threading.Lock()

    def _folder(self) -> str:
        if self.folder is None:
            raise ValueError(
                "the cross_encoder family needs a trained cross-encoder, and these pool settings name none "
                "(PoolSettings.cross_encoder); candidate scoring trains one when the grid holds the family"
            )
        return self.folder

    @cached_property
    def models(self) -> CrossFittedCrossEncoder:
        """The full model, the fold models and which questions each scores (the folds' manifest read)."""
        return CrossFittedCrossEncoder.read(self._folder(), self.folds)

    def folder_for(self, query: str) -> str:
        """The folder of the model that scores question ``query``: its fold model, if it is a
        cross-fitted train question, else the full model."""
        return self.models.model_for(query)

    @property
    def digest(self) -> str:
        """The sha256 of the full model's weights."""
        return self._digest(self._folder())

    def _digest(self, folder: str) -> str:
        with self._lock:
            if folder not in self._digests:
                self._digests[folder] = cross_encoder_digest(folder)
            return self._digests[folder]

    def digest_for(self, queries: Sequence[str]) -> str:
        """The identity of the models that score ``queries``: the full model's digest when it scores
        them all, else a sha256 over each query's model digest, in order."""
        folders = [self.folder_for(q) for q in queries]
        if all(folder == self.folder for folder in folders):
            return self.digest
        return hashlib.sha256("".join(f"{self._digest(f)}\n" for f in folders).encode()).hexdigest()

    def scorer(self, folder: str | None = None) -> CrossEncoderScorer:
        """The scorer in ``folder`` (None: the full model's), loaded (and its files checked) on the first call."""
        folder = folder or self._folder()
        with self._lock:
            if folder not in self._scorers:
                self._scorers[folder] = load_cross_encoder(folder)
            return self._scorers[folder]

    def load(self, queries: Sequence[str]) -> None:
        """Load every model that scores ``queries`` (before candidates run)."""
        for folder in dict.fromkeys(self.folder_for(q) for q in queries):
            self.scorer(folder)

    def score(self, queries: Sequence[str], passages: Sequence[str]) -> Scores:
        """``(n_pairs,)`` scores of ``queries[i]`` with ``passages[i]``, each pair by its query's model."""
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries for {len(passages)} passages")
        out = np.zeros(len(queries), dtype=np.float32)
        for folder, rows in self._groups(queries).items():
            out[rows] = self.scorer(folder).score([queries[i] for i in rows], [passages[i] for i in rows])
        return out

    def score_rows(self, queries: Sequence[str], passage_texts: Sequence[str], doc_ids: npt.NDArray[np.int64]) -> Scores:
        """``(n_queries, depth)`` scores of each query with the corpus rows ``doc_ids`` (``-inf`` on
        ``-1``), each query's row by its model (:meth:`CrossEncoderScorer.score_rows`)."""
        doc_ids = np.asarray(doc_ids)
        if doc_ids.ndim != 2 or len(doc_ids) != len(queries):
            raise ValueError(f"doc_ids must be (n_queries={len(queries)}, depth), got {doc_ids.shape}")
        out = np.full(doc_ids.shape, -np.inf, dtype=np.float32)
        for folder, rows in self._groups(queries).items():
            out[rows] = self.scorer(folder).score_rows([queries[i] for i in rows], passage_texts, doc_ids[rows])
        return out

    def _groups(self, queries: Sequence[str]) -> dict[str, list[int]]:
        """The positions of ``queries`` by the folder of the model that scores them."""
        groups: dict[str, list[int]] = {}
        for i, query in enumerate(queries):
            groups.setdefault(self.folder_for(query), []).append(i)
        return groups


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
