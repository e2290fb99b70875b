"""What an Elasticsearch document of one passage holds, how its filterable fields are mapped, and the
bulk actions that write and delete documents.

A document is one corpus row, under ``_id`` = the row number (as a string)::

    {"row": 7, "text": "...",            # or "embedding": [...] in a dense index
     "passage_id": "p-7", "title": "Paris", "metadata": {"lang": "en", "year": 2021}}

``passage_id``, ``title`` and ``metadata`` are there only when the caller gives them; they are what
:meth:`ragfolio.core.corpus.filters.Filter.to_elasticsearch` addresses (its defaults: ``passage_id``,
``title``, ``metadata.<key>``). Keying ``_id`` by row makes indexing twice overwrite instead of
duplicating, and lets :func:`upsert_actions` and :func:`delete_actions` address a row without asking
the cluster which document holds it (the living corpus adds passages as new rows and masks the rows it
replaces, so a row always names one version of one passage).

Mapping choices, so that the filter clauses mean what the local evaluation means:

* ``passage_id`` and ``title`` are ``keyword``: a ``term`` compares the whole string, as the filter
  does (the BM25 ``text`` field already holds the title for ranking). ``ignore_above: 8191`` keeps a
  longer value in ``_source`` but out of the index (Lucene refuses terms over 32 KiB), so only a
  filter on such a value fails to match.
* ``metadata`` is an object with ``dynamic: true`` under a ``strict`` root: a key maps itself when a
  document first carries it, through :data:`METADATA_TEMPLATES`:

  - strings become ``keyword`` (exact equality, no analysis);
  - ISO-8601 strings become ``date`` (``date_detection`` with the one format
    ``strict_date_optional_time``: ``2024-05-01``, ``2024-05-01T10:00:00Z``, ``...+02:00``; no offset
    is UTC, as in the filter language), so a ``range`` with ISO bounds compares instants;
  - every number becomes ``double`` (the filter compares numbers as float64; left to itself
    Elasticsearch would map a key first seen as ``3`` to ``long`` and truncate a later ``3.5``);
  - booleans stay ``boolean``.

  A key's first value fixes its type. ``ignore_malformed`` on numbers and dates keeps a document whose
  value does not fit (``"n/a"`` in a number key) and leaves that value out of the key's index, so a
  filter never matches it; locally a number range never matches a string either.

Known differences from the local evaluation, all from typing: a ``term`` on a ``keyword`` key also
matches the number written as text (``42`` matches ``"42"``); a date-time written with a space
(``"2024-05-01 10:00"``) is a string here, not a date; equality on a ``date`` key compares instants,
not strings; and a string compared with a ``double`` key is a search error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ragfolio.core.cache import fingerprint

KEYWORD = {"type": "keyword", "ignore_above": 8191}
DATE_FORMAT = "strict_date_optional_time"
METADATA_TEMPLATES: list[dict[str, Any]] = [
    {"metadata_dates": {"path_match": "metadata.*", "match_mapping_type": "date",
                        "mapping": {"type": "date", "format": DATE_FORMAT, "ignore_malformed": True}}},
    {"metadata_strings": {"path_match": "metadata.*", "match_mapping_type": "string", "mapping": KEYWORD}},
    {"metadata_integers": {"path_match": "metadata.*", "match_mapping_type": "long",
                           "mapping": {"type": "double", "ignore_malformed": True}}},
    {"metadata_numbers": {"path_match": "metadata.*", "match_mapping_type": "double",
                          "mapping": {"type": "double", "ignore_malformed": True}}},
]


def passage_mapping() -> dict[str, Any]:
    """The parts of an index's ``mappings`` for ``passage_id``, ``title`` and ``metadata``: its
    ``properties`` and the root settings that map metadata keys (also a valid put-mapping body)."""
    return {
        "date_detection": True,
        "dynamic_date_formats": [DATE_FORMAT],
        "dynamic_templates": [dict(t) for t in METADATA_TEMPLATES],
        "properties": {"passage_id": dict(KEYWORD), "title": dict(KEYWORD), "metadata": {"type": "object",
                                                                                        "dynamic": True}},
    }


def passages_key(
    ids: Sequence[str] | None, titles: Sequence[str] | None, metadata: Sequence[Mapping[str, Any] | None] | None
) -> str | None:
    """A digest of the passages' ids, titles and metadata, or None when neither titles nor metadata are
    given (so an index built without them keeps its name)."""
    if titles is None and metadata is None:
        return None
    n = max(len(x) for x in (ids, titles, metadata) if x is not None)

    def at(values: Sequence[Any] | None, i: int) -> Any:
        return None if values is None else values[i]

    return fingerprint(json.dumps([at(ids, i), at(titles, i), at(metadata, i)], sort_keys=True, default=str)
                       for i in range(n))


def checked_rows(rows: Sequence[int], field: str = "rows", *, unique: bool = True) -> list[int]:
    """``rows`` as Python ints, each a corpus row (an integer >= 0; with ``unique``, each once).

    Raises:
        ValueError: Naming ``field[i]`` and the offending value.
    """
    out: list[int] = []
    seen: set[int] = set()
    for i, row in enumerate(rows):
        if isinstance(row, bool) or not hasattr(row, "__index__") or int(row) < 0:
            raise ValueError(f"{field}[{i}]={row!r} must be a corpus row, an integer >= 0")
        if unique and int(row) in seen:
            raise ValueError(f"{field}[{i}]={int(row)}: row {int(row)} appears more than once")
        seen.add(int(row))
        out.append(int(row))
    return out


def passage_fields(
    n: int,
    ids: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    metadata: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[dict[str, Any]]:
    """For each of ``n`` passages, its ``passage_id``, ``title`` and ``metadata`` fields (those given).

    Raises:
        ValueError: A sequence whose length is not ``n``, or a metadata entry that is not an object.
    """
    for name, values in (("ids", ids), ("titles", titles), ("metadata", metadata)):
        if values is not None and len(values) != n:
            raise ValueError(f"{name}: {len(values)} values for {n} passages")
    fields: list[dict[str, Any]] = [{} for _ in range(n)]
    for i, part in enumerate(fields):
        if ids is not None:
            part["passage_id"] = str(ids[i])
        if titles is not None:
            part["title"] = str(titles[i])
        if metadata is not None and metadata[i] is not None:
            if not isinstance(metadata[i], Mapping):
                raise ValueError(f"metadata[{i}] must be an object (a mapping) or None, got "
                                 f"{type(metadata[i]).__name__}")
            part["metadata"] = dict(metadata[i])  # type: ignore[arg-type]
    return fields


def bulk_actions(
    index: str,
    documents: Sequence[Mapping[str, Any]],
    *,
    rows: Sequence[int] | None = None,
    ids: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    metadata: Sequence[Mapping[str, Any] | None] | None = None,
) -> Iterator[dict[str, Any]]:
    """One ``index`` action per document (``{"text": ...}`` or ``{"embedding": ...}``): ``_id`` and
    ``row`` are ``rows[i]`` (default: ``i``), plus the passage fields given. Indexing a row again
    replaces its document.

    Raises:
        ValueError: Lengths that differ, or a row that is not an integer >= 0 or comes twice.
    """
    n = len(documents)
    row_numbers = list(range(n)) if rows is None else checked_rows(rows)
    if len(row_numbers) != n:
        raise ValueError(f"rows: {len(row_numbers)} rows for {n} documents")
    extra = passage_fields(n, ids, titles, metadata)
    for row, document, fields in zip(row_numbers, documents, extra, strict=True):
        yield {"_op_type": "index", "_index": index, "_id": str(row), "_source": {"row": row, **document, **fields}}


def delete_actions(index: str, rows: Sequence[int]) -> list[dict[str, Any]]:
    """One ``delete`` action per row (a row without a document is no error: see :func:`is_absent`)."""
    return [{"_op_type": "delete", "_index": index, "_id": str(row)} for row in checked_rows(rows)]


def is_absent(item: Mapping[str, Any]) -> bool:
    """Whether a bulk reply item is a ``delete`` of a document that was not there (``404 not_found``),
    which deleting is content with: the row is gone either way."""
    delete = item.get("delete")
    return isinstance(delete, Mapping) and delete.get("status") == 404 and delete.get("result") == "not_found"
