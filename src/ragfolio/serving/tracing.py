"""One trace per request: OpenTelemetry spans made from the timings the core already records.

The core stays free of tracing: it times every stage (:class:`~ragfolio.core.system.routed_system.RoutedRetrieval`'s
``route_ms`` and ``stages_ms``, each :class:`~ragfolio.core.retrieval.running.member_executor.MemberRun`'s
``latency_ms``, :class:`~ragfolio.core.answering.adaptive_rag.RAGAnswer`'s ``latency_ms`` and each LLM call's
:class:`~ragfolio.core.llm.chat.Completion`), and the service's responses carry those timings. When a
request ends, :meth:`RequestTrace.end` makes its spans at once, each with explicit start and end
times: the request's own clock (``time.time_ns()`` when the endpoint was entered, when ``/answer``'s
retrieval came back, when it returned) gives the anchors, the recorded durations the rest.

Spans (the tree is drawn in docs/serving.md, "Tracing"): the request (``ragfolio <endpoint>``),
``route``, ``retrieve`` with a ``member <name>`` per routed member, ``answer`` and ``select`` with an
``llm <call>`` per LLM call (``answer:<member>``, ``select``); ``/batch_retrieve`` has a ``query``
span per query above its ``route`` and ``retrieve``. Every span carries ``ragfolio.request_id``: the
response's ``x-request-id``, the ``request <id>:`` of the log lines.

How the spans are placed:

- a retrieval block (routing, then the shared parts, then the members, which start together when
  the shared parts are done) ends when the request's retrieval came back: for ``/retrieve`` it
  starts ``latency_ms.total`` (the batch's, response building included) before the request ended;
  for ``/answer`` it ends when the retrieval was handed back. A post-retrieval router runs the k
  members before it predicts, so there ``retrieve`` comes first and ``route`` after it; at a
  ``num_docs`` other than the bundle's the members' run at the bundle's depth is inside ``route``;
- the answering block (``answer`` then ``select``) ends when the request ended; its LLM calls run
  one after another in the order they were made, each from its stage's start;
- every span is clipped to its parent's interval, so children always lie within it. Times are the
  batch's when the query came in a batch (``ragfolio.batch_size``): a span shows how long the work
  took, its place is reconstructed.

A request's span is a child of BentoML's server span when that one is sampled (BentoML's own
``tracing`` settings, or an incoming sampled ``traceparent`` header), so the two land in one trace;
otherwise it starts a trace of its own, sampled at ``sample_rate``. No span holds a query string:
:class:`ragfolio.serving.access.AccessControl` drops it before BentoML's middleware records the
server span's URL (a playground ``?key=`` would otherwise be exported). Off (``exporter: none``, the
default) nothing is set up: no provider, no processor, no exporter, and each request costs a
method call that returns at once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from ragfolio.core.system.routed_system import RoutedRetrieval
from ragfolio.serving.config import OTLP_MODULE, OTLP_PACKAGE, TracingConfig
from ragfolio.serving.engine import REWRITE_CALL, public_error
from ragfolio.serving.schemas import AnswerResponse, BatchRetrieveResponse, RetrieveResponse

T = TypeVar("T")
REQUEST_ID = "ragfolio.request_id"
SELECTOR_CALLS = ("select", "answer:closed_book")  # the LLM calls made in the select stage


def ns(ms: float) -> int:
    """Milliseconds as whole nanoseconds (never negative)."""
    return max(0, round(ms * 1_000_000))


def _json_line(span: ReadableSpan) -> str:
    return span.to_json(indent=None) + "\n"


def span_processor(settings: TracingConfig) -> SpanProcessor:
    """The processor that sends the spans where ``settings.exporter`` says (batched, off the request path).

    Raises:
        ImportError: ``otlp`` without its exporter package (named in the message).
        ValueError: ``exporter`` is ``none``: there is nothing to export to.
    """
    if settings.exporter == "console":
        return BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr, formatter=_json_line))
    if settings.exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ImportError(f"tracing.exporter: otlp needs {OTLP_MODULE}: pip install {OTLP_PACKAGE}") from exc
        return BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.endpoint))
    raise ValueError(f"tracing.exporter={settings.exporter!r} exports nothing")


@dataclass(frozen=True)
class _Run:
    name: str
    ok: bool
    error: str | None
    latency_ms: float
    passages: int
    router_score: float | None


@dataclass(frozen=True)
class _Retrieval:
    """One query's routing and retrieval as recorded (milliseconds; the batch's)."""

    route_ms: float
    shared_ms: float
    members_ms: float
    stages: dict[str, float]
    runs: list[_Run]
    routed: bool
    batch_size: int

    @classmethod
    def of_response(cls, r: RetrieveResponse) -> _Retrieval:
        lat = r.latency_ms
        runs = [_Run(m.name, m.ok, m.error, m.latency_ms, len(m.passages), m.router_score) for m in r.members]
        return cls(lat.get("route", 0.0), lat.get("shared", 0.0), lat.get("members", 0.0), _stages(lat), runs,
                   r.routed, r.batch_size)

    @classmethod
    def of_routed(cls, r: RoutedRetrieval) -> _Retrieval:
        res = r.results
        runs = [_Run(run.name, run.ok, public_error(run.error), run.latency_ms, len(run.doc_ids), score)
                for run, score in zip(res.runs, r.router_scores, strict=True)]
        return cls(r.route_ms, res.shared_ms, res.latency_ms - res.shared_ms, dict(r.stages_ms), runs, r.routed,
                   r.batch_size)


def _stages(latency: Mapping[str, float]) -> dict[str, float]:
    return {k.removeprefix("stage."): v for k, v in latency.items() if k.startswith("stage.")}


def _numbers(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without None and NaN (an unrouted member's router score): OTel attributes must have a value."""
    return {k: v for k, v in values.items() if v is not None and not (isinstance(v, float) and v != v)}


