"""Passage graph construction, validation and storage on hand-made corpora."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph


def edges(graph: PassageGraph) -> set[tuple[int, int]]:
    a = graph.adjacency.tocoo()
    return {(int(i), int(j)) for i, j in zip(a.row, a.col, strict=True) if i < j}


def graph_of(n: int, links: list[tuple[int, int]]) -> PassageGraph:
    rows = [i for i, j in links] + [j for i, j in links]
    cols = [j for i, j in links] + [i for i, j in links]
    a = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))
    return PassageGraph(a)


def test_build_links_title_mentions_and_shared_titles() -> None:
    titles = ["Alpha Centauri", "Beta", "Gamma Ray", "Delta", "1999", "Gamma Ray", "Tau"]
    texts = [
        "Alpha Centauri lies near beta, they say.",  # mentions Beta (case-insensitive)
        "Beta is a letter.",  # its own title only
        "Gamma Ray bursts were seen in 1999.",  # a numeric title never counts
        "Betamax tapes, and tau.",  # no word-boundary match; "Tau" is too short
        "A year.",
        "More on gamma rays.",  # "gamma rays" is not "gamma ray"; same title links 2-5
        "ALPHA CENTAURI again",  # multi-token title, any case
    ]
    graph = PassageGraph.build(titles, texts)
    assert edges(graph) == {(0, 1), (2, 5), (0, 6)}
    assert graph.neighbors(0).tolist() == [1, 6]
    assert graph.neighbors(3).tolist() == []
    assert graph.n == 7


def test_build_caps_degree_keeping_the_longest_titles() -> None:
    titles = ["Hub Node", "Short", "Medium Title", "A Much Longer Title", "Other"]
    texts = ["It cites short, medium title and a much longer title.", "", "", "", "hub node"]
    full = PassageGraph.build(titles, texts)
    assert edges(full) == {(0, 1), (0, 2), (0, 3), (0, 4)}
    capped = PassageGraph.build(titles, texts, max_degree=2)
    # hub 0 keeps its two longest-title links: "A Much Longer Title" (3) and "Medium Title" (2)
    assert edges(capped) == {(0, 2), (0, 3)}
    assert np.diff(capped.adjacency.indptr).max() <= 2


def mapped(array: object) -> bool:
    """Whether ``array`` is a view of a memory-mapped file."""
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = getattr(array, "base", None)
    return False


@pytest.mark.parametrize("mmap", [True, False])
def test_save_and_load_round_trip_as_plain_arrays(tmp_path, mmap: bool) -> None:
    graph = graph_of(4, [(0, 1), (1, 2)])
    graph.save(tmp_path / "graph")
    assert sorted(p.name for p in (tmp_path / "graph").iterdir()) == ["data.npy", "indices.npy", "indptr.npy"]
    loaded = PassageGraph.load(tmp_path / "graph", mmap=mmap)
    assert edges(loaded) == {(0, 1), (1, 2)}
    arrays = (loaded.adjacency.data, loaded.adjacency.indices, loaded.adjacency.indptr)
    assert all(mapped(a) == mmap for a in arrays)  # views of the mapped files, not copies
    assert loaded.neighbors(1).tolist() == [0, 2]


def test_graph_rejects_asymmetric_adjacency() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        PassageGraph(sp.csr_matrix(np.array([[0, 1], [0, 0]], dtype=np.float32)))


def test_build_links_nothing_through_empty_titles() -> None:
    graph = PassageGraph.build(["", " ", "Alpha"], ["alpha", "", ""])
    assert edges(graph) == {(0, 2)}


def test_max_entity_df_drops_the_links_through_hub_titles() -> None:
    # "Hub Title": carried by 0 and 5, mentioned by 1, 2 and 3 -> document frequency 5.
    # "Rare Thing": carried by 4, mentioned by 1 -> document frequency 2.
    titles = ["Hub Title", "One", "Two", "Three", "Rare Thing", "Hub Title"]
    texts = ["", "hub title and rare thing", "the hub title", "Hub Title!", "", ""]
    full = PassageGraph.build(titles, texts)
    hub_links = {(0, 1), (0, 2), (0, 3), (1, 5), (2, 5), (3, 5), (0, 5)}
    assert edges(full) == hub_links | {(1, 4)}
    assert edges(PassageGraph.build(titles, texts, max_entity_df=5)) == edges(full)
    # above the cap, the hub links nothing: neither its mentions nor its two carriers' shared title
    assert edges(PassageGraph.build(titles, texts, max_entity_df=4)) == {(1, 4)}
    assert edges(PassageGraph.build(titles, texts, max_entity_df=1)) == set()


def test_a_cap_no_title_reaches_builds_the_uncapped_graph() -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    titles = [f"{words[i % 30]} {words[(3 * i) % 30]}" for i in range(60)]
    texts = [" ".join(rng.choice(words, 40)) for _ in range(60)]
    for max_degree in (3, 50, None):
        plain = PassageGraph.build(titles, texts, max_degree=max_degree)
        capped = PassageGraph.build(titles, texts, max_degree=max_degree, max_entity_df=60)
        assert (plain.adjacency != capped.adjacency).nnz == 0
    # the degree cap of 3 binds on this corpus
    assert np.diff(PassageGraph.build(titles, texts, max_degree=3).adjacency.indptr).max() == 3
    assert np.diff(PassageGraph.build(titles, texts, max_degree=None).adjacency.indptr).max() > 3


def test_max_degree_none_keeps_every_link_of_a_hub() -> None:
    titles = ["Hub Title"] + [f"p{i}" for i in range(60)]
    texts = [""] + ["on hub title"] * 60
    assert PassageGraph.build(titles, texts).neighbors(0).size == 50
    assert PassageGraph.build(titles, texts, max_degree=None).neighbors(0).tolist() == list(range(1, 61))


def test_build_rejects_bad_caps() -> None:
    with pytest.raises(ValueError, match="max_entity_df=0"):
        PassageGraph.build(["A title"], ["text"], max_entity_df=0)
    with pytest.raises(ValueError, match="max_degree=0"):
        PassageGraph.build(["A title"], ["text"], max_degree=0)
