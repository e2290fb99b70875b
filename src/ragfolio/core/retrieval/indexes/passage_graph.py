"""The passage graph: passages linked by title mentions and shared titles.

Passages ``i`` and ``j`` are linked when the text of one mentions the title of the other, or when
they share a title (chunks of one article). :meth:`PassageGraph.build` finds the links, drops those
through hub titles and caps each passage's degree (both optional) and stores them as a symmetric
sparse adjacency; :func:`~ragfolio.core.retrieval.ranking.graph_expansion.graph_expand` walks it.

A title is the graph's stand-in for an *entity* (the paper's graph-dense retriever links passages
through entities an LLM extracted): its *document frequency* is the number of passages that carry
it (as their title) or mention it (in their text).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import InitVar, dataclass
from os import PathLike
from pathlib import Path

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

__all__ = ["PassageGraph"]

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"\w+")
_ARRAYS = ("data", "indices", "indptr")  # a saved graph's CSR arrays, one .npy each
# Same-title links (chunks of one article) outrank every mention when the degree is capped.
_SAME_TITLE_PRIORITY = np.inf


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


@dataclass(frozen=True)
class PassageGraph:
    """Undirected passage graph.

    Attributes:
        adjacency: ``(n, n)`` symmetric ``scipy.sparse.csr_matrix`` of float32 ones, no self-loops.
        check_symmetry: Check that ``adjacency`` is symmetric (seconds at a million passages;
            :meth:`load` skips it for a graph a checksummed bundle holds).
    """

    adjacency: sp.csr_matrix
    check_symmetry: InitVar[bool] = True

    def __post_init__(self, check_symmetry: bool) -> None:
        a = self.adjacency
        if not sp.issparse(a) or a.format != "csr":
            raise ValueError(f"adjacency must be a scipy.sparse CSR matrix, got {type(a).__name__}")
        if a.shape[0] != a.shape[1]:
            raise ValueError(f"adjacency shape {a.shape} must be square")
        if check_symmetry and (a != a.T).nnz:
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

    def save(self, folder: str | PathLike[str]) -> None:
        """Write the adjacency's CSR arrays to ``folder`` (created) as ``.npy`` files (no pickle)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        a = self.adjacency
        for name in _ARRAYS:
            np.save(folder / f"{name}.npy", np.ascontiguousarray(getattr(a, name)), allow_pickle=False)

    @classmethod
    def load(cls, folder: str | PathLike[str], *, mmap: bool = True, check_symmetry: bool = False) -> PassageGraph:
        """The graph :meth:`save` wrote to ``folder``; ``mmap`` maps its arrays instead of reading them."""
        folder = Path(folder)
        data, indices, indptr = (np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None, allow_pickle=False)
                                 for name in _ARRAYS)
        n = len(indptr) - 1
        return cls(sp.csr_matrix((data, indices, indptr), shape=(n, n), copy=False), check_symmetry)

    @classmethod
    def build(
        cls,
        titles: Sequence[str],
        texts: Sequence[str],
        *,
        max_degree: int | None = 50,
        min_title_chars: int = 4,
        max_entity_df: int | None = None,
    ) -> PassageGraph:
        """Link passages by title mentions and shared titles.

        Matching is case-insensitive on ``\\w+`` tokens, so it respects word boundaries and ignores
        punctuation (``"U.S. Army"`` matches ``"u.s army"``). Titles shorter than
        ``min_title_chars`` characters or made of digits only never count as mentions. Rather than
        one regex per title, titles are indexed by their token tuple and each text's token n-grams
        of every title length are intersected with that index. Nested titles both match
        (``"New York City"`` also mentions ``"New York"``). Empty titles link nothing.

        The entity cap drops every link through a title whose document frequency (passages that
        carry or mention it, see the module docstring) exceeds ``max_entity_df``: mentions of it
        and links among the passages that carry it. The degree cap then keeps, per passage, the
        ``max_degree`` links through the longest titles (same-title links first, then ties to the
        lowest row id); a link survives only if both ends keep it, so no degree exceeds the cap.

        Args:
            titles: ``n`` passage titles.
            texts: ``n`` passage texts.
            max_degree: most links per passage, ``>= 1``; None keeps every link.
            min_title_chars: shortest title (stripped) that counts as a mention.
            max_entity_df: largest document frequency of a title that still links, ``>= 1``;
                None keeps links through every title.

        Returns:
            The graph over the ``n`` passages.
        """
        if len(titles) != len(texts):
            raise ValueError(f"{len(titles)} titles but {len(texts)} texts")
        if max_degree is not None and max_degree < 1:
            raise ValueError(f"max_degree={max_degree} must be >= 1 or None")
        if max_entity_df is not None and max_entity_df < 1:
            raise ValueError(f"max_entity_df={max_entity_df} must be >= 1 or None")
        n = len(titles)

        mentions = _title_mentions(titles, texts, min_title_chars)
        hubs: set[tuple[str, ...]] = set()
        if max_entity_df is not None:
            hubs = {title for title, df in _entity_df(titles, mentions).items() if df > max_entity_df}
        same = _same_title_links(titles, hubs)
        mention = _mention_links(mentions, hubs)
        src, dst, prio = (np.concatenate([x, y]) for x, y in zip(same, mention, strict=True))
        adjacency = _capped_adjacency(n, src, dst, prio, n if max_degree is None else max_degree)
        logger.info(
            "passage graph: %d passages, %d links, max degree %d (cap %s), %d hub titles dropped (df cap %s)",
            n, adjacency.nnz // 2, int(np.diff(adjacency.indptr).max(initial=0)), max_degree, len(hubs),
            max_entity_df,
        )
        return cls(adjacency)


Links = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]


