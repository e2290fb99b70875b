"""An answer as it is written, as server-sent events: ``POST /answer`` with ``"stream": true``.

:func:`started_answer` is the machinery every streamed answer uses (``/answer`` here, OpenAI's
chunks in :func:`ragfolio.serving.openai_api.answer_events`): the engine's blocking stream
(:meth:`ragfolio.serving.engine.ServingEngine.answer_stream`) is read in an answering thread by
:func:`iterate_in_thread`, each item within the request's deadline,
and the stream is handed over only once its first item has come, so that a failure until then
is still a status code. Closing it (a client gone) stops the reader at its next token.

:func:`token_events` shapes ``/answer``'s events, each ``event: <name>`` and one ``data:`` line
of JSON:

- ``token``, ``{"text": piece}``: the answer's text as it is produced. When one reader's answer
  is the answer (l = 1) these are the reader's tokens as it writes them (settled as the
  non-streamed answer is cleaned, see :mod:`ragfolio.core.answering.reply_stream`); at l >= 2
  the selected answer, in one piece, once the selector has chosen. The pieces join to the
  final ``answer``.
- ``answer``: the whole :class:`~ragfolio.serving.schemas.AnswerResponse`, the object ``/answer``
  returns without ``stream``. The last event.
- ``error``, instead of ``answer`` when the answer fails after the stream started: the body a
  non-streamed ``/answer`` would have got (``error``, and ``llm``, ``hint`` where it has them),
  with ``status`` (the status code it would have had) and ``request_id``. The last event.

Nothing here imports BentoML.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Executor
from typing import Any, TypeVar

from starlette.responses import StreamingResponse

from ragfolio.core.system.routed_system import RoutedRetrieval
from ragfolio.serving.schemas import AnswerResponse

T = TypeVar("T")
Written = AsyncGenerator[str | AnswerResponse, None]  # text pieces, then the response


async def started_answer(
    retrieval: Awaitable[RoutedRetrieval], stream: Callable[[RoutedRetrieval], Iterator[str | AnswerResponse]],
    executor: Executor, deadline: float, on_response: Callable[[AnswerResponse], None],
) -> Written:
    """The answer that ``stream(await retrieval)`` writes, read in a thread of ``executor``, once its
    first item has come.

    Args:
        retrieval: The request's routed retrieval.
        stream: The engine's answer as it is written: text pieces, then the response.
        executor: The answering threads.
        deadline: The event loop's time by which every item must have come (``answer_timeout_s``
            after the request started).
        on_response: Called with the response as it passes (metrics).

    Raises:
        Exception: What came instead of the first item: ``TimeoutError`` past ``deadline``, the
            LLM's errors, ... (a later one is raised by the returned generator).
    """
    items = _written(retrieval, stream, executor, deadline, on_response)
    try:
        first = await anext(items)
    except BaseException:
        await items.aclose()
        raise
    return _chained(first, items)


async def _written(
    retrieval: Awaitable[RoutedRetrieval], stream: Callable[[RoutedRetrieval], Iterator[str | AnswerResponse]],
    executor: Executor, deadline: float, on_response: Callable[[AnswerResponse], None],
) -> Written:
    loop = asyncio.get_running_loop()
    pieces = iterate_in_thread(stream(await retrieval), executor)
    try:
        while True:
            try:
                item = await asyncio.wait_for(anext(pieces), max(deadline - loop.time(), 1e-3))
            except StopAsyncIteration:
                return
            if isinstance(item, AnswerResponse):
                on_response(item)
            yield item
    finally:
        await pieces.aclose()  # stops the answering thread at its next item


async def iterate_in_thread(items: Iterator[T], executor: Executor) -> AsyncGenerator[T, None]:
    """``items`` (a blocking iterator) read in a thread of ``executor``, handed on as they come.

    Its exception is raised here. Closing this iterator (a client gone, a deadline passed) stops
    the thread before it reads the next item, and closes ``items`` if it is a generator, so
    nothing more is computed for nobody.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = threading.Event()

    def put(kind: str, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is closed: nobody reads any more
            stop.set()

    def pump() -> None:
        try:
            while not stop.is_set():
                try:
                    item = next(items)
                except StopIteration:
                    put("end", None)
                    return
                put("item", item)
        except Exception as exc:  # handed to the reader, which raises it
            put("error", exc)
        finally:
            if callable(close := getattr(items, "close", None)):
                close()

    loop.run_in_executor(executor, pump)  # pump() catches everything: its future holds nothing to await
    try:
        while True:
            kind, value = await queue.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()  # the thread ends by itself, at its next item


async def _chained(first: T, rest: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    try:
        yield first
        async for item in rest:
            yield item
    finally:
        await rest.aclose()


async def token_events(answer: Written, failure: Callable[[Exception], dict[str, Any]]) -> AsyncGenerator[str, None]:
    """``/answer``'s server-sent events of ``answer`` (see the module docstring): a ``token`` per
    non-empty text piece, the rest of the response's answer as one more (all of it at l >= 2),
    then ``answer``; an exception from ``answer`` ends them with ``error``, whose body is
    ``failure(exc)``. ``answer`` is closed when this ends or is closed (a client gone)."""
    sent = ""
    try:
        async for item in answer:
            if isinstance(item, str):
                if item:  # an empty piece: the reader wrote what is not (yet) the answer
                    sent += item
                    yield event("token", {"text": item})
                continue
            if not item.answer.startswith(sent):
                raise RuntimeError(f"streamed {sent!r}, but the answer is {item.answer!r}")
            if rest := item.answer[len(sent):]:
                yield event("token", {"text": rest})
            yield f"event: answer\ndata: {item.model_dump_json()}\n\n"
            return
        raise RuntimeError("the answer ended without a response")
    except Exception as exc:  # a stream cannot change its status: it says so, then ends
        yield event("error", failure(exc))
    finally:
        await answer.aclose()


def event(name: str, data: dict[str, Any]) -> str:
    """One server-sent event: ``event: <name>`` and its data as one line of JSON."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def event_stream(events: AsyncIterator[str]) -> StreamingResponse:
    """The response that sends ``events`` as they come (``text/event-stream``, not cached)."""
    return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
