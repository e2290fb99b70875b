"""The utility index record: rows by split, read back from its JSON with every key checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.scoring.utility_index import (
    SCHEMA_VERSION,
    DatasetRows,
    UtilityIndex,
    datasets_of,
    has_split,
    split_rows,
    stacked,
)
from ragfolio.datasets.record_files import RecordDataset


def _index() -> UtilityIndex:
    return UtilityIndex(
        score="support_recall", num_docs=4, candidates=("bm25", "dense"), families=("bm25", "dense"),
        corpus={"mode": "union"},
        datasets={"a": DatasetRows(("a0", "a1", "a2"), ("train", "test", "train"), ("bridge",) * 3),
                  "b": DatasetRows(("b0", "b1"), ("dev", "train"), ("comparison",) * 2)},
    )


def test_rows_by_split_and_the_stacked_all_key() -> None:
    index = _index()
    assert split_rows(index, "a", "train").tolist() == [0, 2] and split_rows(index, "b", "test").tolist() == []
    assert has_split(index, "dev") and not has_split(index, "holdout")
    assert datasets_of(index, "all") == ["a", "b"] and datasets_of(index, "b") == ["b"]
    U = {"a": np.arange(6, dtype=np.float32).reshape(3, 2), "b": np.ones((2, 2), np.float32)}
    train = stacked(U, index, "train")
    np.testing.assert_array_equal(train["all"], np.array([[0, 1], [4, 5], [1, 1]], np.float32))
    with pytest.raises(ValueError, match="unequal lengths: 2 ids, 1 splits"):
        DatasetRows(("x", "y"), ("train",), ("t", "t"))


def test_the_record_round_trips_through_its_dataset_and_names_a_misspelt_key(tmp_path: Path) -> None:
    index = _index()
    assert UtilityIndex.from_dict(index.to_dict()) == index
    unversioned = {k: v for k, v in index.to_dict().items() if k != "schema_version"}
    assert UtilityIndex.from_dict(unversioned) == index  # files written before the record had a version
    with pytest.raises(ValueError, match="schema version 2"):
        UtilityIndex.from_dict({**index.to_dict(), "schema_version": SCHEMA_VERSION + 1})
    misspelt = index.to_dict()
    misspelt["datasets"]["a"]["splits"] = misspelt["datasets"]["a"].pop("split")
    with pytest.raises(ValueError, match=r"a dataset's rows: unknown keys \['splits'\], missing keys \['split'\]"):
        UtilityIndex.from_dict(misspelt)
    path = tmp_path / "utility_index.json"
    dataset = RecordDataset(str(path), "ragfolio.core.scoring.utility_index.UtilityIndex")
    dataset.save(index)
    assert json.loads(path.read_text())["datasets"]["b"]["split"] == ["dev", "train"]
    assert dataset.load() == index
