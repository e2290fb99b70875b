"""A screenshot of the service's playground (``GET /``) after a real question: ``docs/img/playground.png``.

Starts ``bentoml serve`` from the repository root with the default settings (the bundle of
``make run``, the embedded LLM in its own process), or uses a running service with ``--url``;
waits until ``/answer`` answers once (the LLM loads after the service is ready), opens ``/`` in a
headless Chromium, types ``--question``, clicks Answer (Retrieve with ``--endpoint retrieve``),
waits for the result and saves the whole page as a PNG. Chromium is driven as the playground's
test drives it (``tests/serving/cdp.py``); install it with ``apt-get install chromium``.

Run from the repository root::

    .venv/bin/python benchmarks/playground_screenshot.py --out docs/img/playground.png
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from service_harness import ROOT, serve, wait_for_llm

sys.path.insert(0, str(ROOT / "tests" / "serving"))  # the DevTools-protocol driver the playground's test uses
from cdp import find_chromium, headless_chromium  # noqa: E402

QUESTION = "Who was the father of Hermann II, Landgrave of Hesse?"
WARM_UP = "Where is the Eiffel Tower?"  # a different question, so the shown one is asked once


@contextlib.contextmanager
def service(url: str | None, ready_timeout_s: float) -> Iterator[str]:
    """``url``, or a fresh ``bentoml serve`` with the default settings for the duration."""
    if url:
        yield url.rstrip("/")
        return
    with serve(ready_timeout_s) as served:
        print(f"service ready at {served.url} in {served.ready_s:.1f} s (log: {served.log})")
        yield served.url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running service (default: start one)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--endpoint", choices=("answer", "retrieve"), default="answer")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "playground.png")
    parser.add_argument("--width", type=int, default=1280, help="CSS pixels; the height is the page's")
    parser.add_argument("--ready-timeout-s", type=float, default=300.0)
    parser.add_argument("--answer-timeout-s", type=float, default=300.0, help="the LLM's load and the answer")
    args = parser.parse_args()
    if (browser := find_chromium()) is None:
        sys.exit("no Chromium on PATH: apt-get install chromium")

    with service(args.url, args.ready_timeout_s) as url:
        if args.endpoint == "answer":
            print(f"LLM answering after {wait_for_llm(url, WARM_UP, args.answer_timeout_s):.1f} s")
        with headless_chromium(browser, width=args.width, timeout_s=args.answer_timeout_s) as page:
            page.navigate(f"{url}/")
            page.wait_for("document.getElementById('portfolio').textContent.startsWith('Bundle')")
            page.type_into("#query", args.question)
            page.click(f"#{args.endpoint}")
            page.wait_for(f"document.getElementById('result').dataset.endpoint === '{args.endpoint}'")
            print(page.evaluate("document.getElementById('status').textContent"))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(args.out, width=args.width)
            if page.errors:
                sys.exit(f"the page reported errors: {page.errors}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
