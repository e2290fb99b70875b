"""Utility matrices by query blocks, in this process or on a Dask cluster, with the same bits.

Scoring ``m`` candidates on ``N`` queries is the expensive step of a run. Both paths here cut each
dataset's queries into blocks of ``block_size`` and score a block with :func:`utility_block`; the
rows of the blocks, concatenated in order, are the dataset's ``(N, m)`` matrix. Because every block
is computed by the same code on the same queries, the two paths agree bit for bit. (Blocking
matters: batch size changes float results of some encoders and of FAISS, so an unblocked run is
not guaranteed to match a blocked one to the last bit.)

Datasets that retrieve from the same corpus (``data_prep.corpus: union``) share one runner: in
this process one :class:`PoolRunner` is built per distinct corpus. On a cluster
(:func:`score_on_cluster`) each distinct corpus is scattered to every worker once, then one task
per block is submitted. A worker keeps one :class:`PoolRunner` per corpus and runner
configuration (:data:`_RUNNERS`), so its blocks share indexes, passage embeddings and the graph;
workers that share a disk also share the runner's :class:`~ragfolio.core.cache.ArrayCache`. Before
its blocks, each distinct corpus gets one warm-up task that computes the corpus parts kept on disk
(passage embeddings), so local workers encode each corpus once instead of once per worker.

``dask.distributed`` is imported inside the functions that need it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from tqdm.auto import tqdm

from ragfolio.core.data.passages import Corpus
from ragfolio.core.retrieval.pool import CandidateSpec, encoders_used
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.scoring.runners import RunnerConfig, Score
from ragfolio.core.scoring.utility import utility_matrix

if TYPE_CHECKING:
    from distributed import Future

logger = logging.getLogger(__name__)

Utility = npt.NDArray[np.float32]

# Runners a worker process keeps (one per corpus and configuration), least recently used dropped.
MAX_RUNNERS_PER_WORKER = 4
_RUNNERS: OrderedDict[str, PoolRunner] = OrderedDict()
_RUNNERS_LOCK = threading.Lock()


@dataclass(frozen=True)
class CorpusPart:
    """One corpus's passages, scattered to every worker once. ``key`` is its :attr:`Corpus.fingerprint`."""

    titles: tuple[str, ...]
    texts: tuple[str, ...]
    key: str

    @classmethod
    def of(cls, corpus: Corpus) -> CorpusPart:
        return cls(corpus.titles, corpus.texts, corpus.fingerprint)


@dataclass(frozen=True)
class ScoringJob:
    """One dataset to score: its corpus, its queries and what each query's score is measured against.

    Attributes:
        name: The dataset's name (the key of its matrix).
        corpus: The passages it retrieves from (jobs with equal ``corpus.key`` share a runner).
        queries: ``N`` query texts, in utility-matrix row order.
        targets: Per query, the corpus rows of its gold passages (``support_recall``) or its
            answer aliases (``answer_recall``).
    """

    name: str
    corpus: CorpusPart
    queries: tuple[str, ...]
    targets: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        if len(self.queries) != len(self.targets):
            raise ValueError(f"{self.name}: {len(self.queries)} queries but {len(self.targets)} targets")

    def blocks(self, block_size: int) -> Iterator[tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]]:
        """``(queries, targets)`` of consecutive blocks of at most ``block_size`` queries."""
        if block_size < 1:
            raise ValueError(f"block_size={block_size} must be >= 1")
        for start in range(0, len(self.queries), block_size):
            yield self.queries[start : start + block_size], self.targets[start : start + block_size]


def utility_block(
    runner: PoolRunner, candidates: Sequence[CandidateSpec], queries: Sequence[str],
    targets: Sequence[Sequence[Any]], score: Score, desc: str | None = None,
) -> Utility:
    """``(len(queries), m)`` float32 utilities of every candidate on one block of queries.

    ``desc`` labels a progress bar over the candidates; None shows none (cluster tasks).
    """
    if desc is None:
        results = [runner.run(candidate, queries) for candidate in candidates]
    else:
        results = runner.run_all(candidates, queries, desc=desc)
    return utility_matrix(score, results, targets, runner.passage_texts)


def _concat(blocks: list[Utility], m: int) -> Utility:
    return np.concatenate(blocks) if blocks else np.zeros((0, m), dtype=np.float32)


