"""Passage metadata: the flat JSON object a passage may carry for filtering, checked and made canonical.

A passage's ``metadata`` is a JSON object whose keys are non-empty strings and whose values are
strings (dates as ISO strings, ``"2024-05-01"``), numbers, booleans, or lists of those::

    {"source": "handbook", "year": 2021, "public": true, "tags": ["hr", "leave"]}

``null``, nested objects, lists of lists and non-finite numbers are rejected: a filter compares a
key's value (or any item of its list) with a constant, which none of those would make clear.
:func:`validate_metadata` checks one object; :func:`canonical_json` writes it the one way a
fingerprint hashes it (keys sorted, no spaces).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

Scalar = str | int | float | bool
FIELD = "metadata"
RESERVED = ("id", "title")  # what a filter calls the passage's own id and title (ragfolio.core.corpus.filters)


class MetadataError(ValueError):
    """A metadata object that breaks the rules of the module docstring.

    Attributes:
        field: The offending field, e.g. ``"metadata.tags[2]"``.
        reason: What is wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"field '{field}': {reason}")


def _scalar(value: Any, field: str) -> Scalar:
    if value is None:
        raise MetadataError(field, "null is not allowed; leave the key out")
    if isinstance(value, int | float) and not isinstance(value, bool) and not _finite(value):
        raise MetadataError(field, f"must be a finite float64 number, got {value}")
    if not isinstance(value, str | int | float):  # bool is an int
        kind = "an object" if isinstance(value, Mapping) else type(value).__name__
        raise MetadataError(field, f"expected a string, number or boolean, got {kind}")
    return value


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond float64
        return False


def validate_metadata(value: Any, field: str = FIELD) -> dict[str, Scalar | list[Scalar]]:
    """A checked copy of one passage's metadata object.

    Args:
        value: The parsed ``metadata`` value.
        field: How errors name the object (``"metadata"``).

    Returns:
        A new dict (its lists copied too), keys in their original order.

    Raises:
        MetadataError: ``value`` is not an object, a key is not a non-empty string or is reserved
            (:data:`RESERVED`), or a value is
            ``null``, an object, a list holding anything but scalars, or a non-finite number; the
            error names the key (``metadata.year``) or the list item (``metadata.tags[1]``).
    """
    if not isinstance(value, Mapping):
        raise MetadataError(field, f"expected an object, got {type(value).__name__}")
    checked: dict[str, Scalar | list[Scalar]] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise MetadataError(field, f"keys must be non-empty strings, got {key!r}")
        where = f"{field}.{key}"
        if key in RESERVED:
            raise MetadataError(where, f"the key {key!r} is reserved: filters name the passage's own {key} so")
        if isinstance(item, list | tuple):
            checked[key] = [_scalar(x, f"{where}[{i}]") for i, x in enumerate(item)]
        else:
            checked[key] = _scalar(item, where)
    return checked


def canonical_json(metadata: Mapping[str, Any]) -> str:
    """``metadata`` as compact JSON with sorted keys: equal objects give equal strings."""
    return json.dumps(metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
