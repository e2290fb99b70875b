"""A headless Chromium page driven over the Chrome DevTools Protocol, with what the project has.

No browser-automation package: Chromium is started with ``--remote-debugging-port=0``, the port
it picked is read from the ``DevToolsActivePort`` file it writes into its profile folder, the
page's websocket comes from ``GET /json/list`` (httpx), and protocol commands go over that
websocket (``websockets``' sync client): ``Page.navigate``, ``Runtime.evaluate``,
``Input.insertText``, ``Input.dispatchMouseEvent``, ``Page.captureScreenshot``.

Used by ``test_playground.py`` and ``benchmarks/playground_screenshot.py``.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The first of :data:`BROWSERS` on ``PATH``, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """A protocol command failed, a script threw, or a condition did not hold in time."""


class Page:
    """One browser tab: protocol commands, script evaluation, typing, clicking, screenshots.

    ``errors`` collects the page's uncaught exceptions, ``console.error`` calls and error-level
    log entries (a failed request, a Content-Security-Policy violation) as they arrive.
    """

    def __init__(self, ws: ClientConnection, timeout_s: float = 30.0) -> None:
        self.ws = ws
        self.timeout_s = timeout_s
        self.errors: list[str] = []
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one protocol command and return its ``result`` (events read meanwhile are noted)."""
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.0, deadline - time.monotonic())))
            if message.get("id") == call_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._note(message)

    def _note(self, event: dict[str, Any]) -> None:
        params = event.get("params", {})
        if event.get("method") == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"{params['entry']['text']} ({params['entry'].get('url', '')})")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited), as JSON gives it."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression!r} threw: {details.get('exception', {}).get('description', details)}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float | None = None) -> Any:
        """Poll ``expression`` until it is truthy and return its value; the error shows the page's text."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                text = self.evaluate("document.body ? document.body.innerText : ''")
                raise BrowserError(f"{expression!r} not true after {timeout_s or self.timeout_s} s; the page "
                                   f"reads:\n{text[:3000]}\nerrors: {self.errors}")
            time.sleep(0.05)
        return value

    def navigate(self, url: str) -> None:
        """Open ``url`` and wait until the document has loaded."""
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        self.wait_for("document.readyState === 'complete'")

    def type_into(self, selector: str, text: str) -> None:
        """Focus the element ``selector`` and type ``text`` into it as keyboard input would."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        """A left mouse click at the middle of the element ``selector`` (scrolled into view)."""
        x, y = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path, width: int = 1280) -> Path:
        """Save a PNG of the whole page (``width`` CSS pixels wide, as tall as its content)."""
        self.evaluate("window.scrollTo(0, 0)")
        height = self.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


def _devtools_port(proc: subprocess.Popen[bytes], profile: Path, log: Path, timeout_s: float) -> int:
    """The port Chromium listens on, from the first line of ``<profile>/DevToolsActivePort``."""
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout_s
    while not (port_file.is_file() and port_file.read_text().count("\n") >= 1):
        if proc.poll() is not None or time.monotonic() > deadline:
            state = f"exited with {proc.returncode}" if proc.returncode is not None else f"no port after {timeout_s} s"
            raise BrowserError(f"Chromium {state}:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    return int(port_file.read_text().splitlines()[0])


@contextlib.contextmanager
def headless_chromium(binary: str, width: int = 1280, height: int = 900, timeout_s: float = 30.0) -> Iterator[Page]:
    """A fresh headless Chromium (temporary profile) and its one tab; stopped on exit."""
    # Chromium's helper processes can still write to the profile while it is removed: ignore that.
    with tempfile.TemporaryDirectory(prefix="ragfolio-chromium-", ignore_cleanup_errors=True) as tmp:
        profile, log = Path(tmp) / "profile", Path(tmp) / "chromium.log"
        args = [binary, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                f"--window-size={width},{height}", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox (containers, CI)
            args.append("--no-sandbox")
        with log.open("wb") as out:
            proc = subprocess.Popen([*args, "about:blank"], stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # its own process group: stopped with its helpers
        try:
            port = _devtools_port(proc, profile, log, timeout_s)
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=timeout_s).json()
            tab = next(t for t in targets if t["type"] == "page")
            with connect(tab["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout_s) as ws:
                page = Page(ws, timeout_s)
                for domain in ("Page", "Runtime", "Log"):
                    page.call(f"{domain}.enable")
                page.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                          mobile=False)
                yield page
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
