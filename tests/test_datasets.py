import numpy as np
import pytest
from kedro.io import DatasetError

from ragfolio.core.cache import ArrayCache
from ragfolio.datasets import ArrayCacheDataset, ArrayFolderDataset


def test_array_folder_round_trip_memory_maps(tmp_path) -> None:
    ds = ArrayFolderDataset(str(tmp_path / "u"))
    assert not ds.exists()
    ds.save({"hotpotqa": np.eye(3, dtype=np.float32), "musique": np.zeros((2, 3), dtype=np.float32)})
    ds.save({"hotpotqa": np.ones((2, 2), dtype=np.float32)})  # a second save drops stale arrays
    loaded = ds.load()
    assert list(loaded) == ["hotpotqa"] and isinstance(loaded["hotpotqa"], np.memmap)
    np.testing.assert_array_equal(loaded["hotpotqa"], np.ones((2, 2)))
    assert not (tmp_path / "u" / "musique.npy").exists()


def test_array_folder_rejects_path_like_keys(tmp_path) -> None:
    with pytest.raises(DatasetError, match="not a valid file name"):
        ArrayFolderDataset(str(tmp_path / "u")).save({"../x": np.zeros(1)})


def test_array_folder_missing_names_the_path(tmp_path) -> None:
    with pytest.raises(DatasetError, match="no array folder"):
        ArrayFolderDataset(str(tmp_path / "nope")).load()


def test_array_cache_dataset_is_load_only(tmp_path) -> None:
    ds = ArrayCacheDataset(str(tmp_path / "cache"))
    assert isinstance(ds.load(), ArrayCache)
    assert not (tmp_path / "cache").exists()  # nothing is created until a node writes
    with pytest.raises(DatasetError):
        ds.save(None)
