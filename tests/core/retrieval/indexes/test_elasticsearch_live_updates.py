"""Elasticsearch members of a living corpus: metadata mapping, filters and excluded rows inside the
search, and ``upsert`` / ``delete`` through the bulk API, as the official client sends them.

No cluster runs here (see tests/helpers/elasticsearch_replay.py); the same operations run against a
real one in tests/integration/test_elasticsearch_live.py.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("elasticsearch")

from elasticsearch_replay import URL, ndjson, recorded, replay  # noqa: E402

from ragfolio.core.corpus.filters import parse_filter  # noqa: E402
from ragfolio.core.retrieval.indexes.elasticsearch import (  # noqa: E402
    ElasticsearchBM25Retriever,
    ElasticsearchDenseRetriever,
)
from ragfolio.core.retrieval.indexes.elasticsearch_documents import (  # noqa: E402
    bulk_actions,
    delete_actions,
    is_absent,
    passage_mapping,
    passages_key,
)
from ragfolio.core.retrieval.indexes.elasticsearch_requests import (  # noqa: E402
    MAX_TERMS,
    bm25_index_body,
    dense_index_body,
    knn_searches,
    restriction,
)
from ragfolio.core.retrieval.indexes.elasticsearch_settings import (  # noqa: E402
    ElasticsearchRequestError,
    ElasticsearchSettings,
)

TEXTS = ["Paris. Capital of France.", "Berlin. Capital of Germany.", "The Eiffel Tower is in Paris.", "Rome."]
FILTER = parse_filter({"lang": "en", "year": {"gte": 2020}, "published": {"lt": "2024-05-01T00:00:00Z"},
                       "or": [{"id": {"in": ["p-1", "p-4"]}}, {"title": "Paris"}]})
CLAUSE = FILTER.to_elasticsearch()


def fields_named(clause: Any) -> set[str]:
    """Every field a query clause names (term, terms, range, exists)."""
    found: set[str] = set()
    if isinstance(clause, dict):
        for key, value in clause.items():
            if key in ("term", "terms", "range"):
                found.update(value)
            elif key == "exists":
                found.add(value["field"])
            else:
                found |= fields_named(value)
    elif isinstance(clause, list):
        for item in clause:
            found |= fields_named(item)
    return found


def retriever_on(kind: type, script: list, name: str = "ix", **params: Any) -> tuple[Any, type]:
    settings, client, node = replay(script)
    retriever = kind(settings, client=client, **params)
    retriever.index_name_ = name
    return retriever, node


# --- mapping --------------------------------------------------------------------------------------
def test_metadata_maps_strings_to_keyword_numbers_to_double_and_iso_dates_to_date() -> None:
    for body in (bm25_index_body(k1=1.2, b=0.75, stopwords="english", meta={}),
                 dense_index_body(dims=3, index_type="flat", hnsw_m=16, meta={})):
        mappings = body["mappings"]
        assert mappings["dynamic"] == "strict"  # nothing but metadata keys maps itself
        props = mappings["properties"]
        assert props["row"] == {"type": "integer"}
        assert props["passage_id"]["type"] == props["title"]["type"] == "keyword"
        assert props["metadata"] == {"type": "object", "dynamic": True}
        assert mappings["date_detection"] is True and mappings["dynamic_date_formats"] == ["strict_date_optional_time"]
        by_type = {next(iter(t.values()))["match_mapping_type"]: next(iter(t.values()))
                   for t in mappings["dynamic_templates"]}
        assert all(t["path_match"] == "metadata.*" for t in by_type.values())
        assert by_type["string"]["mapping"]["type"] == "keyword"
        assert by_type["date"]["mapping"] == {"type": "date", "format": "strict_date_optional_time",
                                              "ignore_malformed": True}
        assert by_type["long"]["mapping"] == by_type["double"]["mapping"] == {"type": "double",
                                                                              "ignore_malformed": True}
    # every field a filter clause names is one the mapping gives a type to
    assert fields_named(CLAUSE) == {"metadata.lang", "metadata.year", "metadata.published", "passage_id", "title"}
    assert {f for f in fields_named(CLAUSE) if not f.startswith("metadata.")} <= set(passage_mapping()["properties"])


def test_index_names_change_with_titles_or_metadata_only() -> None:
    settings = ElasticsearchSettings(url=URL)
    bm25 = ElasticsearchBM25Retriever(settings)
    assert passages_key(["p-0"], None, None) is None  # ids alone: the name built before stays
    plain = bm25._name_and_meta("c")[0]
    assert bm25._name_and_meta("c", None)[0] == plain
    with_meta = bm25._name_and_meta("c", passages_key(None, None, [{"lang": "en"}]))[0]
    other_meta = bm25._name_and_meta("c", passages_key(None, None, [{"lang": "fr"}]))[0]
    assert len({plain, with_meta, other_meta}) == 3
    assert passages_key(["a"], ["T"], [{"x": 1, "y": 2}]) == passages_key(["a"], ["T"], [{"y": 2, "x": 1}])
    dense = ElasticsearchDenseRetriever(settings)
    assert dense._name_and_meta("c", 3)[0] != dense._name_and_meta("c", 3, passages_key(None, ["T"], None))[0]


def test_documents_carry_the_passage_fields_given() -> None:
    (action,) = bulk_actions("ix", [{"text": "t"}], rows=[7], ids=["p-7"], titles=["Paris"],
                             metadata=[{"lang": "en", "tags": ["a", "b"]}])
    assert action == {"_op_type": "index", "_index": "ix", "_id": "7", "_source": {
        "row": 7, "text": "t", "passage_id": "p-7", "title": "Paris", "metadata": {"lang": "en", "tags": ["a", "b"]}}}
    (bare,) = bulk_actions("ix", [{"text": "t"}], rows=[7], metadata=[None])
    assert bare["_source"] == {"row": 7, "text": "t"}  # no metadata: no field, so exists: false holds
    with pytest.raises(ValueError, match=r"metadata\[0\] must be an object"):
        list(bulk_actions("ix", [{}], metadata=["lang=en"]))
    with pytest.raises(ValueError, match=r"rows\[1\]=3: row 3 appears more than once"):
        list(bulk_actions("ix", [{}, {}], rows=[3, 3]))
    with pytest.raises(ValueError, match=r"rows\[0\]=-1 must be a corpus row"):
        delete_actions("ix", [-1])
    assert [a["_id"] for a in delete_actions("ix", np.array([4, 9]))] == ["4", "9"]


# --- filters and excluded rows in the search ------------------------------------------------------
def test_bm25_search_carries_the_filter_and_the_excluded_rows() -> None:
    retriever, node = retriever_on(ElasticsearchBM25Retriever, [("POST", "/_msearch", (200, recorded(
        "msearch_bm25.json")))])
    got = retriever.retrieve(["eiffel tower paris", "the of"], 3, filter_clause=CLAUSE, exclude_rows=[3, 1, 3])
    np.testing.assert_array_equal(got.doc_ids, [[2, 0, -1], [-1, -1, -1]])
    lines = ndjson(node.requests[0][2])
    assert lines[0] == {"index": "ix"} and len(lines) == 4
    body = lines[1]
    assert body["size"] == 3  # the filter is inside the query: the cluster returns k allowed hits
    assert body["query"] == {"bool": {
        "must": [{"match": {"text": {"query": "eiffel tower paris"}}}],
        "filter": [CLAUSE],
        "must_not": [{"terms": {"row": [1, 3]}}],
    }}
    assert lines[3]["query"]["bool"]["filter"] == [CLAUSE]


def test_knn_search_passes_filter_and_exclusion_as_the_knn_filter() -> None:
    script = [("POST", "/_msearch", (200, recorded("msearch_knn.json")))]
    retriever, node = retriever_on(ElasticsearchDenseRetriever, script)
    retriever.retrieve_embedded(np.eye(1, 3, dtype=np.float32), 3, filter_clause=CLAUSE, exclude_rows=[2])
    knn = ndjson(node.requests[0][2])[1]["knn"]
    assert knn["filter"] == {"bool": {"filter": [CLAUSE], "must_not": [{"terms": {"row": [2]}}]}}
    assert knn["k"] == 3 and ndjson(node.requests[0][2])[1]["size"] == 3
    (only_rows,) = knn_searches(np.eye(1, 3, dtype=np.float32), 2, 50, exclude_rows=[5])
    assert only_rows["knn"]["filter"] == {"bool": {"must_not": [{"terms": {"row": [5]}}]}}
    (plain,) = knn_searches(np.eye(1, 3, dtype=np.float32), 2, 50, filter_clause=None, exclude_rows=())
    assert "filter" not in plain["knn"]


def test_restrictions_split_long_exclusions_and_name_bad_arguments() -> None:
    many = restriction(None, range(MAX_TERMS + 2))
    assert many is not None and [len(c["terms"]["row"]) for c in many["bool"]["must_not"]] == [MAX_TERMS, 2]
    assert restriction(None, ()) is None
    with pytest.raises(ValueError, match=r"filter_clause must be an Elasticsearch query clause .* got Filter"):
        restriction(FILTER, ())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"exclude_rows\[1\]=2.5 must be a corpus row"):
        restriction(None, [1, 2.5])  # type: ignore[list-item]


# --- live updates through the bulk API ------------------------------------------------------------
def test_bm25_upsert_sends_index_actions_keyed_by_row_and_waits_for_the_refresh() -> None:
    script = [("PUT", "/ix/_mapping", (200, recorded("put_mapping.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_upserted.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_upserted.json")))]
    retriever, node = retriever_on(ElasticsearchBM25Retriever, script)
    retriever.upsert([4, 2], ["Madrid. Capital of Spain.", "The Eiffel Tower, Paris."], ids=["p-4", "p-2"],
                     titles=["Madrid", "Eiffel Tower"], metadata=[{"lang": "es", "year": 2024}, None])
    (method, target, body) = node.requests[0]
    assert json.loads(body) == passage_mapping()  # an index built before the passage fields gets them
    method, target, body = node.requests[1]
    assert "refresh=wait_for" in target
    assert ndjson(body) == [
        {"index": {"_index": "ix", "_id": "4"}},
        {"row": 4, "text": "Madrid. Capital of Spain.", "passage_id": "p-4", "title": "Madrid",
         "metadata": {"lang": "es", "year": 2024}},
        {"index": {"_index": "ix", "_id": "2"}},
        {"row": 2, "text": "The Eiffel Tower, Paris.", "passage_id": "p-2", "title": "Eiffel Tower"},
    ]
    retriever.upsert([4, 2], ["a", "b"])  # the mapping is sent once per retriever
    assert [t.split("?")[0] for _, t, _ in node.requests] == ["/ix/_mapping", "/_bulk", "/_bulk"]
    assert not node.script
    with pytest.raises(ValueError, match="vectors: a BM25 index holds no vectors"):
        retriever.upsert([5], ["x"], vectors=np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match="texts: 1 texts for 2 rows"):
        retriever.upsert([5, 6], ["x"])
    retriever.upsert([], [])  # nothing to send: no request
    assert len(node.requests) == 3


def test_an_index_this_retriever_built_takes_upserts_without_a_mapping_update() -> None:
    name = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))._name_and_meta("c")[0]
    script = [("HEAD", f"/{name}", (404, None)), ("PUT", f"/{name}", (200, recorded("indices_create.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_created.json"))),
              ("POST", f"/{name}/_refresh", (200, recorded("refresh.json"))),
              ("POST", f"/{name}/_count", (200, recorded("count_4.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_upserted.json")))]
    settings, client, node = replay(script)
    retriever = ElasticsearchBM25Retriever(settings, client=client).index(TEXTS, corpus_key="c")
    retriever.upsert([4, 2], ["Madrid.", "Eiffel."])
    assert not node.script
    # completeness counts the base rows only, so rows added live never make the index look partial
    assert json.loads(node.requests[4][2]) == {"query": {"range": {"row": {"lt": 4}}}}


def test_an_index_holding_rows_added_live_is_complete() -> None:
    name = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))._name_and_meta("c")[0]
    script = [("HEAD", f"/{name}", (200, None)), ("POST", f"/{name}/_count", (200, recorded("count_4.json"))),
              ("POST", f"/{name}/_count", (200, recorded("count_4.json")))]
    settings, client, node = replay(script)
    ElasticsearchBM25Retriever(settings, client=client).index(TEXTS, corpus_key="c")
    assert [m for m, _, _ in node.requests] == ["HEAD", "POST", "POST"] and not node.script
    assert all(json.loads(body)["query"] == {"range": {"row": {"lt": 4}}} for _, _, body in node.requests[1:])


def test_dense_upsert_sends_vectors_of_the_index_dims() -> None:
    script = [("PUT", "/ix/_mapping", (200, recorded("put_mapping.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_upserted.json")))]
    retriever, node = retriever_on(ElasticsearchDenseRetriever, script)
    retriever.dims_ = 3
    retriever.upsert([4, 2], ["unused", "unused"], ids=["p-4", "p-2"], metadata=[{"lang": "es"}, {"lang": "fr"}],
                     vectors=np.array([[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]], np.float32))
    lines = ndjson(node.requests[1][2])
    assert lines[0] == {"index": {"_index": "ix", "_id": "4"}}
    assert lines[1]["row"] == 4 and lines[1]["embedding"] == pytest.approx([0.0, 0.6, 0.8])
    assert lines[1]["passage_id"] == "p-4" and lines[1]["metadata"] == {"lang": "es"} and "text" not in lines[1]
    with pytest.raises(ValueError, match="vectors: the dense retriever needs the rows' embeddings"):
        retriever.upsert([5], ["x"])
    with pytest.raises(ValueError, match=r"vectors: shape \(1, 2\), expected \(1, 3\)"):
        retriever.upsert([5], vectors=np.zeros((1, 2), np.float32))


@pytest.mark.parametrize("kind", [ElasticsearchBM25Retriever, ElasticsearchDenseRetriever])
def test_delete_sends_delete_actions_and_a_row_without_a_document_is_no_error(kind) -> None:
    script = [("PUT", "/ix/_mapping", (200, recorded("put_mapping.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_deleted.json")))]
    retriever, node = retriever_on(kind, script)
    retriever.delete([4, 9])  # row 9 has no document: "not_found", 404
    method, target, body = node.requests[1]
    assert "refresh=wait_for" in target
    assert ndjson(body) == [{"delete": {"_index": "ix", "_id": "4"}}, {"delete": {"_index": "ix", "_id": "9"}}]
    assert is_absent(recorded("bulk_deleted.json")["items"][1]) and not is_absent(
        recorded("bulk_deleted.json")["items"][0])


def test_refused_documents_fail_the_upsert_naming_the_reason() -> None:
    script = [("PUT", "/ix/_mapping", (200, recorded("put_mapping.json"))),
              ("PUT", "/_bulk", (200, recorded("bulk_rejected.json")))]
    retriever, _ = retriever_on(ElasticsearchBM25Retriever, script)
    with pytest.raises(ElasticsearchRequestError, match=r"1 upsert action\(s\) failed on 'ix'.*metadata.public"):
        retriever.upsert([5], ["x"], metadata=[{"public": "yes"}])


def test_live_updates_need_an_index() -> None:
    retriever = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))
    with pytest.raises(RuntimeError, match=r"call index\(\) or attach\(\) first"):
        retriever.delete([1])
