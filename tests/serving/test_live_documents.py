"""The living corpus through the service: documents added, replaced and deleted while it runs,
metadata filters on every retrieval endpoint, and the update log replayed at the next start."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import service_client, write_config
from tiny_bundle import CountingEncoder, write_encoder_bundle, write_tiny_bundle

from ragfolio.core.retrieval.encoders.kinds import ENCODER_KINDS

NEW = {"id": "doc-glass", "title": "Zorblax Quintavelle",
       "text": "Zorblax Quintavelle is a glassblower who founded the Quintavelle works in 1931.",
       "metadata": {"source": "handbook", "year": 2024, "tags": ["glass", "craft"]}}
QUESTION = "Who founded the Quintavelle works?"


@pytest.fixture
def counting(monkeypatch) -> None:
    monkeypatch.setitem(ENCODER_KINDS, "counting", CountingEncoder)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    write_encoder_bundle(tmp_path / "bundle")
    return tmp_path / "bundle"


def _ids(body: dict) -> list[str]:
    return [p["id"] for p in body["passages"]]


def _member_ids(body: dict) -> list[str]:
    return [p["id"] for m in body["members"] if m["ok"] for p in m["passages"]]


def test_an_added_document_is_searchable_at_once_and_survives_a_restart(bundle, fake_llm_url, tmp_path, counting):
    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url)
    with service_client(config) as client:
        assert NEW["id"] not in _ids(client.post("/retrieve", json={"query": QUESTION, "l": 3}).json())
        added = client.post("/documents", json={"documents": [NEW]})
        assert added.status_code == 200, added.text
        assert added.json()["added"] == [NEW["id"]] and added.json()["version"] == 1
        body = client.post("/retrieve", json={"query": QUESTION, "l": 3}).json()
        assert NEW["id"] in _ids(body)
        found = next(p for p in body["passages"] if p["id"] == NEW["id"])
        assert found["metadata"] == NEW["metadata"] and found["text"] == NEW["text"]
        live = client.get("/portfolio").json()["live"]
        assert live["added"] == 1 and live["version"] == 1 and live["log"] == "updates.jsonl"
    assert (bundle / "live" / "updates.jsonl").is_file()
    with service_client(config) as client:  # a restart replays the log; the bundle still verifies
        assert NEW["id"] in _ids(client.post("/retrieve", json={"query": QUESTION, "l": 3}).json())
        assert client.get("/portfolio").json()["live"]["version"] == 1


def test_replace_and_delete_by_id(bundle, fake_llm_url, tmp_path, counting):
    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url)
    with service_client(config) as client:
        client.post("/documents", json={"documents": [NEW]})
        changed = {**NEW, "text": "Zorblax Quintavelle sold the Quintavelle works in 1950 to a cooperative."}
        replaced = client.post("/documents", json={"documents": [changed]}).json()
        assert replaced["replaced"] == [NEW["id"]] and replaced["added"] == []
        body = client.post("/retrieve", json={"query": "When were the Quintavelle works sold?", "l": 3}).json()
        texts = [p["text"] for p in body["passages"] if p["id"] == NEW["id"]]
        assert texts == [changed["text"]]  # one copy, the new text
        assert client.delete(f"/documents/{NEW['id']}").status_code == 200
        body = client.post("/retrieve", json={"query": QUESTION, "l": 3}).json()
        assert NEW["id"] not in _member_ids(body)
        missing = client.delete(f"/documents/{NEW['id']}")
        assert missing.status_code == 404 and "doc-glass" in missing.json()["error"]
        first = client.post("/retrieve", json={"query": QUESTION, "l": 1}).json()["passages"][0]["id"]
        assert client.delete(f"/documents/{first}").status_code == 200  # a passage of the bundle's corpus
        assert first not in _member_ids(client.post("/retrieve", json={"query": QUESTION, "l": 3}).json())


def test_a_malformed_document_is_a_400_naming_it_and_changes_nothing(bundle, fake_llm_url, tmp_path, counting):
    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url)
    with service_client(config) as client:
        bad = client.post("/documents", json={"documents": [NEW, {"id": "x", "text": ""}]})
        assert bad.status_code == 400 and "documents[1].text" in bad.json()["error"], bad.text
        nested = client.post("/documents", json={"documents": [{**NEW, "metadata": {"a": {"b": 1}}}]})
        assert nested.status_code == 400 and "documents[0].metadata" in nested.json()["error"], nested.text
        assert client.post("/documents", json={"docs": []}).status_code == 400
        assert client.get("/portfolio").json()["live"]["version"] == 0  # all or none


def test_every_passage_a_filtered_query_gets_matches_the_filter(bundle, fake_llm_url, tmp_path, counting):
    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url)
    with service_client(config) as client:
        docs = [{**NEW, "id": f"doc-{i}", "text": f"{NEW['text']} Edition {i}.",
                 "metadata": {"source": "handbook" if i % 2 else "wiki", "year": 2000 + i}} for i in range(8)]
        assert client.post("/documents", json={"documents": docs}).status_code == 200
        wanted = {"source": "handbook", "year": {"gte": 2003}}
        keep = {d["id"] for d in docs if d["metadata"]["source"] == "handbook" and d["metadata"]["year"] >= 2003}
        body = client.post("/retrieve", json={"query": QUESTION, "l": 3, "filter": wanted}).json()
        got = _member_ids(body)
        assert got and set(got) <= keep, (got, keep)
        batch = client.post("/batch_retrieve", json={"queries": [QUESTION, "glassblower"], "filter": wanted}).json()
        for result in batch["results"]:
            assert set(_member_ids(result)) <= keep
        by_id = client.post("/retrieve", json={"query": QUESTION, "filter": {"id": {"in": ["doc-1", "doc-2"]}}}).json()
        assert set(_member_ids(by_id)) <= {"doc-1", "doc-2"}
        bad = client.post("/retrieve", json={"query": QUESTION, "filter": {"year": {"between": [1, 2]}}})
        assert bad.status_code == 400 and "between" in bad.text, bad.text
        chat = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": QUESTION}],
                                                         "filter": {"year": {"gt": "soon"}}})
        assert chat.status_code == 400, chat.text


def test_a_graph_member_says_it_sees_added_documents_after_the_next_run(fake_llm_url, tmp_path):
    write_tiny_bundle(tmp_path / "bundle")  # bm25, graph, two_hop
    config = write_config(tmp_path / "serving.yml", tmp_path / "bundle", fake_llm_url)
    with service_client(config) as client:
        client.post("/documents", json={"documents": [NEW]})
        live = client.get("/portfolio").json()["live"]
        assert [m.startswith("graph") for m in live["members_without_live_updates"]] == [True]
        body = client.post("/retrieve", json={"query": QUESTION, "l": 3}).json()
        assert body["degraded"] is False
        assert NEW["id"] in _ids(body)


def test_queries_during_updates_all_answer(bundle, fake_llm_url, tmp_path, counting):
    import threading

    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url)
    with service_client(config) as client:
        statuses: list[int] = []
        stop = threading.Event()

        def ask() -> None:
            while not stop.is_set():
                statuses.append(client.post("/retrieve", json={"query": QUESTION, "l": 3}).status_code)

        askers = [threading.Thread(target=ask) for _ in range(4)]
        for thread in askers:
            thread.start()
        for i in range(20):
            doc = {**NEW, "id": f"doc-{i}", "text": f"{NEW['text']} Note {i}."}
            assert client.post("/documents", json={"documents": [doc]}).status_code == 200
            if i % 3 == 2:
                assert client.delete(f"/documents/doc-{i - 1}").status_code == 200
        stop.set()
        for thread in askers:
            thread.join()
        assert len(statuses) > 20 and set(statuses) == {200}
        assert client.get("/portfolio").json()["live"]["added"] == 20 - 6


def test_a_delta_past_stale_share_says_the_portfolio_may_be_stale(bundle, fake_llm_url, tmp_path, counting, caplog):
    config = write_config(tmp_path / "serving.yml", bundle, fake_llm_url, live_updates={"stale_share": 0.05})
    with service_client(config) as client:
        n = client.get("/portfolio").json()["live"]["base_passages"]
        docs = [{**NEW, "id": f"doc-{i}", "text": f"{NEW['text']} Part {i}."} for i in range(int(0.05 * n) + 1)]
        reply = client.post("/documents", json={"documents": docs}).json()
        assert reply["stale"] is True and reply["delta_share"] > 0.05
        assert client.get("/portfolio").json()["live"]["stale"] is True
    assert any("the portfolio may be stale" in r.getMessage() for r in caplog.records)


def test_a_router_that_reads_the_lists_routes_over_added_documents(fake_llm_url, tmp_path):
    write_tiny_bundle(tmp_path / "bundle", router_kind="post_retrieval")  # its features read the passage graph
    config = write_config(tmp_path / "serving.yml", tmp_path / "bundle", fake_llm_url)
    with service_client(config) as client:
        client.post("/documents", json={"documents": [NEW]})
        body = client.post("/retrieve", json={"query": QUESTION, "l": 1})
        assert body.status_code == 200, body.text
        assert body.json()["routed"] is True
        assert NEW["id"] in _member_ids(client.post("/retrieve", json={"query": QUESTION, "l": 3}).json())