class RequestTrace:
    """One request's spans, made when it ends (:meth:`end`); its clock starts when it is made."""

    def __init__(self, tracer: Tracer, endpoint: str, request_id: str | None, num_docs: int) -> None:
        self._tracer, self.endpoint, self.request_id, self._num_docs = tracer, endpoint, request_id, num_docs
        self._start = time.time_ns()
        self._retrieval: tuple[int, RoutedRetrieval] | None = None
        self._ended = False

    def retrieved(self, retrieval: RoutedRetrieval) -> RoutedRetrieval:
        """Note when the request's routed retrieval came back (``/answer``, the chat); returns it."""
        self._retrieval = (time.time_ns(), retrieval)
        return retrieval

    def end(self, result: T) -> T:
        """Make the request's spans from ``result`` (once) and return it.

        ``result``: a :class:`RetrieveResponse`, :class:`BatchRetrieveResponse` or :class:`AnswerResponse`,
        or what a failed request returns (an error response with ``status_code``, or the service's
        ``Failure`` with ``status`` and ``message``): the request span then has an error status.
        """
        if not self._ended:
            self._ended = True
            self._record(result, time.time_ns())
        return result

    # --- spans ----------------------------------------------------------------------------------
    def _span(self, name: str, parent: Span | Context, start: int, end: int, attributes: Mapping[str, Any],
              kind: SpanKind = SpanKind.INTERNAL, error: str | None = None) -> tuple[Span, int, int]:
        """A span over ``[start, end]`` (ns since the epoch), ended at once; returns it and its bounds."""
        context = parent if isinstance(parent, Context) else trace.set_span_in_context(parent)
        span = self._tracer.start_span(name, context, kind, {REQUEST_ID: self.request_id or "", **_numbers(attributes)},
                                       start_time=start)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=max(start, end))
        return span, start, max(start, end)

    def _child(self, name: str, parent: tuple[Span, int, int], start: int, length: int,
               attributes: Mapping[str, Any], **kw: Any) -> tuple[Span, int, int]:
        """A span of ``length`` ns from ``start``, clipped to ``parent``'s interval."""
        span, lo, hi = parent
        begin = min(max(start, lo), hi)
        return self._span(name, span, begin, min(begin + length, hi), attributes, **kw)

    def _record(self, result: Any, end: int) -> None:
        current = trace.get_current_span()  # BentoML's server span, when its tracing samples it
        joined = current.get_span_context().trace_flags.sampled
        parent: Span | Context = current if joined else Context()
        status = int(getattr(result, "status", None) or getattr(result, "status_code", None) or 200)
        error = str(getattr(result, "message", f"HTTP {status}")) if status >= 400 else None
        request = self._span(f"ragfolio {self.endpoint}", parent, self._start, end,
                             {"ragfolio.endpoint": self.endpoint, "http.response.status_code": status,
                              **self._summary(result)},
                             kind=SpanKind.INTERNAL if joined else SpanKind.SERVER, error=error)
        if not request[0].get_span_context().trace_flags.sampled:  # nor would its children be
            return
        if isinstance(result, RetrieveResponse):
            self._retrieval_spans(request, end - ns(result.latency_ms.get("total", 0.0)),
                                  _Retrieval.of_response(result), result.num_docs)
        elif isinstance(result, BatchRetrieveResponse):
            for i, r in enumerate(result.results):
                total = ns(r.latency_ms.get("total", 0.0))
                query = self._child("query", request, end - total, total, {"ragfolio.query_index": i, **self._summary(r)})
                self._retrieval_spans(query, query[1], _Retrieval.of_response(r), r.num_docs)
        elif self._retrieval is not None:  # /answer, the chat: answered, or failed after the retrieval
            retrieved_at, routed = self._retrieval
            recorded = _Retrieval.of_routed(routed)
            length = ns(recorded.route_ms + recorded.shared_ms + recorded.members_ms)
            self._retrieval_spans(request, retrieved_at - length, recorded, self._num_docs)  # answered at the bundle's
            if isinstance(result, AnswerResponse):
                self._answering_spans(request, retrieved_at, result)

    @staticmethod
    def _summary(result: Any) -> dict[str, Any]:
        """The request's (or a batch query's) attributes from its response."""
        if isinstance(result, BatchRetrieveResponse):
            return {"ragfolio.queries": len(result.results), "ragfolio.degraded": result.degraded}
        if not isinstance(result, RetrieveResponse | AnswerResponse):
            return {}
        out = {"ragfolio.l": result.l, "ragfolio.routed": result.routed, "ragfolio.degraded": result.degraded,
               "ragfolio.batch_size": result.batch_size, "ragfolio.passages": len(result.passages)}
        if isinstance(result, RetrieveResponse):
            return {**out, "ragfolio.num_docs": result.num_docs}
        return {**out, "ragfolio.chosen_member": result.chosen_member, "ragfolio.fallback": result.fallback,
                "ragfolio.tokens.prompt": result.tokens.prompt, "ragfolio.tokens.completion": result.tokens.completion}

    def _retrieval_spans(self, parent: tuple[Span, int, int], start: int, r: _Retrieval, num_docs: int) -> None:
        """``route`` and ``retrieve`` (with a ``member`` span per routed member) from ``start``."""
        route_len, retrieve_len = ns(r.route_ms), ns(r.shared_ms + r.members_ms)
        members_first = "members" in r.stages and num_docs == self._num_docs  # post-retrieval routing
        route_at, retrieve_at = (start + retrieve_len, start) if members_first else (start, start + route_len)
        self._child("route", parent, route_at, route_len,
                    {"ragfolio.routed": r.routed, "ragfolio.members": [run.name for run in r.runs],
                     "ragfolio.batch_size": r.batch_size,
                     **{f"ragfolio.stage.{name}_ms": ms for name, ms in r.stages.items()}})
        degraded = not all(run.ok for run in r.runs)
        retrieve = self._child("retrieve", parent, retrieve_at, retrieve_len,
                               {"ragfolio.num_docs": num_docs, "ragfolio.shared_ms": r.shared_ms,
                                "ragfolio.degraded": degraded})
        for rank, run in enumerate(r.runs):
            self._child(f"member {run.name}", retrieve, retrieve[1] + ns(r.shared_ms), ns(run.latency_ms),
                        {"ragfolio.member": run.name, "ragfolio.rank": rank, "ragfolio.ok": run.ok,
                         "ragfolio.error": run.error, "ragfolio.passages": run.passages,
                         "ragfolio.router_score": run.router_score, "ragfolio.latency_ms": run.latency_ms},
                        error=run.error)

    def _answering_spans(self, parent: tuple[Span, int, int], retrieved_at: int, a: AnswerResponse) -> None:
        """``answer`` then ``select``, ending with the request, each with its LLM calls one after another."""
        answer_len, select_len = ns(a.latency_ms.get("answer", 0.0)), ns(a.latency_ms.get("select", 0.0))
        start = max(parent[2] - answer_len - select_len, retrieved_at)
        stages = {
            "answer": self._child("answer", parent, start, answer_len, {"ragfolio.candidates": len(a.candidates)}),
            "select": self._child("select", parent, start + answer_len, select_len,
                                  {"ragfolio.candidates": len(a.candidates), "ragfolio.chosen": a.chosen,
                                   "ragfolio.chosen_member": a.chosen_member, "ragfolio.fallback": a.fallback}),
        }
        cursor = {name: stage[1] for name, stage in stages.items()}
        for call, usage in a.tokens.calls.items():  # in the order the calls were made
            if call == REWRITE_CALL:  # a chat follow-up's rewrite, made before the request's span began
                continue
            stage = "select" if call in SELECTOR_CALLS else "answer"
            length = ns(float(usage.get("latency_ms", 0.0)))
            member = call.removeprefix("answer:") if call.startswith("answer:") and call not in SELECTOR_CALLS else None
            self._child(f"llm {call}", stages[stage], cursor[stage], length,
                        {"ragfolio.llm.call": call, "ragfolio.member": member,
                         "ragfolio.tokens.prompt": usage.get("prompt"), "ragfolio.tokens.completion": usage.get("completion"),
                         "ragfolio.latency_ms": usage.get("latency_ms")}, kind=SpanKind.CLIENT)
            cursor[stage] += length


