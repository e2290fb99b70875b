"""A scripted HTTP handler class served on a free loopback port, for the LLM client tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

H = TypeVar("H", bound=type[BaseHTTPRequestHandler])


@contextmanager
def serving(handler: H) -> Iterator[H]:
    """``handler`` served in a thread until the block ends; its ``url`` is set to the server's ``/v1``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def send_json(handler: BaseHTTPRequestHandler, data: bytes, status: int = 200) -> None:
    """Answer the request ``handler`` is serving with the JSON body ``data`` and ``status``."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
