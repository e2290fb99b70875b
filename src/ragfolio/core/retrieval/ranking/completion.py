"""Full result lists: every candidate returns exactly ``k`` distinct passages per query.

A family can find fewer than ``k`` passages for a query (BM25 with few matching terms, a
diversifier over a short prefilter, a small graph neighbourhood) and pads the row with ``-1``.
Scores that divide by the passages returned would then reward short lists, and a portfolio
member that hands the LLM fewer passages is not comparable with one that hands it ``k``. So the
pool completes every short row, deterministically, from rankings it already has (the candidate's
own first stage, then a dense ranking), and last from corpus order; :func:`check_full` is the
one check that every result obeys the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ragfolio.core.retrieval.results import RetrievalResult


def short_rows(result: RetrievalResult) -> int:
    """Rows holding fewer than ``result.k`` passages (``-1`` padding)."""
    return int((result.doc_ids < 0).any(axis=1).sum())


def complete_rows(
    result: RetrievalResult,
    fallbacks: Sequence[Callable[[], RetrievalResult]],
    n_passages: int,
) -> RetrievalResult:
    """Fill each short row of ``result`` up to ``result.k`` distinct passages.

    A short row keeps its own passages in order, then takes the next passages it lacks from each
    fallback ranking's same row in turn, then the lowest corpus rows it lacks. Completed slots
    repeat the row's lowest finite score (0 when it has none), so scores stay finite and
    non-increasing.

    Args:
        result: ``(n_queries, k)`` rankings, ``-1`` padded.
        fallbacks: Rankings of the same queries, built only if some row is still short when
            they are reached (a fallback may itself be short).
        n_passages: Corpus size, ``>= k``.

    Returns:
        A result with no ``-1`` and ``k`` distinct ids in every row (``result`` itself when no row
        is short).
    """
    k = result.k
    if n_passages < k:
        raise ValueError(f"the corpus has {n_passages} passages, fewer than k={k}")
    short = np.flatnonzero((result.doc_ids < 0).any(axis=1))
    if short.size == 0:
        return result
    doc_ids, scores = result.doc_ids.copy(), result.scores.copy()
    rows = {int(q): [int(d) for d in doc_ids[q] if d >= 0] for q in short}
    for build in fallbacks:
        pending = [q for q, ids in rows.items() if len(ids) < k]
        if not pending:
            break
        fallback = build().doc_ids
        for q in pending:
            _extend(rows[q], (int(d) for d in fallback[q] if d >= 0), k)
    for q, ids in rows.items():
        if len(ids) < k:
            _extend(ids, range(n_passages), k)
        own_scores = result.scores[q][result.doc_ids[q] >= 0]
        finite = own_scores[np.isfinite(own_scores)]
        floor = float(finite.min()) if finite.size else 0.0
        doc_ids[q] = ids
        scores[q] = np.concatenate([own_scores, np.full(k - own_scores.size, floor, dtype=np.float32)])
    return RetrievalResult(doc_ids, scores)


def _extend(ids: list[int], more: Iterable[int], k: int) -> None:
    """Append the ids of ``more`` that ``ids`` lacks, in order, until it holds ``k``."""
    seen = set(ids)
    for d in more:
        if len(ids) >= k:
            return
        if d not in seen:
            ids.append(d)
            seen.add(d)


def check_full(result: RetrievalResult, n_queries: int, k: int, name: str) -> None:
    """Raise ``ValueError`` unless ``result`` is ``(n_queries, k)`` with ``k`` distinct ids a row."""
    if result.doc_ids.shape != (n_queries, k):
        raise ValueError(f"{name}: result shape {result.doc_ids.shape} != ({n_queries}, {k})")
    if (result.doc_ids < 0).any():
        raise ValueError(f"{name}: {short_rows(result)} of {n_queries} rows hold fewer than {k} passages")
    ordered = np.sort(result.doc_ids, axis=1)
    repeats = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
    if repeats.any():
        raise ValueError(f"{name}: {int(repeats.sum())} rows repeat a passage, e.g. row {int(np.argmax(repeats))}")
