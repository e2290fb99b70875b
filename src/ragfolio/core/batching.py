"""Gather items submitted concurrently (by coroutines of one event loop) into batches for one function.

:class:`MicroBatcher` is dynamic batching, as model servers do it: the first item of a batch waits
at most ``max_wait_s`` for others, a batch holds at most ``max_batch_size`` items, and at most
``max_concurrent`` batches run at once (in ``executor``'s threads, since the function blocks). While
every slot is busy, new items queue up and leave together as the next batch, so the batches grow
with the load and a lone item waits only ``max_wait_s``.

Both the service's retrieval (query encoding, routing and members over a batch) and the embedded
LLM's server (one ``generate`` call for several prompts) use it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class BatchStats:
    """What a batcher has done so far: ``batches`` run and ``items`` in them (``items / batches``
    is the mean batch size)."""

    batches: int
    items: int


class MicroBatcher(Generic[T, R]):
    """Runs ``process`` over batches of the items that ``submit`` receives concurrently.

    Args:
        process: Blocking; given a list of items, returns one result per item, in order. An
            exception fails every item of the batch with it.
        max_batch_size: Most items in one batch.
        max_wait_s: Longest time the first item of a batch waits for more to arrive.
        max_concurrent: Batches processed at once.
        executor: Threads ``process`` runs in; None: the event loop's default executor.
        on_batch: Called with each batch's size before it is processed (e.g. a metric).

    Bound to the event loop of its first ``submit``; use one batcher per event loop.
    """

    def __init__(
        self,
        process: Callable[[list[T]], Sequence[R]],
        *,
        max_batch_size: int,
        max_wait_s: float,
        max_concurrent: int = 1,
        executor: Executor | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        if max_batch_size < 1 or max_concurrent < 1 or max_wait_s < 0:
            raise ValueError(f"max_batch_size={max_batch_size} and max_concurrent={max_concurrent} must be >= 1, "
                             f"max_wait_s={max_wait_s} >= 0")
        self.process, self.executor, self.on_batch = process, executor, on_batch
        self.max_batch_size, self.max_wait_s, self.max_concurrent = max_batch_size, max_wait_s, max_concurrent
        self._pending: list[tuple[T, asyncio.Future[R], float]] = []
        # Both bind to the event loop of their first use (Python >= 3.10), so they can be made here.
        self._arrived = asyncio.Event()
        self._slots = asyncio.Semaphore(max_concurrent)
        self._collector: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._batches = self._items = 0

    def stats(self) -> BatchStats:
        return BatchStats(self._batches, self._items)

    async def submit(self, item: T) -> R:
        """The result of ``item``, processed in a batch with whatever else arrives meanwhile."""
        return (await self.submit_many([item]))[0]

    async def submit_many(self, items: Sequence[T]) -> list[R]:
        """The results of ``items``, in order; they join the queue together (a batch may hold
        some of them with other callers' items)."""
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        futures: list[asyncio.Future[R]] = [loop.create_future() for _ in items]
        self._pending.extend((item, future, now) for item, future in zip(items, futures, strict=True))
        self._arrived.set()
        if self._collector is None or self._collector.done():
            self._collector = loop.create_task(self._collect())
        try:
            return list(await asyncio.gather(*futures))
        except BaseException:  # cancelled or failed: the others are not wanted any more
            for future in futures:
                future.cancel()
            raise

    async def _collect(self) -> None:
        """Form batches while items are pending: wait for a free slot, then for a full batch or
        the first item's deadline, then start the batch and go on."""
        while True:
            self._pending = [p for p in self._pending if not p[1].done()]  # cancelled while queued
            if not self._pending:
                return
            await self._slots.acquire()
            try:
                while len(self._pending) < self.max_batch_size:
                    wait = self._pending[0][2] + self.max_wait_s - time.monotonic() if self._pending else 0.0
                    if wait <= 0:
                        break
                    self._arrived.clear()
                    try:
                        await asyncio.wait_for(self._arrived.wait(), wait)
                    except TimeoutError:
                        break
                batch = [p for p in self._pending[: self.max_batch_size] if not p[1].done()]
                del self._pending[: self.max_batch_size]
            except BaseException:
                self._slots.release()
                raise
            if not batch:
                self._slots.release()
                continue
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[tuple[T, asyncio.Future[R], float]]) -> None:
        items = [item for item, _, _ in batch]
        self._batches += 1
        self._items += len(items)
        try:
            if self.on_batch is not None:
                self.on_batch(len(items))
            results = await asyncio.get_running_loop().run_in_executor(self.executor, self.process, items)
            if len(results) != len(items):
                raise RuntimeError(f"process returned {len(results)} results for {len(items)} items")
        except Exception as exc:  # every item of the batch fails with it; the batcher goes on
            for _, future, _ in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            for (_, future, _), result in zip(batch, results, strict=True):
                if not future.done():  # a caller that gave up (a timeout) is skipped
                    future.set_result(result)
        finally:
            self._slots.release()
