"""One trace per request (ragfolio.serving.tracing): spans caught by an in-memory exporter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import closed_port_url, service_client, write_config
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import ValidationError
from tiny_bundle import MEMBERS, questions

from ragfolio.serving import config as config_module
from ragfolio.serving import tracing
from ragfolio.serving.config import TracingConfig, load_config
from ragfolio.serving.schemas import MemberResult, RetrieveResponse
from ragfolio.serving.tracing import REQUEST_ID, RequestTrace, Tracing, Untraced

K = len(MEMBERS)
TRACEPARENT_ID = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """Every span the service exports, caught in memory as each ends (the test hook: the processor)."""
    memory = InMemorySpanExporter()
    monkeypatch.setattr(tracing, "span_processor", lambda settings: SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def traced(spans: InMemorySpanExporter, tmp_path: Path, tiny_bundle: Path, fake_llm_url: str) -> Iterator[object]:
    """The service with tracing on (its exporter replaced by ``spans``)."""
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False,
                          tracing={"exporter": "console"})
    with service_client(config) as client:
        yield client


def request_spans(memory: InMemorySpanExporter, rid: str) -> list[ReadableSpan]:
    return [s for s in memory.get_finished_spans() if s.attributes.get(REQUEST_ID) == rid]


def one_trace(found: list[ReadableSpan], endpoint: str,
              unique: bool = True) -> tuple[ReadableSpan, dict[str, ReadableSpan]]:
    """The request span of ``found`` and ``found`` by name, after checking they form one tree whose
    children lie within their parents' time spans (and, ``unique``, that no two share a name)."""
    assert found, "no spans"
    assert len({s.context.trace_id for s in found}) == 1
    by_id = {s.context.span_id: s for s in found}
    roots = [s for s in found if s.parent is None or s.parent.span_id not in by_id]
    assert [r.name for r in roots] == [f"ragfolio {endpoint}"]
    for span in found:
        assert span.start_time <= span.end_time
        if span is not roots[0]:
            parent = by_id[span.parent.span_id]
            assert parent.start_time <= span.start_time and span.end_time <= parent.end_time, (span.name, parent.name)
    names = {s.name: s for s in found}
    assert len(names) == len(found) or not unique, sorted(s.name for s in found)
    return roots[0], names


def parent_of(span: ReadableSpan, names: dict[str, ReadableSpan]) -> str:
    return next(name for name, s in names.items() if s.context.span_id == span.parent.span_id)


def test_an_answer_is_one_trace_of_routing_members_and_llm_calls(traced, spans) -> None:
    response = traced.post("/answer", json={"query": questions()[0], "l": 2})
    assert response.status_code == 200, response.text
    body, rid = response.json(), response.headers["x-request-id"]
    request, names = one_trace(request_spans(spans, rid), "/answer")
    members = [m["name"] for m in body["members"]]
    assert set(names) == {"ragfolio /answer", "route", "retrieve", "answer", "select", "llm select",
                          *(f"member {m}" for m in members), *(f"llm answer:{m}" for m in members)}
    assert len(spans.get_finished_spans()) == len(names)  # every span of the request carries its id
    assert request.kind is SpanKind.SERVER and request.attributes["http.response.status_code"] == 200
    assert request.attributes["ragfolio.l"] == 2 and request.attributes["ragfolio.routed"] is True
    assert request.attributes["ragfolio.chosen_member"] == body["chosen_member"]
    assert request.attributes["ragfolio.tokens.prompt"] == body["tokens"]["prompt"]
    for member in body["members"]:
        span = names[f"member {member['name']}"]
        assert parent_of(span, names) == "retrieve"
        assert span.attributes["ragfolio.ok"] is True and span.attributes["ragfolio.passages"] == len(member["passages"])
        assert span.end_time - span.start_time == pytest.approx(member["latency_ms"] * 1e6, abs=1e3)
    for call, usage in body["tokens"]["calls"].items():
        span = names[f"llm {call}"]
        assert span.kind is SpanKind.CLIENT and parent_of(span, names) == call.split(":")[0]
        assert span.attributes["ragfolio.tokens.prompt"] == usage["prompt"]
        assert span.attributes["ragfolio.tokens.completion"] == usage["completion"]
    # the stages in the order they ran: routing, members, readers one after another, selector
    order = [names[n].start_time for n in ("route", "retrieve", "answer", "select")]
    assert order == sorted(order)
    calls = [names[f"llm answer:{m}"] for m in members]
    assert all(a.end_time <= b.start_time for a, b in zip(calls, calls[1:], strict=False))
    assert names["select"].attributes["ragfolio.chosen_member"] == body["chosen_member"]


