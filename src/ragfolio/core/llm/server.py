"""An in-process LLM backend as its own process: a small OpenAI-compatible HTTP server.

::

    python -m ragfolio.core.llm.server --port 8081            # the embedded reader (llama.cpp)
    python -m ragfolio.core.llm.server --port 8081 --backend '{"kind": "transformers", "model_path": "m/"}'

The service starts and supervises it (:mod:`ragfolio.core.llm.process`), so that a crash or a hang
of the model takes down only this process; anything that speaks the OpenAI API can use it too
(:class:`~ragfolio.core.llm.chat.OpenAICompatibleClient`, ``llm.kind: openai``). Endpoints:

- ``GET /health``: ``{"status": "ok", ...}`` once the model is loaded (503 ``"loading"`` before),
  with ``busy_s``, how long the generation under way has run (a supervisor kills a hung one), and
  the ``batches`` generated and ``calls`` answered so far.
- ``POST /v1/completions``: ``{"prompt": str, "max_tokens": 16, "temperature": 0, "stop": [...]}``.
- ``POST /v1/chat/completions``: ``{"messages": [...], "max_tokens": 16, "temperature": 0, "stop": [...],
  "response_format": {"type": "json_schema", "json_schema": {"schema": {...}}}}``; the messages
  become the backend's prompt (its chat template, or plain text for a base model), and a
  llama.cpp backend's reply is JSON of the schema (``/v1/completions`` takes it too).
- Either POST with ``"stream": true``: server-sent events in OpenAI's chunk format
  (``chat.completion.chunk`` with ``delta.content``, or ``text_completion`` with ``text``) as the
  model generates (a backend with ``stream_text``, llama.cpp; another sends its whole completion
  as one chunk), a chunk with ``finish_reason``, the usage chunk when
  ``stream_options.include_usage``, then ``data: [DONE]``. A refused prompt is still a 400 (the
  response starts with the first piece); a failure after that ends the stream with an
  ``{"error": ...}`` event. A streamed call runs alone in the generation thread, not batched; a
  client that goes away stops its generation at the next token.
- ``GET /v1/models``.

Either POST also takes ``max_completion_tokens``, OpenAI's newer name for ``max_tokens`` (which
langchain-openai 1.x sends instead), and it wins when both are given; and ``logprobs``
(``true`` for chat, a count for ``/v1/completions``): the choice then carries each generated
token's log-probability in OpenAI's shape (:func:`~ragfolio.core.llm.logprobs.openai_logprobs`:
``{"content": [{"token", "logprob", ...}]}``, or the legacy ``tokens``/``token_logprobs``; no
alternatives), ``null`` from a backend that records none. A stream sends them in its last chunk.

Concurrent requests are gathered (:class:`~ragfolio.core.batching.MicroBatcher`, ``--max-batch``
prompts, ``--max-wait-ms``) and those of equal settings and similar length go to one ``generate``
call of the backend, which runs them as one batch
(:func:`~ragfolio.core.llm.local_calls.answer_calls`,
:meth:`~ragfolio.core.llm.embedded.TransformersBackend.generate`); generation runs in one thread,
one batch at a time. A bad request is a 400, a prompt longer than the context a 400 naming its
length; the server listens on loopback by default and takes no credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragfolio.core.batching import MicroBatcher
from ragfolio.core.llm.backend_config import EMBEDDED_LLM
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.llm.chat import Completion, LLMRequestError, LocalModel, schema_of
from ragfolio.core.llm.local_calls import Call, Outcome, answer_calls, stream_call
from ragfolio.core.llm.logprobs import openai_logprobs

logger = logging.getLogger(__name__)


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")  # OpenAI clients send fields this server does not use

    model: str | None = None
    max_tokens: int = Field(16, ge=1, le=4096)
    # OpenAI's newer name for the limit, which langchain-openai 1.x sends instead: it wins when given
    max_completion_tokens: int | None = Field(None, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    stop: str | list[str] | None = None
    response_format: dict[str, Any] | None = None  # {"type": "json_schema", "json_schema": {"schema": ...}}
    stream: bool = False
    stream_options: dict[str, Any] | None = None  # {"include_usage": true}

    @model_validator(mode="after")
    def _newer_limit(self) -> _Sampling:
        if self.max_completion_tokens is not None:
            self.max_tokens = self.max_completion_tokens
        return self

    def stops(self) -> tuple[str, ...] | None:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop) if self.stop else None

    def wants_logprobs(self) -> bool:
        """Whether the reply carries the tokens' logprobs (each request kind reads its own field)."""
        return False


class CompletionRequest(_Sampling):
    prompt: str = Field(max_length=200_000)
    logprobs: int | None = Field(None, ge=0)  # the legacy API's alternatives per token (none are given)

    def wants_logprobs(self) -> bool:
        return self.logprobs is not None


