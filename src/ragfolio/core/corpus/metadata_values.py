"""The values a passage's metadata may hold, and how they compare.

Metadata is a flat JSON object: each value is a string, a number, a boolean, or a list of those (a tag
list). A date is a string in ISO-8601 form (``"2024-05-01"``, ``"2024-05-01T10:00:00Z"``); it stays a
string for equality, and range comparisons read it as a UTC timestamp.

Every comparison in the filter language goes through the helpers here, so that a filter evaluated on
one row and on a whole column agree exactly: numbers compare as float64, a date as float seconds since
the epoch (UTC; a date or a time without an offset is taken as UTC), and a boolean is never a number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from ragfolio.core.data.metadata import Scalar

# A value as the filter language compares it for equality: the kind ("s", "n" or "b") and the value
# (numbers as float, so that 1 and 1.0 are one value).
Token = tuple[str, str | float | bool]


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?")


def type_name(value: Any) -> str:
    """The JSON name of ``value``'s type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def is_number(value: Any) -> bool:
    """Whether ``value`` is a number (an int or a float, never a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def scalar_problem(value: Any) -> str | None:
    """Why ``value`` is not an allowed scalar (a message fragment), or None when it is one."""
    if isinstance(value, str | bool):
        return None
    if is_number(value):
        try:
            finite = math.isfinite(float(value))
        except OverflowError:
            finite = False
        return None if finite else f"the number {value!r} is not a finite float64"
    return f"got {type_name(value)}"


@lru_cache(maxsize=65536)
def parse_date(text: str) -> float | None:
    """Seconds since the epoch (UTC) of an ISO-8601 date or date-time string, or None when ``text`` is
    not one. Only the forms ``YYYY-MM-DD[THH:MM[:SS[.ffffff]]][Z|+HH:MM]`` count, so that a plain number
    or a word is never a date."""
    if not _DATE.fullmatch(text):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:  # e.g. "2024-13-01": the right shape but no such day
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def token(value: Scalar) -> Token:
    """The equality form of a scalar: equal tokens mean equal values (``1 == 1.0``, ``True != 1``)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, str):
        return ("s", value)
    return ("n", float(value))
