"""What every stage's record shares: keys checked against its fields, and a schema version.

A record is a frozen dataclass that one core stage writes and later stages read
(:class:`~ragfolio.core.selection.portfolios.Portfolios`,
:class:`~ragfolio.core.scoring.utility_index.UtilityIndex`, ...): its ``from_dict`` reads a JSON
mapping through :func:`checked_fields` (and :func:`read_version` where it carries a
``schema_version``), so a misspelt or missing key fails when the artifact is loaded, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any


def checked_fields(cls: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``data`` after checking its keys against dataclass ``cls``'s fields (a field with a default may be absent).

    Raises:
        ValueError: A key is unknown or a required one is missing (the message names both lists).
    """
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    unknown, missing = sorted(set(data) - names), sorted(required - set(data))
    if unknown or missing:
        raise ValueError(f"{what}: unknown keys {unknown}, missing keys {missing}")
    return dict(data)


def read_version(data: Mapping[str, Any], what: str, current: int) -> dict[str, Any]:
    """``data`` without its ``schema_version`` (absent: version 1), checked to be one this code reads.

    Raises:
        ValueError: The version is newer than ``current``.
    """
    out = dict(data)
    version = out.pop("schema_version", 1)
    if version > current:
        raise ValueError(f"{what} of schema version {version}; this ragfolio reads up to {current}")
    return out
