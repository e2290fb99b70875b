"""A pool runner over a view of its corpus: the passages added since the indexes were built, and a row mask.

A service's corpus lives (:mod:`ragfolio.core.corpus.live_corpus`): passages are added, replaced
and deleted while it runs, and a query may carry a metadata filter. Both are a :class:`CorpusView`
of the runner's corpus: the added rows (``n_base..``, with their vectors per encoder) and which rows
may be returned. :func:`runner_over` gives the runner that ranks that view, with the same families
and members, sharing every corpus part of the runner it is made from (indexes, passage graph,
encoders), so making one costs no index build:

* its BM25 and dense indexes are the base ones wrapped with the added passages and the mask
  (:mod:`ragfolio.core.retrieval.indexes.live_indexes`), so every base, and every family ranking
  from one, ranks the view;
* its titles, texts and passage embeddings are the base ones followed by the added ones;
* a family that cannot rank added passages (``Family.live_updates`` False: the passage graph)
  ranks the base rows under the mask, and the added passages its first stage ranks among its top
  ``num_docs`` are put in at their first-stage positions (:func:`with_added`);
* every member's list is then kept to the allowed rows and completed from allowed rows (its first
  stage, the dense base, then corpus order), so no member returns a deleted or filtered-out
  passage, and a row is short only when fewer than ``num_docs`` passages are allowed.

A view's query parts are its own (a fresh memo): the same query ranks differently in another view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever, tokenize
from ragfolio.core.retrieval.indexes.delta_bm25 import DeltaBM25, average_length
from ragfolio.core.retrieval.indexes.faiss_index import DenseRetriever
from ragfolio.core.retrieval.indexes.live_indexes import LiveTextIndex, LiveVectorIndex
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.ranking.completion import _extend
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.retrieval.running.memo import PartsMemo
from ragfolio.core.retrieval.running.pool_runner import PoolRunner, passage_texts

Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class CorpusView:
    """What a runner over a living corpus ranks.

    Attributes:
        n_base: Rows of the indexed corpus (the runner's).
        titles: Titles of the added rows, ``n_base..``, in order.
        texts: Texts of the added rows.
        vectors: ``(n_added, dim)`` passage vectors of the added rows by encoder name (every encoder
            whose passage embeddings a member reads).
        allowed: ``(n_base + n_added,)`` rows that may be returned; None: every row.
        name: Names the view in logs (the corpus version and the filter).
        remote_filter: The filter as an Elasticsearch clause (an index on a cluster filters
            itself, by the metadata it stores); None: no filter.
        dead: Rows deleted or replaced: an index on a cluster leaves them out of its search.
    """

    n_base: int
    titles: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    vectors: Mapping[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    allowed: Mask | None = None
    name: str = ""
    remote_filter: Mapping[str, Any] | None = None
    dead: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(self.titles) != len(self.texts):
            raise ValueError(f"{len(self.titles)} titles for {len(self.texts)} added texts")
        for encoder, vectors in self.vectors.items():
            if len(vectors) != len(self.texts):
                raise ValueError(f"{len(vectors)} {encoder} vectors for {len(self.texts)} added passages")
        if self.allowed is not None and len(self.allowed) != self.n_base + len(self.texts):
            raise ValueError(f"allowed has {len(self.allowed)} rows for {self.n_base + len(self.texts)} passages")

    @property
    def n_added(self) -> int:
        return len(self.texts)

    def base_only(self) -> CorpusView:
        """This view without its added rows: what a family that cannot rank them sees."""
        allowed = None if self.allowed is None else self.allowed[: self.n_base]
        return CorpusView(self.n_base, allowed=allowed, name=f"{self.name} (indexed rows)",
                          remote_filter=self.remote_filter, dead=tuple(r for r in self.dead if r < self.n_base))


class Joined(Sequence[str]):
    """Two sequences read as one (the indexed passages' titles or texts, then the added ones'),
    without copying the first."""

    def __init__(self, first: Sequence[str], second: Sequence[str]) -> None:
        self.first, self.second = first, second

    def __len__(self) -> int:
        return len(self.first) + len(self.second)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        n = len(self.first)
        return self.first[i] if i < n else self.second[i - n]

    def __iter__(self) -> Iterator[str]:
        yield from self.first
        yield from self.second


class ViewRunner(PoolRunner):
    """A :class:`PoolRunner` over a :class:`CorpusView` of another runner's corpus (see the module
    docstring); made by :func:`runner_over`, never directly."""

    parent: PoolRunner
    view: CorpusView

    @cached_property
    def passage_texts(self) -> Sequence[str]:  # type: ignore[override]
        return Joined(self.parent.passage_texts, passage_texts(self.view.titles, self.view.texts))

    @cached_property
    def _base_view(self) -> PoolRunner:
        """The runner that ranks this view's indexed rows only (for families without live updates)."""
        return self if self.view.n_added == 0 else runner_over(self.parent, self.view.base_only())

    def _delta_bm25(self, index: BM25Retriever, stopwords: str) -> DeltaBM25 | None:
        if self.view.n_added == 0:
            return None
        avg_len = self._remember(("avg_len", stopwords), lambda: average_length(
            self.parent._remember(("tokens", stopwords), lambda: tokenize(self.parent.passage_texts, stopwords))))
        texts = passage_texts(self.view.titles, self.view.texts)
        return DeltaBM25(index.statistics(), index.n_docs, avg_len, texts, stopwords)

    def _encode(self, name: str, texts: list[str], *, queries: bool) -> npt.NDArray[np.float32]:
        return self.parent._encode(name, texts, queries=queries)  # one encoder (and its lock) for all views

    def query_embeddings(self, encoder: str, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.parent.query_embeddings(encoder, queries)  # a query's vector is the same in every view

    def _cached_result(self, namespace: str, key: Mapping[str, Any], compute: Callable[[], RetrievalResult]
                       ) -> RetrievalResult:
        return compute()  # a view's rankings depend on its mask and added rows: never from the disk cache

    def bm25(self, params: Mapping[str, Any]) -> Any:
        base = self.parent.bm25(params)
        if not isinstance(base, BM25Retriever):  # an Elasticsearch index: it filters itself
            return RemoteView(base, self.view)
        full = {**self.bm25_params, **params}
        key = ("live_bm25", tuple(sorted(full.items())))
        return self._remember(key, lambda: LiveTextIndex(
            base, self._delta_bm25(base, full["stopwords"]), self.view.allowed))

    def dense(self, encoder: str, index_type: str = "auto", backend: str = "inprocess") -> Any:
        base = self.parent.dense(encoder, index_type, backend)
        if not isinstance(base, DenseRetriever):
            return RemoteView(base, self.view)
        added = self.view.vectors.get(encoder) if self.view.n_added else None
        if self.view.n_added and added is None:
            raise ValueError(f"the live corpus holds no {encoder} vectors of its {self.view.n_added} added passages")
        return self._remember(("live_dense", encoder, index_type, backend),
                              lambda: LiveVectorIndex(base, added, self.view.allowed))

    def passage_embeddings(self, encoder: str) -> npt.NDArray[np.float32]:
        base = self.parent.passage_embeddings(encoder)
        if self.view.n_added == 0:
            return base
        return self._remember(("passage_emb", encoder), lambda: np.concatenate([base, self.view.vectors[encoder]]))

    def graph(self, max_entity_df: int | None = None) -> Any:
        return self.parent.graph(max_entity_df)

    def corpus_indexes(self) -> list[Any]:
        return self.parent.corpus_indexes()

    def run(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult:
        """The candidate's ranking of the view: ``num_docs`` allowed passages a row, fewer only when
        fewer are allowed."""
        family = self._family(candidate)
        if not family.live_updates and self._base_view is not self:
            ranked = self._base_view.run(candidate, queries)
            if (stage := family.first_stage) is None:
                return ranked
            return with_added(ranked, self.base(candidate.params[stage], queries), self.view.n_base)
        result = self._compute(candidate, queries)
        fallbacks: list[Callable[[], RetrievalResult]] = []
        if (stage := family.first_stage) is not None:
            fallbacks.append(lambda: self.base(candidate.params[stage], queries))
        if self.completion_encoder is not None:
            fallbacks.append(lambda: self.base(f"dense:{self.completion_encoder}", queries))
        return allowed_rows(result, self.view.allowed, fallbacks, len(self.texts))


class RemoteView:
    """An index on an Elasticsearch cluster searched under a view: the view's filter and its dead rows
    go into the search (``filter_clause``, ``exclude_rows``), so a filtered query still gets ``k``
    passages when ``k`` match. The cluster holds the indexed rows only: added passages join at the
    next run (the Elasticsearch members are listed as such in ``/portfolio``)."""

    def __init__(self, index: Any, view: CorpusView) -> None:
        self.index, self.view = index, view

    def retrieve(self, queries: Sequence[str], k: int) -> RetrievalResult:
        return self.index.retrieve(queries, k, filter_clause=self.view.remote_filter, exclude_rows=self.view.dead)

    def retrieve_embedded(self, query_emb: npt.NDArray[np.float32], k: int) -> RetrievalResult:
        return self.index.retrieve_embedded(query_emb, k, filter_clause=self.view.remote_filter,
                                            exclude_rows=self.view.dead)


def with_added(ranked: RetrievalResult, seeds: RetrievalResult, n_base: int) -> RetrievalResult:
    """A list of indexed rows with the added rows its first stage ranks among the top ``k`` put in at
    their first-stage positions (the rows below move down; the list keeps ``k``).

    How a family that cannot rank added passages itself (the passage graph links indexed rows only)
    still serves them: where its own seeds put them. An added row takes the score of the row it
    displaces, so the scores stay non-increasing.
    """
    k = ranked.k
    ids, scores = ranked.doc_ids.copy(), ranked.scores.copy()
    for q in range(ids.shape[0]):
        top = seeds.doc_ids[q, :k]
        added = [(pos, int(row)) for pos, row in enumerate(top) if row >= n_base]
        if not added:
            continue
        rest = [int(row) for row in ranked.doc_ids[q] if row >= 0]
        for pos, row in added:
            rest.insert(min(pos, len(rest)), row)
        row_ids = rest[:k]
        ids[q, : len(row_ids)] = row_ids
        own = ranked.scores[q][ranked.doc_ids[q] >= 0]
        scores[q, : len(row_ids)] = np.sort(np.resize(own, len(row_ids)))[::-1] if own.size else 0.0
    return RetrievalResult(ids, scores)


def allowed_rows(
    result: RetrievalResult, allowed: Mask | None, fallbacks: Sequence[Callable[[], RetrievalResult]], n_rows: int
) -> RetrievalResult:
    """``result`` kept to ``allowed`` rows, each row completed to ``result.k`` from ``fallbacks`` (built
    only when needed), then from the allowed rows in corpus order; ``-1``-padded only where fewer
    than ``k`` rows are allowed. Completed slots repeat the row's lowest score (0 when none)."""
    k = result.k
    ok = (result.doc_ids >= 0) & (result.doc_ids < n_rows)
    if allowed is not None:
        ok &= allowed[np.clip(result.doc_ids, 0, n_rows - 1)]
    if ok.all():
        return result
    ids = np.full_like(result.doc_ids, -1)
    scores = np.full_like(result.scores, -np.inf)
    rows = [[int(d) for d in result.doc_ids[q][ok[q]]] for q in range(len(ids))]
    built: dict[int, RetrievalResult] = {}
    every_allowed: npt.NDArray[np.int64] | None = None
    for q, row in enumerate(rows):
        own = result.scores[q][ok[q]]
        for i, build in enumerate(fallbacks):
            if len(row) >= k:
                break
            if i not in built:
                built[i] = build()
            more = built[i].doc_ids[q]
            _extend(row, (int(d) for d in more if d >= 0 and (allowed is None or allowed[d])), k)
        if len(row) < k:
            if every_allowed is None:
                every_allowed = np.arange(n_rows) if allowed is None else np.flatnonzero(allowed)
            _extend(row, (int(d) for d in every_allowed[: 4 * k]), k)
            if len(row) < k:
                _extend(row, (int(d) for d in every_allowed), k)
        finite = own[np.isfinite(own)]
        floor = float(finite.min()) if finite.size else 0.0
        ids[q, : len(row)] = row
        scores[q, : own.size] = own
        scores[q, own.size: len(row)] = floor
    return RetrievalResult(ids, scores)


def runner_over(runner: PoolRunner, view: CorpusView) -> ViewRunner:
    """``runner`` ranking ``view`` of its corpus, sharing its corpus parts (see the module docstring)."""
    parent = runner.parent if isinstance(runner, ViewRunner) else runner
    if view.n_base != len(parent.texts):
        raise ValueError(f"a view of {view.n_base} indexed passages over a runner of {len(parent.texts)}")
    viewed = ViewRunner.__new__(ViewRunner)
    state = {key: value for key, value in vars(parent).items() if key not in ("passage_texts", "corpus_key")}
    viewed.__dict__.update(state)
    viewed.num_docs = runner.num_docs
    viewed.parent, viewed.view = parent, view
    viewed.titles = Joined(parent.titles, view.titles) if view.n_added else parent.titles
    viewed.texts = Joined(parent.texts, view.texts) if view.n_added else parent.texts
    viewed._memo = PartsMemo(parent._memo.max_query_batches)
    return viewed
