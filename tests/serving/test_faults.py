"""``fault_injection`` (benchmarks and tests only): a member made slow times out, the response is a
200 with ``degraded: true``, and a setting naming no member stops the start."""

from __future__ import annotations

import pytest
from conftest import service_client, write_config
from pydantic import ValidationError
from tiny_bundle import MEMBERS, questions

from ragfolio.serving.config import FaultInjectionConfig, ServingConfig

K = len(MEMBERS)


def test_a_slow_member_times_out_and_the_response_is_degraded(tiny_bundle, fake_llm_url, tmp_path) -> None:
    with service_client(write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url)) as client:
        slow = client.get("/portfolio").json()["members"][1]["name"]
    fault = {"member": slow, "delay_s": 0.5}
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, member_timeout_s=0.1,
                          fault_injection=fault)
    timed_out = f"{slow}: timeout after 0.1 s"
    with service_client(config) as client:
        first = client.post("/retrieve", json={"query": questions()[0], "l": K}).json()
        assert first["degraded"] is True and first["reasons"] == [timed_out], first["reasons"]
        assert [m["name"] for m in first["members"] if not m["ok"]] == [slow]
        # Later requests may find the pool's threads still held by the sleeping member (as a hung
        # member's would be), so another member may time out too; the slow one always does.
        for route, payload in [("/retrieve", {"query": questions()[1], "l": K, "num_docs": 2}),  # another view
                               ("/answer", {"query": questions()[2], "l": K})]:
            response = client.post(route, json=payload)
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["degraded"] is True and timed_out in body["reasons"], body["reasons"]
            assert all(reason.endswith("timeout after 0.1 s") for reason in body["reasons"]), body["reasons"]
        batch = client.post("/batch_retrieve", json={"queries": questions()[:3], "l": K}).json()
        assert batch["degraded"] is True and all(r["degraded"] for r in batch["results"])
        assert f'ragfolio_member_timeouts_total{{member="{slow}"}}' in client.get("/metrics").text


def test_a_fault_naming_no_member_stops_the_start(tiny_bundle, fake_llm_url, tmp_path) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url,
                          fault_injection={"member": "bm25(nothing)", "delay_s": 1})
    with pytest.raises(ValueError, match=r"fault_injection.member='bm25\(nothing\)' is not a member"):
        with service_client(config):
            pass


def test_fault_injection_is_off_by_default_and_checked() -> None:
    assert ServingConfig().fault_injection is None
    with pytest.raises(ValidationError, match="delay_s"):
        FaultInjectionConfig(member="m", delay_s=0)
