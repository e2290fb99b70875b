import numpy as np
import pytest
from kedro.io import DatasetError

from ragfolio.core.cache import ArrayCache
from ragfolio.datasets.array_folders import ArrayFolderDataset
from ragfolio.datasets.array_trees import ArrayTreeDataset
from ragfolio.datasets.retrieval_cache import ArrayCacheDataset


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


def test_array_tree_round_trip_keeps_arrays_sparse_matrices_and_order(tmp_path) -> None:
    import json

    import scipy.sparse as sp

    tree = {"hotpotqa": {"text": sp.random(5, 8, density=0.3, format="csr", dtype=np.float32, random_state=0),
                         "minilm": np.arange(15, dtype=np.float32).reshape(5, 3)},
            "musique": {}, "names": ["b", "a"], "n": np.int64(3)}
    dataset = ArrayTreeDataset(str(tmp_path / "tree"))
    dataset.save(tree)
    back = dataset.load()
    assert list(back) == list(tree) and back["names"] == ["b", "a"] and back["n"] == 3 and back["musique"] == {}
    assert sp.issparse(back["hotpotqa"]["text"]) and (back["hotpotqa"]["text"] != tree["hotpotqa"]["text"]).nnz == 0
    assert back["hotpotqa"]["minilm"].dtype == np.float32
    np.testing.assert_array_equal(back["hotpotqa"]["minilm"], tree["hotpotqa"]["minilm"])
    files = json.loads((tmp_path / "tree" / "tree.json").read_text())["tree"]  # inspectable: no pickles
    assert files["hotpotqa"]["minilm"] == {"__array__": "arrays/1.npy"}

    dataset.save({"only": np.zeros(2)})  # a smaller tree leaves no stale arrays
    assert sorted(p.name for p in (tmp_path / "tree" / "arrays").iterdir()) == ["0.npy"]


def test_array_tree_stores_records_and_refuses_others(tmp_path) -> None:
    from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
    from ragfolio.core.routing.judging.evaluation import RoutingComparison

    comparisons = ArrayTreeDataset(str(tmp_path / "dev"), "ragfolio.core.routing.judging.evaluation.RoutingComparison",
                                   keyed=True)
    picks = {"learned": np.array([[1, 0], [0, 1]]), "top_average": np.array([[0, 1], [0, 1]])}
    comparisons.save({"all": RoutingComparison(picks, np.array([[0.0, 1.0], [1.0, 0.5]], np.float32))})
    back = comparisons.load()["all"]
    assert list(back.picks) == ["learned", "top_average"] and back.curves == {"learned": [1.0, 1.0], "top_average": [0.5, 1.0]}
    with pytest.raises(DatasetError, match="holds ragfolio.core.routing.judging.evaluation.RoutingComparison records"):
        comparisons.save({"all": {"picks": picks}})

    inputs = ArrayTreeDataset(str(tmp_path / "retrieval"), "ragfolio.core.routing.features.retrieval_features.RetrievalInputs")
    record = RetrievalInputs({"a": np.ones((2, 3), np.float32)}, {"all": {"a": np.ones((2, 2, 4), np.float32)}},
                             {"first_stage": ["x", "y", "z"], "members": ["m"] * 4})
    inputs.save(record)
    back_inputs = inputs.load()
    assert back_inputs.names == record.names
    np.testing.assert_array_equal(back_inputs.members["all"]["a"], record.members["all"]["a"])
    with pytest.raises(DatasetError, match="no array tree at"):
        ArrayTreeDataset(str(tmp_path / "missing")).load()


def test_a_timings_file_loads_back_and_an_absent_one_loads_as_no_timings(tmp_path) -> None:
    from ragfolio.datasets.timing_files import TimingsDataset

    timings = TimingsDataset(filepath=str(tmp_path / "timings" / "retrieval_features.json"))
    assert timings.exists() and timings.load() == {}  # e.g. after a dvc pull: timings are not tracked
    timings.save({"cost": {"n_queries": 2, "fetch_ms_per_query": 0.25}})
    assert timings.load() == {"cost": {"n_queries": 2, "fetch_ms_per_query": 0.25}}
