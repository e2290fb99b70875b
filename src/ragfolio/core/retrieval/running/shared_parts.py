"""Which shared parts a batch of candidates needs, and computing them (in parallel) before they run.

:meth:`PoolRunner.prepare <ragfolio.core.retrieval.running.pool_runner.PoolRunner.prepare>` is
these two functions: :func:`shared_part_calls` lists the calls that compute every part the
candidates' families declare (:meth:`~ragfolio.core.retrieval.family.Family.needs`), and
:func:`run_parts` makes them, in turn or in an executor's threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import partial
from typing import TYPE_CHECKING

from ragfolio.core.retrieval.family import Expansion, SharedParts, base_parts, families
from ragfolio.core.retrieval.pool import CandidateSpec

if TYPE_CHECKING:
    from ragfolio.core.retrieval.running.pool_runner import PoolRunner


def shared_part_calls(
    runner: PoolRunner, candidates: Sequence[CandidateSpec], queries: Sequence[str]
) -> list[Callable[[], object]]:
    """One call per shared part ``candidates`` read for ``queries``: query embeddings (those a base
    reads included, :func:`~ragfolio.core.retrieval.family.base_parts`), bases, two-hop expansions,
    the corpus parts they search, and the cross-encoder they score with."""
    registered = families()  # a candidate of an unknown family fails in run, alone
    needed = SharedParts.union(
        registered[c.family].needs(registered[c.family].full_params(c.params)) for c in candidates
        if c.family in registered
    )
    encoders = dict.fromkeys(needed.query_encoders)  # a dict as an ordered set
    for base in needed.bases:  # a base that reads an encoder (dense:<encoder>) needs its query embeddings too
        encoders.update(dict.fromkeys(base_parts(base).query_encoders))
    parts: list[Callable[[], object]] = [partial(runner.query_embeddings, encoder, queries) for encoder in encoders]
    parts += [partial(runner.base, base, queries) for base in needed.bases]
    parts += [partial(_expand_and_embed, runner, expansion, queries) for expansion in needed.expansions]
    parts += [partial(runner.bm25, params) for params in needed.bm25]
    parts += [partial(runner.dense, index.encoder, index.index_type, index.backend) for index in needed.dense]
    parts += [partial(runner.passage_embeddings, encoder) for encoder in needed.passage_encoders]
    if needed.graph:
        parts.append(runner.graph)
    parts += [partial(runner.graph, cap) for cap in needed.entity_graphs]
    if needed.cross_encoder:  # the models of these queries loaded (and their files checked) once, before the candidates run
        parts.append(partial(runner.cross_encoder.load, queries))
    return parts


def run_parts(parts: Sequence[Callable[[], object]], executor: Executor | None) -> None:
    """Call every part: in turn without ``executor``, else in its threads with the caller helping.

    Parts wait for each other through the runner's memo (one lock per key), never for a queued
    task, so this cannot deadlock; a part no worker has started yet is run by the calling thread.
    """
    if executor is None:
        for part in parts:
            part()
        return
    futures = [executor.submit(part) for part in parts]
    for part, future in zip(parts, futures, strict=True):
        if future.cancel():
            part()
        else:
            future.result()


def _expand_and_embed(runner: PoolRunner, expansion: Expansion, queries: Sequence[str]) -> None:
    """The expanded queries, and what the second hop's base reads of them (its dense indexes, then the
    expanded queries' embeddings)."""
    expanded = runner.expanded_queries(expansion.first, expansion.append, queries)
    second = base_parts(expansion.second)
    for index in second.dense:
        runner.dense(index.encoder, index.index_type, index.backend)
    for encoder in second.query_encoders:
        runner.query_embeddings(encoder, expanded)
