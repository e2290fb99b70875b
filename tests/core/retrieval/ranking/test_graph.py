"""Graph expansion (seeds, neighbourhoods, personalised PageRank) on hand-made graphs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from ragfolio.core.retrieval.ranking.graph_expansion import PassageGraph, graph_expand
from ragfolio.core.retrieval.results import RetrievalResult


def graph_of(n: int, links: list[tuple[int, int]]) -> PassageGraph:
    rows = [i for i, j in links] + [j for i, j in links]
    cols = [j for i, j in links] + [i for i, j in links]
    a = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, n))
    return PassageGraph(a)


def seeds(ids: list[list[int]]) -> RetrievalResult:
    doc_ids = np.asarray(ids, dtype=np.int64)
    scores = -np.arange(doc_ids.size, dtype=np.float32).reshape(doc_ids.shape)
    return RetrievalResult(doc_ids, scores)


def test_ppr_ranks_a_seed_neighbour_above_a_weaker_unrelated_seed() -> None:
    graph = graph_of(6, [(0, 1), (3, 4)])
    out = graph_expand(seeds([[0, 5, 3]]), graph, 4, n_seeds=2, hops=1, n_iter=300)
    # restart r = (2/3 on 0, 1/3 on 5); 5 is isolated (dangling), 1 hangs off 0:
    # x5 = .15 r5 + .85 x5 r5, x1 = .85 x0, x0 = .15 r0 + .85 (x1 + x5 r0)
    x5 = 0.15 / 3 / (1 - 0.85 / 3)
    x0 = (0.15 * 2 / 3 + 0.85 * x5 * 2 / 3) / (1 - 0.85**2)
    # seed 3 is beyond n_seeds, so 4 is not reached; the short list is completed with seed 3
    assert out.doc_ids.tolist() == [[0, 1, 5, 3]]
    np.testing.assert_allclose(out.scores[0, :3], [x0, 0.85 * x0, x5], rtol=1e-5)
    assert out.scores[0, 3] < out.scores[0, 2]


def test_hops_bound_the_neighbourhood() -> None:
    graph = graph_of(5, [(0, 1), (1, 2), (2, 3)])
    one = graph_expand(seeds([[0]]), graph, 4, n_seeds=1, hops=1)
    two = graph_expand(seeds([[0]]), graph, 4, n_seeds=1, hops=2)
    assert one.doc_ids.tolist() == [[0, 1, -1, -1]]
    # on the path 0-1-2 the middle node out-scores the seed (x1 = .85 x0 / (1 - .85**2 / 2))
    assert two.doc_ids.tolist() == [[1, 0, 2, -1]]
    zero = graph_expand(seeds([[2, 0]]), graph, 3, n_seeds=2, hops=0)
    assert sorted(zero.doc_ids[0, :2].tolist()) == [0, 2] and zero.doc_ids[0, 2] == -1


def test_dense_rank_orders_the_neighbourhood_by_cosine() -> None:
    graph = graph_of(4, [(0, 1), (0, 2), (2, 3)])
    passages = np.array([[0.6, 0.8], [1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    out = graph_expand(
        seeds([[0]]), graph, 4, n_seeds=1, hops=1, rank="dense",
        query_emb=query, passage_emb=passages,
    )
    assert out.doc_ids.tolist() == [[1, 2, 0, -1]]
    np.testing.assert_allclose(out.scores[0, :3], [1.0, 0.8, 0.6], rtol=1e-6)


def test_queries_without_seeds_are_all_padding() -> None:
    graph = graph_of(3, [(0, 1)])
    out = graph_expand(seeds([[-1, -1], [1, -1]]), graph, 2, n_seeds=2, hops=1)
    assert out.doc_ids.tolist() == [[-1, -1], [1, 0]]


def test_graph_expand_validates_arguments() -> None:
    graph = graph_of(3, [(0, 1)])
    with pytest.raises(ValueError, match="rank='pagerank'"):
        bad_rank: Any = "pagerank"
        graph_expand(seeds([[0]]), graph, 2, n_seeds=1, hops=1, rank=bad_rank)
    with pytest.raises(ValueError, match="needs query_emb"):
        graph_expand(seeds([[0]]), graph, 2, n_seeds=1, hops=1, rank="dense")
    with pytest.raises(ValueError, match="out of range"):
        graph_expand(seeds([[7]]), graph, 2, n_seeds=1, hops=1)
    with pytest.raises(ValueError, match="damping=1.0"):
        graph_expand(seeds([[0]]), graph, 2, n_seeds=1, hops=1, damping=1.0)


def naive_expand(seed_ids, adj, k, n_seeds, hops, damping, n_iter):
    """One query at a time with dense matrices, straight from the definitions."""
    out = []
    for row in seed_ids:
        seed = list(dict.fromkeys(int(i) for i in row if i >= 0))[:n_seeds]
        nodes, frontier = set(seed), set(seed)
        for _ in range(hops):
            frontier = {int(u) for v in frontier for u in adj[v].indices} - nodes
            nodes |= frontier
        nodes = sorted(nodes)
        sub = adj[nodes][:, nodes].toarray()
        degree = sub.sum(axis=1)
        restart = np.zeros(len(nodes))
        for rank, v in enumerate(seed, start=1):
            restart[nodes.index(v)] = 1.0 / rank
        restart /= restart.sum() if seed else 1.0
        x = restart.copy()
        for _ in range(n_iter):
            moved = sub @ np.where(degree > 0, x / np.maximum(degree, 1), 0.0)
            x = (1 - damping) * restart + damping * (moved + x[degree == 0].sum() * restart)
        ranked = [v for v, _ in sorted(zip(nodes, x, strict=True), key=lambda t: (-t[1], t[0]))[:k]]
        ranked += [int(v) for v in dict.fromkeys(int(i) for i in row) if v >= 0 and v not in ranked][: k - len(ranked)]
        out.append(ranked + [-1] * (k - len(ranked)))
    return out


@pytest.mark.parametrize("hops", [0, 1, 2])
def test_batched_ppr_matches_naive_per_query(hops: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragfolio.core.retrieval.ranking.graph_expansion as graph_module

    monkeypatch.setattr(graph_module, "_QUERY_CHUNK", 4)  # several chunks, one ragged
    rng = np.random.default_rng(1)
    links = {tuple(sorted(map(int, rng.choice(40, 2, replace=False)))) for _ in range(60)}
    graph = graph_of(40, sorted(links))
    ids = np.stack([rng.permutation(40)[:6] for _ in range(10)])
    ids[2, :] = -1
    ids[5, 1] = ids[5, 0]  # a repeated seed counts once
    got = graph_expand(seeds(ids.tolist()), graph, 5, n_seeds=3, hops=hops, damping=0.7, n_iter=25)
    want = naive_expand(ids, graph.adjacency, 5, 3, hops, 0.7, 25)
    assert got.doc_ids.tolist() == want


def test_max_candidates_keeps_whole_hops_then_the_overflowing_hops_closest_passages() -> None:
    # 0 -> {1, 2, 3} (hop 1), 1 -> 4 (hop 2); cosines to the query: 3 > 1 > 2, and 4 best of all
    graph = graph_of(5, [(0, 1), (0, 2), (0, 3), (1, 4)])
    passages = np.array([[0.0, 1.0], [0.8, 0.6], [0.6, 0.8], [0.9, 0.4359], [1.0, 0.0]], dtype=np.float32)
    query = np.array([[1.0, 0.0]], dtype=np.float32)

    def members(cap: int | None) -> set[int]:
        out = graph_expand(seeds([[0]]), graph, 5, n_seeds=1, hops=2, rank="dense", query_emb=query,
                           passage_emb=passages, max_candidates=cap)
        return {int(d) for d in out.doc_ids[0] if d >= 0}

    assert members(None) == members(5) == {0, 1, 2, 3, 4}
    assert members(4) == {0, 1, 2, 3}  # hop 1 whole; hop 2 would overflow and the cap is reached
    assert members(3) == {0, 3, 1}  # hop 1 overflows: its two closest passages, and no hop 2
    assert members(1) == {0}


def test_max_candidates_with_ppr_keeps_the_passages_most_linked_from_the_previous_hop() -> None:
    # hop 1: {1, 2}; hop 2: 3 (linked from 1 and 2) and 4 (from 1 only)
    graph = graph_of(5, [(0, 1), (0, 2), (1, 3), (2, 3), (1, 4)])
    out = graph_expand(seeds([[0]]), graph, 5, n_seeds=1, hops=2, max_candidates=4)
    assert sorted(int(d) for d in out.doc_ids[0] if d >= 0) == [0, 1, 2, 3]


def naive_capped_members(seed_ids, adj, n_seeds, hops, cap, sims):
    """One query at a time, straight from the rule: whole hops while within the cap, then the best."""
    out = []
    for q, row in enumerate(seed_ids):
        nodes = list(dict.fromkeys(int(i) for i in row if i >= 0))[:n_seeds]
        frontier = set(nodes)
        for _ in range(hops):
            reached = {int(u) for v in frontier for u in adj[v].indices} - set(nodes)
            if len(nodes) + len(reached) > cap:
                best = sorted(reached, key=lambda u: (-float(sims[u, q]), u))[: cap - len(nodes)]
                nodes += best
                break
            nodes += sorted(reached)
            frontier = reached
        out.append(set(nodes))
    return out


@pytest.mark.parametrize("cap", [3, 7, 15, 40])
def test_batched_capped_neighbourhood_matches_naive_per_query(cap: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragfolio.core.retrieval.ranking.graph_expansion as graph_module

    monkeypatch.setattr(graph_module, "_QUERY_CHUNK", 4)  # several chunks, one ragged
    rng = np.random.default_rng(2)
    links = {tuple(sorted(map(int, rng.choice(40, 2, replace=False)))) for _ in range(70)}
    graph = graph_of(40, sorted(links))
    passages = rng.normal(size=(40, 8)).astype(np.float32)
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    queries = rng.normal(size=(10, 8)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = np.stack([rng.permutation(40)[:6] for _ in range(10)])
    got = graph_expand(seeds(ids.tolist()), graph, 40, n_seeds=2, hops=3, rank="dense", query_emb=queries,
                       passage_emb=passages, max_candidates=cap)
    want = naive_capped_members(ids, graph.adjacency, 2, 3, cap, passages @ queries.T)
    # seeds beyond n_seeds backfill the rows after the neighbourhood: compare the neighbourhood part
    for q in range(10):
        assert set(got.doc_ids[q, : len(want[q])].tolist()) == want[q]
    uncapped = graph_expand(seeds(ids.tolist()), graph, 5, n_seeds=2, hops=3, rank="dense", query_emb=queries,
                            passage_emb=passages)
    big = graph_expand(seeds(ids.tolist()), graph, 5, n_seeds=2, hops=3, rank="dense", query_emb=queries,
                       passage_emb=passages, max_candidates=40)
    np.testing.assert_array_equal(big.doc_ids, uncapped.doc_ids)
    np.testing.assert_array_equal(big.scores, uncapped.scores)


def test_max_candidates_below_n_seeds_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_candidates=1 must be >= n_seeds=2"):
        graph_expand(seeds([[0, 1]]), graph_of(3, [(0, 1)]), 2, n_seeds=2, hops=1, max_candidates=1)
