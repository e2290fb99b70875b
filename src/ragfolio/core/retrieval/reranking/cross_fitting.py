"""Cross-fitting: train questions scored by fold models that did not see them, every other question by the full model.

The cross-encoder is trained on the train questions' pairs, so it scores those questions better than
it would unseen ones: train rows of the utility matrix and their ``judge.*`` features would be
optimistic, and greedy selection and the routers, which fit on train rows, would favour the family.
Cross-fitting splits the questions the full model trained on into ``K`` folds (:func:`assign_folds`),
trains fold model ``k`` on the pairs of the other folds
(:func:`~ragfolio.core.retrieval.reranking.fold_training.fit_folds`) and scores fold ``k``'s
questions with it. Dev and test questions, and train questions the full model did not train on
(``max_train_questions``), are scored by the full model, the one a bundle serves.

:class:`CrossFittedCrossEncoder` is what a pool runner asks "which model scores this question?"
(:meth:`~CrossFittedCrossEncoder.model_for`). A runner sees question texts, not ids, so the record
maps each cross-fitted question's text to its fold: questions sharing a text share a fold, and a dev
or test question whose text is a train question's is scored as that train question is (the full model
saw its text).

The folds are a folder (:meth:`TrainedCrossFitting.save`): ``fold_<k>/``, each a cross-encoder
folder with its own digest (:mod:`~ragfolio.core.retrieval.reranking.cross_encoder_folder`), and
``ragfolio_cross_fitting.json``: ``k``, the seed, the fold of each question id and its text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ragfolio.core.folder_swap import replace_folder
from ragfolio.core.retrieval.reranking.cross_encoder_folder import CrossEncoderScorer, save_cross_encoder

MANIFEST = "ragfolio_cross_fitting.json"
FORMAT = 1


def assign_folds(texts: Mapping[str, str], k: int, seed: int = 0) -> dict[str, int]:
    """The fold (``0 .. k-1``) of each question id of ``texts`` (question id -> question text).

    Questions sharing a text form one group, named by its smallest id; the groups, ordered by
    sha256 of ``"<seed>:<id>"``, are dealt to the folds in turn. So the folds are disjoint, their
    sizes differ by at most one group, and a question's fold depends on the seed and the ids only,
    not on the order they come in.

    Raises:
        ValueError: ``k < 2`` or fewer than ``k`` distinct texts.
    """
    groups: dict[str, list[str]] = {}
    for qid in sorted(texts):
        groups.setdefault(texts[qid], []).append(qid)
    if k < 2 or len(groups) < k:
        raise ValueError(f"cross-fitting needs folds={k} >= 2 and at least as many distinct questions ({len(groups)})")
    order = sorted(groups.values(), key=lambda ids: hashlib.sha256(f"{seed}:{ids[0]}".encode()).hexdigest())
    return {qid: i % k for i, ids in enumerate(order) for qid in ids}


@dataclass(frozen=True)
class CrossFitting:
    """Which fold each cross-fitted question is in.

    Attributes:
        k: The number of folds.
        seed: The seed of :func:`assign_folds`.
        fold_of: Question id -> its fold.
        texts: Question id -> its text (what a pool runner sees of it).
    """

    k: int
    seed: int
    fold_of: Mapping[str, int]
    texts: Mapping[str, str]

    @classmethod
    def of(cls, texts: Mapping[str, str], k: int, seed: int = 0) -> CrossFitting:
        """The folds :func:`assign_folds` gives ``texts``."""
        return cls(k, seed, assign_folds(texts, k, seed), dict(texts))

    def questions(self, fold: int) -> list[str]:
        """The question ids of ``fold``, sorted."""
        return sorted(qid for qid, f in self.fold_of.items() if f == fold)

    def fold_of_text(self, text: str) -> int | None:
        """The fold of the question with text ``text``; None: no cross-fitted question has it."""
        return self._by_text.get(text)

    @cached_property
    def _by_text(self) -> dict[str, int]:
        return {self.texts[qid]: fold for qid, fold in self.fold_of.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "seed": self.seed, "fold_of": dict(sorted(self.fold_of.items())),
                "texts": dict(sorted(self.texts.items()))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CrossFitting:
        return cls(int(data["k"]), int(data["seed"]), {str(q): int(f) for q, f in data["fold_of"].items()},
                   {str(q): str(t) for q, t in data["texts"].items()})


@dataclass(frozen=True)
class CrossFittedCrossEncoder:
    """The full model, the fold models and the folds: which model scores which question.

    Attributes:
        full: The full model's folder (trained on every cross-fitted question; the one served).
        folds: The fold models' folders, fold ``k``'s at ``k`` (empty: no cross-fitting).
        fitting: The folds; None with no cross-fitting.
    """

    full: str
    folds: tuple[str, ...] = ()
    fitting: CrossFitting | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "folds", tuple(self.folds))
        k = 0 if self.fitting is None else self.fitting.k
        if len(self.folds) != k:
            raise ValueError(f"{len(self.folds)} fold models for {k} folds")

    def model_for(self, query: str) -> str:
        """The folder of the model that scores question ``query`` (a text): its fold's model when
        it is a cross-fitted question, else the full model."""
        fold = None if self.fitting is None else self.fitting.fold_of_text(query)
        return self.full if fold is None else self.folds[fold]

    @property
    def models(self) -> tuple[str, ...]:
        """Every folder: the full model's, then the folds'."""
        return (self.full, *self.folds)

    @classmethod
    def read(cls, full: str, folds: str | None = None) -> CrossFittedCrossEncoder:
        """The full model at ``full`` with the folds saved in folder ``folds`` (None: none)."""
        if folds is None:
            return cls(full)
        manifest = read_manifest(folds)
        if not manifest["k"]:
            return cls(full)
        return cls(full, tuple(str(Path(folds) / name) for name in manifest["models"]),
                   CrossFitting.from_dict(manifest["fitting"]))


@dataclass(frozen=True)
class TrainedCrossFitting:
    """What cross-fitting hands on: the fold models' scorers and the folds, or why there are none.

    Attributes:
        scorers: Fold ``k``'s scorer at ``k``; empty without cross-fitting.
        fitting: The folds; None without cross-fitting.
        info: Per fold what its training recorded (its train question ids included), or ``{"reason": ...}``.
    """

    scorers: tuple[CrossEncoderScorer, ...] = ()
    fitting: CrossFitting | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def folds_path(self) -> str | None:
        """None: no fold model (what an in-memory catalog hands on); fold models must be saved first."""
        if not self.scorers:
            return None
        raise ValueError("the fold models are in memory only; save them to a folder (the catalog's "
                         "cross_encoder_folds, ragfolio.datasets.cross_encoders.CrossEncoderFoldsDataset) for the pool runners to load")

    def save(self, path: str | Path) -> dict[str, Any]:
        """Write the folder ``path`` (replacing it): a ``fold_<k>/`` per model and the manifest; the manifest."""

        def write(tmp: Path) -> dict[str, Any]:
            if self.fitting is None or not self.scorers:
                manifest = {"format": FORMAT, "k": 0, "reason": str(self.info.get("reason", ""))}
            else:
                models = [f"fold_{k}" for k in range(len(self.scorers))]
                for name, scorer, info in zip(models, self.scorers, self.info["folds"], strict=True):
                    save_cross_encoder(scorer, tmp / name, info)
                manifest = {"format": FORMAT, "k": self.fitting.k, "models": models, "fitting": self.fitting.to_dict()}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            return manifest

        return replace_folder(Path(path), write)


@dataclass(frozen=True)
class CrossFittingFolder:
    """A folds folder as later steps see it: where it is and how many fold models it holds."""

    path: str
    k: int

    @classmethod
    def read(cls, path: str | Path) -> CrossFittingFolder:
        """The folder ``path`` (its manifest read; raises FileNotFoundError without one)."""
        return cls(str(path), int(read_manifest(path)["k"]))

    @property
    def folds_path(self) -> str | None:
        """The folder when it holds fold models, else None (what ``PoolSettings.cross_encoder_folds`` records)."""
        return self.path if self.k else None


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the folds folder ``path``.

    Raises:
        FileNotFoundError: ``path`` holds no manifest.
        ValueError: Its format is not this ragfolio's.
    """
    manifest_file = Path(path) / MANIFEST
    if not manifest_file.is_file():
        raise FileNotFoundError(f"no cross-fitted cross-encoder at {path} (missing {MANIFEST}); candidate "
                                "scoring writes one when it trains the cross-encoder")
    manifest: dict[str, Any] = json.loads(manifest_file.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_file}: format {manifest.get('format')!r}, this ragfolio reads {FORMAT}")
    return manifest
