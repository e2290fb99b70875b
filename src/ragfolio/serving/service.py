"""The trained portfolio and router as a BentoML service: ``bentoml serve`` from the project root.

Endpoints (JSON): ``POST /retrieve``, ``POST /batch_retrieve``, ``POST /answer`` (``"stream": true``: server-sent
events as it is written, :mod:`ragfolio.serving.answer_stream`), ``GET /portfolio``,
OpenAI's ``GET /v1/models`` and ``POST /v1/chat/completions`` (``/answer`` in OpenAI's shapes,
:mod:`ragfolio.serving.openai_api`), plus BentoML's ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` (Prometheus). ``GET /`` is the
playground, an HTML page that calls these (:mod:`ragfolio.serving.playground`); it takes the place
of BentoML's Swagger UI. ``GET /docs.json`` is the OpenAPI document of every endpoint, with the limits
in force (:mod:`ragfolio.serving.openapi`); the routes beside BentoML's APIs are :mod:`ragfolio.serving.routes`.

The class only translates: requests are validated by :mod:`ragfolio.serving.schemas`, work is done
by :class:`ragfolio.serving.engine.ServingEngine` (core calls) in two thread pools, one for
retrieval and one for answering, so that slow ``/answer`` requests never hold up ``/retrieve``.
The queries of concurrent ``/retrieve`` and ``/batch_retrieve`` requests are gathered into batches
(:class:`ragfolio.core.batching.MicroBatcher`, settings ``batching``) that are encoded, routed and
retrieved together, whatever the router; the routed members run concurrently. The retrievals of
concurrent ``/answer`` requests are batched the same way (a batcher of their own, in the retrieval
threads), then each is answered in the answering threads. The embedded LLM runs in a process of
its own that the engine supervises (``llm_process``); readiness and retrieval never wait on it.

Errors: a body over ``max_body_bytes`` is a 413, one nesting deeper than ``max_json_depth`` a 400
and one without ``Content-Type: application/json`` a 415 (:mod:`ragfolio.serving.guard`, before
BentoML parses it); a bad request is a 400 whose ``detail`` names the field (``loc``) and the limit
(``msg``); past ``request_timeout_s`` / ``answer_timeout_s`` a 504; an LLM that cannot be reached
a 503 (and ``/retrieve`` keeps working); an LLM that rejects the request a 502; anything else a
500. No error body holds exception text, an upstream URL or reply: each carries the request id
(also the ``x-request-id`` header), and the log holds the detail under it. A member that fails or
times out is left out and the response says ``degraded: true`` with the reasons (timeout or
"failed", nothing more). Metrics: :mod:`ragfolio.serving.prometheus_metrics`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import bentoml
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response

from ragfolio.core.answering.conversation import Rewrite
from ragfolio.core.batching import MicroBatcher
from ragfolio.core.bundle import BundleIntegrityError, resolve_bundle, verify_bundle
from ragfolio.core.llm.chat import LLMRequestError, LLMUnavailableError
from ragfolio.core.system.routed_system import RoutedRetrieval
from ragfolio.serving.access import AccessControl, AccessPolicy, access_policy, current_policy
from ragfolio.serving.answer_stream import Written, event_stream, started_answer, token_events
from ragfolio.serving.config import load_config
from ragfolio.serving.engine import RetrievalItem, ServingEngine
from ragfolio.serving.guard import (
    INTERNAL_ERROR,
    RequestGuard,
    current_request_id,
    install_request_logging,
    service_setting,
)
from ragfolio.serving.live_documents import DocumentsAPI
from ragfolio.serving.openai_api import (
    ChatRequest,
    ChunkHead,
    OpenAIError,
    answer_events,
    chat_reply,
    completion_body,
    error_body,
    models_body,
    parse_chat_request,
)
from ragfolio.serving.openapi import openapi_document
from ragfolio.serving.prometheus_metrics import serving_metrics
from ragfolio.serving.routes import portfolio_app
from ragfolio.serving.schemas import (
    AnswerRequest,
    AnswerResponse,
    BatchRetrieveRequest,
    BatchRetrieveResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from ragfolio.serving.tracing import Tracing

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


def error(status: int, message: str, **extra: Any) -> JSONResponse:
    """A JSON error response ``{"error": message, ...}`` (the guard adds ``request_id``)."""
    return JSONResponse({"error": message, **extra}, status_code=status)


@dataclass(frozen=True)
class Failure:
    """Why a request got no answer: the status, the message, the fields ``/answer``'s error adds and
    a code (OpenAI's ``error.code``)."""

    status: int
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    code: str | None = None


def internal_error(endpoint: str) -> JSONResponse:
    """The 500 of an unexpected exception: logged with its traceback under the request id, not shown."""
    logger.exception("request %s: %s failed", current_request_id(), endpoint)
    return error(500, INTERNAL_ERROR)


@bentoml.asgi_app(portfolio_app, path="/")
@bentoml.service(name="ragfolio", workers=1, traffic={"timeout": 600, "max_concurrency": 256})
class RagfolioService:
    """Routes a query to l of the k portfolio members, retrieves with them concurrently, answers.

    The bundle is loaded and verified once, here; a file that differs from its recorded checksum
    stops the start-up with an error naming the file. Settings: :mod:`ragfolio.serving.config`.
    """

    def __init__(self) -> None:
        self.config = load_config(root=RagfolioService.working_dir)  # type: ignore[attr-defined]  # set by @bentoml.service
        install_request_logging()  # every log line of a request names its id
        self.access = access_policy(self.config)  # API keys and CORS (ragfolio.serving.access)
        try:
            self.engine = ServingEngine(self.config)
        except (BundleIntegrityError, FileNotFoundError) as exc:
            logger.error("refusing to start: %s", exc)
            raise
        self.engine.start_llm()  # returns at once: the LLM loads in its own process meanwhile
        self.tracing = Tracing.from_config(self.config.tracing, self.engine.num_docs)  # off: nothing set up
        if self.config.warm_up:
            self.engine.warm_up()
        batching = self.config.batching
        self._retrieve_pool = ThreadPoolExecutor(batching.concurrent_batches, thread_name_prefix="ragfolio-retrieve")
        self._answer_pool = ThreadPoolExecutor(self.config.answer_threads, thread_name_prefix="ragfolio-answer")
        self.documents = DocumentsAPI(self.engine.documents)  # POST, GET and DELETE /documents
        self.metrics = serving_metrics()
        self._batcher: MicroBatcher[RetrievalItem, RetrieveResponse] = MicroBatcher(
            lambda items: self.engine.retrieve_many(items),
            max_batch_size=batching.max_batch_size, max_wait_s=batching.max_wait_ms / 1000,
            max_concurrent=batching.concurrent_batches, executor=self._retrieve_pool,
            on_batch=self.metrics.retrieval_batch_size.observe,
        )
        self._answer_batcher: MicroBatcher[RetrievalItem, RoutedRetrieval] = MicroBatcher(
            lambda items: self.engine.route_many(items),
            max_batch_size=batching.max_batch_size, max_wait_s=batching.max_wait_ms / 1000,
            max_concurrent=batching.concurrent_batches, executor=self._retrieve_pool,
            on_batch=self.metrics.retrieval_batch_size.observe,
        )
        self._created = int(time.time())  # the model's "created" in /v1/models: when it was loaded
        self._openapi: dict[str, Any] | None = None
        self._ready = True

    @bentoml.on_deployment
    def check_bundle() -> None:  # a staticmethod hook
        """Verify the bundle once in ``bentoml serve``'s main process, before any worker starts.

        A mismatch then stops the command with the file's name; a worker that failed in
        ``__init__`` would instead be restarted by the server over and over.
        """
        root = RagfolioService.working_dir  # type: ignore[attr-defined]  # set by @bentoml.service
        config = load_config(root=root)
        verify_bundle(resolve_bundle(config.bundle))
        AccessPolicy.from_config(config)  # a missing or bad API key variable stops the command too

    def __is_ready__(self) -> bool:
        """``/readyz``: true once the bundle is loaded (and warmed up); the LLM is not waited for."""
        return getattr(self, "_ready", False)

    @bentoml.on_shutdown
    def shutdown(self) -> None:
        self._retrieve_pool.shutdown(wait=False, cancel_futures=True)
        self._answer_pool.shutdown(wait=False, cancel_futures=True)
        self.documents.close()  # an update in progress is logged and applied, or not begun
        self.engine.close()
        self.tracing.close()

    def _validate(self, model: type[M], **fields: Any) -> M:
        """Validate again with the run-time limits; a pydantic ValidationError becomes BentoML's 400."""
        return model.model_validate(fields, context={"limits": self.engine.limits})

    async def _in_pool(self, pool: ThreadPoolExecutor, timeout_s: float, call: Callable[[], Any]) -> Any:
        """``call()`` in ``pool``; raises TimeoutError past ``timeout_s`` (the thread runs on, unobserved)."""
        future = asyncio.get_running_loop().run_in_executor(pool, call)
        return await asyncio.wait_for(future, timeout_s)

    def _timeout(self, endpoint: str, message: str) -> JSONResponse:
        self._count_timeout(endpoint, message)
        return error(504, message)

    def _count_timeout(self, endpoint: str, message: str) -> None:
        logger.warning("request %s: %s: %s", current_request_id(), endpoint, message)
        self.metrics.request_timeouts.labels(endpoint=endpoint).inc()

    @bentoml.api(input_spec=RetrieveRequest, output_spec=RetrieveResponse)
    async def retrieve(
        self, query: str, l: int | None = None, num_docs: int | None = None,  # noqa: E741 - the API's name
        filter: dict[str, Any] | None = None,  # noqa: A002 - the API's name
    ) -> RetrieveResponse | JSONResponse:
        """Route the query to l members and return each one's passages and the merged list (only
        passages whose metadata match ``filter``, when given)."""
        trace = self.tracing.start("/retrieve", current_request_id())  # the request's spans (tracing.py)
        request = self._validate(RetrieveRequest, query=query, l=l, num_docs=num_docs, filter=filter)
        item = self.engine.item(request.query, request.l, request.num_docs, current_request_id(), request.filter)
        try:
            response = await asyncio.wait_for(self._batcher.submit(item), self.config.request_timeout_s)
        except TimeoutError:
            return trace.end(self._timeout("/retrieve", f"retrieval took longer than request_timeout_s={self.config.request_timeout_s}"))
        except Exception:  # e.g. an index that cannot be read: a 500 that names nothing of it
            return trace.end(internal_error("/retrieve"))
        self.metrics.observe_retrieval("/retrieve", response.members, response.degraded)
        return trace.end(response)

    @bentoml.api(input_spec=BatchRetrieveRequest, output_spec=BatchRetrieveResponse)
    async def batch_retrieve(
        self, queries: list[str], l: int | None = None, num_docs: int | None = None,  # noqa: E741
        filter: dict[str, Any] | None = None,  # noqa: A002 - the API's name
    ) -> BatchRetrieveResponse | JSONResponse:
        """``/retrieve`` for each query (at most max_batch), batched with any concurrent ones; in order."""
        trace = self.tracing.start("/batch_retrieve", rid := current_request_id())
        request = self._validate(BatchRetrieveRequest, queries=queries, l=l, num_docs=num_docs, filter=filter)
        self.metrics.batch_size.labels(endpoint="/batch_retrieve").observe(len(request.queries))
        loop = asyncio.get_running_loop()
        start = loop.time()
        items = [self.engine.item(q, request.l, request.num_docs, rid, request.filter) for q in request.queries]
        try:
            results = await asyncio.wait_for(self._batcher.submit_many(items), self.config.request_timeout_s)
        except TimeoutError:
            return trace.end(self._timeout("/batch_retrieve",
                                           f"the batch took longer than request_timeout_s={self.config.request_timeout_s}"))
        except Exception:
            return trace.end(internal_error("/batch_retrieve"))
        for result in results:
            self.metrics.observe_retrieval("/batch_retrieve", result.members, result.degraded)
        return trace.end(BatchRetrieveResponse(results=results, degraded=any(r.degraded for r in results),
                                               latency_ms=1000 * (loop.time() - start)))

    @bentoml.api(input_spec=AnswerRequest, output_spec=AnswerResponse)
    async def answer(
        self, query: str, l: int | None = None, stream: bool = False,  # noqa: E741
        filter: dict[str, Any] | None = None,  # noqa: A002 - the API's name
    ) -> AnswerResponse | Response:
        """Retrieve with l routed members, answer from each member's passages, select one answer
        (``stream``: as server-sent events while it is written, :meth:`_answer_events`)."""
        request = self._validate(AnswerRequest, query=query, l=l, stream=stream, filter=filter)
        if request.stream:
            return await self._answer_events(request)
        result = await self._answered("/answer", request)
        return error(result.status, result.message, **result.extra) if isinstance(result, Failure) else result

    async def _answered(self, endpoint: str, request: AnswerRequest,
                        rewrite: Rewrite | None = None) -> AnswerResponse | Failure:
        """The answer to a validated request, or why there is none (``/answer``, OpenAI's chat).

        LLM errors are logged under the request id with their cause (which names the endpoint's
        URL and may quote its reply); the failure names only the LLM's kind. An LLM process that
        is down, restarting or hung is a 503 like an unreachable endpoint.
        """
        trace = self.tracing.start(endpoint, rid := current_request_id())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.answer_timeout_s
        try:
            item = self.engine.item(request.query, request.l, request_id=rid, where=request.filter)
            retrieval = trace.retrieved(await self._retrieval(item))
            call = functools.partial(self.engine.answer, item, retrieval=retrieval, rewrite=rewrite)
            response: AnswerResponse = await self._in_pool(self._answer_pool, max(deadline - loop.time(), 1e-3), call)
        except Exception as exc:
            return trace.end(self._failure(endpoint, exc))
        self.metrics.observe_retrieval(endpoint, response.members, response.degraded)
        return trace.end(response)

    async def _retrieval(self, item: RetrievalItem) -> RoutedRetrieval:
        """The item's routed retrieval, batched with concurrent answering requests' retrievals."""
        return await asyncio.wait_for(self._answer_batcher.submit(item), self.config.answer_timeout_s)

    def _failure(self, endpoint: str, exc: Exception) -> Failure:
        """Why an answer failed (see :meth:`_answered`), logged under the request id and counted."""
        rid, kind = current_request_id(), self.engine.reader.llm.get("kind")
        if isinstance(exc, TimeoutError):
            message = f"answering took longer than answer_timeout_s={self.config.answer_timeout_s}"
            self._count_timeout(endpoint, message)
            return Failure(504, message, code="timeout")
        if isinstance(exc, LLMUnavailableError | ImportError):
            logger.warning("request %s: %s: the LLM is unavailable: %s: %s", rid, endpoint, type(exc).__name__, exc)
            self.metrics.llm_errors.labels(error="unavailable").inc()
            return Failure(503, "the LLM is unavailable", {"llm": kind, "hint": "/retrieve still works"},
                           "llm_unavailable")
        if isinstance(exc, LLMRequestError):
            logger.warning("request %s: %s: the LLM rejected the request: %s", rid, endpoint, exc)
            self.metrics.llm_errors.labels(error="rejected").inc()
            return Failure(502, "the LLM rejected the request", {"llm": kind}, "llm_rejected")
        logger.error("request %s: %s failed", rid, endpoint, exc_info=exc)
        return Failure(500, INTERNAL_ERROR, code="internal_error")

    def openapi(self) -> dict[str, Any]:
        """``GET /docs.json``: BentoML's document with every route and the limits in force
        (:mod:`ragfolio.serving.openapi`), made once."""
        if self._openapi is None:
            spec = RagfolioService.openapi_spec.asdict()  # type: ignore[attr-defined]  # the bentoml.Service
            self._openapi = openapi_document(spec, self.engine.limits, keys=not self.access.open)
        return self._openapi

    def models(self) -> dict[str, Any]:
        """``GET /v1/models``: the one model, ``ragfolio``, with the bundle's name and version."""
        return models_body(self._created, self.engine.bundle.name, self.engine.bundle.version)

    async def chat_completions(self, body: bytes) -> Response:
        """``POST /v1/chat/completions``: ``/answer`` in OpenAI's request, reply, chunk and error shapes.

        The question is the last user message, or its standalone rewrite (:meth:`_standalone`,
        :mod:`ragfolio.serving.openai_api`); a bad request is a 400 and a failed answer the status ``/answer``
        gives it, both as OpenAI's error object. ``stream: true``: server-sent events (:meth:`_chat_stream`).
        """
        try:
            chat = await self._standalone(parse_chat_request(body, self.engine.limits))
        except OpenAIError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        if chat.options.stream:
            return await self._chat_stream(chat)
        result = await self._answered("/v1/chat/completions", chat.answer, chat.rewrite)
        if isinstance(result, Failure):
            return JSONResponse(error_body(result.status, result.message, code=result.code), status_code=result.status)
        head = self._chunk_head()
        return JSONResponse(completion_body(chat_reply(result, chat.options, reply_id=head.id, created=head.created,
                                                       fingerprint=head.fingerprint, rewrite=chat.rewrite)))

    async def _standalone(self, chat: ChatRequest) -> ChatRequest:
        """``chat`` asking its follow-up as a standalone question (:meth:`ServingEngine.standalone`, in an
        answering thread) when it has earlier turns and ``chat.rewrite_followups``; as it is past the timeout."""
        settings, rid = self.config.chat, current_request_id()
        if chat.turns and settings.rewrite_followups:
            call = functools.partial(self.engine.standalone, chat.turns, chat.answer.query, rid)
            try:
                return chat.rewritten(await self._in_pool(self._answer_pool, settings.rewrite_timeout_s, call))
            except TimeoutError:
                logger.warning("request %s: the follow-up's rewrite took longer than chat.rewrite_timeout_s=%s; "
                               "answering the last message as it is", rid, settings.rewrite_timeout_s)
        return chat

    def _chunk_head(self) -> ChunkHead:
        bundle = self.engine.bundle
        return ChunkHead(f"chatcmpl-{current_request_id() or uuid.uuid4().hex}", int(time.time()),
                         f"{bundle.name}-{bundle.version}")

    async def _chat_stream(self, chat: ChatRequest) -> Response:
        """A chat answer streamed as it is written (:meth:`_answer_stream`): a failure before the
        reader's first token (at l >= 2: the whole answer) is a status code, one after it
        (``answer_timeout_s`` included) a last chunk saying ``"error"``
        (:func:`ragfolio.serving.openai_api.answer_events`)."""
        endpoint = "/v1/chat/completions"
        written = await self._answer_stream(endpoint, chat.answer, chat.rewrite)
        if isinstance(written, Failure):
            return JSONResponse(error_body(written.status, written.message, code=written.code), status_code=written.status)

        def failed(exc: Exception) -> tuple[int, str, str | None]:
            failure = self._failure(endpoint, exc)
            return failure.status, failure.message, failure.code

        return event_stream(answer_events(self._chunk_head(), written, chat.options, failed, chat.rewrite))

    async def _answer_stream(self, endpoint: str, request: AnswerRequest,
                             rewrite: Rewrite | None = None) -> Written | Failure:
        """The answer to a validated request as it is written, read in an answering thread
        (:func:`ragfolio.serving.answer_stream.started_answer`) once its first piece has come, or why
        none came. A client that goes away stops the answer at the reader's next token."""
        trace = self.tracing.start(endpoint, rid := current_request_id())
        deadline = asyncio.get_running_loop().time() + self.config.answer_timeout_s
        try:
            item = self.engine.item(request.query, request.l, request_id=rid, where=request.filter)
            return await started_answer(
                self._retrieval(item),
                lambda retrieval: self.engine.answer_stream(item, trace.retrieved(retrieval), rewrite),
                self._answer_pool, deadline,
                lambda response: self.metrics.observe_retrieval(endpoint, trace.end(response).members, response.degraded))
        except Exception as exc:
            return trace.end(self._failure(endpoint, exc))

    async def _answer_events(self, request: AnswerRequest) -> Response:
        """``/answer`` with ``stream``: server-sent events (:mod:`ragfolio.serving.answer_stream`); a
        failure before the first piece is its status code, one after it an ``error`` event."""
        written, rid = await self._answer_stream("/answer", request), current_request_id()
        if isinstance(written, Failure):
            return error(written.status, written.message, **written.extra)

        def failed(exc: Exception) -> dict[str, Any]:
            failure = self._failure("/answer", exc)
            return {"error": failure.message, **failure.extra, "status": failure.status, "request_id": rid}

        return event_stream(token_events(written, failed))


# Before BentoML reads a body: request ids, the body limits, error bodies without internals.
RagfolioService.add_asgi_middleware(RequestGuard, max_body_bytes=service_setting("max_body_bytes"),  # type: ignore[attr-defined]
                                    max_json_depth=service_setting("max_json_depth"))
# Inside the guard: CORS, then API keys (its refusals get the request id and the /v1/ error shape).
RagfolioService.add_asgi_middleware(AccessControl, policy=current_policy)  # type: ignore[attr-defined]
