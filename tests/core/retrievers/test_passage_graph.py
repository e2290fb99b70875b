"""Passage graph construction, validation and storage on hand-made corpora."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ragfolio.core.retrievers.passage_graph import PassageGraph


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


def test_save_and_load_round_trip(tmp_path) -> None:
    graph = graph_of(4, [(0, 1), (1, 2)])
    path = tmp_path / "graph.npz"
    graph.save(path)
    with np.load(path, allow_pickle=False) as raw:  # plain arrays, no pickle
        assert "indptr" in raw
    loaded = PassageGraph.load(path)
    assert edges(loaded) == {(0, 1), (1, 2)}


def test_graph_rejects_asymmetric_adjacency() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        PassageGraph(sp.csr_matrix(np.array([[0, 1], [0, 0]], dtype=np.float32)))


def test_build_links_nothing_through_empty_titles() -> None:
    graph = PassageGraph.build(["", " ", "Alpha"], ["alpha", "", ""])
    assert edges(graph) == {(0, 2)}
