"""Metadata values and their columns: what validation accepts and rejects, the arrays a column holds,
and appending rows giving the same columns as building them all at once."""

from __future__ import annotations

import random

import numpy as np
import pytest
from random_metadata import random_filter, random_rows

from ragfolio.core.corpus.filters import parse_filter
from ragfolio.core.corpus.metadata_columns import Column, MetadataColumns
from ragfolio.core.corpus.metadata_values import parse_date, token


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2024-05-01", "2024-05-01T00:00:00+00:00"),
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00+00:00"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00+00:00"),
        ("2024-05-01T12:00+0200", "2024-05-01T10:00:00+00:00"),
        ("2024-05-01 10:00:00.250", "2024-05-01T10:00:00.250000+00:00"),
        ("1969-12-31", "1969-12-31T00:00:00+00:00"),
    ],
)
def test_dates_parse_as_utc(text: str, iso: str) -> None:
    from datetime import datetime

    assert parse_date(text) == datetime.fromisoformat(iso).timestamp()


@pytest.mark.parametrize("text", ["2024-13-01", "2024-02-30", "20240501", "2024", "2024/05/01", "May 1", "",
                                  "2024-05-01T10", "2024-05-01x"])
def test_other_strings_are_not_dates(text: str) -> None:
    assert parse_date(text) is None


def test_tokens_tell_types_apart() -> None:
    assert token(1) == token(1.0) == ("n", 1.0)
    assert len({token(1), token(True), token("1")}) == 3


def test_a_column_holds_scalars_lists_and_dates() -> None:
    rows = [{"k": 2}, {"k": "2024-05-01"}, {"k": ["a", 3, "2024-05-02", "a"]}, None, {"k": []}, {"k": True}]
    columns = MetadataColumns.from_rows(rows, ["p0", "p1", "p2", "p3", "p4", "p5"], ["t"] * 6)
    k = columns.column("k")
    assert isinstance(k, Column) and len(k) == 6
    assert k.present.tolist() == [True, True, True, False, False, True]
    assert np.array_equal(k.numbers, [2, np.nan, np.nan, np.nan, np.nan, np.nan], equal_nan=True)
    assert np.array_equal(k.dates, [np.nan, parse_date("2024-05-01"), *[np.nan] * 4], equal_nan=True)
    assert [k.codes[i] for i in (0, 1, 5)] == [k.vocabulary[("n", 2.0)], k.vocabulary[("s", "2024-05-01")],
                                               k.vocabulary[("b", True)]]
    assert k.codes[[2, 3, 4]].tolist() == [-1, -1, -1]
    assert {t: rows.tolist() for t, rows in k.list_rows.items()} == {
        ("s", "a"): [2], ("n", 3.0): [2], ("s", "2024-05-02"): [2]}
    assert k.list_numbers[0].tolist() == [2] and k.list_numbers[1].tolist() == [3.0]
    assert k.list_dates[0].tolist() == [2] and k.list_dates[1].tolist() == [parse_date("2024-05-02")]


def test_columns_know_their_keys_ids_and_titles() -> None:
    columns = MetadataColumns.from_rows([{"b": 1}, {"a": "x"}, None], ["p0", "p1", "p2"], ["A", "B", "A"])
    assert len(columns) == 3
    assert columns.keys() == ["a", "b"]
    assert columns.column("missing") is None
    title = columns.column("title")
    assert title is not None and title.codes.tolist() == [0, 1, 0] and title.present.all()
    assert MetadataColumns.from_rows([], [], []).keys() == []


def test_building_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"rows \(2\), ids \(1\) and titles \(2\)"):
        MetadataColumns.from_rows([None, None], ["p0"], ["a", "b"])
    with pytest.raises(ValueError, match=r"field 'metadata row 1.a': .* got an object"):
        MetadataColumns.from_rows([{"a": 1}, {"a": {"b": 2}}], ["p0", "p1"], ["a", "b"])
    with pytest.raises(ValueError, match=r"ids\[1\] must be a string, got int"):
        MetadataColumns.from_rows([None, None], ["p0", 1], ["a", "b"])  # type: ignore[list-item]


def test_appending_equals_building_at_once() -> None:
    rows, ids, titles = random_rows(500, seed=3)
    at_once = MetadataColumns.from_rows(rows, ids, titles)
    first = MetadataColumns.from_rows(rows[:320], ids[:320], titles[:320])
    appended = first.appended(rows[320:], ids[320:], titles[320:]).appended([], [], [])
    assert len(first) == 320 and len(appended) == 500
    assert appended.keys() == at_once.keys()
    rng = random.Random(5)
    for _ in range(300):
        parsed = parse_filter(random_filter(rng))
        assert np.array_equal(parsed.mask(appended), parsed.mask(at_once))
        assert np.array_equal(parsed.mask(first), parsed.mask(at_once)[:320])


def test_appending_new_keys_and_list_values() -> None:
    base = MetadataColumns.from_rows([{"tags": ["a"]}, {"year": 2020}], ["p0", "p1"], ["A", "B"])
    grown = base.appended([{"tags": ["a", "b"], "lang": "en"}, {"year": "2020"}], ["p2", "p3"], ["C", "D"])
    assert base.keys() == ["tags", "year"] and len(base) == 2  # unchanged
    assert grown.keys() == ["lang", "tags", "year"]
    for spec, expected in [({"tags": "a"}, [0, 2]), ({"tags": "b"}, [2]), ({"lang": "en"}, [2]),
                           ({"lang": {"exists": False}}, [0, 1, 3]), ({"year": 2020}, [1]), ({"year": "2020"}, [3]),
                           ({"id": {"in": ["p0", "p3"]}}, [0, 3]), ({"title": "C"}, [2])]:
        assert np.flatnonzero(parse_filter(spec).mask(grown)).tolist() == expected, spec
