"""Corpus indexes that a bundle carries: which index, under which settings, saved how.

A :class:`CorpusIndex` is one built index of the corpus (``bm25``: a
:class:`~ragfolio.core.retrieval.indexes.bm25_index.BM25Retriever`; ``dense``: a
:class:`~ragfolio.core.retrieval.indexes.faiss_index.DenseRetriever`; ``graph``: a
:class:`~ragfolio.core.retrieval.indexes.passage_graph.PassageGraph`) with the settings the pool
runner asked for it by (``key``). Every kind has the same contract, ``index.save(folder)`` and
``Kind.load(folder, mmap=...)``, in its library's own format (bm25s's arrays, ``faiss.write_index``,
the graph's CSR arrays; no pickle), so the service maps a saved index instead of rebuilding it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever
from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph

INDEX_KINDS: dict[str, Any] = {"bm25": BM25Retriever, "dense": DenseRetriever, "graph": PassageGraph}


@dataclass(frozen=True)
class CorpusIndex:
    """One built index of the corpus and the settings it was asked for by.

    Attributes:
        kind: ``bm25``, ``dense`` or ``graph`` (:data:`INDEX_KINDS`).
        key: ``bm25``: its full parameters; ``dense``: ``encoder`` and the built ``index_type``;
            ``graph``: ``max_entity_df`` (None: the degree-capped graph).
        index: The index.
    """

    kind: str
    key: dict[str, Any]
    index: Any

    def __post_init__(self) -> None:
        if self.kind not in INDEX_KINDS:
            raise ValueError(f"index kind={self.kind!r} is not one of {sorted(INDEX_KINDS)}")

    def save(self, folder: str | Path) -> None:
        """Write the index to ``folder`` in its library's format."""
        self.index.save(folder)

    @classmethod
    def load(cls, kind: str, key: dict[str, Any], folder: str | Path, *, mmap: bool = True) -> CorpusIndex:
        """The ``kind`` index saved in ``folder`` (memory-mapped with ``mmap``)."""
        if kind not in INDEX_KINDS:
            raise ValueError(f"{folder}: index kind={kind!r} is not one of {sorted(INDEX_KINDS)}")
        return cls(kind, dict(key), INDEX_KINDS[kind].load(folder, mmap=mmap))


def index_key(kind: str, key: Mapping[str, Any]) -> tuple[Any, ...]:
    """The key a pool runner keeps a corpus index under: its kind and its settings, sorted."""
    return (kind, tuple(sorted(key.items())))


def indexes_among(parts: Mapping[Hashable, Any]) -> list[CorpusIndex]:
    """The corpus indexes among a runner's corpus parts (keyed by :func:`index_key`; others are skipped)."""
    found = [CorpusIndex(key[0], dict(key[1]), value) for key, value in parts.items()
             if isinstance(key, tuple) and len(key) == 2 and key[0] in INDEX_KINDS]
    return sorted(found, key=lambda index: (index.kind, repr(sorted(index.key.items()))))  # not thread order


def stored_vectors(indexes: Mapping[tuple[Any, ...], Any], encoder: str) -> Any:
    """The passage vectors of ``encoder`` as held by a dense index among ``indexes`` (keyed by
    :func:`index_key`), or None: a runner given both a bundle's embeddings and its indexes reads
    the vectors from the index, so they are held once in memory, not twice."""
    for key, index in indexes.items():
        if key[0] == "dense" and dict(key[1]).get("encoder") == encoder:
            return index.vectors()
    return None
