"""Batched retrieval: the micro-batcher on its own, and concurrent /retrieve and /batch_retrieve
requests encoded and routed together with the passages each query gets alone."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import service_client, write_config
from tiny_bundle import CountingEncoder, questions, write_encoder_bundle

from ragfolio.core.batching import MicroBatcher
from ragfolio.core.retrieval.encoders.kinds import ENCODER_KINDS


def record(batches: list[list[int]], delay_s: float = 0.0):
    def process(items: list[int]) -> list[int]:
        batches.append(list(items))
        time.sleep(delay_s)
        return [10 * i for i in items]

    return process


def test_concurrent_items_are_gathered_into_bounded_batches_in_order() -> None:
    batches: list[list[int]] = []
    batcher = MicroBatcher(record(batches, 0.05), max_batch_size=4, max_wait_s=0.02)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(batcher.submit(i) for i in range(10))))

    assert asyncio.run(main()) == [10 * i for i in range(10)]
    assert sorted(i for b in batches for i in b) == list(range(10))
    assert all(len(b) <= 4 for b in batches) and len(batches) == 3
    assert batcher.stats().batches == 3 and batcher.stats().items == 10


def test_a_lone_item_waits_at_most_max_wait() -> None:
    batcher = MicroBatcher(record([]), max_batch_size=8, max_wait_s=0.05)

    async def main() -> float:
        start = time.perf_counter()
        assert await batcher.submit(3) == 30
        return time.perf_counter() - start

    assert asyncio.run(main()) < 0.5


def test_submit_many_keeps_order_and_a_failure_fails_its_batch_only() -> None:
    def process(items: list[int]) -> list[int]:
        if 13 in items:
            raise RuntimeError("unlucky")
        return [-i for i in items]

    batcher = MicroBatcher(process, max_batch_size=3, max_wait_s=0.0)

    async def main() -> None:
        assert await batcher.submit_many(list(range(7))) == [-i for i in range(7)]
        with pytest.raises(RuntimeError, match="unlucky"):
            await batcher.submit_many([12, 13])
        assert await batcher.submit(5) == -5  # the batcher goes on

    asyncio.run(main())


def test_a_caller_that_gives_up_is_skipped() -> None:
    batches: list[list[int]] = []
    batcher = MicroBatcher(record(batches, 0.2), max_batch_size=1, max_wait_s=0.0)

    async def main() -> None:
        first = asyncio.ensure_future(batcher.submit(1))
        await asyncio.sleep(0.05)  # 1 is being processed; 2 waits for the slot
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit(2), 0.05)
        assert await first == 10
        assert await batcher.submit(3) == 30

    asyncio.run(main())
    assert batches == [[1], [3]]


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_batch_size=0"):
        MicroBatcher(record([]), max_batch_size=0, max_wait_s=0.0)


@pytest.fixture(scope="module")
def encoder_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("encoder_bundle") / "bundle"
    write_encoder_bundle(path)
    return path


@pytest.fixture
def counting(monkeypatch) -> list[tuple[int, int]]:
    monkeypatch.setitem(ENCODER_KINDS, "counting", CountingEncoder)
    CountingEncoder.calls.clear()
    return CountingEncoder.calls


def comparable(body: dict) -> dict:
    """A /retrieve body without its timings and router scores (compared by :func:`router_scores`)."""
    members = [{k: v for k, v in m.items() if k not in ("latency_ms", "router_score")} for m in body["members"]]
    return {**{k: v for k, v in body.items() if k not in ("latency_ms", "batch_size")}, "members": members}


def router_scores(bodies: list[dict]) -> list[float]:
    return [m["router_score"] for body in bodies for m in body["members"]]


def test_concurrent_retrieves_share_encoder_calls_and_get_the_passages_they_get_alone(
    encoder_bundle, counting, fake_llm_url, tmp_path
) -> None:
    queries = questions()[:12]
    alone_config = write_config(tmp_path / "alone.yml", encoder_bundle, fake_llm_url,
                                batching={"max_batch_size": 1, "max_wait_ms": 0})
    with service_client(alone_config) as client:
        alone = [client.post("/retrieve", json={"query": q, "l": 2}).json() for q in queries]
    config = write_config(tmp_path / "batched.yml", encoder_bundle, fake_llm_url,
                          batching={"max_batch_size": 32, "max_wait_ms": 100})
    with service_client(config) as client:
        counting.clear()  # after the warm-up's call
        barrier = threading.Barrier(len(queries))

        def retrieve(query: str) -> dict:
            barrier.wait()
            response = client.post("/retrieve", json={"query": query, "l": 2})
            assert response.status_code == 200, response.text
            return response.json()

        with ThreadPoolExecutor(len(queries)) as pool:
            together = list(pool.map(retrieve, queries))
        calls = list(counting)
        metrics = client.get("/metrics").text
    for dim in (16, 8):  # each encoder: all the queries, in fewer calls than queries
        texts = [n for d, n in calls if d == dim]
        assert sum(texts) == len(queries) and len(texts) < len(queries), calls
    assert [comparable(b) for b in together] == [comparable(b) for b in alone]
    # the router's forward pass over a batch rounds float32 differently from one over one query
    assert router_scores(together) == pytest.approx(router_scores(alone), abs=1e-5)
    assert "ragfolio_retrieval_batch_size_count" in metrics


def test_batch_retrieve_is_one_encoder_call_per_batch(encoder_bundle, counting, fake_llm_url, tmp_path) -> None:
    queries = questions()
    config = write_config(tmp_path / "serving.yml", encoder_bundle, fake_llm_url,
                          batching={"max_batch_size": 8, "max_wait_ms": 0})
    with service_client(config) as client:
        counting.clear()
        body = client.post("/batch_retrieve", json={"queries": queries, "l": 3, "num_docs": 2}).json()
        assert [r["query"] for r in body["results"]] == queries
        assert all(len(m["passages"]) == 2 for r in body["results"] for m in r["members"])
        single = client.post("/retrieve", json={"query": queries[5], "l": 3, "num_docs": 2}).json()
    assert comparable(single) == comparable(body["results"][5])
    assert router_scores([single]) == pytest.approx(router_scores([body["results"][5]]), abs=1e-5)
    sizes = [8] * (len(queries) // 8) + ([len(queries) % 8] if len(queries) % 8 else [])
    for dim in (16, 8):  # one call per batch and encoder (then one for the lone /retrieve)
        assert [n for d, n in counting if d == dim] == [*sizes, 1], counting
