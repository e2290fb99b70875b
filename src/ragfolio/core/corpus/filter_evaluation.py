"""Evaluating a parsed filter: on one row (:func:`row_matches`) or on all rows at once (:func:`row_mask`).

Both read values through :mod:`~ragfolio.core.corpus.metadata_values`, so they agree on every row:

* ``In``: some value of the field (the scalar, or an element of the list) has the token of one of the
  wanted values: strings equal as strings (a date string too), numbers as float64, booleans as booleans;
  a number never equals a string or a boolean.
* ``Range``: some value of the field is a number (``kind="number"``) or a date string (``kind="date"``)
  within every bound; anything else does not match.
* ``Exists``: the field has at least one value (an empty list has none).
* A field the row lacks satisfies none of them, so it matches only under ``Not``.

:func:`row_mask` works per column: a membership test on integer codes, comparisons on float arrays,
and the inverted index of list values; it never loops over rows in Python.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.corpus.filter_nodes import And, Exists, In, Node, Not, Or, Range
from ragfolio.core.corpus.metadata_columns import Column, MetadataColumns
from ragfolio.core.corpus.metadata_values import is_number, parse_date, token

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le,
}


def row_matches(node: Node, row: Mapping[str, Any] | None, *, id: str, title: str) -> bool:
    """Whether one passage (its metadata ``row``, None for none, its ``id`` and ``title``) matches."""
    match node:
        case And(children):
            return all(row_matches(child, row, id=id, title=title) for child in children)
        case Or(children):
            return any(row_matches(child, row, id=id, title=title) for child in children)
        case Not(child):
            return not row_matches(child, row, id=id, title=title)
    values = _values(node.field, row, id, title)
    match node:
        case In(_, wanted):
            tokens = {token(v) for v in wanted}
            return any(token(value) in tokens for value in values)
        case Range():
            bounds = {op: _bound_number(node.kind, bound) for op, bound in node.bounds().items()}
            for value in values:
                number = _value_number(node.kind, value)
                if number is not None and all(_COMPARE[op](number, bound) for op, bound in bounds.items()):
                    return True
            return False
        case Exists():
            return len(values) > 0
    raise TypeError(f"not a filter node: {node!r}")


def row_mask(node: Node, columns: MetadataColumns) -> npt.NDArray[np.bool_]:
    """``(len(columns),)`` bool: which rows match (equal to :func:`row_matches` row by row)."""
    match node:
        case And(children):
            mask = row_mask(children[0], columns)
            for child in children[1:]:
                mask &= row_mask(child, columns)
            return mask
        case Or(children):
            mask = row_mask(children[0], columns)
            for child in children[1:]:
                mask |= row_mask(child, columns)
            return mask
        case Not(child):
            return ~row_mask(child, columns)
    column = columns.column(node.field)
    if column is None:
        return np.zeros(len(columns), dtype=np.bool_)
    match node:
        case In(_, wanted):
            return _in_mask(column, [token(v) for v in wanted])
        case Range():
            return _range_mask(column, node)
        case Exists():
            return column.present.copy()
    raise TypeError(f"not a filter node: {node!r}")


def _values(field: str, row: Mapping[str, Any] | None, id: str, title: str) -> list[Any]:
    if field == "id":
        return [id]
    if field == "title":
        return [title]
    value = None if row is None else row.get(field)
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _bound_number(kind: str, bound: Any) -> float:
    seconds = parse_date(bound) if kind == "date" else float(bound)
    if seconds is None:  # parse_filter lets only date strings into a date range
        raise ValueError(f"{bound!r} is not an ISO-8601 date")
    return seconds


def _value_number(kind: str, value: Any) -> float | None:
    if kind == "number":
        return float(value) if is_number(value) else None
    return parse_date(value) if isinstance(value, str) else None


def _in_mask(column: Column, tokens: list[Any]) -> npt.NDArray[np.bool_]:
    codes = [column.vocabulary[t] for t in tokens if t in column.vocabulary]
    if len(codes) == 1:
        mask = column.codes == codes[0]
    elif codes:
        mask = np.isin(column.codes, np.asarray(codes, dtype=np.int32))
    else:
        mask = np.zeros(len(column), dtype=np.bool_)
    for t in tokens:
        if (rows := column.list_rows.get(t)) is not None:
            mask[rows] = True
    return mask


def _range_mask(column: Column, node: Range) -> npt.NDArray[np.bool_]:
    scalars, (list_rows, list_values) = (
        (column.numbers, column.list_numbers) if node.kind == "number" else (column.dates, column.list_dates)
    )
    bounds = {op: _bound_number(node.kind, bound) for op, bound in node.bounds().items()}
    mask = np.ones(len(column), dtype=np.bool_)
    inside = np.ones(list_values.shape[0], dtype=np.bool_)
    for op, bound in bounds.items():  # NaN (no value of this kind) fails every comparison
        mask &= _COMPARE[op](scalars, bound)
        inside &= _COMPARE[op](list_values, bound)
    mask[list_rows[inside]] = True
    return mask