def _same_title_links(titles: Sequence[str], hubs: set[tuple[str, ...]]) -> Links:
    """Directed links between passages with the same (case-folded) title, top priority.

    Titles whose tokens are in ``hubs`` link nothing.
    """
    rows_by_title: dict[str, list[int]] = defaultdict(list)
    for i, title in enumerate(titles):
        if title.strip() and not (hubs and tuple(_tokens(title)) in hubs):
            rows_by_title[title.strip().casefold()].append(i)
    src, dst = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for rows in rows_by_title.values():
        if len(rows) > 1:
            r = np.asarray(rows, np.int64)
            a, b = np.meshgrid(r, r, indexing="ij")
            off = a != b
            src.append(a[off])
            dst.append(b[off])
    s, d = np.concatenate(src), np.concatenate(dst)
    return s, d, np.full(s.size, _SAME_TITLE_PRIORITY)


@dataclass(frozen=True)
class _Mentions:
    """Which passage texts mention which titles.

    Attributes:
        titles: Each mentionable title's tokens, by title id.
        carriers: Row ids of the passages carrying each title, by title id.
        text: Row id of the mentioning passage, one per (text, title) pair.
        title: Title id of the mentioned title, one per pair.
    """

    titles: list[tuple[str, ...]]
    carriers: list[list[int]]
    text: npt.NDArray[np.int64]
    title: npt.NDArray[np.int64]


def _title_mentions(titles: Sequence[str], texts: Sequence[str], min_title_chars: int) -> _Mentions:
    """Find every (text, title) mention; see :meth:`PassageGraph.build` for the matching rules."""
    gram_id: dict[tuple[str, ...], int] = {}
    members: list[list[int]] = []
    for i, title in enumerate(titles):
        title_toks = tuple(_tokens(title))
        if len(title.strip()) < min_title_chars or not title_toks or "".join(title_toks).isdigit():
            continue
        if title_toks not in gram_id:
            gram_id[title_toks] = len(members)
            members.append([])
        members[gram_id[title_toks]].append(i)
    by_length: dict[int, set[tuple[str, ...]]] = defaultdict(set)
    for gram in gram_id:
        by_length[len(gram)].add(gram)

    # One pass per title length over each text's token n-grams, intersected in C.
    pair_text: list[int] = []
    pair_gram: list[int] = []
    for i, text in enumerate(texts):
        toks = _tokens(text)
        for length, grams in by_length.items():
            if length <= len(toks):
                for gram in grams.intersection(zip(*(toks[s:] for s in range(length)), strict=False)):
                    pair_text.append(i)
                    pair_gram.append(gram_id[gram])
    return _Mentions(list(gram_id), members, np.asarray(pair_text, np.int64), np.asarray(pair_gram, np.int64))


def _entity_df(titles: Sequence[str], mentions: _Mentions) -> dict[tuple[str, ...], int]:
    """Each title's document frequency: passages that carry it or mention it (each counted once)."""
    passages: dict[tuple[str, ...], set[int]] = defaultdict(set)
    for i, title in enumerate(titles):
        passages[tuple(_tokens(title))].add(i)
    for i, g in zip(mentions.text.tolist(), mentions.title.tolist(), strict=True):
        passages[mentions.titles[g]].add(i)
    return {title: len(rows) for title, rows in passages.items()}


def _mention_links(mentions: _Mentions, hubs: set[tuple[str, ...]]) -> Links:
    """Directed links both ways between a text and the passages whose title it mentions.

    Priority is the mentioned title's length in characters (longer titles are more specific).
    Mentions of titles in ``hubs`` link nothing.
    """
    pair_text, g = mentions.text, mentions.title
    if hubs:
        kept = np.fromiter((t not in hubs for t in mentions.titles), dtype=bool, count=len(mentions.titles))
        pair_text, g = pair_text[kept[g]], g[kept[g]]
    # Expand each (text, title) pair to every passage with that title.
    members = mentions.carriers
    sizes = np.fromiter((len(m) for m in members), dtype=np.int64, count=len(members))
    indptr = np.r_[0, np.cumsum(sizes)]
    flat = np.fromiter((j for m in members for j in m), dtype=np.int64, count=int(indptr[-1]))
    weight = np.fromiter((len(" ".join(t)) for t in mentions.titles), dtype=np.float64, count=len(members))
    counts = sizes[g]
    starts = np.repeat(indptr[g] - (np.cumsum(counts) - counts), counts)
    src = np.repeat(pair_text, counts)
    dst = flat[starts + np.arange(int(counts.sum()))]
    prio = np.repeat(weight[g], counts)
    keep = src != dst
    src, dst, prio = src[keep], dst[keep], prio[keep]
    return np.r_[src, dst], np.r_[dst, src], np.r_[prio, prio]


def _capped_adjacency(
    n: int,
    src: npt.NDArray[np.int64],
    dst: npt.NDArray[np.int64],
    prio: npt.NDArray[np.float64],
    max_degree: int,
) -> sp.csr_matrix:
    """Symmetric 0/1 adjacency keeping each node's ``max_degree`` highest-priority links."""
    levels, prio_rank = np.unique(-prio, return_inverse=True)  # 0 = highest priority
    # One integer key orders by (src, priority desc, dst); keep each pair's best entry.
    order = np.argsort((src * levels.size + prio_rank) * n + dst, kind="stable")
    src, dst = src[order], dst[order]
    _, first = np.unique(src * n + dst, return_index=True)
    first.sort()
    src, dst = src[first], dst[first]
    rank = np.arange(src.size) - np.searchsorted(src, src, side="left")
    keep = rank < max_degree
    kept = sp.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.float32), (src[keep], dst[keep])), shape=(n, n)
    )
    both = kept.multiply(kept.T).tocsr()
    both.sort_indices()
    return both.astype(np.float32)