class ChatMessage(BaseModel):
    role: str
    content: str = Field(max_length=200_000)


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1, max_length=64)
    logprobs: bool = False

    def wants_logprobs(self) -> bool:
        return self.logprobs


class LLMServer:
    """The server's state: the backend, its batcher and the generation thread.

    Args:
        backend: The local backend (loaded when the server starts).
        model_name: Reported as ``model`` in replies and ``/v1/models``.
        max_batch: Most prompts generated together.
        max_wait_ms: Longest wait of a first request for others to join its batch.
    """

    def __init__(self, backend: LocalModel, *, model_name: str, max_batch: int = 4, max_wait_ms: float = 5.0) -> None:
        self.backend, self.model_name = backend, model_name
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="llm-generate")
        self.batcher: MicroBatcher[Call, Outcome] = MicroBatcher(
            self._process, max_batch_size=max_batch, max_wait_s=max_wait_ms / 1000, executor=self.executor)
        self.loaded = False
        self.streamed = 0  # streamed calls answered (each alone, outside the batches)
        self._busy_since: float | None = None

    def _process(self, calls: list[Call]) -> list[Outcome]:
        self._busy_since = time.monotonic()
        try:
            return answer_calls(self.backend, calls)
        finally:
            self._busy_since = None

    def load(self) -> None:
        start = time.perf_counter()
        self.backend.load()
        self.loaded = True
        logger.info("model loaded in %.1f s; serving", time.perf_counter() - start)

    def _stream(self, call: Call, put: Callable[[str, Any], None], cancel: threading.Event) -> None:
        """Generate ``call`` in the generation thread, handing on ``("piece", text)`` as they come,
        then ``("end", Completion)``; or ``("refused", why)`` before any piece (a 400), or
        ``("failed", why)``. Stops at the next piece once ``cancel`` is set (the client is gone)."""
        self._busy_since = time.monotonic()
        stream = stream_call(self.backend, call)
        said = False
        try:
            while not cancel.is_set():
                try:
                    piece = next(stream)
                except StopIteration as end:
                    self.streamed += 1
                    put("end", end.value)
                    return
                said = True
                put("piece", piece)
        except LLMRequestError as exc:
            put("failed" if said else "refused", str(exc))
        except Exception:
            logger.exception("generation failed")
            put("failed", "generation failed")
        finally:
            stream.close()
            self._busy_since = None

    async def _streamed(self, call: Call, chat: bool, include_usage: bool, logprobs: bool) -> Any:
        """The response of a ``stream: true`` call (see the module docstring)."""
        from starlette.responses import JSONResponse, StreamingResponse

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()

        def put(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the event loop is gone: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        loop.run_in_executor(self.executor, self._stream, call, put, cancel)
        kind, value = await queue.get()
        if kind in ("refused", "failed"):
            status, error_type = (400, "invalid_request_error") if kind == "refused" else (500, "server_error")
            return JSONResponse({"error": {"message": value, "type": error_type}}, status_code=status)
        head = {"id": f"cmpl-{time.time_ns():x}", "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": self.model_name}

        def event(body: dict[str, Any]) -> str:
            return f"data: {json.dumps({**head, **body})}\n\n"

        # text None: the last chunk, with no text (and the logprobs, when asked for)
        def chunk(text: str | None, finish_reason: str | None = None, scored: dict[str, Any] | None = None) -> str:
            said = ({"delta": {} if text is None else {"content": text}} if chat else {"text": text or ""})
            return event({"choices": [{"index": 0, **said, "logprobs": scored, "finish_reason": finish_reason}]})

        async def events() -> AsyncIterator[str]:
            nonlocal kind, value
            try:
                if chat:
                    yield event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                              "finish_reason": None}]})
                while kind == "piece":
                    yield chunk(value)
                    kind, value = await queue.get()
                if kind == "end":
                    completion: Completion = value
                    yield chunk(None, "length" if completion.completion_tokens >= call.max_tokens else "stop",
                                openai_logprobs(completion.logprobs, chat) if logprobs else None)
                    if include_usage:
                        yield event({"choices": [], "usage": _usage(completion)})
                else:
                    yield f"data: {json.dumps({'error': {'message': value, 'type': 'server_error'}})}\n\n"
                yield "data: [DONE]\n\n"
            finally:
                cancel.set()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    def busy_s(self) -> float:
        since = self._busy_since
        return 0.0 if since is None else time.monotonic() - since

    def app(self) -> Any:
        """The Starlette app (imported here: the rest of ragfolio.core does not need Starlette)."""
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
            return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)

        async def health(request: Request) -> JSONResponse:
            stats = self.batcher.stats()
            body = {"status": "ok" if self.loaded else "loading", "model": self.model_name,
                    "busy_s": round(self.busy_s(), 3), "pid": os.getpid(), "batches": stats.batches,
                    "calls": stats.items + self.streamed}
            return JSONResponse(body, status_code=200 if self.loaded else 503)

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": self.model_name, "object": "model"}]})

        async def answer(request: Request, chat: bool) -> Any:
            if not self.loaded:
                return error(503, "the model is loading", "unavailable")
            try:
                payload = json.loads(await request.body())
                parsed: _Sampling = (ChatRequest if chat else CompletionRequest).model_validate(payload)
            except (ValueError, ValidationError) as exc:
                return error(400, f"invalid request: {exc}")
            messages = [m.model_dump() for m in parsed.messages] if isinstance(parsed, ChatRequest) else None
            prompt = parsed.prompt if isinstance(parsed, CompletionRequest) else None
            schema = schema_of(parsed.response_format)
            call = Call(prompt, messages, parsed.max_tokens, parsed.temperature, parsed.stops(),
                        None if schema is None else json.dumps(schema, sort_keys=True))
            if parsed.stream:
                return await self._streamed(call, chat, bool((parsed.stream_options or {}).get("include_usage")),
                                            parsed.wants_logprobs())
            try:
                outcome = await self.batcher.submit(call)
            except Exception:
                logger.exception("generation failed")
                return error(500, "generation failed", "server_error")
            if outcome.completion is None:
                return error(400, outcome.refusal or "refused")
            return JSONResponse(self._reply(outcome.completion, call, chat, parsed.wants_logprobs()))

        async def completions(request: Request) -> Any:
            return await answer(request, chat=False)

        async def chat_completions(request: Request) -> Any:
            return await answer(request, chat=True)

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            # Load in the generation thread, so /health answers ("loading") meanwhile.
            loading = asyncio.get_running_loop().run_in_executor(self.executor, self.load)
            loading.add_done_callback(_exit_if_failed)
            yield
            self.executor.shutdown(wait=False, cancel_futures=True)

        return Starlette(lifespan=lifespan, routes=[
            Route("/health", health), Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        ])

    def _reply(self, completion: Completion, call: Call, chat: bool, logprobs: bool) -> dict[str, Any]:
        finish = "length" if completion.completion_tokens >= call.max_tokens else "stop"
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish,
                                  "logprobs": openai_logprobs(completion.logprobs, chat) if logprobs else None}
        if chat:
            choice["message"] = {"role": "assistant", "content": completion.text}
        else:
            choice["text"] = completion.text
        return {
            "id": f"cmpl-{time.time_ns():x}", "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": self.model_name, "choices": [choice],
            "usage": _usage(completion),
        }


