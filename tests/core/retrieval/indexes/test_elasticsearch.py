"""Elasticsearch backend: request building and response parsing, through the real client.

No cluster runs here: ``ReplayNode`` (tests/helpers/elasticsearch_replay.py) stands in for the HTTP
layer only, so the official client serialises every request and parses every response as it would
against a cluster. Responses are recorded ES 8.x bodies under tests/fixtures/elasticsearch/;
tests/integration/test_elasticsearch_live.py runs against a real one. Filters and live updates:
test_elasticsearch_live_updates.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("elasticsearch")

import elastic_transport  # noqa: E402
from elasticsearch_replay import URL, Reply, ndjson, recorded, replay  # noqa: E402
from rankings import rank_overlap  # noqa: E402

from ragfolio.core.cache import ArrayCache  # noqa: E402
from ragfolio.core.data.loading import load_folder  # noqa: E402
from ragfolio.core.data.passages import build_corpus  # noqa: E402
from ragfolio.core.retrieval.indexes.elasticsearch import ElasticsearchBM25Retriever, ElasticsearchDenseRetriever
from ragfolio.core.retrieval.indexes.elasticsearch_documents import bulk_actions
from ragfolio.core.retrieval.indexes.elasticsearch_requests import (
    bm25_index_body,
    bm25_searches,
    dense_index_body,
    index_name,
    knn_searches,
    msearch_lines,
    parse_msearch,
)
from ragfolio.core.retrieval.indexes.elasticsearch_settings import (
    ElasticsearchIndexMissingError,
    ElasticsearchRequestError,
    ElasticsearchSettings,
    ElasticsearchUnavailableError,
)
from ragfolio.core.retrieval.pool import expand_grid, make_candidate  # noqa: E402
from ragfolio.core.retrieval.results import RetrievalResult  # noqa: E402
from ragfolio.core.retrieval.running.pool_runner import PoolRunner  # noqa: E402

TEXTS = ["Paris. Capital of France.", "Berlin. Capital of Germany.", "The Eiffel Tower is in Paris.", "Rome."]
IDS = ["p-000", "p-001", "p-002", "p-003"]


# --- settings -------------------------------------------------------------------------------------
def test_settings_take_params_then_environment_then_the_callers_credentials() -> None:
    creds = {"url": "http://creds:9200", "username": "elastic", "password": "s3cret"}
    env = {"ELASTICSEARCH_URL": "http://env:9200", "ELASTICSEARCH_REQUEST_TIMEOUT": "7.5", "ELASTICSEARCH_VERIFY_CERTS": "false"}
    got = ElasticsearchSettings.resolve({"index_prefix": "exp1"}, credentials=creds, environ=env)
    assert (got.url, got.username, got.password, got.index_prefix) == ("http://env:9200", "elastic", "s3cret", "exp1")
    assert (got.request_timeout, got.verify_certs) == (7.5, False)
    assert "s3cret" not in repr(got)
    assert got.client_options()["basic_auth"] == ("elastic", "s3cret")
    got = ElasticsearchSettings.resolve({"url": URL}, credentials=creds, environ=env)
    assert got.url == URL


def test_settings_read_no_configuration_file(tmp_path, monkeypatch) -> None:
    """Core never reads Kedro's conf/local: a credentials file there is the caller's to pass."""
    (tmp_path / "conf" / "local").mkdir(parents=True)
    (tmp_path / "conf" / "local" / "credentials.yml").write_text("elasticsearch:\n  url: http://file:9200\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="ELASTICSEARCH_URL"):
        ElasticsearchSettings.resolve(environ={})


def test_settings_name_what_is_missing_or_wrong() -> None:
    with pytest.raises(ValueError, match="ELASTICSEARCH_URL"):
        ElasticsearchSettings.resolve(environ={}, credentials={})
    with pytest.raises(ValueError, match=r"unknown Elasticsearch setting\(s\) \['hots'\]"):
        ElasticsearchSettings.resolve({"hots": URL}, environ={})
    with pytest.raises(ValueError, match="is not a boolean"):
        ElasticsearchSettings.resolve({"url": URL}, environ={"ELASTICSEARCH_VERIFY_CERTS": "maybe"})
    with pytest.raises(ValueError, match="username and password"):
        ElasticsearchSettings(url=URL, username="elastic")
    with pytest.raises(ValueError, match="url='es:9200'"):
        ElasticsearchSettings(url="es:9200")


def test_client_retries_transient_statuses_itself() -> None:
    options = ElasticsearchSettings(url=URL, api_key="abc", max_retries=5).client_options()
    assert options["retry_on_status"] == (429, 502, 503, 504) and options["retry_on_timeout"] is True
    assert options["max_retries"] == 5 and options["api_key"] == "abc" and options["retry_backoff_base"] > 0


# --- request building -----------------------------------------------------------------------------
def test_bm25_mapping_carries_k1_b_and_an_analyzer_that_tokenises_like_bm25s() -> None:
    body = bm25_index_body(k1=0.9, b=0.3, stopwords="english", meta={"corpus": "c"})
    settings, props = body["settings"], body["mappings"]["properties"]
    assert settings["similarity"]["ragfolio_bm25"] == {"type": "BM25", "k1": 0.9, "b": 0.3}
    assert settings["number_of_shards"] == 1
    assert props["text"] == {"type": "text", "analyzer": "ragfolio_text", "similarity": "ragfolio_bm25"}
    assert props["row"] == {"type": "integer"}
    analyzer = settings["analysis"]["analyzer"]["ragfolio_text"]
    assert analyzer["filter"] == ["lowercase", "ragfolio_min2", "ragfolio_stop"]
    assert "ragfolio_stop" not in bm25_index_body(k1=0.9, b=0.3, stopwords="none", meta={})["settings"]["analysis"][
        "analyzer"]["ragfolio_text"]["filter"]
    with pytest.raises(ValueError, match="stopwords='french'"):
        bm25_index_body(k1=1, b=1, stopwords="french", meta={})


def test_the_english_stop_filter_drops_what_bm25s_drops() -> None:
    import bm25s.stopwords

    # Lucene's _english_ set, which the mapping names, is the list bm25s uses.
    lucene_english = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
                      "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
                      "they", "this", "to", "was", "will", "with"}
    assert set(bm25s.stopwords.STOPWORDS_EN) == lucene_english


def test_dense_mapping_and_index_names() -> None:
    body = dense_index_body(dims=3, index_type="hnsw", hnsw_m=16, meta={})
    vector = body["mappings"]["properties"]["embedding"]
    assert vector == {"type": "dense_vector", "dims": 3, "index": True, "similarity": "cosine",
                      "index_options": {"type": "hnsw", "m": 16}}
    assert dense_index_body(dims=3, index_type="flat", hnsw_m=16, meta={})["mappings"]["properties"]["embedding"][
        "index_options"] == {"type": "flat"}
    a = index_name("ragfolio", "bm25", {"corpus": "c", "k1": 1.2, "b": 0.75})
    assert a == index_name("ragfolio", "bm25", {"b": 0.75, "k1": 1.2, "corpus": "c"})  # key order is irrelevant
    assert a != index_name("ragfolio", "bm25", {"corpus": "c", "k1": 0.9, "b": 0.75})
    assert a.startswith("ragfolio-bm25-") and a == a.lower()


def test_bulk_actions_key_documents_by_row_so_reindexing_overwrites() -> None:
    actions = list(bulk_actions("ix", [{"text": t} for t in TEXTS[:2]], ids=IDS[:2]))
    assert actions == [
        {"_op_type": "index", "_index": "ix", "_id": "0", "_source": {"row": 0, "text": TEXTS[0], "passage_id": "p-000"}},
        {"_op_type": "index", "_index": "ix", "_id": "1", "_source": {"row": 1, "text": TEXTS[1], "passage_id": "p-001"}},
    ]
    assert [a["_source"] for a in bulk_actions("ix", [{}, {}])] == [{"row": 0}, {"row": 1}]
    with pytest.raises(ValueError, match="ids: 1 values for 2 passages"):
        list(bulk_actions("ix", [{}, {}], ids=["x"]))


def test_msearch_bodies() -> None:
    searches = bm25_searches(["capital of France"], 3)
    assert searches == [{"size": 3, "query": {"match": {"text": {"query": "capital of France"}}}, "_source": ["row"],
                         "track_total_hits": False}]
    assert msearch_lines("ix", searches) == [{"index": "ix"}, searches[0]]
    (knn,) = knn_searches(np.array([[0.6, 0.8]], dtype=np.float32), 2, 50)
    assert knn["knn"]["field"] == "embedding" and knn["knn"]["k"] == 2 and knn["knn"]["num_candidates"] == 50
    assert knn["knn"]["query_vector"] == pytest.approx([0.6, 0.8])


# --- response parsing -----------------------------------------------------------------------------
def test_parse_msearch_pads_like_the_in_process_retrievers() -> None:
    got = parse_msearch(recorded("msearch_bm25.json"), 3, "ix")
    np.testing.assert_array_equal(got.doc_ids, [[2, 0, -1], [-1, -1, -1]])
    np.testing.assert_allclose(got.scores[0, :2], [1.8459812, 0.6931472], rtol=1e-6)
    assert np.isneginf(got.scores[0, 2]) and np.isneginf(got.scores[1]).all()
    assert got.doc_ids.dtype == np.int64 and got.scores.dtype == np.float32


def test_parse_msearch_errors_name_the_index_or_the_reason() -> None:
    with pytest.raises(ElasticsearchIndexMissingError, match="'ix' does not exist; build it with index()"):
        parse_msearch(recorded("msearch_index_missing.json"), 3, "ix")
    with pytest.raises(ElasticsearchRequestError, match=r"failed \(400\): x_content_parse_exception"):
        parse_msearch(recorded("msearch_parse_error.json"), 3, "ix")


def test_rank_overlap() -> None:
    a = RetrievalResult(np.array([[1, 2, 3], [4, -1, -1], [-1, -1, -1]]), np.zeros((3, 3), np.float32))
    b = RetrievalResult(np.array([[3, 2, 9], [5, -1, -1], [-1, -1, -1]]), np.zeros((3, 3), np.float32))
    np.testing.assert_allclose(rank_overlap(a, b, 3), [2 / 3, 0.0, 1.0])
    np.testing.assert_allclose(rank_overlap(a, b, 1), [0.0, 0.0, 1.0])


# --- through the client ---------------------------------------------------------------------------
def index_script(name_count: int, bulk: str) -> list[tuple[str, str, Reply]]:
    return [("HEAD", "/IX", (404, None)), ("PUT", "/IX", (200, recorded("indices_create.json"))),
            ("PUT", "/_bulk", (200, recorded(bulk))), ("POST", "/IX/_refresh", (200, recorded("refresh.json"))),
            ("POST", "/IX/_count", (200, recorded(f"count_{name_count}.json")))]


def with_index(script: list[tuple[str, str, Reply]], name: str) -> list[tuple[str, str, Reply]]:
    return [(m, p.replace("IX", name), r) for m, p, r in script]


def test_index_then_retrieve_through_the_client() -> None:
    retriever = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL), k1=0.9, b=0.4)
    name = retriever._name_and_meta("corpus-1")[0]
    script = with_index(index_script(4, "bulk_created.json"), name)
    script.append(("POST", "/_msearch", (200, recorded("msearch_bm25.json"))))
    settings, client, node = replay(script)
    retriever = ElasticsearchBM25Retriever(settings, k1=0.9, b=0.4, client=client)
    got = retriever.index(TEXTS, IDS, corpus_key="corpus-1").retrieve(["eiffel tower paris", "the of"], 3)
    np.testing.assert_array_equal(got.doc_ids, [[2, 0, -1], [-1, -1, -1]])
    requests = {(m, t.split("?")[0]): b for m, t, b in node.requests}
    created = json.loads(requests[("PUT", f"/{name}")])
    assert created["settings"]["similarity"]["ragfolio_bm25"] == {"type": "BM25", "k1": 0.9, "b": 0.4}
    assert created["mappings"]["_meta"]["corpus"] == "corpus-1"
    lines = ndjson(requests[("PUT", "/_bulk")])
    assert lines[0] == {"index": {"_index": name, "_id": "0"}}
    assert lines[1] == {"row": 0, "text": TEXTS[0], "passage_id": "p-000"}
    assert len(lines) == 8
    lines = ndjson(requests[("POST", "/_msearch")])
    assert lines == msearch_lines(name, bm25_searches(["eiffel tower paris", "the of"], 3))
    assert not node.script


def test_reindexing_a_complete_index_sends_no_documents() -> None:
    name = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))._name_and_meta("c")[0]
    script = [("HEAD", f"/{name}", (200, None)), ("POST", f"/{name}/_count", (200, recorded("count_4.json"))),
              ("POST", f"/{name}/_count", (200, recorded("count_4.json")))]
    settings, client, node = replay(script)
    ElasticsearchBM25Retriever(settings, client=client).index(TEXTS, IDS, corpus_key="c")
    assert [m for m, _, _ in node.requests] == ["HEAD", "POST", "POST"] and not node.script


def test_an_incomplete_index_is_overwritten_by_id_not_duplicated() -> None:
    name = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))._name_and_meta("c")[0]
    script = [("HEAD", f"/{name}", (200, None)), ("POST", f"/{name}/_count", (200, recorded("count_0.json"))),
              ("PUT", f"/{name}", (400, recorded("indices_create_exists.json")))]
    script += with_index(index_script(4, "bulk_updated.json"), name)[2:]
    settings, client, node = replay(script)
    retriever = ElasticsearchBM25Retriever(settings, client=client).index(TEXTS, IDS, corpus_key="c")
    assert retriever.n_docs_ == 4 and not node.script


def test_dense_knn_scores_are_mapped_back_to_cosine() -> None:
    emb = np.eye(4, 3, dtype=np.float32)
    probe = ElasticsearchDenseRetriever(ElasticsearchSettings(url=URL))
    name = probe._name_and_meta("c", 3)[0]
    script = with_index(index_script(4, "bulk_created.json"), name)
    script.append(("POST", "/_msearch", (200, recorded("msearch_knn.json"))))
    settings, client, node = replay(script)
    got = ElasticsearchDenseRetriever(settings, client=client).index(emb, IDS, corpus_key="c").retrieve_embedded(
        emb[1:2], 3)
    np.testing.assert_array_equal(got.doc_ids, [[1, 0, -1]])
    np.testing.assert_allclose(got.scores[0, :2], [0.8, 0.5], rtol=1e-6)
    search = ndjson(node.requests[-1][2])[1]
    assert search["knn"]["k"] == 3 and search["knn"]["num_candidates"] == 100
    bulk = ndjson(node.requests[2][2])
    assert bulk[1] == {"row": 0, "embedding": [1.0, 0.0, 0.0], "passage_id": "p-000"}


def test_rejected_searches_are_retried_alone() -> None:
    one_hit = recorded("msearch_bm25.json")
    one_hit["responses"] = one_hit["responses"][:1]
    settings, client, node = replay([("POST", "/_msearch", (200, recorded("msearch_rejected.json"))),
                                     ("POST", "/_msearch", (200, one_hit))])
    retriever = ElasticsearchBM25Retriever(settings, client=client)
    retriever.index_name_ = "ix"
    got = retriever.retrieve(["a", "b"], 2)
    np.testing.assert_array_equal(got.doc_ids, [[2, -1], [2, 0]])
    assert len(ndjson(node.requests[1][2])) == 2  # only the rejected query went again


def test_transient_http_errors_are_retried_by_the_client() -> None:
    busy = (503, {"error": {"type": "unavailable_shards_exception", "reason": "primary shard is not active"},
                  "status": 503})
    ok = (200, recorded("msearch_bm25.json"))
    settings, client, node = replay([("POST", "/_msearch", busy), ("POST", "/_msearch", ok)])
    retriever = ElasticsearchBM25Retriever(settings, client=client)
    retriever.index_name_ = "ix"
    assert retriever.retrieve(["a", "b"], 1).doc_ids.tolist() == [[2], [-1]]
    assert len(node.requests) == 2


def test_an_unreachable_cluster_is_a_connection_error_naming_the_url() -> None:
    name = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))._name_and_meta("c")[0]
    refused = elastic_transport.ConnectionError("[Errno 111] Connection refused")
    settings, client, node = replay([("HEAD", f"/{name}", refused)] * 3, max_retries=2)
    with pytest.raises(ElasticsearchUnavailableError, match=r"cannot reach Elasticsearch at http://es.invalid:9200"):
        ElasticsearchBM25Retriever(settings, client=client).index(TEXTS, corpus_key="c")
    assert isinstance(ElasticsearchUnavailableError("x"), ConnectionError)
    assert len(node.requests) == 3  # the first try and two retries


def test_a_missing_index_says_how_to_build_it() -> None:
    name = ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL))._name_and_meta("c")[0]
    settings, client, _ = replay([("HEAD", f"/{name}", (404, None))])
    with pytest.raises(ElasticsearchIndexMissingError, match=f"{name}' does not exist; build it with index"):
        ElasticsearchBM25Retriever(settings, client=client).attach("c")
    # deleted between the existence check and the count: the client's NotFoundError is translated
    settings, client, _ = replay([("HEAD", f"/{name}", (200, None)),
                                  ("POST", f"/{name}/_count", (404, recorded("index_not_found.json")))])
    with pytest.raises(ElasticsearchIndexMissingError, match=name):
        ElasticsearchBM25Retriever(settings, client=client).attach("c")
    settings, client, _ = replay([("POST", "/_msearch", (200, recorded("msearch_index_missing.json")))])
    retriever = ElasticsearchBM25Retriever(settings, client=client)
    retriever.index_name_ = name
    with pytest.raises(ElasticsearchIndexMissingError, match=name):
        retriever.retrieve(["a", "b"], 2)


def test_refused_credentials_are_a_permission_error() -> None:
    settings, client, _ = replay([("POST", "/_msearch", (401, recorded("security_exception.json")))])
    retriever = ElasticsearchBM25Retriever(settings, client=client)
    retriever.index_name_ = "ix"
    with pytest.raises(PermissionError, match="ELASTICSEARCH_API_KEY"):
        retriever.retrieve(["a"], 2)


def test_only_method_lucene_is_served() -> None:
    with pytest.raises(ValueError, match="only method='lucene'"):
        ElasticsearchBM25Retriever(ElasticsearchSettings(url=URL), method="bm25l")


# --- the grid -------------------------------------------------------------------------------------
def test_backend_is_a_grid_parameter_that_renames_nothing_by_default() -> None:
    assert make_candidate("bm25", {}).name == "bm25(k1=1.2,b=0.75,method=lucene,stopwords=english)"
    assert "backend" not in make_candidate("bm25", {"backend": "inprocess"}).params
    es = make_candidate("bm25", {"backend": "elasticsearch"})
    assert es.name == "bm25(k1=1.2,b=0.75,method=lucene,stopwords=english,backend=elasticsearch)"
    assert es.params["backend"] == "elasticsearch"
    names = [c.name for c in expand_grid({"dense": {"encoder": "minilm", "backend": ["inprocess", "elasticsearch"]}})]
    assert names == [
        "dense(encoder=minilm,index_type=flat)",
        "dense(encoder=minilm,index_type=flat,backend=elasticsearch)",
    ]
    with pytest.raises(ValueError, match="backend='solr'"):
        make_candidate("bm25", {"backend": "solr"})
    with pytest.raises(ValueError, match="unknown parameter"):
        make_candidate("hybrid", {"encoder": "minilm", "backend": "elasticsearch"})


def test_pool_runner_sends_elasticsearch_candidates_to_the_cluster(tiny_dir, monkeypatch) -> None:
    questions = load_folder(tiny_dir)
    corpus, queries = build_corpus(questions), [q.question for q in questions]
    runner = PoolRunner(corpus.titles, corpus.texts, {}, ArrayCache(tiny_dir / "unused", enabled=False), num_docs=3,
                        prefilter_depth=8, elasticsearch={"url": URL, "index_prefix": "t"})
    seen = {}

    def fake_index(self, texts, ids=None, *, corpus_key=None):
        seen.update(settings=self.settings, n=len(texts), key=corpus_key, k1=self.k1)
        self.index_name_ = "ix"
        return self

    def fake_retrieve(self, qs, k):  # the cluster's answer: rows 2, 1, 0 for every query
        ids = np.tile(np.arange(k, dtype=np.int64)[::-1], (len(qs), 1))
        return RetrievalResult(ids, np.ones((len(qs), k), np.float32))

    monkeypatch.setattr(ElasticsearchBM25Retriever, "index", fake_index)
    monkeypatch.setattr(ElasticsearchBM25Retriever, "retrieve", fake_retrieve)
    got = runner.run(make_candidate("bm25", {"k1": 0.9, "backend": "elasticsearch"}), queries)
    assert got.doc_ids.shape == (len(queries), 3) and (got.doc_ids == [2, 1, 0]).all()
    assert seen["settings"].url == URL and seen["settings"].index_prefix == "t" and seen["k1"] == 0.9
    assert seen["n"] == len(runner.passage_texts) and seen["key"] == runner.corpus_key


def test_core_imports_without_the_client() -> None:
    code = (
        "import sys, ragfolio.core.retrieval.running.pool_runner, ragfolio.core.retrieval.indexes.elasticsearch; "
        "print('elasticsearch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
