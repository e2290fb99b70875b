"""The utility matrices' index: which question each row is, and its split and type, per dataset.

Candidate scoring writes one ``(n_questions, n_candidates)`` utility matrix per dataset and a
:class:`UtilityIndex` (``utility_index.json``)::

    {"schema_version": 1, "score": ..., "num_docs": ..., "candidates": [name, ...], "families": [...],
     "corpus": {...}, "datasets": {dataset: {"ids": [...], "split": [...], "type": [...]}}}

with ``ids``, ``split`` and ``type`` in row order; a row's split is ``train`` (what stages fit on),
``dev`` (carved from train by ``data_prep.dev_fraction``: development choices) or ``test`` (read
by the reports only). Later stages select rows by split here and join rows to questions on their
ids. ``all`` (:data:`ALL`) names every dataset's rows stacked, in the index's dataset order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from ragfolio.core.data.records import Question
from ragfolio.core.record_checks import checked_fields, read_version

SCHEMA_VERSION = 1


ALL = "all"
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class DatasetRows:
    """One dataset's utility-matrix rows: each row's question id, split and question type, in row order."""

    ids: tuple[str, ...]
    split: tuple[str, ...]
    type: tuple[str, ...]

    def __post_init__(self) -> None:
        if not len(self.ids) == len(self.split) == len(self.type):
            raise ValueError(f"rows of unequal lengths: {len(self.ids)} ids, {len(self.split)} splits, "
                             f"{len(self.type)} types")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        rows = checked_fields(cls, data, "a dataset's rows")
        return cls(**{name: tuple(values) for name, values in rows.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "split": list(self.split), "type": list(self.type)}


@dataclass(frozen=True)
class UtilityIndex:
    """What candidate scoring scored: the columns (candidates), the rows (per dataset) and how.

    Attributes:
        score: The per-query score of the matrices (``support_recall``, ``answer_recall``, ...).
        num_docs: Passages each candidate returned per query.
        candidates: Column names, in column order; ``families`` is each one's family.
        corpus: :meth:`~ragfolio.core.data.corpora.Corpora.describe` of the corpus scored over.
        datasets: Each dataset's :class:`DatasetRows`, in the order stages stack them.
    """

    score: str
    num_docs: int
    candidates: tuple[str, ...]
    families: tuple[str, ...]
    corpus: Mapping[str, Any]
    datasets: Mapping[str, DatasetRows]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record of a :meth:`to_dict` mapping (without ``schema_version``: version 1).

        Raises:
            ValueError: A newer schema, or a key unknown or missing (the message names them).
        """
        index = checked_fields(cls, read_version(data, "a utility index", SCHEMA_VERSION), "a utility index")
        return cls(
            score=index["score"], num_docs=int(index["num_docs"]), candidates=tuple(index["candidates"]),
            families=tuple(index["families"]), corpus=dict(index["corpus"]),
            datasets={d: DatasetRows.from_dict(rows) for d, rows in index["datasets"].items()},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION, "score": self.score, "num_docs": self.num_docs,
            "candidates": list(self.candidates), "families": list(self.families), "corpus": dict(self.corpus),
            "datasets": {d: rows.to_dict() for d, rows in self.datasets.items()},
        }


def has_split(utility_index: UtilityIndex, split: str) -> bool:
    """Whether some dataset of the index has rows of ``split``."""
    return any(split in rows.split for rows in utility_index.datasets.values())


def split_rows(utility_index: UtilityIndex, dataset: str, split: str) -> npt.NDArray[np.int64]:
    """Row numbers of ``dataset``'s utility matrix that belong to ``split``."""
    splits = np.asarray(utility_index.datasets[dataset].split)
    return np.flatnonzero(splits == split).astype(np.int64)


def datasets_of(utility_index: UtilityIndex, key: str) -> list[str]:
    """The datasets whose rows portfolio ``key`` stands for: every dataset for :data:`ALL`, else ``[key]``."""
    return list(utility_index.datasets) if key == ALL else [key]


def stacked(
    utility_matrices: Mapping[str, npt.NDArray[Any]], utility_index: UtilityIndex, split: str
) -> dict[str, npt.NDArray[Any]]:
    """Each dataset's ``split`` rows, plus :data:`ALL`: every dataset's rows stacked (same columns)."""
    parts = {d: np.asarray(utility_matrices[d][split_rows(utility_index, d, split)]) for d in utility_index.datasets}
    return {**parts, ALL: np.concatenate(list(parts.values()), axis=0)}


def row_questions(questions: list[dict[str, Any]], utility_index: UtilityIndex, dataset: str) -> list[Question]:
    """The questions of ``dataset``'s utility-matrix rows, in row order, joined on their ids.

    Raises:
        ValueError: A row's id is not among ``questions`` of that dataset (the index is stale).
    """
    by_id = {r["id"]: r for r in questions if r["dataset"] == dataset}
    ids = utility_index.datasets[dataset].ids
    if missing := [qid for qid in ids if qid not in by_id]:
        raise ValueError(f"{dataset}: {len(missing)} utility-matrix row(s) name questions that are not in the "
                         f"questions, first {missing[0]!r}: rerun candidate_scoring")
    return [Question.from_record(by_id[qid], source="questions") for qid in ids]


def split_questions(
    questions: list[dict[str, Any]], utility_index: UtilityIndex, dataset: str, split: str
) -> list[Question]:
    """The questions of ``dataset``'s ``split`` rows, in row order (see :func:`row_questions`)."""
    rows = row_questions(questions, utility_index, dataset)
    return [rows[i] for i in split_rows(utility_index, dataset, split)]
