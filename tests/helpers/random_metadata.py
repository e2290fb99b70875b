"""Random metadata tables and random filters over them (the corpus tests check that a filter's mask
over all rows equals its per-row answer, on many of both, with a fixed seed)."""

from __future__ import annotations

import random
from typing import Any

DATES = ["2024-05-01", "2024-05-01T10:00:00Z", "2024-05-01T12:00:00+02:00", "2024-04-30T23:59:59.5",
         "2023-12-31", "2025-01-01T00:00", "2024-05-02 08:00:00"]
NOT_DATES = ["2024-13-01", "yesterday", "2024/05/01", "20240501"]
VALUES: list[Any] = ["en", "fr", "a", "b", "c", "2020", "p3", "t1", 0, 1, 2, 1.0, 2.5, 2020, 2020.0, -3,
                     True, False, *DATES[:3], NOT_DATES[0]]
FIELDS = ["year", "score", "lang", "tags", "published", "flag", "mixed", "absent", "id", "title"]


def _scalar(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(["en", "fr", "de", "a", "b", "2020"])
    if kind == 1:
        return rng.choice([0, 1, 2, 2020, -3, 2021])
    if kind == 2:
        return rng.choice([1.0, 2.5, 2020.0, -0.5, 1e-9])
    if kind == 3:
        return rng.choice([True, False])
    return rng.choice(DATES + NOT_DATES)


def random_rows(n: int, seed: int) -> tuple[list[dict[str, Any] | None], list[str], list[str]]:
    """``n`` metadata rows (some None, some missing keys, mixed types, lists), their ids and titles."""
    rng = random.Random(seed)
    rows: list[dict[str, Any] | None] = []
    for _ in range(n):
        if rng.random() < 0.05:
            rows.append(None)
            continue
        row: dict[str, Any] = {}
        if rng.random() < 0.8:
            row["year"] = rng.choice([rng.randint(2015, 2025), float(rng.randint(2015, 2025)), "2020", True])
        if rng.random() < 0.7:
            row["score"] = rng.choice([rng.uniform(-1, 3), rng.randint(0, 2), 2.5])
        if rng.random() < 0.7:
            row["lang"] = rng.choice(["en", "fr", "de", "EN"])
        if rng.random() < 0.7:
            row["tags"] = (rng.choice(["a", "b"]) if rng.random() < 0.2
                           else [_scalar(rng) for _ in range(rng.randint(0, 4))])
        if rng.random() < 0.7:
            row["published"] = rng.choice(DATES + NOT_DATES + [2024])
        if rng.random() < 0.6:
            row["flag"] = rng.choice([True, False, 1, 0])
        if rng.random() < 0.6:
            row["mixed"] = _scalar(rng) if rng.random() < 0.6 else [_scalar(rng) for _ in range(rng.randint(0, 3))]
        rows.append(row)
    ids = [f"p{i}" for i in range(n)]
    titles = [rng.choice(["t1", "t2", "2024-05-01", "Einstein"]) for _ in range(n)]
    return rows, ids, titles


def _bounds(rng: random.Random) -> dict[str, Any]:
    ops = rng.sample(["gt", "gte", "lt", "lte"], rng.randint(1, 2))
    if rng.random() < 0.5:
        return {op: rng.choice([-1, 0, 1, 1.5, 2, 2.5, 2018, 2020, 2020.0, 2023]) for op in ops}
    return {op: rng.choice(DATES) for op in ops}


def _condition(rng: random.Random) -> Any:
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice(VALUES)  # shorthand equality
    if kind == 1:
        return {rng.choice(["eq", "ne"]): rng.choice(VALUES)}
    if kind == 2:
        return {rng.choice(["in", "nin"]): rng.sample(VALUES, rng.randint(1, 4))}
    if kind in (3, 4):
        return _bounds(rng)
    if kind == 5:
        return {"exists": rng.random() < 0.5}
    if kind == 6:  # several operators in one object: all hold
        return {**_bounds(rng), rng.choice(["eq", "ne"]): rng.choice(VALUES), "nin": ["a", 2020]}
    return {"ne": rng.choice(VALUES), "exists": True}


def random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """A valid filter of at most 4 levels over :data:`FIELDS`."""
    kind = rng.randrange(10) if depth < 3 else 0
    if kind <= 4:
        fields = rng.sample(FIELDS, 1 if rng.random() < 0.8 else 2)
        return {field: _condition(rng) for field in fields}
    if kind <= 6:
        return {rng.choice(["and", "or"]): [random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    if kind == 7:
        return {"not": random_filter(rng, depth + 1)}
    return {**random_filter(rng, depth + 1), "or": [random_filter(rng, depth + 1), random_filter(rng, depth + 1)]}