def test_a_retrieval_is_one_trace_without_llm_spans(traced, spans) -> None:
    response = traced.post("/retrieve", json={"query": questions()[1], "l": K, "num_docs": 5})
    assert response.status_code == 200, response.text
    body, rid = response.json(), response.headers["x-request-id"]
    request, names = one_trace(request_spans(spans, rid), "/retrieve")
    assert set(names) == {"ragfolio /retrieve", "route", "retrieve", *(f"member {m['name']}" for m in body["members"])}
    assert request.attributes["ragfolio.num_docs"] == 5 and request.attributes["ragfolio.l"] == K
    route = names["route"]
    assert list(route.attributes["ragfolio.members"]) == [m["name"] for m in body["members"]]
    assert route.attributes["ragfolio.stage.features_ms"] == body["latency_ms"]["stage.features"]
    assert names["retrieve"].attributes["ragfolio.shared_ms"] == body["latency_ms"]["shared"]
    assert route.end_time <= names["retrieve"].start_time  # a query-only router routes, then members run


def test_a_batch_is_one_trace_with_a_span_per_query(traced, spans) -> None:
    queries = questions()[:3]
    response = traced.post("/batch_retrieve", json={"queries": queries, "l": 1})
    assert response.status_code == 200, response.text
    found = request_spans(spans, response.headers["x-request-id"])
    request, _ = one_trace(found, "/batch_retrieve", unique=False)
    by_id = {s.context.span_id: s for s in found}
    query_spans = [s for s in found if s.name == "query"]
    assert sorted(s.attributes["ragfolio.query_index"] for s in query_spans) == [0, 1, 2]
    for span in found:
        if span.name in ("route", "retrieve"):
            assert by_id[span.parent.span_id].name == "query"
    assert request.attributes["ragfolio.queries"] == 3


def test_a_failed_answer_is_traced_with_its_status(tmp_path, tiny_bundle, spans) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, closed_port_url(), warm_up=False,
                          tracing={"exporter": "console"})
    with service_client(config) as client:
        response = client.post("/answer", json={"query": questions()[0]})
    assert response.status_code == 503
    request, names = one_trace(request_spans(spans, response.headers["x-request-id"]), "/answer")
    assert request.status.status_code is StatusCode.ERROR and request.status.description == "the LLM is unavailable"
    assert request.attributes["http.response.status_code"] == 503
    assert {"route", "retrieve"} <= set(names) and not any(n.startswith("llm") for n in names)


def test_a_sampled_bentoml_span_is_the_parent(traced, spans) -> None:
    """A sampled incoming trace (BentoML's server span then records it): the request joins that trace."""
    header = {"traceparent": f"00-{TRACEPARENT_ID}-b7ad6b7169203331-01"}
    response = traced.post("/retrieve", json={"query": questions()[0]}, headers=header)
    found = request_spans(spans, response.headers["x-request-id"])
    assert {format(s.context.trace_id, "032x") for s in found} == {TRACEPARENT_ID}
    request = next(s for s in found if s.name == "ragfolio /retrieve")
    assert request.kind is SpanKind.INTERNAL and request.parent is not None
    assert format(request.parent.span_id, "016x") != "b7ad6b7169203331"  # BentoML's span sits between


def test_sample_rate_zero_records_nothing(tmp_path, tiny_bundle, fake_llm_url, spans) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False,
                          tracing={"exporter": "console", "sample_rate": 0.0})
    with service_client(config) as client:
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200
    assert spans.get_finished_spans() == ()


def test_tracing_off_sets_nothing_up(tmp_path, tiny_bundle, fake_llm_url, spans, monkeypatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tracing is off: nothing may be set up")

    monkeypatch.setattr(tracing, "span_processor", refuse)
    monkeypatch.setattr(tracing, "TracerProvider", refuse)
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False)
    assert load_config(config).tracing.exporter == "none"  # the shipped default
    with service_client(config) as client:
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200
        assert client.post("/answer", json={"query": questions()[0]}).status_code == 200
    assert spans.get_finished_spans() == ()
    off = Tracing.from_config(TracingConfig(), num_docs=3)
    trace = off.start("/retrieve", "rid")
    assert isinstance(trace, Untraced) and off.start("/answer", "other") is trace and not off.enabled
    result = object()
    start = time.perf_counter()
    for _ in range(100_000):
        assert off.start("/answer", "rid").end(result) is result
    assert time.perf_counter() - start < 1.0  # about 0.05 s: a method call or two per request


def test_console_prints_each_span_as_a_json_line(tmp_path, tiny_bundle, fake_llm_url, capfd) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url, warm_up=False,
                          tracing={"exporter": "console"})
    with service_client(config) as client:
        rid = client.post("/retrieve", json={"query": questions()[0]}).headers["x-request-id"]
    printed = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith('{"name"')]
    mine = [span for span in printed if span["attributes"].get(REQUEST_ID) == rid]
    assert {span["name"] for span in mine} >= {"ragfolio /retrieve", "route", "retrieve"}


