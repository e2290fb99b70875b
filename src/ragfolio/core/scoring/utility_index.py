"""The utility matrices' index: which question each row is, and its split and type, per dataset.

Candidate scoring writes one ``(n_questions, n_candidates)`` utility matrix per dataset and an
index (``utility_index.json``)::

    {"candidates": [name, ...], "score": ..., "num_docs": ..., "corpus": {...},
     "datasets": {dataset: {"ids": [...], "split": [...], "type": [...]}}}

with ``ids``, ``split`` and ``type`` in row order; a row's split is ``train`` (what stages fit on),
``dev`` (carved from train by ``data_prep.dev_fraction``: development choices) or ``test`` (read
by the reports only). Later stages select rows by split here and join rows to questions on their ids. ``all`` (:data:`ALL`) names every dataset's rows stacked, in the
index's dataset order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.data.records import Question

ALL = "all"
SPLITS = ("train", "dev", "test")


def has_split(utility_index: Mapping[str, Any], split: str) -> bool:
    """Whether some dataset of the index has rows of ``split``."""
    return any(split in rows["split"] for rows in utility_index["datasets"].values())


def split_rows(utility_index: Mapping[str, Any], dataset: str, split: str) -> npt.NDArray[np.int64]:
    """Row numbers of ``dataset``'s utility matrix that belong to ``split``."""
    splits = np.asarray(utility_index["datasets"][dataset]["split"])
    return np.flatnonzero(splits == split).astype(np.int64)


def datasets_of(utility_index: Mapping[str, Any], key: str) -> list[str]:
    """The datasets whose rows portfolio ``key`` stands for: every dataset for :data:`ALL`, else ``[key]``."""
    return list(utility_index["datasets"]) if key == ALL else [key]


def stacked(
    utility_matrices: Mapping[str, npt.NDArray[Any]], utility_index: Mapping[str, Any], split: str
) -> dict[str, npt.NDArray[Any]]:
    """Each dataset's ``split`` rows, plus :data:`ALL`: every dataset's rows stacked (same columns)."""
    parts = {d: np.asarray(utility_matrices[d][split_rows(utility_index, d, split)]) for d in utility_index["datasets"]}
    return {**parts, ALL: np.concatenate(list(parts.values()), axis=0)}


def row_questions(questions: list[dict[str, Any]], utility_index: Mapping[str, Any], dataset: str) -> list[Question]:
    """The questions of ``dataset``'s utility-matrix rows, in row order, joined on their ids.

    Raises:
        ValueError: A row's id is not among ``questions`` of that dataset (the index is stale).
    """
    by_id = {r["id"]: r for r in questions if r["dataset"] == dataset}
    ids = utility_index["datasets"][dataset]["ids"]
    if missing := [qid for qid in ids if qid not in by_id]:
        raise ValueError(f"{dataset}: {len(missing)} utility-matrix row(s) name questions that are not in the "
                         f"questions, first {missing[0]!r}: rerun candidate_scoring")
    return [Question.from_record(by_id[qid], source="questions") for qid in ids]


def split_questions(
    questions: list[dict[str, Any]], utility_index: Mapping[str, Any], dataset: str, split: str
) -> list[Question]:
    """The questions of ``dataset``'s ``split`` rows, in row order (see :func:`row_questions`)."""
    rows = row_questions(questions, utility_index, dataset)
    return [rows[i] for i in split_rows(utility_index, dataset, split)]
