"""A bundle that routes only where routing was shown to help: every other l is the single best member
alone, at l x num_docs passages, and the service says so (responses, /portfolio, the start-up log)."""

from __future__ import annotations

import logging

import pytest
from conftest import service_client, write_config
from tiny_bundle import SCORING, write_tiny_bundle

from ragfolio.core.bundle import load_bundle


@pytest.fixture(scope="module")
def partial_bundle(tmp_path_factory):
    path = tmp_path_factory.mktemp("partial") / "bundle"
    write_tiny_bundle(path, "post_retrieval", routed_ls=(1,))
    return path


def test_unrouted_l_is_the_single_best_member_at_l_times_num_docs(partial_bundle, fake_llm_url, tmp_path, caplog) -> None:
    bundle = load_bundle(partial_bundle)
    assert bundle.routed_ls == (1,) and bundle.routes_at(1) and not bundle.routes_at(2)
    single = bundle.members[bundle.single_best].name
    config = write_config(tmp_path / "serving.yml", partial_bundle, fake_llm_url)
    with caplog.at_level(logging.WARNING, logger="ragfolio.serving.engine"), service_client(config) as client:
        info = client.get("/portfolio").json()
        assert info["routed_ls"] == [1] and info["single_best"] == single
        routed = client.post("/retrieve", json={"query": "which river is the longest", "l": 1}).json()
        assert routed["routed"] and len(routed["members"]) == 1
        for body, depth in (({"l": 2}, SCORING.num_docs), ({"l": 3, "num_docs": 2}, 2), ({}, SCORING.num_docs)):
            unrouted = client.post("/retrieve", json={"query": "which river is the longest", **body}).json()
            l = body.get("l", 2)  # noqa: E741 - the bundle's default_l is 2
            assert unrouted["routed"] is False and [m["name"] for m in unrouted["members"]] == [single], body
            assert len(unrouted["members"][0]["passages"]) == len(unrouted["passages"]) == l * depth, body
        answered = client.post("/answer", json={"query": "which river is the longest"}).json()
        assert answered["routed"] is False and [c["member"] for c in answered["candidates"]] == [single]
    assert any("routing is off at the default l=2" in r.getMessage() for r in caplog.records)