def _usage(completion: Completion) -> dict[str, int]:
    return {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "total_tokens": completion.tokens}


def _exit_if_failed(future: Any) -> None:
    """A model that cannot load ends the process (exit status 3); its supervisor decides what next."""
    if future.cancelled() or future.exception() is None:
        return
    logger.error("the model did not load: %s: %s", type(future.exception()).__name__, future.exception())
    os._exit(3)


async def _watch_parent(parent_pid: int, server: Any) -> None:
    """Stop the server once the process that started it is gone (so no model outlives its service)."""
    while not server.should_exit:
        if os.getppid() != parent_pid:
            logger.warning("parent process %d is gone; stopping", parent_pid)
            server.should_exit = True
            return
        await asyncio.sleep(1.0)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible server of an in-process LLM backend")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend", default=json.dumps(EMBEDDED_LLM),
                        help="a make_backend config as JSON, of kind transformers or llama_cpp (default: the embedded model)")
    parser.add_argument("--model-name", default="embedded")
    parser.add_argument("--max-batch", type=int, default=4, help="prompts generated together, at most")
    parser.add_argument("--max-wait-ms", type=float, default=5.0, help="longest wait for a batch to fill")
    parser.add_argument("--parent-pid", type=int, help="stop when this process is gone")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [llm_server %(process)d] %(message)s")
    backend = make_backend(json.loads(args.backend))
    if not isinstance(backend, LocalModel):
        parser.error(f"--backend {args.backend}: only in-process kinds (transformers, llama_cpp) are served")
    import uvicorn

    server = LLMServer(backend, model_name=args.model_name, max_batch=args.max_batch, max_wait_ms=args.max_wait_ms)
    uv = uvicorn.Server(uvicorn.Config(server.app(), host=args.host, port=args.port, log_level="warning",
                                       access_log=False))

    async def serve() -> None:
        if args.parent_pid:
            watch = asyncio.create_task(_watch_parent(args.parent_pid, uv))
        await uv.serve()
        if args.parent_pid:
            watch.cancel()

    asyncio.run(serve())  # uvicorn stops gracefully on SIGINT and SIGTERM


if __name__ == "__main__":
    main()
