"""The embedded LLM in a process of its own, started and kept running by the process that uses it.

:class:`LLMProcess` runs ``python -m ragfolio.core.llm.server`` (an OpenAI-compatible server around
an in-process backend) on a loopback port and watches it from a thread:

- it polls ``GET /health`` every ``health_interval_s``; the process is *ready* once that says ok;
- a process that exits, stops answering ``/health`` ``unhealthy_after`` times in a row, keeps one
  generation running past ``max_call_s`` (hung), or is not ready ``startup_timeout_s`` after it
  started, is killed and started again after ``backoff_s * 2**n`` seconds (at most
  ``max_backoff_s``; ``n`` counts the restarts since it last stayed ready for ``stable_s``);
- the server stops by itself when its parent is gone (``--parent-pid``).

:class:`ProcessBackend` is the :class:`~ragfolio.core.llm.chat.ChatBackend` the answerer uses: while
the process is not ready it raises :class:`~ragfolio.core.llm.chat.LLMUnavailableError` at once;
otherwise it calls the server with :class:`~ragfolio.core.llm.chat.OpenAICompatibleClient`, whose
connection errors and timeouts (a crash or a hang mid-call) are that error too. Its
:meth:`~ProcessBackend.stream` asks the server for ``stream: true`` and hands out the pieces as the
server generates them. Starting the process does not wait for the model to load.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from ragfolio.core.llm.chat import (
    Completion,
    JSONSchema,
    LLMUnavailableError,
    Messages,
    OpenAICompatibleClient,
    TextStream,
)

logger = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS's choice)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LLMProcess:
    """Starts the LLM server process and restarts it when it dies or hangs (see the module docstring).

    Args:
        backend: The :func:`ragfolio.core.llm.backends.make_backend` config of an in-process kind
            (``transformers`` or ``llama_cpp``), passed to the server as JSON.
        max_batch: Prompts the server generates together, at most.
        max_wait_ms: The server's longest wait for a batch to fill.
        host: Interface the server listens on (loopback: it has no authentication).
        health_interval_s: Seconds between health checks.
        health_timeout_s: A health check slower than this failed.
        unhealthy_after: Failed checks in a row after which a ready process is killed.
        max_call_s: A generation running longer than this is a hang: the process is killed.
        startup_timeout_s: A process not ready this long after its start is killed.
        backoff_s: Wait before the first restart; doubled for each further one.
        max_backoff_s: Longest wait before a restart.
        stable_s: A process ready this long resets the backoff.
    """

    def __init__(
        self,
        backend: Mapping[str, Any],
        *,
        max_batch: int = 4,
        max_wait_ms: float = 5.0,
        host: str = "127.0.0.1",
        health_interval_s: float = 1.0,
        health_timeout_s: float = 5.0,
        unhealthy_after: int = 3,
        max_call_s: float = 120.0,
        startup_timeout_s: float = 600.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        stable_s: float = 60.0,
    ) -> None:
        if backend.get("kind") not in ("transformers", "llama_cpp"):
            raise ValueError(f"backend kind={backend.get('kind')!r}: only in-process kinds (transformers, llama_cpp) "
                             "run as a process")
        self.backend = dict(backend)
        self.max_batch, self.max_wait_ms, self.host = max_batch, max_wait_ms, host
        self.health_interval_s, self.health_timeout_s = health_interval_s, health_timeout_s
        self.unhealthy_after, self.max_call_s, self.startup_timeout_s = unhealthy_after, max_call_s, startup_timeout_s
        self.backoff_s, self.max_backoff_s, self.stable_s = backoff_s, max_backoff_s, stable_s
        self.port: int | None = None
        self.starts = 0  # processes started so far
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """Whether the process answered its last health check as loaded and well."""
        return self._ready.is_set()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id while one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def command(self) -> list[str]:
        """The server's command line (on :attr:`port`)."""
        return [sys.executable, "-m", "ragfolio.core.llm.server", "--host", self.host, "--port", str(self.port),
                "--backend", json.dumps(self.backend), "--max-batch", str(self.max_batch),
                "--max-wait-ms", str(self.max_wait_ms), "--parent-pid", str(os.getpid())]

    def start(self) -> None:
        """Start the process and its watcher; returns at once (the model loads meanwhile)."""
        if self._thread is not None:
            raise RuntimeError("the LLM process was started already")
        self._thread = threading.Thread(target=self._supervise, name="llm-process", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until the process is ready or ``timeout_s`` passed; returns whether it is ready."""
        return self._ready.wait(timeout_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop watching and end the process (SIGTERM, then SIGKILL after ``timeout_s``)."""
        self._stop.set()
        self._ready.clear()
        self._end(timeout_s)
        if self._thread is not None:
            self._thread.join(timeout_s)

    # --- the watcher thread -------------------------------------------------------------------
    def _supervise(self) -> None:
        restarts = 0
        while not self._stop.is_set():
            try:
                ready_since = self._run_once()
            except Exception:  # the watcher must outlive anything one process does
                logger.exception("watching the LLM process failed")
                self._ready.clear()
                self._end(timeout_s=0.0)
                ready_since = None
            if self._stop.is_set():
                break
            if ready_since is not None and time.monotonic() - ready_since >= self.stable_s:
                restarts = 0
            delay = min(self.max_backoff_s, self.backoff_s * 2**restarts)
            restarts += 1
            logger.warning("the LLM process will restart in %.1f s (restart %d)", delay, restarts)
            self._stop.wait(delay)

    def _run_once(self) -> float | None:
        """Run one process until it exits or is killed; returns when it became ready (or None)."""
        if self.port is None:
            self.port = free_port(self.host)
        try:
            self._proc = subprocess.Popen(self.command())  # its output goes to the service's log
        except OSError as exc:
            logger.error("the LLM process could not start: %s: %s", type(exc).__name__, exc)
            return None
        self.starts += 1
        started, ready_since, failures = time.monotonic(), None, 0
        logger.info("LLM process %d started on %s (start %d)", self._proc.pid, self.base_url, self.starts)
        while not self._stop.wait(self.health_interval_s if ready_since else min(self.health_interval_s, 0.25)):
            if (code := self._proc.poll()) is not None:
                logger.warning("the LLM process %d exited with status %s", self._proc.pid, code)
                break
            health = self._health()
            if health is not None and health.get("status") == "ok":
                failures = 0
                if ready_since is None:
                    ready_since = time.monotonic()
                    logger.info("LLM process %d ready after %.1f s", self._proc.pid, ready_since - started)
                self._ready.set()
                if float(health.get("busy_s", 0.0)) > self.max_call_s:
                    logger.warning("the LLM process %d has generated for %.0f s (max_call_s=%s): killing it",
                                   self._proc.pid, health["busy_s"], self.max_call_s)
                    break
            elif ready_since is not None:
                failures += 1
                if failures >= self.unhealthy_after:
                    logger.warning("the LLM process %d failed %d health checks in a row: killing it",
                                   self._proc.pid, failures)
                    break
            elif time.monotonic() - started > self.startup_timeout_s:
                logger.warning("the LLM process %d was not ready after startup_timeout_s=%s: killing it",
                               self._proc.pid, self.startup_timeout_s)
                break
        self._ready.clear()
        self._end(timeout_s=0.0 if not self._stop.is_set() else 5.0)
        if ready_since is None:
            self.port = None  # never served: maybe the port was taken; the next start takes another
        return ready_since

    def _health(self) -> dict[str, Any] | None:
        """``GET /health``'s body (also on a 503), or None when it does not answer in time."""
        url = f"http://{self.host}:{self.port}/health"
        try:
            with urllib.request.urlopen(url, timeout=self.health_timeout_s) as response:
                body: dict[str, Any] = json.loads(response.read())
                return body
        except urllib.error.HTTPError as err:  # a 503 while loading, with its body
            with contextlib.suppress(OSError, ValueError):
                return dict(json.loads(err.read()))
            return None
        except (OSError, ValueError, http.client.HTTPException):  # refused, timed out, cut off, garbled
            return None

    def _end(self, timeout_s: float) -> None:
        """End the current process: SIGTERM, SIGKILL after ``timeout_s`` (at once for a hung one)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if timeout_s > 0:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout_s)
                return
        proc.kill()
        proc.wait()


class ProcessBackend:
    """The :class:`~ragfolio.core.llm.chat.ChatBackend` of an :class:`LLMProcess` (see the module docstring).

    Args:
        process: The supervised server.
        api: ``"completions"`` for plain-text (base) models, ``"chat"`` for chat-template ones.
        timeout_s: Per-call timeout: a call past it is a hang, :class:`LLMUnavailableError`.
        max_retries: Retries of a failed call (0: a crash mid-call fails that call).
    """

    def __init__(self, process: LLMProcess, *, api: str, timeout_s: float = 60.0, max_retries: int = 0) -> None:
        self.process, self.api, self.timeout_s, self.max_retries = process, api, timeout_s, max_retries
        self._client: OpenAICompatibleClient | None = None

    def _current_client(self) -> OpenAICompatibleClient:
        client = self._client
        if client is None or client.base_url != self.process.base_url:  # a restart may change the port
            client = self._client = OpenAICompatibleClient(
                self.process.base_url, "embedded", timeout_s=self.timeout_s, max_retries=self.max_retries,
                backoff_s=0.0, api=self.api)
        return client

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> Completion:
        """Complete through the server (``json_schema`` as its ``response_format``).

        Raises:
            LLMUnavailableError: The process is not ready (starting, or restarting after it
                stopped), or failed or timed out during the call.
            LLMRequestError: The server refused the call (e.g. a prompt longer than the context).
        """
        if not self.process.ready:
            raise LLMUnavailableError("the LLM process is not ready (starting, or restarting after it stopped)")
        return self._current_client().complete(messages, max_tokens=max_tokens, temperature=temperature,
                                               json_schema=json_schema)

    def stream(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> TextStream:
        """:meth:`complete`'s completion as the server generates it
        (:meth:`~ragfolio.core.llm.chat.OpenAICompatibleClient.stream`).

        Raises:
            LLMUnavailableError: At once while the process is not ready; when the first piece is
                read if the call fails; mid-stream if the process dies or hangs.
            LLMRequestError: The server refused the call (when the first piece is read).
        """
        if not self.process.ready:
            raise LLMUnavailableError("the LLM process is not ready (starting, or restarting after it stopped)")
        return self._current_client().stream(messages, max_tokens=max_tokens, temperature=temperature,
                                             json_schema=json_schema)