class Untraced(RequestTrace):
    """The trace of a request while tracing is off: nothing is recorded, every method returns at once."""

    def __init__(self) -> None:  # no tracer, no clock: nothing to set up
        pass

    def retrieved(self, retrieval: RoutedRetrieval) -> RoutedRetrieval:
        return retrieval

    def end(self, result: T) -> T:
        return result


class Tracing:
    """The service's tracer: one :class:`RequestTrace` per request (:meth:`start`).

    Args:
        provider: The tracer provider; None: tracing is off and :meth:`start` returns a trace that does nothing.
        num_docs: The bundle's ``num_docs`` (a request at another depth reruns its members after routing).
    """

    def __init__(self, provider: TracerProvider | None, num_docs: int) -> None:
        self.provider, self.num_docs = provider, num_docs
        self._tracer = None if provider is None else provider.get_tracer("ragfolio.serving")
        self._off = Untraced()

    @classmethod
    def from_config(cls, settings: TracingConfig, num_docs: int) -> Tracing:
        """Set up the exporter ``settings`` name (:func:`span_processor`); nothing at all when it is ``none``."""
        if settings.exporter == "none":
            return cls(None, num_docs)
        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(settings.sample_rate)),
                                  resource=Resource.create({SERVICE_NAME: "ragfolio"}))
        provider.add_span_processor(span_processor(settings))
        return cls(provider, num_docs)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def start(self, endpoint: str, request_id: str | None) -> RequestTrace:
        """A request's trace, its clock started now; the request id is set on BentoML's span too."""
        if self._tracer is None:
            return self._off
        current = trace.get_current_span()
        if current.is_recording():
            current.set_attribute(REQUEST_ID, request_id or "")
        return RequestTrace(self._tracer, endpoint, request_id, self.num_docs)

    def close(self) -> None:
        """Send the spans still buffered and stop the exporter."""
        if self.provider is not None:
            self.provider.shutdown()