def post_retrieval_response(num_docs: int) -> RetrieveResponse:
    members = [MemberResult(name=m, family=m, router_score=0.5, ok=True, error=None, latency_ms=4.0, passages=[])
               for m in ("a", "b")]
    return RetrieveResponse(query="q", l=2, num_docs=num_docs, members=members, passages=[], degraded=False,
                            reasons=[], batch_size=1,
                            latency_ms={"route": 3.0, "shared": 1.0, "members": 5.0, "total": 10.0,
                                        "stage.members": 6.0, "stage.first_stage": 1.0, "stage.features": 1.0,
                                        "stage.predict": 1.0})


@pytest.mark.parametrize(("num_docs", "members_first"), [(3, True), (6, False)])
def test_a_post_retrieval_router_s_members_are_placed_before_its_prediction(num_docs, members_first) -> None:
    """Post-retrieval the k members run before the router predicts; at another depth they run again after."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace = RequestTrace(provider.get_tracer("test"), "/retrieve", "rid", num_docs=3)
    time.sleep(0.02)  # longer than the recorded 10 ms, so that nothing is clipped
    trace.end(post_retrieval_response(num_docs))
    _, names = one_trace(list(memory.get_finished_spans()), "/retrieve")
    route, retrieve = names["route"], names["retrieve"]
    assert (retrieve.end_time <= route.start_time) is members_first
    assert (route.end_time <= retrieve.start_time) is not members_first
    assert route.end_time - route.start_time == 3_000_000 and retrieve.end_time - retrieve.start_time == 6_000_000
    for name in ("member a", "member b"):  # after the shared parts, together
        assert names[name].start_time == retrieve.start_time + 1_000_000


def test_tracing_settings_are_checked() -> None:
    assert TracingConfig().exporter == "none" and TracingConfig(exporter=None).exporter == "none"
    with pytest.raises(ValidationError, match="endpoint"):
        TracingConfig(exporter="console", endpoint="http://127.0.0.1:4318/v1/traces")
    with pytest.raises(ValidationError, match="sample_rate"):
        TracingConfig(exporter="console", sample_rate=1.5)
    with pytest.raises(ValidationError, match="exporter"):
        TracingConfig(exporter="jaeger")


def test_otlp_without_its_exporter_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(config_module, "OTLP_MODULE", "opentelemetry.exporter.no_such_exporter")
    with pytest.raises(ValidationError, match="pip install opentelemetry-exporter-otlp-proto-http"):
        TracingConfig(exporter="otlp")
    monkeypatch.setattr(config_module, "OTLP_MODULE", "json")  # an importable module stands in for it
    assert TracingConfig(exporter="otlp", endpoint="http://127.0.0.1:4318/v1/traces").endpoint


def test_tracing_is_set_from_the_environment(tmp_path, tiny_bundle, fake_llm_url) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url)
    settings = load_config(config, env={"RAGFOLIO_TRACING__EXPORTER": "console", "RAGFOLIO_TRACING__SAMPLE_RATE": "0.5"})
    assert settings.tracing == TracingConfig(exporter="console", sample_rate=0.5)
    assert load_config(config, env={"RAGFOLIO_TRACING__EXPORTER": "none"}).tracing.exporter == "none"


def test_recorded_times_longer_than_the_request_are_clipped_to_it() -> None:
    """Durations from another clock (or a batch's) never push a child outside its parent."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    RequestTrace(provider.get_tracer("test"), "/retrieve", "rid", num_docs=3).end(post_retrieval_response(3))
    request, names = one_trace(list(memory.get_finished_spans()), "/retrieve")  # checks the nesting
    assert request.end_time - request.start_time < 10_000_000  # shorter than the recorded 10 ms
    assert set(names) == {"ragfolio /retrieve", "route", "retrieve", "member a", "member b"}


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_completion_is_one_trace(traced, spans, stream) -> None:
    request = {"model": "ragfolio", "messages": [{"role": "user", "content": questions()[0]}], "l": 1,
               "stream": stream}
    response = traced.post("/v1/chat/completions", json=request)
    assert response.status_code == 200, response.text
    request_span, names = one_trace(request_spans(spans, response.headers["x-request-id"]), "/v1/chat/completions")
    members = [n for n in names if n.startswith("member ")]
    assert len(members) == 1 and {"route", "retrieve", "answer", "select"} <= set(names)
    assert f"llm answer:{members[0].removeprefix('member ')}" in names
    assert request_span.attributes["ragfolio.l"] == 1
