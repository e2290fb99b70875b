"""Graph retrieval: expand seed passages over a title-mention graph, rank the neighbourhood.

Passages ``i`` and ``j`` are linked when the text of one mentions the title of the other, or when
they share a title (chunks of one article); :class:`PassageGraph` (built in
:mod:`ragfolio.core.retrieval.indexes.passage_graph`) holds those links. :func:`graph_expand` takes each
query's top seeds, collects their ``hops``-neighbourhood (at most ``max_candidates`` passages)
and ranks it by personalised PageRank or by dense cosine.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph
from ragfolio.core.retrieval.results import RetrievalResult

__all__ = ["PassageGraph", "graph_expand"]

# graph_expand ranks a chunk of queries at once as one block-diagonal graph; 32 keeps a 2-hop
# neighbourhood at the degree cap (~7,500 passages a query) within a few hundred MB.
_QUERY_CHUNK = 32


def graph_expand(
    seeds: RetrievalResult,
    graph: PassageGraph,
    k: int,
    *,
    n_seeds: int,
    hops: int,
    rank: Literal["ppr", "dense"] = "ppr",
    damping: float = 0.85,
    query_emb: npt.NDArray[np.floating] | None = None,
    passage_emb: npt.NDArray[np.floating] | None = None,
    n_iter: int = 30,
    max_candidates: int | None = None,
) -> RetrievalResult:
    """Expand each query's top seeds over the graph and rank the neighbourhood.

    The candidates of a query are its first ``n_seeds`` seed passages plus every passage within
    ``hops`` links of them; seeds stay eligible. ``rank="ppr"`` scores them by personalised
    PageRank on the candidates' induced subgraph: ``x <- (1 - damping) * r + damping * (A D^-1 x
    + (dangling mass) * r)`` for ``n_iter`` steps from ``x = r``, where the restart vector ``r``
    puts weight ``1 / rank`` on the seed at rank 1, 2, ... (normalised to sum 1; rank-based
    because seed scores from BM25 and dense retrievers live on different scales).
    ``rank="dense"`` scores them by cosine to the query. Equal scores go to the lowest row id.

    ``max_candidates`` caps a query's neighbourhood, seeds included: hops are added whole while
    the neighbourhood stays within the cap; the first hop that would overflow it adds only its
    best passages up to the cap, and no hop follows. Its best passages are those with the highest
    cosine to the query (``rank="dense"``) or with the most links from the previous hop
    (``rank="ppr"``, a proxy for the PageRank mass they would receive), ties to the lowest row id.

    Args:
        seeds: ``(n_queries, P)`` first-stage ranking.
        graph: passage graph over the same corpus rows.
        k: passages to return per query.
        n_seeds: seeds taken per query, ``>= 1``.
        hops: neighbourhood radius, ``>= 0``.
        rank: ``"ppr"`` or ``"dense"``.
        damping: PageRank continuation probability in ``[0, 1)``.
        query_emb: ``(n_queries, dim)`` L2-normalised; required for ``rank="dense"``.
        passage_emb: ``(n_passages, dim)`` L2-normalised; required for ``rank="dense"``.
        n_iter: power-iteration steps for ``rank="ppr"``.
        max_candidates: most passages in a query's neighbourhood, ``>= n_seeds``; None: no cap.

    Returns:
        ``(n_queries, k)`` ranking; scores are PageRank mass or cosines. A neighbourhood smaller
        than ``k`` is completed with the next passages of the first-stage ranking (scored below
        it), so a row is padded only when the seeds themselves run out.
    """
    if rank not in ("ppr", "dense"):
        raise ValueError(f"rank={rank!r} must be 'ppr' or 'dense'")
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    if n_seeds < 1:
        raise ValueError(f"n_seeds={n_seeds} must be >= 1")
    if hops < 0:
        raise ValueError(f"hops={hops} must be >= 0")
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping={damping} must be in [0, 1)")
    if n_iter < 1:
        raise ValueError(f"n_iter={n_iter} must be >= 1")
    if max_candidates is not None and max_candidates < n_seeds:
        raise ValueError(f"max_candidates={max_candidates} must be >= n_seeds={n_seeds} (or None)")
    ids = np.asarray(seeds.doc_ids, dtype=np.int64)
    if ids.size and ids.max() >= graph.n:
        raise ValueError(f"seed row id {ids.max()} out of range for a graph of {graph.n} passages")
    if rank == "dense":
        if query_emb is None or passage_emb is None:
            raise ValueError("rank='dense' needs query_emb and passage_emb")
        query_emb = np.asarray(query_emb, dtype=np.float32)
        passage_emb = np.asarray(passage_emb, dtype=np.float32)
        if query_emb.shape[0] != ids.shape[0] or passage_emb.shape[0] != graph.n:
            raise ValueError(
                f"query_emb {query_emb.shape} / passage_emb {passage_emb.shape} must have "
                f"{ids.shape[0]} queries / {graph.n} passages"
            )

    n = ids.shape[0]
    out_ids = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.full((n, k), -np.inf, dtype=np.float32)
    for lo in range(0, n, _QUERY_CHUNK):
        block = ids[lo : lo + _QUERY_CHUNK]
        seed_keys, restart_weight = _seed_keys(block, graph.n, n_seeds)
        sims = None
        if rank == "dense":
            if query_emb is None or passage_emb is None:  # graph_expand checked this already
                raise ValueError("rank='dense' needs query_emb and passage_emb")
            sims = partial(_similarities, passage_emb, query_emb[lo : lo + _QUERY_CHUNK])
        if max_candidates is None:
            members = _neighbourhood(graph.adjacency, seed_keys, hops, block.shape[0])  # sorted keys
        else:
            members = _capped_neighbourhood(graph.adjacency, seed_keys, hops, block.shape[0], max_candidates, sims)
        query, node = np.divmod(members, graph.n)
        if sims is None:
            restart = np.zeros(members.size)
            restart[np.searchsorted(members, seed_keys)] = restart_weight
            scores = _personalised_pagerank(graph.adjacency, members, restart, damping, n_iter)
        else:
            scores = sims(node, query)
        # Best first within a query; equal scores go to the lowest row id.
        order = np.lexsort((node, -scores, query))
        query, node, scores = query[order], node[order], scores[order]
        col = np.arange(query.size) - np.searchsorted(query, query, side="left")
        keep = col < k
        out_ids[lo + query[keep], col[keep]] = node[keep]
        out_scores[lo + query[keep], col[keep]] = scores[keep]
    _backfill(out_ids, out_scores, ids)
    return RetrievalResult(out_ids, out_scores)


def _backfill(out_ids: npt.NDArray[np.int64], out_scores: npt.NDArray[np.float32], seeds: npt.NDArray[np.int64]) -> None:
    """Fill rows whose neighbourhood had fewer than k passages with the next first-stage passages.

    Every candidate must return the same number of passages (DESIGN.md section 2): a sparse
    graph would otherwise hand back one or two passages, and a score normalised by the number
    returned (support recall) would reward the short list. Backfilled passages keep first-stage
    order and score below every expanded passage of their row.
    """
    k = out_ids.shape[1]
    for q in np.flatnonzero((out_ids < 0).any(axis=1)):
        have = [int(d) for d in out_ids[q] if d >= 0]
        extra = [int(d) for d in seeds[q] if d >= 0 and int(d) not in set(have)][: k - len(have)]
        if not extra:
            continue
        floor = float(out_scores[q, : len(have)].min()) if have else 0.0
        out_ids[q, len(have) : len(have) + len(extra)] = extra
        out_scores[q, len(have) : len(have) + len(extra)] = floor - 1.0 - np.arange(len(extra), dtype=np.float32)


def _seed_keys(
    block: npt.NDArray[np.int64], n_passages: int, n_seeds: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Keys ``query * n_passages + row`` of each query's first ``n_seeds`` distinct seeds.

    Returns the sorted keys and their restart weights, ``1 / seed rank`` normalised per query.
    """
    c, p = block.shape
    query = np.repeat(np.arange(c, dtype=np.int64), p)
    row = block.ravel()
    valid = row >= 0
    keys = query[valid] * n_passages + row[valid]  # row-major: seed rank order within a query
    _, first = np.unique(keys, return_index=True)
    keys = keys[np.sort(first)]
    query = keys // n_passages
    rank = np.arange(keys.size) - np.searchsorted(query, query, side="left")
    keys, query, rank = keys[rank < n_seeds], query[rank < n_seeds], rank[rank < n_seeds]
    weight = 1.0 / (rank + 1.0)
    weight /= np.bincount(query, weights=weight, minlength=c)[query]
    order = np.argsort(keys)
    return keys[order], weight[order]


