"""The cross-encoder's judgement of a member's list: what the routers' ``judge.*`` features read.

:class:`ListJudge` scores (question, passage) pairs with the cross-encoder a pool runner holds
(``PoolSettings.cross_encoder``, the model candidate scoring trained; a cross-fitted train question
by the fold model that did not train on it, :mod:`ragfolio.core.retrieval.reranking.cross_fitting`):
each query's distinct passages among the lists it is handed are scored once, in one call per model
for the batch, and the scores are kept in the runner's disk cache under the digest of the models
that scored the queries, the queries, the rows and :data:`JUDGEMENTS_VERSION` (router training reads
every member's list of every question; a rerun reads them back). A service's runner has the cache off, so a live query is
scored afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import ArrayCache, fingerprint
from ragfolio.core.retrieval.running.cross_scores import CrossEncoderPart

NAMESPACE = "judgements"
# Bump when the scores change for the same models and pairs (tests/core/test_cache_versions.py).
JUDGEMENTS_VERSION = 1


class JudgedRunner(Protocol):
    """What a judge reads from a pool runner (:class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner` is one)."""

    cross_encoder: CrossEncoderPart
    cache: ArrayCache

    @property
    def passage_texts(self) -> list[str]: ...

    @property
    def corpus_key(self) -> str: ...


class ListJudge:
    """``judge(queries, doc_ids)``: ``(n_queries, d)`` cross-encoder probabilities that corpus row
    ``doc_ids[i, j]`` supports ``queries[i]`` (``-inf`` on ``-1``).

    Raises (on call):
        ValueError: ``doc_ids`` is not ``(n_queries, d)``, or the runner names no cross-encoder.
    """

    def __init__(self, runner: JudgedRunner) -> None:
        self.runner = runner

    def __call__(self, queries: Sequence[str], doc_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        if doc_ids.ndim != 2 or len(doc_ids) != len(queries):
            raise ValueError(f"doc_ids must be (n_queries={len(queries)}, d), got {doc_ids.shape}")
        runner = self.runner

        def compute() -> dict[str, npt.NDArray[Any]]:
            out = np.full(doc_ids.shape, -np.inf, dtype=np.float32)
            rows, cols = np.nonzero(doc_ids >= 0)
            if not len(rows):
                return {"scores": out}
            pairs, where = np.unique(np.stack([rows, doc_ids[rows, cols]], axis=1), axis=0, return_inverse=True)
            scores = runner.cross_encoder.score([queries[int(q)] for q in pairs[:, 0]],
                                                [runner.passage_texts[int(d)] for d in pairs[:, 1]])
            out[rows, cols] = scores[where.reshape(-1)]
            return {"scores": out}

        if not runner.cache.enabled:
            return compute()["scores"]
        key = {"corpus": runner.corpus_key, "cross_encoder": runner.cross_encoder.digest_for(queries),
               "queries": fingerprint(queries), "rows": fingerprint(map(str, doc_ids.ravel().tolist())),
               "shape": list(doc_ids.shape), "version": JUDGEMENTS_VERSION}
        return runner.cache.get_or_compute(NAMESPACE, key, compute)["scores"]
