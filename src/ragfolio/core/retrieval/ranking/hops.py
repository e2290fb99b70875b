"""Iterative two-hop retrieval: retrieve, append the top passage to the query, retrieve again, merge.

Multi-hop questions name one entity and ask about another; the first hop finds the bridge passage
and the expanded query reaches the passage the bridge points to.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragfolio.core.retrieval.results import RetrievalResult, pad_rows

APPEND_RULES = ("title", "text")
MERGE_RULES = ("interleave", "first1", "first2")


def expand_queries(
    queries: Sequence[str],
    first_hop: RetrievalResult,
    titles: Sequence[str],
    texts: Sequence[str],
    append: str = "title",
) -> list[str]:
    """Each query with its first-hop top passage's title (``append="title"``) or title and text."""
    if append not in APPEND_RULES:
        raise ValueError(f"append={append!r} must be one of {APPEND_RULES}")
    expanded = []
    for query, row in zip(queries, first_hop.doc_ids[:, 0], strict=True):
        if row < 0:
            expanded.append(query)
        elif append == "title":
            expanded.append(f"{query} {titles[row]}")
        else:
            expanded.append(f"{query} {titles[row]}. {texts[row]}")
    return expanded


def merge_hops(first: RetrievalResult, second: RetrievalResult, k: int, rule: str = "interleave") -> RetrievalResult:
    """Merge two rankings of the same queries into ``k`` distinct passages.

    Rules: ``interleave`` alternates first and second hop (first hop leads); ``first1`` / ``first2``
    keep the top 1 / 2 first-hop passages and fill the rest from the second hop. Any rule falls back
    to the other ranking when one runs out. Scores are ``1 / rank`` in the merged list.
    """
    if rule not in MERGE_RULES:
        raise ValueError(f"rule={rule!r} must be one of {MERGE_RULES}")
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    rows, row_scores = [], []
    for a, b in zip(first.doc_ids, second.doc_ids, strict=True):
        a, b = [int(x) for x in a if x >= 0], [int(x) for x in b if x >= 0]
        if rule == "interleave":
            order = [x for pair in zip(a, b, strict=False) for x in pair] + a[len(b) :] + b[len(a) :]
        else:
            keep = 1 if rule == "first1" else 2
            order = a[:keep] + b + a[keep:]
        picked = list(dict.fromkeys(order))[:k]
        rows.append(picked)
        row_scores.append([1.0 / (i + 1) for i in range(len(picked))])
    return pad_rows(rows, row_scores, k)

