"""Graph retrieval: expand seed passages over a title-mention passage graph and rank the hood.

Passages ``i`` and ``j`` are linked when the text of one mentions the title of the other, or when
they share a title (chunks of one article). :func:`graph_expand` takes each query's top seeds,
collects their ``hops``-neighbourhood and ranks it by personalised PageRank or by dense cosine.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from ragfolio.core.retrievers.base import RetrievalResult, pad_rows

__all__ = ["PassageGraph", "graph_expand"]

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"\w+")
# Same-title links (chunks of one article) outrank every mention when the degree is capped.
_SAME_TITLE_PRIORITY = np.inf


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


@dataclass(frozen=True)
class PassageGraph:
    """Undirected passage graph.

    Attributes:
        adjacency: ``(n, n)`` symmetric ``scipy.sparse.csr_matrix`` of float32 ones, no self-loops.
    """

    adjacency: sp.csr_matrix

    def __post_init__(self) -> None:
        a = self.adjacency
        if not sp.issparse(a) or a.format != "csr":
            raise ValueError(f"adjacency must be a scipy.sparse CSR matrix, got {type(a).__name__}")
        if a.shape[0] != a.shape[1]:
            raise ValueError(f"adjacency shape {a.shape} must be square")
        if (a != a.T).nnz:
            raise ValueError("adjacency must be symmetric")

    @property
    def n(self) -> int:
        return int(self.adjacency.shape[0])

    def neighbors(self, i: int) -> npt.NDArray[np.int64]:
        """Sorted row ids linked to passage ``i``."""
        if not 0 <= i < self.n:
            raise IndexError(f"passage {i} out of range for a graph of {self.n} passages")
        a = self.adjacency
        return np.sort(a.indices[a.indptr[i] : a.indptr[i + 1]]).astype(np.int64)

    def save(self, path: str | PathLike[str]) -> None:
        """Write the adjacency as a ``.npz`` (``scipy.sparse.save_npz``; no pickle)."""
        sp.save_npz(path, self.adjacency, compressed=True)

    @classmethod
    def load(cls, path: str | PathLike[str]) -> PassageGraph:
        """Read a graph written by :meth:`save`."""
        return cls(sp.csr_matrix(sp.load_npz(path)))

    @classmethod
    def build(
        cls,
        titles: Sequence[str],
        texts: Sequence[str],
        *,
        max_degree: int = 50,
        min_title_chars: int = 4,
    ) -> PassageGraph:
        """Link passages by title mentions and shared titles.

        Matching is case-insensitive on ``\\w+`` tokens, so it respects word boundaries and ignores
        punctuation (``"U.S. Army"`` matches ``"u.s army"``). Titles shorter than
        ``min_title_chars`` characters or made of digits only never count as mentions. Rather than
        one regex per title, titles are indexed by their token tuple and every text is scanned once,
        looking up only the n-grams whose first token starts some title. Nested titles both match
        (``"New York City"`` also mentions ``"New York"``).

        The degree cap keeps, per passage, the ``max_degree`` links through the longest titles
        (same-title links first, then ties to the lowest row id); a link survives only if both
        ends keep it, so no degree exceeds the cap.

        Args:
            titles: ``n`` passage titles.
            texts: ``n`` passage texts.
            max_degree: most links per passage, ``>= 1``.
            min_title_chars: shortest title (stripped) that counts as a mention.

        Returns:
            The graph over the ``n`` passages.
        """
        if len(titles) != len(texts):
            raise ValueError(f"{len(titles)} titles but {len(texts)} texts")
        if max_degree < 1:
            raise ValueError(f"max_degree={max_degree} must be >= 1")
        n = len(titles)

        rows_by_title: dict[str, list[int]] = defaultdict(list)
        for i, title in enumerate(titles):
            rows_by_title[title.strip().casefold()].append(i)
        src: list[npt.NDArray[np.int64]] = []
        dst: list[npt.NDArray[np.int64]] = []
        prio: list[npt.NDArray[np.float64]] = []
        for rows in rows_by_title.values():
            if len(rows) > 1:
                r = np.asarray(rows, dtype=np.int64)
                a, b = np.meshgrid(r, r, indexing="ij")
                off = a != b
                src.append(a[off])
                dst.append(b[off])
                prio.append(np.full(int(off.sum()), _SAME_TITLE_PRIORITY))

        # token tuple -> rows with that title; first token -> the lengths of titles starting with it
        by_tokens: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, title in enumerate(titles):
            toks = tuple(_tokens(title))
            if len(title.strip()) >= min_title_chars and toks and not "".join(toks).isdigit():
                by_tokens[toks].append(i)
        lengths_by_first: dict[str, set[int]] = defaultdict(set)
        for toks in by_tokens:
            lengths_by_first[toks[0]].add(len(toks))
        first_lengths = {t: sorted(ls) for t, ls in lengths_by_first.items()}

        m_src: list[int] = []
        m_dst: list[int] = []
        m_prio: list[float] = []
        for i, text in enumerate(texts):
            toks = _tokens(text)
            found: set[tuple[str, ...]] = set()
            for start, tok in enumerate(toks):
                for length in first_lengths.get(tok, ()):
                    gram = tuple(toks[start : start + length])
                    if len(gram) == length and gram in by_tokens:
                        found.add(gram)
            for gram in found:
                weight = float(len(" ".join(gram)))
                for j in by_tokens[gram]:
                    if j != i:  # both directions: i mentions j's title
                        m_src += (i, j)
                        m_dst += (j, i)
                        m_prio += (weight, weight)
        src.append(np.asarray(m_src, dtype=np.int64))
        dst.append(np.asarray(m_dst, dtype=np.int64))
        prio.append(np.asarray(m_prio, dtype=np.float64))
        adjacency = _capped_adjacency(
            n, np.concatenate(src), np.concatenate(dst), np.concatenate(prio), max_degree
        )
        logger.info(
            "passage graph: %d passages, %d links, max degree %d",
            n, adjacency.nnz // 2, int(np.diff(adjacency.indptr).max(initial=0)),
        )
        return cls(adjacency)


def _capped_adjacency(
    n: int,
    src: npt.NDArray[np.int64],
    dst: npt.NDArray[np.int64],
    prio: npt.NDArray[np.float64],
    max_degree: int,
) -> sp.csr_matrix:
    """Symmetric 0/1 adjacency keeping each node's ``max_degree`` highest-priority links."""
    # One entry per directed pair, with its best priority.
    order = np.lexsort((-prio, dst, src))
    src, dst, prio = src[order], dst[order], prio[order]
    first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]
    src, dst, prio = src[first], dst[first], prio[first]
    order = np.lexsort((dst, -prio, src))
    src, dst = src[order], dst[order]
    rank = np.arange(src.size) - np.searchsorted(src, src, side="left")
    keep = rank < max_degree
    kept = sp.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.float32), (src[keep], dst[keep])), shape=(n, n)
    )
    both = kept.multiply(kept.T).tocsr()
    both.sort_indices()
    return both.astype(np.float32)


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
) -> RetrievalResult:
    """Expand each query's top seeds over the graph and rank the neighbourhood.

    The candidates of a query are its first ``n_seeds`` seed passages plus every passage within
    ``hops`` links of them; seeds stay eligible. ``rank="ppr"`` scores them by personalised
    PageRank on the candidates' induced subgraph: ``x <- (1 - damping) * r + damping * (A D^-1 x
    + (dangling mass) * r)`` for ``n_iter`` steps from ``x = r``, where the restart vector ``r``
    puts weight ``1 / rank`` on the seed at rank 1, 2, ... (normalised to sum 1; rank-based
    because seed scores from BM25 and dense retrievers live on different scales).
    ``rank="dense"`` scores them by cosine to the query. Equal scores go to the lowest row id.

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

    Returns:
        ``(n_queries, k)`` ranking; scores are PageRank mass or cosines.
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

    adj = graph.adjacency
    rows: list[list[int]] = []
    row_scores: list[list[float]] = []
    for q in range(ids.shape[0]):
        seed = _unique_in_order(ids[q][ids[q] >= 0])[:n_seeds]
        if seed.size == 0:
            rows.append([])
            row_scores.append([])
            continue
        nodes = _neighbourhood(adj, seed, hops)
        if rank == "ppr":
            scores = _personalised_pagerank(adj, nodes, seed.size, damping, n_iter)
        else:
            scores = passage_emb[nodes] @ query_emb[q]  # type: ignore[index]
        order = np.lexsort((nodes, -scores))[:k]
        rows.append(nodes[order].tolist())
        row_scores.append(scores[order].tolist())
    return pad_rows(rows, row_scores, k)


def _unique_in_order(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    _, first = np.unique(ids, return_index=True)
    return ids[np.sort(first)]


def _neighbourhood(
    adj: sp.csr_matrix, seed: npt.NDArray[np.int64], hops: int
) -> npt.NDArray[np.int64]:
    """The (distinct) seeds first, in order, then the other nodes within ``hops`` links."""
    nodes = [seed]
    seen = set(seed.tolist())
    frontier = seed
    for _ in range(hops):
        if frontier.size == 0:
            break
        reached = np.unique(
            np.concatenate([adj.indices[adj.indptr[v] : adj.indptr[v + 1]] for v in frontier])
        )
        frontier = np.asarray([v for v in reached.tolist() if v not in seen], dtype=np.int64)
        seen.update(frontier.tolist())
        nodes.append(frontier)
    return np.concatenate(nodes).astype(np.int64)


def _personalised_pagerank(
    adj: sp.csr_matrix, nodes: npt.NDArray[np.int64], n_seed: int, damping: float, n_iter: int
) -> npt.NDArray[np.float64]:
    """PageRank on the subgraph induced by ``nodes``, restarting at its first ``n_seed`` nodes."""
    sub = adj[nodes][:, nodes].tocsr()
    degree = np.asarray(sub.sum(axis=1)).ravel()
    dangling = degree == 0
    inv_degree = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, degree))
    restart = np.zeros(nodes.size)
    restart[:n_seed] = 1.0 / np.arange(1, n_seed + 1)
    restart /= restart.sum()
    x = restart.copy()
    for _ in range(n_iter):
        # The adjacency is symmetric, so A D^-1 x spreads each node's mass over its links.
        spread = sub @ (x * inv_degree) + x[dangling].sum() * restart
        x = (1.0 - damping) * restart + damping * spread
    return x