def score_in_process(
    jobs: Sequence[ScoringJob], candidates: Sequence[CandidateSpec], config: RunnerConfig, score: Score,
    block_size: int,
) -> dict[str, Utility]:
    """``{dataset: U}`` with ``U`` of shape ``(N, m)`` float32, block after block in this process.

    One runner is built per distinct corpus, so jobs over one corpus share its indexes and embeddings.
    """
    out, runners = {}, {}
    for job in jobs:
        if job.corpus.key not in runners:
            runners[job.corpus.key] = config.build(job.corpus.titles, job.corpus.texts)
        runner = runners[job.corpus.key]
        blocks = list(job.blocks(block_size))
        out[job.name] = _concat(
            [utility_block(runner, candidates, queries, targets, score,
                           desc=f"{job.name} candidates" + (f" (block {i + 1}/{len(blocks)})" if len(blocks) > 1 else ""))
             for i, (queries, targets) in enumerate(blocks)],
            len(candidates),
        )
    return out


def worker_runner(corpus: CorpusPart, config: RunnerConfig) -> PoolRunner:
    """This process's runner for ``corpus`` and ``config``, built on first use and then reused."""
    key = f"{corpus.key}|{config.key()}"
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = config.build(corpus.titles, corpus.texts)
        _RUNNERS.move_to_end(key)
        while len(_RUNNERS) > MAX_RUNNERS_PER_WORKER:
            _RUNNERS.popitem(last=False)
    return runner


def _warm_corpus(corpus: CorpusPart, config: RunnerConfig, encoders: Sequence[str]) -> str:
    """Compute (or load) the corpus's passage embeddings for ``encoders`` on this worker."""
    runner = worker_runner(corpus, config)
    for encoder in encoders:
        runner.passage_embeddings(encoder)
    return corpus.key


def _score_block(
    corpus: CorpusPart, config: RunnerConfig, candidates: Sequence[CandidateSpec], queries: Sequence[str],
    targets: Sequence[Sequence[Any]], score: Score, warmed: str,
) -> Utility:
    """A cluster task: one block's utilities (``warmed`` only orders it after the warm-up)."""
    runner = worker_runner(corpus, config)
    return utility_block(runner, candidates, queries, targets, score)


def score_on_cluster(
    jobs: Sequence[ScoringJob], candidates: Sequence[CandidateSpec], config: RunnerConfig, score: Score,
    block_size: int, address: str,
) -> dict[str, Utility]:
    """The same matrices as :func:`score_in_process`, computed on the Dask cluster at ``address``.

    Args:
        jobs: The datasets to score.
        candidates: The ``m`` candidates (matrix columns, in order).
        config: How each worker builds its runners.
        score: ``support_recall`` or ``answer_recall``.
        block_size: Queries per task.
        address: The scheduler's address, e.g. ``tcp://10.0.0.5:8786``.
    """
    try:
        from distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('scoring on a Dask cluster needs `pip install "dask[distributed]"`') from exc

    encoders = encoders_used(candidates)
    with Client(address, set_as_default=False) as client:
        n_workers = len(client.scheduler_info()["workers"])
        block_futures: dict[str, list[Future]] = {}
        shared: dict[str, tuple[Future, Future]] = {}  # corpus key -> (scattered corpus, its warm-up)
        for job in jobs:
            if job.corpus.key not in shared:
                scattered = client.scatter(job.corpus, broadcast=True)
                shared[job.corpus.key] = scattered, client.submit(_warm_corpus, scattered, config, encoders, pure=False)
            corpus, warmed = shared[job.corpus.key]
            block_futures[job.name] = [
                client.submit(_score_block, corpus, config, list(candidates), queries, targets, score, warmed, pure=False)
                for queries, targets in job.blocks(block_size)
            ]
        every = [f for futures in block_futures.values() for f in futures]
        logger.info("scoring %d blocks of <= %d queries on %d Dask workers at %s", len(every), block_size, n_workers, address)
        for future in tqdm(as_completed(every, loop=client.loop), total=len(every), desc="query blocks", unit="block"):
            future.result()  # raises here, naming the block's error, if a task failed
        return {name: _concat(client.gather(futures), len(candidates)) for name, futures in block_futures.items()}
