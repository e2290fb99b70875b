"""``GET /``: the playground, one static HTML page that calls the service's own JSON API.

The page (``static/playground.html``, shipped as package data) asks ``GET /portfolio`` for the
members, then ``POST /retrieve`` or ``POST /answer`` for a typed question, and shows the routed
members with their router scores, each member's passages and candidate answer, the selector's
choice, the latency of each stage, and an error's message and request id. It has no build step and
loads nothing from elsewhere; the Content-Security-Policy sent with it holds it to that (its own
inline script and style, requests to this origin only).
"""

from __future__ import annotations

import functools
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse

PAGE = "static/playground.html"

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'unsafe-inline'",  # the page's one inline script; it builds the DOM with textContent only
    "style-src 'unsafe-inline'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
])


@functools.cache
def playground_html() -> str:
    """The page's HTML, read once from the installed package."""
    return resources.files("ragfolio.serving").joinpath(PAGE).read_text(encoding="utf-8")


async def playground_view(request: Request) -> HTMLResponse:
    """``GET /``: the playground page."""
    return HTMLResponse(playground_html(), headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                                                    "Cache-Control": "no-cache"})
