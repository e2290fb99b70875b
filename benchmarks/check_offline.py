"""Does a command try to reach the network? Runs it behind a local proxy that logs and refuses every attempt.

Every HTTP client these tools use (requests, urllib3, httpx: Kedro's, MLflow's and BentoML's usage
reports, DVC's updater and analytics, the model hubs) honours ``HTTP(S)_PROXY``; the proxy listens
on 127.0.0.1, records the host each request asks for, answers 403 and closes. Loopback traffic
(``NO_PROXY=127.0.0.1,localhost``: a local MLflow store, ``bentoml serve`` on 127.0.0.1) goes
direct. For a stricter check run the same command in a network namespace with only loopback::

    unshare -n sh -c 'ip link set lo up && make run'

Run from the repository root, one command per argument (each through ``sh -c``)::

    .venv/bin/python benchmarks/check_offline.py '.venv/bin/kedro run --pipelines=data_prep' '.venv/bin/dvc status'

Exits 1 when any command tried to reach an outside host, and prints each command's exit status,
time and attempts.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time


class RefusingProxy:
    """A proxy on 127.0.0.1 that records the target of each request and refuses it (403)."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                    self.attempts.append(first)  # "CONNECT host:443 HTTP/1.1" or "GET http://host/... HTTP/1.1"
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self._server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("commands", nargs="+")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="longest a command may run")
    args = parser.parse_args(argv)
    proxy, failed = RefusingProxy(), False
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1"}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[name] = proxy.url
    try:
        for command in args.commands:
            before, start = len(proxy.attempts), time.monotonic()
            out = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=args.timeout_s)
            attempts = proxy.attempts[before:]
            failed |= bool(attempts)
            print(f"$ {command}\n  exit {out.returncode} in {time.monotonic() - start:.0f} s; "
                  f"network attempts: {len(attempts)}" + "".join(f"\n    {a}" for a in attempts), flush=True)
    finally:
        proxy.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
