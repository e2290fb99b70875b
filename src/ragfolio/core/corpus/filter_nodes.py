"""The parsed form of a metadata filter: a small immutable tree.

:func:`~ragfolio.core.corpus.filters.parse_filter` builds it; evaluation and translation walk it. There
are three leaf conditions on a field (:class:`In`, :class:`Range`, :class:`Exists`) and three logical
nodes (:class:`And`, :class:`Or`, :class:`Not`); the grammar's other operators are spelt with them
(``eq`` is ``In`` of one value, ``ne`` is ``Not(In)``, ``exists: false`` is ``Not(Exists)``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from ragfolio.core.corpus.metadata_values import Scalar, is_number, token

RANGE_OPERATORS = ("gt", "gte", "lt", "lte")


class FilterError(ValueError):
    """A filter that does not follow the grammar.

    Attributes:
        path: Where in the filter, e.g. ``"filter.and[1].year.gt"``.
        reason: What is wrong there, e.g. ``"gt needs a number or a date string, got list"``.
    """

    def __init__(self, path: str, reason: str, *, shown_at: str | None = None) -> None:
        # shown_at: the path the message names when it differs from ``path`` (an operator's error is
        # reported at its field, the reason naming the operator).
        super().__init__(f"{shown_at or path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class In:
    """The field holds one of ``values`` (a list field: contains one of them)."""

    field: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class Range:
    """The field's value lies within the given bounds (a list field: one of its values does).

    ``kind`` says what the bounds are: numbers (compared as float64) or ISO-8601 date strings (compared
    as UTC timestamps with the row's date strings). Missing bounds are None.
    """

    field: str
    kind: Literal["number", "date"]
    gt: Scalar | None = None
    gte: Scalar | None = None
    lt: Scalar | None = None
    lte: Scalar | None = None

    def bounds(self) -> dict[str, Scalar]:
        """``{operator: bound}`` of the bounds that are set, in grammar order."""
        return {op: bound for op in RANGE_OPERATORS if (bound := getattr(self, op)) is not None}


@dataclass(frozen=True)
class Exists:
    """The field has a value (a list field: at least one element)."""

    field: str


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    child: Node


Node = In | Range | Exists | And | Or | Not


def canonical(node: Node) -> dict[str, Any]:
    """The filter in the grammar's JSON form, written one way only: values sorted and deduplicated,
    integral floats as ints, nested ``and`` / ``or`` flattened and their members sorted. Two filters
    with the same canonical form match the same rows."""
    match node:
        case In(field, values):
            unique = sorted({token(v): _plain(v) for v in values}.items(), key=lambda item: item[0])
            plain = [value for _, value in unique]
            return {field: {"eq": plain[0]} if len(plain) == 1 else {"in": plain}}
        case Range(field):
            return {field: {op: _plain(bound) for op, bound in node.bounds().items()}}
        case Exists(field):
            return {field: {"exists": True}}
        case And() | Or():
            name = "and" if isinstance(node, And) else "or"
            members = [canonical(child) for child in _flattened(node, type(node))]
            return {name: sorted(members, key=lambda member: json.dumps(member, sort_keys=True))}
        case Not(child):
            return {"not": canonical(child)}
    raise TypeError(f"not a filter node: {node!r}")


def _flattened(node: And | Or, kind: type) -> list[Node]:
    out: list[Node] = []
    for child in node.children:
        out.extend(_flattened(child, kind) if isinstance(child, kind) else [child])  # type: ignore[arg-type]
    return out


def _plain(value: Scalar) -> Scalar:
    if is_number(value) and float(value).is_integer() and abs(float(value)) < 2**53:
        return int(value)
    return value
