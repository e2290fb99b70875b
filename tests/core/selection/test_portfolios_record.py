"""The portfolios record: what later stages read of portfolio selection, checked when it is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kedro.io import DatasetError

from ragfolio.core.selection.portfolios import SCHEMA_VERSION, Portfolios, Selection
from ragfolio.datasets.record_files import RecordDataset

RECORD = "ragfolio.core.selection.portfolios.Portfolios"


def _portfolios() -> Portfolios:
    sel = Selection(n_train=30, n_train_available=40, greedy=[3, 0, 2], greedy_train_values=[0.5, 0.7, 0.75],
                    portfolio=["c3", "c0"], top_by_average=[0, 3, 1], random=[[1, 2, 0]],
                    certificate={"upper_bound": 0.8, "ratio": 0.9}, required_sample_size=900)
    return Portfolios(k=2, k_max=3, n_queries=None, candidates=["c0", "c1", "c2", "c3"], selections={"all": sel})


def test_members_and_single_best_are_attributes_not_keys() -> None:
    p = _portfolios()
    assert p.members("all") == [3, 0] and p.selection("all").single_best == 0 and p.keys == ["all"]
    with pytest.raises(KeyError, match="no portfolio for 'hotpotqa'; portfolios are \\['all'\\]"):
        p.members("hotpotqa")
    with pytest.raises(ValueError, match="k=4"):
        Portfolios(k=4, k_max=3, n_queries=None, candidates=[], selections={})


def test_the_record_round_trips_and_reads_files_written_before_it_had_a_version(tmp_path: Path) -> None:
    p = _portfolios()
    assert Portfolios.from_dict(p.to_dict()) == p
    old = {key: value for key, value in p.to_dict().items() if key != "schema_version"}
    assert Portfolios.from_dict(old) == p
    with pytest.raises(ValueError, match="schema version 2"):
        Portfolios.from_dict({**p.to_dict(), "schema_version": SCHEMA_VERSION + 1})
    misspelt = p.to_dict()
    misspelt["selections"]["all"]["portfolo"] = misspelt["selections"]["all"].pop("portfolio")
    with pytest.raises(ValueError, match=r"unknown keys \['portfolo'\], missing keys \['portfolio'\]"):
        Portfolios.from_dict(misspelt)


def test_the_dataset_saves_the_json_the_record_gives_and_names_the_file_of_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "06_models" / "portfolios.json"
    dataset = RecordDataset(str(path), RECORD, save_args={"indent": 1})
    assert not dataset.exists()
    dataset.save(_portfolios())
    assert path.read_text() == json.dumps(_portfolios().to_dict(), indent=1)
    assert dataset.load() == _portfolios()
    with pytest.raises(DatasetError, match="holds a ragfolio.core.selection.portfolios.Portfolios, not a dict"):
        dataset.save(_portfolios().to_dict())
    path.write_text(json.dumps({"k": 2}))
    with pytest.raises(DatasetError, match=f"{path}: portfolios: unknown keys \\[\\], missing keys"):
        dataset.load()


def test_the_dataset_reads_and_writes_any_fsspec_filesystem_and_versions() -> None:
    """RecordDataset is kedro-datasets' JSONDataset with the record in front: fsspec paths, versioning."""
    from kedro.io.core import Version

    remote = RecordDataset("memory://ragfolio-test/portfolios.json", RECORD)
    remote.save(_portfolios())
    assert remote.load() == _portfolios() and remote.exists()
    versioned = RecordDataset("memory://ragfolio-test/versioned.json", RECORD, version=Version(None, None))
    versioned.save(_portfolios())
    assert versioned.load() == _portfolios()
