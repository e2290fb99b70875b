"""The service serves whichever router the bundle holds, a router that sees the retrieval included."""

from __future__ import annotations

from conftest import service_client, write_config
from tiny_bundle import questions, write_tiny_bundle


def test_a_bundle_with_a_post_retrieval_router_serves_each_query_on_its_own_retrieval(
    tmp_path_factory, fake_llm_url
) -> None:
    """``router_training.bundle.router: post_retrieval``: /retrieve, /batch_retrieve and /answer route with it."""
    folder = tmp_path_factory.mktemp("post") / "bundle"
    write_tiny_bundle(folder, router_kind="post_retrieval")
    config = write_config(folder.parent / "serving.yml", folder, fake_llm_url)
    with service_client(config) as post:
        assert post.get("/portfolio").json()["router"] == "post_retrieval"
        one = post.post("/retrieve", json={"query": questions()[0], "l": 2}).json()
        assert len(one["members"]) == 2 and one["passages"] and not one["degraded"]
        batch = post.post("/batch_retrieve", json={"queries": questions()[:3], "l": 1}).json()
        assert [r["query"] for r in batch["results"]] == questions()[:3]
        alone = post.post("/retrieve", json={"query": questions()[0], "l": 1}).json()
        assert [m["name"] for m in batch["results"][0]["members"]] == [m["name"] for m in alone["members"]]
        assert post.post("/answer", json={"query": questions()[1], "l": 2}).status_code == 200
