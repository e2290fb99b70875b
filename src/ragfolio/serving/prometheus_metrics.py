"""The service's own Prometheus metrics, shown on BentoML's ``/metrics`` next to BentoML's.

=========================================  =========  ==================  ======================================
metric                                     type       labels              counts
=========================================  =========  ==================  ======================================
``ragfolio_member_latency_seconds``        histogram  member              a routed member's retrieval time
``ragfolio_router_choices_total``          counter    member              queries the router sent to the member
``ragfolio_member_timeouts_total``         counter    member              runs past ``member_timeout_s``
``ragfolio_member_failures_total``         counter    member              runs that raised
``ragfolio_degraded_total``                counter    endpoint            responses with ``degraded: true``
``ragfolio_request_timeouts_total``        counter    endpoint            504s (past the request's deadline)
``ragfolio_llm_errors_total``              counter    error               ``/answer``'s 503s (unavailable), 502s (rejected)
``ragfolio_batch_size``                    histogram  endpoint            queries per ``/batch_retrieve`` request
``ragfolio_retrieval_batch_size``          histogram                      queries encoded and routed together
=========================================  =========  ==================  ======================================

Member labels are the members' names, so there are at most k of each. The metrics are made on
first use, in the worker: BentoML sets ``PROMETHEUS_MULTIPROC_DIR`` there after this module is
imported, and ``prometheus_client`` picks its multiprocess mode when it is imported (hence also
``prometheus_client`` directly: ``bentoml.metrics`` is its deprecated alias in BentoML 1.4).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ragfolio.serving.schemas import MemberResult

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class ServingMetrics:
    """The metric objects (``prometheus_client`` Counter and Histogram); see the module docstring."""

    member_latency: Any
    router_choices: Any
    member_timeouts: Any
    member_failures: Any
    degraded: Any
    request_timeouts: Any
    llm_errors: Any
    batch_size: Any
    retrieval_batch_size: Any

    def observe_retrieval(self, endpoint: str, members: list[MemberResult], degraded: bool) -> None:
        """Count one query's routing, each routed member's latency and failure, and degradation."""
        for member in members:
            self.router_choices.labels(member=member.name).inc()
            self.member_latency.labels(member=member.name).observe(member.latency_ms / 1000)
            if member.error is not None:
                failed = self.member_timeouts if member.error.startswith("timeout") else self.member_failures
                failed.labels(member=member.name).inc()
        if degraded:
            self.degraded.labels(endpoint=endpoint).inc()


@functools.cache
def serving_metrics() -> ServingMetrics:
    """The process's metrics, registered on the first call (a second registration would fail)."""
    from prometheus_client import Counter, Histogram

    return ServingMetrics(
        member_latency=Histogram("ragfolio_member_latency_seconds", "Retrieval time of a routed member",
                                 ["member"], buckets=LATENCY_BUCKETS_S),
        router_choices=Counter("ragfolio_router_choices", "Queries the router sent to a member", ["member"]),
        member_timeouts=Counter("ragfolio_member_timeouts", "Member runs past member_timeout_s", ["member"]),
        member_failures=Counter("ragfolio_member_failures", "Member runs that raised", ["member"]),
        degraded=Counter("ragfolio_degraded", "Responses with degraded: true", ["endpoint"]),
        request_timeouts=Counter("ragfolio_request_timeouts", "Requests past their deadline (504)", ["endpoint"]),
        llm_errors=Counter("ragfolio_llm_errors", "LLM unavailable (503) or rejecting (502) on /answer", ["error"]),
        batch_size=Histogram("ragfolio_batch_size", "Queries per batch request", ["endpoint"],
                             buckets=BATCH_BUCKETS),
        retrieval_batch_size=Histogram("ragfolio_retrieval_batch_size",
                                       "Queries encoded, routed and retrieved together (all requests)",
                                       buckets=BATCH_BUCKETS),
    )
