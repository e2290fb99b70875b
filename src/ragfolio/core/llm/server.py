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
- ``GET /v1/models``.

Concurrent requests are gathered (:class:`~ragfolio.core.batching.MicroBatcher`, ``--max-batch``
prompts, ``--max-wait-ms``) and those of equal settings and similar length go to one ``generate``
call of the backend, which runs them as one batch
(:meth:`~ragfolio.core.llm.embedded.TransformersBackend.generate`); generation runs in one thread,
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
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragfolio.core.batching import MicroBatcher
from ragfolio.core.llm.backends import EMBEDDED_LLM, make_backend
from ragfolio.core.llm.chat import Completion, LLMRequestError, LocalModel, Messages, schema_of

logger = logging.getLogger(__name__)


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")  # OpenAI clients send fields this server does not use

    model: str | None = None
    max_tokens: int = Field(16, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    stop: str | list[str] | None = None
    response_format: dict[str, Any] | None = None  # {"type": "json_schema", "json_schema": {"schema": ...}}

    def stops(self) -> tuple[str, ...] | None:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop) if self.stop else None


class CompletionRequest(_Sampling):
    prompt: str = Field(max_length=200_000)


class ChatMessage(BaseModel):
    role: str
    content: str = Field(max_length=200_000)


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1, max_length=64)


@dataclass(frozen=True)
class Call:
    """One request to answer: a text ``prompt``, or chat ``messages`` rendered by the backend."""

    prompt: str | None
    messages: Messages | None
    max_tokens: int
    temperature: float
    stop: tuple[str, ...] | None
    json_schema: str | None = None  # the schema's canonical JSON (hashable), when the reply must be JSON


@dataclass(frozen=True)
class Outcome:
    """A call's completion, or why the backend refused it (a 400)."""

    completion: Completion | None
    refusal: str | None = None


# A batch pads every prompt to its longest, and padding costs as much as prompt tokens; so prompts
# are batched only with others at most this much longer (the answerer's short selector prompts
# apart from its answer prompts, which hold passages).
MAX_LENGTH_RATIO = 1.5


def answer_calls(backend: LocalModel, calls: list[Call]) -> list[Outcome]:
    """Answer a batch of calls: one ``generate`` per group of equal settings and similar length.

    Chat calls whose model has an engine-side chat template (no text prompt) are completed one
    by one. A refused group is retried call by call, so one over-long prompt fails alone.
    """
    out: dict[int, Outcome] = {}
    groups: dict[tuple[int, float, tuple[str, ...] | None, str | None], list[tuple[int, str]]] = {}
    for i, call in enumerate(calls):
        if call.messages is None:
            prompt, stop = call.prompt, call.stop
        else:
            prompt, stop = backend.prompt(call.messages), call.stop or _tuple(backend.default_stop)
        if prompt is None:  # the engine applies a chat template of its own
            try:
                out[i] = Outcome(backend.complete(call.messages or [], max_tokens=call.max_tokens,
                                                  temperature=call.temperature, json_schema=_schema(call)))
            except LLMRequestError as exc:
                out[i] = Outcome(None, str(exc))
            continue
        groups.setdefault((call.max_tokens, call.temperature, stop, call.json_schema), []).append((i, prompt))
    batches = [(key, part) for key, members in groups.items() for part in _by_length(members)]
    for (max_tokens, temperature, stop, schema), members in batches:
        settings: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "stop": stop,
                                    "json_schema": None if schema is None else json.loads(schema)}
        prompts = [prompt for _, prompt in members]
        try:
            outcomes = [Outcome(c) for c in backend.generate(prompts, **settings)]
        except LLMRequestError as exc:
            outcomes = ([_generate_one(backend, p, settings) for p in prompts] if len(prompts) > 1
                        else [Outcome(None, str(exc))])
        out.update((i, outcome) for (i, _), outcome in zip(members, outcomes, strict=True))
    return [out[i] for i in range(len(calls))]


def _by_length(members: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """``members`` (index, prompt) in runs of similar length: each at most :data:`MAX_LENGTH_RATIO`
    times its shortest (characters stand in for tokens)."""
    runs: list[list[tuple[int, str]]] = []
    for member in sorted(members, key=lambda m: len(m[1])):
        if runs and len(member[1]) <= MAX_LENGTH_RATIO * max(len(runs[-1][0][1]), 1):
            runs[-1].append(member)
        else:
            runs.append([member])
    return runs


def _generate_one(backend: LocalModel, prompt: str, settings: dict[str, Any]) -> Outcome:
    try:
        return Outcome(backend.generate([prompt], **settings)[0])
    except LLMRequestError as exc:
        return Outcome(None, str(exc))


def _schema(call: Call) -> dict[str, Any] | None:
    return None if call.json_schema is None else dict(json.loads(call.json_schema))


def _tuple(stop: list[str] | None) -> tuple[str, ...] | None:
    return tuple(stop) if stop else None


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
                    "calls": stats.items}
            return JSONResponse(body, status_code=200 if self.loaded else 503)

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": self.model_name, "object": "model"}]})

        async def answer(request: Request, chat: bool) -> JSONResponse:
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
            try:
                outcome = await self.batcher.submit(call)
            except Exception:
                logger.exception("generation failed")
                return error(500, "generation failed", "server_error")
            if outcome.completion is None:
                return error(400, outcome.refusal or "refused")
            return JSONResponse(self._reply(outcome.completion, call, chat))

        async def completions(request: Request) -> JSONResponse:
            return await answer(request, chat=False)

        async def chat_completions(request: Request) -> JSONResponse:
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

    def _reply(self, completion: Completion, call: Call, chat: bool) -> dict[str, Any]:
        finish = "length" if completion.completion_tokens >= call.max_tokens else "stop"
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": completion.text}
        else:
            choice["text"] = completion.text
        return {
            "id": f"cmpl-{time.time_ns():x}", "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": self.model_name, "choices": [choice],
            "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                      "total_tokens": completion.tokens},
        }


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
