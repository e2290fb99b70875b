"""The metadata filter language: which passages a query may retrieve.

A filter is a JSON object over passage metadata (Mongo- and Qdrant-like). A field is a metadata key,
or one of the pseudo-fields ``id`` and ``title`` (the passage's own id and title)::

    {"lang": "en"}                                  equality (shorthand for {"lang": {"eq": "en"}})
    {"lang": {"ne": "en"}}                          not equal (a passage without "lang" matches)
    {"source": {"in": ["wiki", "news"]}}            one of; {"nin": [...]} none of
    {"year": {"gte": 2020, "lt": 2024}}             range (several bounds in one object: all hold)
    {"published": {"gte": "2024-05-01"}}            a date range: ISO-8601 bounds and values
    {"tags": "physics"}                             a list field contains "physics"
    {"reviewed": {"exists": true}}                  the field has a value ({"exists": false}: it has none)
    {"lang": "en", "year": {"gt": 2020}}            several keys in one object: all hold
    {"and": [f, ...]}, {"or": [f, ...]}, {"not": f} logical combinations of filters
    {"or": [{"id": {"in": ["p1", "p7"]}}, {"not": {"tags": {"in": ["draft", "old"]}}}]}

Meaning:

* Values are strings, numbers and booleans. Numbers compare as float64 (``1`` equals ``1.0``); a number
  never equals a string or a boolean, and such a comparison is no match, never an error.
* A list field (a tag list) matches ``eq`` / ``in`` when one of its elements does, and a range when one
  of its elements lies within all the range's bounds; ``ne`` / ``nin`` mean "contains none of".
* Range bounds are numbers, or ISO-8601 date strings (``"2024-05-01"``, ``"2024-05-01T10:00:00Z"``,
  ``"2024-05-01T12:00:00+02:00"``; no offset means UTC) compared as timestamps with the row values that
  are date strings. A number range never matches a string, a date range never matches a number, and
  equality on dates is equality of the strings.
* A field a passage lacks (or whose list is empty) matches nothing, so it passes only ``ne``, ``nin``,
  ``exists: false`` and ``not``.
* Keys ``and``, ``or`` and ``not`` are logical, so metadata keys of those names cannot be filtered on.

Limits: at most 16 levels of nesting and 1024 conditions; ``and`` / ``or`` take non-empty lists and
``in`` / ``nin`` non-empty lists of scalars. A violation raises :class:`FilterError` naming its path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.corpus import filter_elasticsearch, filter_evaluation
from ragfolio.core.corpus.filter_nodes import (
    RANGE_OPERATORS,
    And,
    Exists,
    FilterError,
    In,
    Node,
    Not,
    Or,
    Range,
    canonical,
)
from ragfolio.core.corpus.metadata_columns import MetadataColumns
from ragfolio.core.corpus.metadata_values import Scalar, is_number, parse_date, scalar_problem, type_name

__all__ = ["Filter", "FilterError", "parse_filter"]

MAX_DEPTH = 16
MAX_NODES = 1024
LOGICAL = ("and", "or", "not")
OPERATORS = ("eq", "ne", "in", "nin", *RANGE_OPERATORS, "exists")


@dataclass(frozen=True)
class Filter:
    """A parsed, validated filter (build it with :func:`parse_filter`).

    Attributes:
        root: The filter's tree (see :mod:`~ragfolio.core.corpus.filter_nodes`).
    """

    root: Node

    def matches(self, row: Mapping[str, Any] | None, *, id: str, title: str) -> bool:
        """Whether one passage matches: its metadata ``row`` (None for none), ``id`` and ``title``."""
        return filter_evaluation.row_matches(self.root, row, id=id, title=title)

    def mask(self, columns: MetadataColumns) -> npt.NDArray[np.bool_]:
        """``(len(columns),)`` bool, which rows match; row ``i`` agrees with :meth:`matches` on row ``i``."""
        return filter_evaluation.row_mask(self.root, columns)

    def to_elasticsearch(
        self, prefix: str = "metadata.", *, id_field: str = "passage_id", title_field: str = "title"
    ) -> dict[str, Any]:
        """The Elasticsearch query clause (``term``, ``terms``, ``range``, ``exists``, ``bool``) for a
        ``bool`` query's ``filter`` list; metadata key ``k`` is the field ``prefix + k``."""
        return filter_elasticsearch.to_elasticsearch(
            self.root, prefix=prefix, id_field=id_field, title_field=title_field
        )

    def to_dict(self) -> dict[str, Any]:
        """The filter in canonical grammar form (parsing it gives an equivalent filter)."""
        return canonical(self.root)

    def key(self) -> str:
        """A canonical JSON string (sorted keys, sorted values): equal for filters written differently
        that mean the same (``{"a": 1}`` and ``{"a": {"eq": 1.0}}``), for use in cache keys."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def fields(self) -> frozenset[str]:
        """The fields the filter reads (metadata keys and pseudo-fields)."""
        found: set[str] = set()
        stack: list[Node] = [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, And | Or):
                stack.extend(node.children)
            elif isinstance(node, Not):
                stack.append(node.child)
            else:
                found.add(node.field)
        return frozenset(found)


def parse_filter(obj: Any, *, path: str = "filter") -> Filter:
    """Validate a filter in the grammar above and return it parsed.

    Args:
        obj: The filter as decoded from JSON.
        path: The name of the filter in error paths (e.g. ``"body.filter"``).

    Raises:
        FilterError: With ``path`` (e.g. ``"filter.and[1].year.gt"``) and ``reason``.
    """
    return Filter(_Parser().filter(obj, path, depth=1))


class _Parser:
    """One parse; counts the conditions made so far against :data:`MAX_NODES`."""

    def __init__(self) -> None:
        self.nodes = 0

    def made(self, node: Node, path: str) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise FilterError(path, f"a filter may hold at most {MAX_NODES} conditions")
        return node

    def filter(self, obj: Any, path: str, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise FilterError(path, f"filters nest at most {MAX_DEPTH} levels deep")
        if not isinstance(obj, Mapping):
            raise FilterError(path, f"a filter must be an object, got {type_name(obj)}")
        if not obj:
            raise FilterError(path, "a filter needs at least one condition (send no filter to match everything)")
        parts = [self.part(key, value, path, depth) for key, value in obj.items()]
        return parts[0] if len(parts) == 1 else self.made(And(tuple(parts)), path)

    def part(self, key: Any, value: Any, path: str, depth: int) -> Node:
        if not isinstance(key, str) or not key:
            raise FilterError(path, f"a field name must be a non-empty string, got {key!r}")
        here = f"{path}.{key}"
        if key == "not":
            return self.made(Not(self.filter(value, here, depth + 1)), here)
        if key in ("and", "or"):
            if not isinstance(value, list | tuple) or not value:
                raise FilterError(here, f"{key} needs a non-empty list of filters, got {_described(value)}")
            children = tuple(self.filter(child, f"{here}[{i}]", depth + 1) for i, child in enumerate(value))
            return self.made((And if key == "and" else Or)(children), here)
        if key in OPERATORS:
            raise FilterError(here, f"{key} is an operator, not a field: write {{\"<field>\": {{\"{key}\": ...}}}}")
        if isinstance(value, Mapping):
            return self.conditions(key, value, here)
        return self.made(In(key, (_scalar(value, "eq", here, path=here),)), here)

    def conditions(self, field: str, ops: Mapping[str, Any], path: str) -> Node:
        if not ops:
            raise FilterError(path, "an operator object needs at least one operator")
        parts: list[Node] = []
        bounds: dict[str, Scalar] = {}
        for op, value in ops.items():
            at = f"{path}.{op}"
            if op in ("eq", "ne"):
                node: Node = In(field, (_scalar(value, op, at, path=path),))
                parts.append(self.made(Not(node) if op == "ne" else node, at))
            elif op in ("in", "nin"):
                if not isinstance(value, list | tuple) or not value:
                    raise FilterError(
                        at, f"{op} needs a non-empty list of values, got {_described(value)}", shown_at=path
                    )
                values = tuple(_scalar(v, op, f"{at}[{i}]", path=path) for i, v in enumerate(value))
                parts.append(self.made(Not(In(field, values)) if op == "nin" else In(field, values), at))
            elif op in RANGE_OPERATORS:
                bounds[op] = _bound(value, op, at, path)
            elif op == "exists":
                if not isinstance(value, bool):
                    raise FilterError(at, f"exists needs true or false, got {type_name(value)}", shown_at=path)
                parts.append(self.made(Exists(field) if value else Not(Exists(field)), at))
            else:
                raise FilterError(at, f"unknown operator {op!r}; expected one of {', '.join(OPERATORS)}", shown_at=path)
        if bounds:
            kinds = {"number" if is_number(b) else "date" for b in bounds.values()}
            if len(kinds) > 1:
                raise FilterError(path, "range bounds must be all numbers or all date strings, not both")
            parts.append(self.made(Range(field, kinds.pop(), **bounds), path))  # type: ignore[arg-type]
        return parts[0] if len(parts) == 1 else self.made(And(tuple(parts)), path)


def _scalar(value: Any, op: str, at: str, *, path: str) -> Scalar:
    if (problem := scalar_problem(value)) is not None:
        hint = "; use in to match any of several values" if isinstance(value, list | tuple) and op == "eq" else ""
        raise FilterError(at, f"{op} needs a string, number or boolean, {problem}{hint}", shown_at=path)
    return value


def _bound(value: Any, op: str, at: str, path: str) -> Scalar:
    if is_number(value) and scalar_problem(value) is None:
        return value
    if isinstance(value, str):
        if parse_date(value) is None:
            raise FilterError(at, f"{op} needs a number or a date string, got {value!r} (not an ISO-8601 date)",
                              shown_at=path)
        return value
    raise FilterError(at, f"{op} needs a number or a date string, got {_described(value)}", shown_at=path)


def _described(value: Any) -> str:
    if is_number(value) and scalar_problem(value) is not None:
        return f"{value!r} (not a finite float64)"
    return "an empty list" if isinstance(value, list | tuple) and not value else type_name(value)
