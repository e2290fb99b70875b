"""How far two retrievers' rankings agree (the Elasticsearch tests compare them with BM25's)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.results import RetrievalResult


def rank_overlap(a: RetrievalResult, b: RetrievalResult, k: int) -> npt.NDArray[np.float64]:
    """Per-query overlap of two rankings' top ``k``: ``|A & B| / max(|A|, |B|)``, shape ``(n_queries,)``.

    ``A`` and ``B`` are the rows' first ``k`` ids without ``-1`` padding; two empty rows agree (1.0).
    """
    if a.doc_ids.shape[0] != b.doc_ids.shape[0]:
        raise ValueError(f"{a.doc_ids.shape[0]} and {b.doc_ids.shape[0]} queries differ")
    out = np.ones(a.doc_ids.shape[0], dtype=np.float64)
    for i, (x, y) in enumerate(zip(a.doc_ids[:, :k], b.doc_ids[:, :k], strict=True)):
        top_a, top_b = set(x[x >= 0].tolist()), set(y[y >= 0].tolist())
        if top_a or top_b:
            out[i] = len(top_a & top_b) / max(len(top_a), len(top_b))
    return out
