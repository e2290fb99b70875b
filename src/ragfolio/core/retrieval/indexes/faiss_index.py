"""Dense retrieval: a bi-encoder's passage embeddings in a FAISS inner-product index.

Embeddings are L2-normalised, so inner product is cosine similarity. ``index_type`` is ``flat``
(exact), ``hnsw`` (approximate, for corpora where exact search is too slow) or ``auto``: ``hnsw``
above ``hnsw_above`` passages, else ``flat`` (docs/benchmarks.md, "A million passages", gives both
types' recall@4 and latency).

An index is saved with ``faiss.write_index`` (FAISS's own format; no pickle) and loaded
memory-mapped (:meth:`DenseRetriever.load`), so a large corpus's vectors stay in the page cache
instead of being copied into the process.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.results import RetrievalResult

INDEX_TYPES = ("flat", "hnsw", "auto")
HNSW_ABOVE = 100_000  # passages above which index_type auto builds HNSW
INDEX_FILE, SETTINGS_FILE = "index.faiss", "index.json"


def resolved_index_type(index_type: str, n_passages: int, hnsw_above: int = HNSW_ABOVE) -> str:
    """``index_type`` with ``auto`` resolved for a corpus of ``n_passages``."""
    if index_type != "auto":
        return index_type
    return "hnsw" if n_passages > hnsw_above else "flat"


@dataclass
class DenseRetriever:
    """Exact or HNSW inner-product search over precomputed passage embeddings.

    Args:
        index_type: ``flat``, ``hnsw`` or ``auto`` (see the module docstring).
        hnsw_m: Neighbours per HNSW node (``hnsw`` only).
        hnsw_ef_construction: Candidates kept while building the HNSW graph.
        hnsw_ef_search: Candidates kept while searching it (higher: better recall, slower).
        hnsw_above: Corpus size above which ``auto`` builds HNSW.
    """

    index_type: str = "flat"
    hnsw_m: int = 32
    hnsw_ef_construction: int = 40
    hnsw_ef_search: int = 256
    hnsw_above: int = HNSW_ABOVE

    def __post_init__(self) -> None:
        if self.index_type not in INDEX_TYPES:
            raise ValueError(f"index_type={self.index_type!r} must be one of {INDEX_TYPES}")
        self._index: Any = None
        self.built_type = ""  # flat or hnsw, once index() or load() ran

    def index(self, passage_emb: npt.NDArray[np.float32]) -> DenseRetriever:
        """Index ``passage_emb`` of shape ``(n_passages, dim)``."""
        import faiss

        emb = np.ascontiguousarray(passage_emb, dtype=np.float32)
        if emb.ndim != 2 or len(emb) == 0:
            raise ValueError(f"passage_emb must be a non-empty 2-d array, got shape {emb.shape}")
        self.built_type = resolved_index_type(self.index_type, len(emb), self.hnsw_above)
        index: Any
        if self.built_type == "flat":
            index = faiss.IndexFlatIP(emb.shape[1])
        else:
            index = faiss.IndexHNSWFlat(emb.shape[1], self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.hnsw_ef_construction
            index.hnsw.efSearch = self.hnsw_ef_search
        index.add(emb)
        self._index = index
        return self

    @property
    def n_passages(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    def save(self, folder: str | Path) -> None:
        """Write the index to ``folder`` (created): ``index.faiss`` and its settings, ``index.json``."""
        import faiss

        if self._index is None:
            raise RuntimeError("call index() before save()")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self._index, str(folder / INDEX_FILE))
        (folder / SETTINGS_FILE).write_text(json.dumps({**asdict(self), "built_type": self.built_type}, indent=1))

    @classmethod
    def load(cls, folder: str | Path, *, mmap: bool = True) -> DenseRetriever:
        """The index :meth:`save` wrote to ``folder``; ``mmap`` maps its vectors instead of reading them."""
        import faiss

        folder = Path(folder)
        settings = json.loads((folder / SETTINGS_FILE).read_text())
        built_type = settings.pop("built_type")
        retriever = cls(**settings)
        flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if mmap else 0
        retriever._index = faiss.read_index(str(folder / INDEX_FILE), flags)
        if built_type == "hnsw":
            retriever._index.hnsw.efSearch = retriever.hnsw_ef_search
        retriever.built_type = built_type
        return retriever

    def vectors(self) -> npt.NDArray[np.float32]:
        """The ``(n_passages, dim)`` vectors the index stores, read-only and not copied: a loaded
        index's rows stay in its mapped file, so a caller that also needs the passage vectors (a
        member reranking by similarity) reads the same pages as the search instead of a second copy."""
        import faiss

        if self._index is None:
            raise RuntimeError("call index() or load() before vectors()")
        flat: Any = faiss.downcast_index(self._index.storage) if self.built_type == "hnsw" else self._index
        n, dim = int(flat.ntotal), int(flat.d)
        view = faiss.rev_swig_ptr(flat.get_xb(), n * dim)
        return np.asarray(_Rows(self._index, view.__array_interface__["data"][0], (n, dim)))

    def retrieve_embedded(
        self, query_emb: npt.NDArray[np.float32], k: int, *, allowed: npt.NDArray[np.bool_] | None = None
    ) -> RetrievalResult:
        """Top-``k`` rows for each of ``query_emb``'s ``(n_queries, dim)`` rows.

        ``allowed``: an ``(n_passages,)`` bool mask; only its rows are searched (FAISS's
        ``IDSelectorBitmap``, so a query still gets ``k`` passages when ``k`` rows are allowed).
        """
        import faiss

        if self._index is None:
            raise RuntimeError("call index() before retrieve_embedded()")
        if k < 1:
            raise ValueError(f"k={k} must be >= 1")
        query = np.ascontiguousarray(query_emb, dtype=np.float32)
        if allowed is None:
            scores, ids = self._index.search(query, k)
        else:
            if len(allowed) != self.n_passages:
                raise ValueError(f"allowed has {len(allowed)} rows for an index of {self.n_passages} passages")
            bits = np.packbits(np.asarray(allowed, dtype=bool), bitorder="little")  # alive while searching
            selector = faiss.IDSelectorBitmap(self.n_passages, faiss.swig_ptr(bits))
            params: Any = (faiss.SearchParametersHNSW(sel=selector, efSearch=self.hnsw_ef_search)  # type: ignore[attr-defined]
                           if self.built_type == "hnsw" else faiss.SearchParameters(sel=selector))  # type: ignore[call-arg]
            scores, ids = self._index.search(query, k, params=params)
        scores = scores.astype(np.float32)
        scores[ids < 0] = -np.inf
        return RetrievalResult(ids.astype(np.int64), scores)


class _Rows:
    """A read-only numpy view of vectors held by a FAISS index; being the array's base, it keeps the
    index (and so the memory the view points into) alive as long as the array."""

    def __init__(self, index: Any, address: int, shape: tuple[int, int]) -> None:
        self.index = index
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": "<f4", "data": (address, True)}
