"""Pool runners configured as candidate scoring ran them, from the settings it recorded.

Candidate scoring writes the settings its runners used (:class:`PoolSettings`, the catalog's
``pool_settings``); every later stage builds its runners from that record rather than from
candidate scoring's parameters, so what they retrieve, and what a bundle claims, is what was scored.
A stage that runs the pool again reads it as one :class:`ScoredPool` (corpora, candidates, those
settings and the retrieval cache).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.passages import Corpus
from ragfolio.core.record_checks import checked_fields
from ragfolio.core.retrieval.family import import_families
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running.pool_runner import PoolRunner

# What a utility matrix measures (ragfolio.core.scoring.utility computes each; the settings name one)
Score = Literal["support_recall", "answer_recall"]
SCORES: tuple[Score, ...] = get_args(Score)


@dataclass(frozen=True)
class RunnerConfig:
    """Everything a :class:`PoolRunner` needs besides its corpus: small and picklable.

    Attributes:
        encoders: Encoder configs by name.
        cache: The runner's on-disk cache (workers on one machine share it by path).
        options: Other :class:`PoolRunner` keyword arguments (``num_docs``, ``prefilter_depth``, ...).
        family_modules: Modules registering the user's families, imported where the runner is built
            (a Dask worker's registry starts with the built-ins only).
    """

    encoders: Mapping[str, Mapping[str, Any]]
    cache: ArrayCache
    options: Mapping[str, Any] = field(default_factory=dict)
    family_modules: Sequence[str] = ()

    def build(self, titles: Sequence[str], texts: Sequence[str], **extra: Any) -> PoolRunner:
        """The runner over ``(titles, texts)``; ``extra``: :class:`PoolRunner` keywords beyond the
        options (a bundle's embeddings and indexes, ``max_query_batches``)."""
        import_families(self.family_modules)
        return PoolRunner(titles, texts, self.encoders, self.cache, **self.options, **extra)

    def key(self) -> str:
        """A string naming this configuration, for the worker's runner table."""
        return json.dumps(
            {"encoders": self.encoders, "cache": [str(self.cache.root), self.cache.enabled, self.cache.read_only],
             "options": self.options},
            sort_keys=True, default=str,
        )


@dataclass(frozen=True)
class PoolSettings:
    """How candidate scoring configured its pool runners.

    Attributes:
        num_docs: Passages every candidate returns.
        prefilter_depth: Depth of the shared first-stage rankings that rerankers reorder.
        bm25_base: Parameters of the BM25 that prefilters, seeds and fuses (empty: bm25s defaults).
        graph_max_degree: Neighbours per passage in the passage graph (graph candidates with a
            ``max_entity_df`` walk a graph without this cap).
        encoders: Encoder configs by name.
        score: What the utility matrices measure (``support_recall`` or ``answer_recall``).
        family_modules: Modules that register retriever families of the user's (imported when the
            settings are built, so every stage that runs the pool has them; left out of
            :meth:`to_dict` when empty, so records from before it existed read the same).
        cross_encoder: The folder of the cross-encoder candidate scoring trained for the
            ``cross_encoder`` family (:mod:`ragfolio.core.retrieval.reranking`); None when it
            trained none (then left out of :meth:`to_dict`, as ``family_modules`` is).
        cross_encoder_folds: The folder of its fold models (cross-fitting,
            :mod:`ragfolio.core.retrieval.reranking.cross_fitting`): each train question the full model
            trained on is scored by the fold model that did not; None without cross-fitting (then left
            out of :meth:`to_dict`). A bundle records none (:meth:`served`).
    """

    num_docs: int
    prefilter_depth: int
    bm25_base: dict[str, Any]
    graph_max_degree: int
    encoders: dict[str, dict[str, Any]]
    score: Score
    family_modules: list[str] = field(default_factory=list)
    cross_encoder: str | None = None
    cross_encoder_folds: str | None = None

    def __post_init__(self) -> None:
        import_families(self.family_modules)
        if self.cross_encoder_folds and not self.cross_encoder:
            raise ValueError(f"cross_encoder_folds={self.cross_encoder_folds!r} without a cross_encoder")
        for name in ("num_docs", "prefilter_depth", "graph_max_degree"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if self.score not in SCORES:
            raise ValueError(f"score={self.score!r} must be one of {SCORES}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PoolSettings:
        """The settings of a :meth:`to_dict` mapping.

        Raises:
            ValueError: A key is unknown or a required one is missing (the message names them).
        """
        return cls(**checked_fields(cls, data, "pool settings"))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for optional in ("family_modules", "cross_encoder", "cross_encoder_folds"):
            if not data[optional]:
                del data[optional]
        return data

    def runner_config(self, cache: ArrayCache, num_docs: int | None = None) -> RunnerConfig:
        """How to build a pool runner returning ``num_docs`` passages (default: :attr:`num_docs`)."""
        options = {
            "num_docs": num_docs or self.num_docs, "prefilter_depth": max(self.prefilter_depth, num_docs or 0),
            "bm25_params": self.bm25_base or None, "graph_max_degree": self.graph_max_degree,
            **({"cross_encoder": self.cross_encoder} if self.cross_encoder else {}),
            **({"cross_encoder_folds": self.cross_encoder_folds} if self.cross_encoder_folds else {}),
        }
        return RunnerConfig(self.encoders, cache, options, tuple(self.family_modules))

    def served(self) -> PoolSettings:
        """These settings as a bundle serves them: the full cross-encoder only (the fold models
        score the run's train questions, which a service never sees as such)."""
        return replace(self, cross_encoder_folds=None)

    def runner(self, corpus: Corpus, cache: ArrayCache, num_docs: int | None = None) -> PoolRunner:
        """The pool runner of ``corpus`` (``num_docs`` overridable)."""
        return self.runner_config(cache, num_docs).build(corpus.titles, corpus.texts)


class CorpusRunners:
    """One pool runner per corpus of a run and depth, built on first use and kept.

    Args:
        corpora: The run's corpora; datasets sharing a corpus share its runners.
        cache: The retrieval cache the runners read (and write, unless it is a reader).
        settings: How candidate scoring configured its runners.
    """

    def __init__(self, corpora: Corpora, cache: ArrayCache, settings: PoolSettings) -> None:
        self.corpora, self.cache, self.settings = corpora, cache, settings
        self._runners: dict[tuple[str, int], PoolRunner] = {}

    def get(self, corpus: str, num_docs: int | None = None) -> PoolRunner:
        """The runner over corpus ``corpus`` (a name of ``corpora.corpora``) at depth ``num_docs``."""
        depth = num_docs or self.settings.num_docs
        if (corpus, depth) not in self._runners:
            self._runners[corpus, depth] = self.settings.runner(self.corpora.corpora[corpus], self.cache, depth)
        return self._runners[corpus, depth]

    def for_dataset(self, dataset: str, num_docs: int | None = None) -> PoolRunner:
        """The runner over the corpus ``dataset`` retrieves from."""
        return self.get(self.corpora.name_for(dataset), num_docs)


@dataclass(frozen=True)
class ScoredPool:
    """The candidate pool as candidate scoring ran it, for a later stage to run again.

    Attributes:
        corpora: The run's corpora (``corpora``).
        candidates: The candidates, in utility-matrix column order (``candidates``).
        settings: How candidate scoring configured its runners (``pool_settings``).
        cache: The retrieval cache candidate scoring filled (``retrieval_cache``).
    """

    corpora: Corpora
    candidates: tuple[CandidateSpec, ...]
    settings: PoolSettings
    cache: ArrayCache

    @classmethod
    def of(cls, corpora: Corpora, candidates: Sequence[Mapping[str, Any]], settings: PoolSettings,
           cache: ArrayCache) -> ScoredPool:
        """The pool of the catalog's records (``candidates`` as candidate scoring wrote them)."""
        return cls(corpora, tuple(CandidateSpec.from_record(c) for c in candidates), settings, cache)

    def runners(self, *, read_only: bool = False) -> CorpusRunners:
        """New runners over the pool's corpora (``read_only``: on a read-only view of the cache)."""
        return CorpusRunners(self.corpora, self.cache.reader() if read_only else self.cache, self.settings)


def served_corpus(
    runners: CorpusRunners, names: Sequence[str], encoders: Sequence[str]
) -> tuple[Corpus, dict[str, npt.NDArray[np.float32]]]:
    """The corpus a bundle serves over corpora ``names``, and its ``(n_passages, dim)`` float32 embeddings.

    One corpus (always so with ``data_prep.corpus: union``) is served as it was measured, so its
    fingerprint is the reports'. Several (per-dataset corpora, the ``all`` portfolio) are stacked
    with passages repeated across them kept once; embeddings come from the retrieval cache (an
    encoder embeds each passage on its own, so the stacked rows are the corpora's rows).
    """
    if len(names) == 1:
        runner = runners.get(names[0])
        embeddings = {name: np.asarray(runner.passage_embeddings(name), dtype=np.float32) for name in encoders}
        return runners.corpora.corpora[names[0]], embeddings
    records: list[dict[str, Any]] = []
    parts: dict[str, list[npt.NDArray[np.float32]]] = {name: [] for name in encoders}
    seen: set[str] = set()
    for corpus_name in names:
        corpus, runner = runners.corpora.corpora[corpus_name], runners.get(corpus_name)
        new = [i for i, pid in enumerate(corpus.ids) if pid not in seen]
        seen.update(corpus.ids[i] for i in new)
        rows = corpus.to_records()
        records += [rows[i] for i in new]
        for name in encoders:
            parts[name].append(runner.passage_embeddings(name)[new])
    return Corpus.from_records(records), {name: np.concatenate(v).astype(np.float32) for name, v in parts.items()}
