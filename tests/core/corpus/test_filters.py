"""The metadata filter language: its grammar and errors, what each operator matches, the mask over all
rows agreeing with the per-row answer, canonical keys, and the Elasticsearch clauses."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from random_metadata import random_filter, random_rows

from ragfolio.core.corpus.filter_nodes import And, Exists, In, Not, Or, Range
from ragfolio.core.corpus.filters import MAX_DEPTH, MAX_NODES, Filter, FilterError, parse_filter
from ragfolio.core.corpus.metadata_columns import MetadataColumns

ROWS: list[dict[str, Any] | None] = [
    {"year": 2020, "lang": "en", "tags": ["physics", "history"], "published": "2024-05-01", "reviewed": True},
    {"year": 2021.0, "lang": "fr", "tags": [], "published": "2024-05-01T10:00:00Z", "reviewed": False},
    {"year": "2022", "lang": "en", "tags": "physics", "published": "2024-05-02T00:30:00+02:00"},
    None,
    {"year": 2023, "tags": ["chemistry", 7], "published": "not a date", "reviewed": 1},
]
IDS = ["p0", "p1", "p2", "p3", "p4"]
TITLES = ["Einstein", "Curie", "Bohr", "Planck", "Curie"]
COLUMNS = MetadataColumns.from_rows(ROWS, IDS, TITLES)


def matching(spec: Any) -> list[str]:
    """The ids the filter matches, checked to be the same by row and by mask."""
    parsed = parse_filter(spec)
    by_row = [i for row, i, t in zip(ROWS, IDS, TITLES, strict=True) if parsed.matches(row, id=i, title=t)]
    by_mask = [IDS[i] for i in np.flatnonzero(parsed.mask(COLUMNS))]
    assert by_row == by_mask, spec
    return by_row


# -- the grammar -------------------------------------------------------------------------------------------


def test_shorthand_and_eq_parse_to_one_membership() -> None:
    assert parse_filter({"lang": "en"}) == parse_filter({"lang": {"eq": "en"}}) == Filter(In("lang", ("en",)))


def test_operators_become_the_tree() -> None:
    assert parse_filter({"a": {"ne": 1}}).root == Not(In("a", (1,)))
    assert parse_filter({"a": {"nin": [1, "x"]}}).root == Not(In("a", (1, "x")))
    assert parse_filter({"a": {"exists": False}}).root == Not(Exists("a"))
    assert parse_filter({"a": {"gt": 1, "lte": 5}}).root == Range("a", "number", gt=1, lte=5)
    assert parse_filter({"d": {"gte": "2024-01-01"}}).root == Range("d", "date", gte="2024-01-01")
    assert parse_filter({"a": 1, "b": 2}).root == And((In("a", (1,)), In("b", (2,))))
    assert parse_filter({"or": [{"a": 1}, {"not": {"b": 2}}]}).root == Or((In("a", (1,)), Not(In("b", (2,)))))
    assert parse_filter({"a": {"eq": 1, "gt": 0}}).root == And((In("a", (1,)), Range("a", "number", gt=0)))


def test_the_tree_is_immutable() -> None:
    parsed = parse_filter({"a": {"in": [1, 2]}})
    with pytest.raises(AttributeError):
        parsed.root.field = "b"  # type: ignore[misc, union-attr]
    assert parsed.fields() == frozenset({"a"})
    assert parse_filter({"or": [{"a": 1}, {"not": {"id": "x"}}]}).fields() == frozenset({"a", "id"})


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ([{"a": 1}], "filter", "filter: a filter must be an object, got list"),
        ("lang", "filter", "got string"),
        ({}, "filter", "at least one condition"),
        ({"a": {}}, "filter.a", "filter.a: an operator object needs at least one operator"),
        ({"a": {"like": "x"}}, "filter.a.like", "filter.a: unknown operator 'like'"),
        ({"gt": 3}, "filter.gt", "gt is an operator, not a field"),
        ({"and": []}, "filter.and", "filter.and: and needs a non-empty list of filters, got an empty list"),
        ({"or": {"a": 1}}, "filter.or", "or needs a non-empty list of filters, got object"),
        ({"not": [{"a": 1}]}, "filter.not", "filter.not: a filter must be an object, got list"),
        ({"and": [{"a": 1}, {"year": {"gt": [1]}}]}, "filter.and[1].year.gt",
         "filter.and[1].year: gt needs a number or a date string, got list"),
        ({"a": {"gt": True}}, "filter.a.gt", "gt needs a number or a date string, got boolean"),
        ({"a": {"lt": "soon"}}, "filter.a.lt", "got 'soon' (not an ISO-8601 date)"),
        ({"a": {"lt": "2024-02-30"}}, "filter.a.lt", "not an ISO-8601 date"),
        ({"a": {"gte": float("nan")}}, "filter.a.gte", "not a finite float64"),
        ({"a": {"gt": 1, "lt": "2024-01-01"}}, "filter.a", "all numbers or all date strings"),
        ({"a": {"in": []}}, "filter.a.in", "filter.a: in needs a non-empty list of values, got an empty list"),
        ({"a": {"nin": "x"}}, "filter.a.nin", "nin needs a non-empty list of values, got string"),
        ({"a": {"in": [1, [2]]}}, "filter.a.in[1]", "filter.a: in needs a string, number or boolean, got list"),
        ({"a": {"in": [{"b": 1}]}}, "filter.a.in[0]", "got object"),
        ({"a": [1, 2]}, "filter.a", "eq needs a string, number or boolean, got list; use in"),
        ({"a": None}, "filter.a", "got null"),
        ({"a": {"ne": None}}, "filter.a.ne", "filter.a: ne needs a string, number or boolean, got null"),
        ({"a": {"exists": 1}}, "filter.a.exists", "exists needs true or false, got number"),
        ({"": 1}, "filter", "a field name must be a non-empty string"),
        ({"or": [{"a": 1}, {"not": {"b": {"eq": 10**400}}}]}, "filter.or[1].not.b.eq", "not a finite float64"),
    ],
)
def test_each_error_names_its_path(spec: Any, path: str, message: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(spec)
    assert caught.value.path == path
    assert message in str(caught.value)
    assert str(caught.value).endswith(caught.value.reason)
    assert isinstance(caught.value, ValueError)


def test_the_root_name_is_the_callers() -> None:
    with pytest.raises(FilterError, match=r"^body\.filter\.a: unknown operator") as caught:
        parse_filter({"a": {"x": 1}}, path="body.filter")
    assert caught.value.path == "body.filter.a.x"


def _nested(depth: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"a": 1}
    for _ in range(depth - 1):
        spec = {"not": spec}
    return spec


def test_nesting_is_limited() -> None:
    parse_filter(_nested(MAX_DEPTH))
    with pytest.raises(FilterError, match=f"at most {MAX_DEPTH} levels") as caught:
        parse_filter(_nested(MAX_DEPTH + 1))
    assert caught.value.path == "filter" + ".not" * MAX_DEPTH


def test_the_number_of_conditions_is_limited() -> None:
    parse_filter({"or": [{"a": i} for i in range(MAX_NODES - 1)]})
    with pytest.raises(FilterError, match=f"at most {MAX_NODES} conditions") as caught:
        parse_filter({"or": [{"a": i} for i in range(MAX_NODES)]})
    assert caught.value.path == "filter.or"
    with pytest.raises(FilterError, match="conditions") as caught:
        parse_filter({"and": [{f"f{i}": {"gt": 0, "ne": 5}} for i in range(400)]})
    assert caught.value.path.startswith("filter.and[")


# -- what matches --------------------------------------------------------------------------------------------


def test_equality_compares_numbers_as_numbers_and_never_across_types() -> None:
    assert matching({"year": 2020}) == ["p0"]
    assert matching({"year": 2021}) == ["p1"]  # 2021 == 2021.0
    assert matching({"year": "2022"}) == ["p2"]  # the string, not the number 2022
    assert matching({"year": 2022}) == []
    assert matching({"reviewed": True}) == ["p0"]  # not p4's 1
    assert matching({"reviewed": 1}) == ["p4"]
    assert matching({"year": {"in": [2020, "2022", 2023.0]}}) == ["p0", "p2", "p4"]


def test_missing_fields_match_only_negations() -> None:
    assert matching({"lang": {"ne": "en"}}) == ["p1", "p3", "p4"]
    assert matching({"lang": {"nin": ["en", "fr"]}}) == ["p3", "p4"]
    assert matching({"lang": {"exists": False}}) == ["p3", "p4"]
    assert matching({"not": {"lang": "en"}}) == ["p1", "p3", "p4"]
    assert matching({"nowhere": {"gt": 0}}) == []
    assert matching({"nowhere": {"ne": 0}}) == IDS
    assert matching({"nowhere": {"exists": True}}) == []


def test_lists_contain() -> None:
    assert matching({"tags": "physics"}) == ["p0", "p2"]  # p2's tags is a plain string
    assert matching({"tags": {"in": ["chemistry", "history"]}}) == ["p0", "p4"]
    assert matching({"tags": {"nin": ["physics"]}}) == ["p1", "p3", "p4"]
    assert matching({"tags": {"exists": True}}) == ["p0", "p2", "p4"]  # p1's list is empty
    assert matching({"tags": {"gt": 5}}) == ["p4"]  # one element in range
    assert matching({"tags": {"gt": 5, "lt": 7}}) == []  # one element must satisfy every bound
    assert matching({"tags": 7.0}) == ["p4"]


def test_ranges_on_numbers_skip_strings_and_booleans() -> None:
    assert matching({"year": {"gte": 2021}}) == ["p1", "p4"]  # "2022" is a string
    assert matching({"year": {"gt": 2019, "lt": 2023}}) == ["p0", "p1"]
    assert matching({"reviewed": {"gte": 0}}) == ["p4"]  # True and False are not numbers


def test_dates_compare_as_utc_timestamps() -> None:
    # p0: 05-01 00:00Z, p1: 05-01 10:00Z, p2: 05-01 22:30Z (+02:00), p4: not a date
    assert matching({"published": {"gt": "2024-05-01"}}) == ["p1", "p2"]
    assert matching({"published": {"gte": "2024-05-01T00:00:00Z", "lt": "2024-05-01T10:00:00"}}) == ["p0"]
    assert matching({"published": {"gt": "2024-05-01T22:00:00Z"}}) == ["p2"]
    assert matching({"published": {"lte": "2024-05-02"}}) == ["p0", "p1", "p2"]
    assert matching({"published": "2024-05-01"}) == ["p0"]  # equality is of strings
    assert matching({"year": {"gt": "2000-01-01"}}) == []  # numbers are not dates
    assert matching({"published": {"gt": 0}}) == []  # date strings are not numbers


def test_id_and_title_are_pseudo_fields() -> None:
    assert matching({"id": {"in": ["p1", "p3", "p9"]}}) == ["p1", "p3"]
    assert matching({"title": "Curie", "lang": {"ne": "fr"}}) == ["p4"]
    assert matching({"or": [{"id": "p0"}, {"title": "Planck"}]}) == ["p0", "p3"]


def test_logic() -> None:
    assert matching({"and": [{"lang": "en"}, {"tags": "physics"}, {"year": {"lt": 2021}}]}) == ["p0"]
    assert matching({"or": [{"lang": "fr"}, {"tags": "chemistry"}]}) == ["p1", "p4"]
    assert matching({"not": {"or": [{"lang": "fr"}, {"tags": "chemistry"}]}}) == ["p0", "p2", "p3"]
    assert matching({"lang": "en", "or": [{"year": 2020}, {"year": "2022"}], "not": {"id": "p0"}}) == ["p2"]


def test_a_row_with_no_metadata() -> None:
    parsed = parse_filter({"or": [{"lang": "en"}, {"title": "Planck"}]})
    assert parsed.matches(None, id="x", title="Planck")
    assert not parsed.matches({}, id="x", title="Bohr")


def test_mask_agrees_with_matches_on_random_filters() -> None:
    rows, ids, titles = random_rows(500, seed=7)
    columns = MetadataColumns.from_rows(rows, ids, titles)
    rng = random.Random(11)
    some_but_not_all = 0
    for _ in range(600):
        spec = random_filter(rng)
        parsed = parse_filter(spec)
        mask = parsed.mask(columns)
        by_row = np.array([parsed.matches(r, id=i, title=t) for r, i, t in zip(rows, ids, titles, strict=True)])
        assert mask.dtype == np.bool_ and mask.shape == (500,)
        assert np.array_equal(mask, by_row), (spec, np.flatnonzero(mask != by_row)[:5])
        assert np.array_equal(parse_filter(parsed.to_dict()).mask(columns), mask), spec
        some_but_not_all += 0 < mask.sum() < 500
    assert some_but_not_all > 200  # the random filters are not trivially empty or full


# -- keys and Elasticsearch ----------------------------------------------------------------------------------


def test_key_is_canonical() -> None:
    same = [
        {"a": 1, "b": {"in": ["y", "x", "x"]}},
        {"b": {"in": ["x", "y"]}, "a": {"eq": 1.0}},
        {"and": [{"b": {"in": ["y", "x"]}}, {"and": [{"a": 1}]}]},
    ]
    keys = {parse_filter(spec).key() for spec in same}
    assert keys == {'{"and":[{"a":{"eq":1}},{"b":{"in":["x","y"]}}]}'}
    assert parse_filter({"a": {"ne": 1}}).key() == parse_filter({"not": {"a": 1}}).key()
    assert parse_filter({"a": 1}).key() != parse_filter({"a": "1"}).key()
    assert parse_filter({"a": 1}).key() != parse_filter({"a": True}).key()
    assert parse_filter({"a": {"gt": 1.5, "lt": 2}}).key() == '{"a":{"gt":1.5,"lt":2}}'


@pytest.mark.parametrize(
    ("spec", "clause"),
    [
        ({"lang": "en"}, {"term": {"metadata.lang": "en"}}),
        ({"lang": {"ne": "en"}}, {"bool": {"must_not": [{"term": {"metadata.lang": "en"}}]}}),
        ({"tags": {"in": ["a", 2]}}, {"terms": {"metadata.tags": ["a", 2]}}),
        ({"tags": {"nin": ["a", 2]}}, {"bool": {"must_not": [{"terms": {"metadata.tags": ["a", 2]}}]}}),
        ({"year": {"gte": 2020, "lt": 2024}}, {"range": {"metadata.year": {"gte": 2020, "lt": 2024}}}),
        ({"d": {"gt": "2024-05-01"}}, {"range": {"metadata.d": {"gt": "2024-05-01"}}}),
        ({"flag": {"exists": True}}, {"exists": {"field": "metadata.flag"}}),
        ({"flag": {"exists": False}}, {"bool": {"must_not": [{"exists": {"field": "metadata.flag"}}]}}),
        ({"flag": True, "id": "p1"},
         {"bool": {"must": [{"term": {"metadata.flag": True}}, {"term": {"passage_id": "p1"}}]}}),
        ({"or": [{"title": "Curie"}, {"a": 1}]},
         {"bool": {"should": [{"term": {"title": "Curie"}}, {"term": {"metadata.a": 1}}], "minimum_should_match": 1}}),
        ({"not": {"a": 1}}, {"bool": {"must_not": [{"term": {"metadata.a": 1}}]}}),
    ],
)
def test_elasticsearch_clauses(spec: Any, clause: dict[str, Any]) -> None:
    assert parse_filter(spec).to_elasticsearch() == clause


def test_elasticsearch_field_names_are_the_callers() -> None:
    parsed = parse_filter({"a": 1, "id": "p1", "title": {"exists": True}})
    assert parsed.to_elasticsearch("meta_", id_field="_id", title_field="title.keyword") == {"bool": {"must": [
        {"term": {"meta_a": 1}}, {"term": {"_id": "p1"}}, {"exists": {"field": "title.keyword"}},
    ]}}