def _neighbour_keys(adj: sp.csr_matrix, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For each key ``(query, v)``, the keys ``(query, u)`` of ``v``'s neighbours, in order."""
    query, node = np.divmod(keys, adj.shape[0])
    starts, ends = adj.indptr[node], adj.indptr[node + 1]
    counts = ends - starts
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
    return np.repeat(query, counts) * adj.shape[0] + adj.indices[offsets]


def _neighbourhood(
    adj: sp.csr_matrix, seed_keys: npt.NDArray[np.int64], hops: int, n_queries: int
) -> npt.NDArray[np.int64]:
    """Sorted keys of every (query, passage) within ``hops`` links of the query's seeds."""
    # A flat (n_queries * n_passages) table turns set operations into O(links) array indexing.
    seen = np.zeros(n_queries * adj.shape[0], dtype=bool)
    seen[seed_keys] = True
    frontier = seed_keys
    for _ in range(hops):
        if frontier.size == 0:
            break
        reached = _neighbour_keys(adj, frontier)
        reached = reached[~seen[reached]]
        seen[reached] = True
        frontier = np.unique(reached)
    return np.flatnonzero(seen)


Similarities = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.float64]]


def _similarities(
    passage_emb: npt.NDArray[np.float32], query_emb: npt.NDArray[np.float32],
    node: npt.NDArray[np.int64], query: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """Cosine of passage ``node[i]`` and query ``query[i]`` for every i, from those passages' rows
    only: a query's neighbourhood is a few hundred passages, and scoring the whole corpus would read
    every embedding (1.5 GB a query at a million passages)."""
    rows, inverse = np.unique(node, return_inverse=True)
    return (np.asarray(passage_emb[rows]) @ query_emb.T)[inverse, query].astype(np.float64)


def _capped_neighbourhood(
    adj: sp.csr_matrix,
    seed_keys: npt.NDArray[np.int64],
    hops: int,
    n_queries: int,
    max_candidates: int,
    sims: Similarities | None,
) -> npt.NDArray[np.int64]:
    """Sorted keys of each query's neighbourhood, at most ``max_candidates`` a query.

    Like :func:`_neighbourhood`, hop by hop; a query whose next hop overflows the cap takes the
    hop's best passages up to the cap (highest ``sims(passage, query)`` when ``sims`` is given,
    else most links from the previous hop; ties to the lowest row id) and stops growing.
    """
    n = adj.shape[0]
    seen = np.zeros(n_queries * n, dtype=bool)
    seen[seed_keys] = True
    size = np.bincount(seed_keys // n, minlength=n_queries)
    frontier = seed_keys
    for _ in range(hops):
        if frontier.size == 0:
            break
        reached = _neighbour_keys(adj, frontier)
        reached, links = np.unique(reached[~seen[reached]], return_counts=True)
        query = reached // n
        room = max_candidates - size
        new = np.bincount(query, minlength=n_queries)
        full = new > room  # queries whose hop overflows: keep their best, then stop
        take = ~full[query]
        if full.any():
            over = np.flatnonzero(full[query])
            q_over, node_over = query[over], reached[over] % n
            score = sims(node_over, q_over) if sims is not None else links[over].astype(np.float64)
            order = np.lexsort((node_over, -score, q_over))  # best first within a query
            over, q_over = over[order], q_over[order]
            col = np.arange(over.size) - np.searchsorted(q_over, q_over, side="left")
            take[over[col < room[q_over]]] = True
        reached = reached[take]
        seen[reached] = True
        size += np.bincount(reached // n, minlength=n_queries)
        frontier = reached[~full[reached // n]]
    return np.flatnonzero(seen)


def _personalised_pagerank(
    adj: sp.csr_matrix,
    members: npt.NDArray[np.int64],
    restart: npt.NDArray[np.float64],
    damping: float,
    n_iter: int,
) -> npt.NDArray[np.float64]:
    """PageRank on each query's induced subgraph, restarting with ``restart`` (sums to 1 a query).

    Dangling nodes (no link inside their subgraph) send their mass back to the restart vector.
    """
    size = members.size
    if size == 0:
        return np.zeros(0)
    query = members // adj.shape[0]
    n_queries = int(query[-1]) + 1
    local = np.full(n_queries * adj.shape[0], -1, dtype=np.int64)
    local[members] = np.arange(size)
    target = local[_neighbour_keys(adj, members)]  # grouped by member, in member order
    inside = target >= 0
    # Row r of the block-diagonal subgraph holds the inside targets of member r's links.
    ends = np.cumsum(np.diff(adj.indptr)[members % adj.shape[0]])
    indptr = np.r_[0, np.cumsum(inside)][np.r_[0, ends]]
    indices = target[inside]
    sub = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(size, size))
    degree = np.diff(indptr)
    dangling = degree == 0
    inv_degree = 1.0 / np.maximum(degree, 1)
    x = restart.copy()
    for _ in range(n_iter):
        # The adjacency is symmetric, so A D^-1 x spreads each node's mass over its links.
        lost = np.bincount(query, weights=np.where(dangling, x, 0.0), minlength=n_queries)
        spread = sub @ (x * inv_degree) + lost[query] * restart
        x = (1.0 - damping) * restart + damping * spread
    return x
