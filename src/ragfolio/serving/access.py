"""Who may call the service: API keys (setting ``auth``) and cross-origin browsers (setting ``cors``).

:class:`AccessControl` is an ASGI middleware that the service adds right after
:class:`ragfolio.serving.guard.RequestGuard`, so it runs inside the guard: its refusals carry the
request id, take OpenAI's error shape under ``/v1/`` and are logged as one line.

- **CORS** (``cors``, off by default): Starlette's ``CORSMiddleware`` with the settings' origins
  answers preflight ``OPTIONS`` requests itself, before any key is asked for, and adds
  ``Access-Control-Allow-Origin`` to the responses to an allowed origin (a 401 too, so that a
  browser app can read it).
- **API keys** (``auth.api_keys_env``, off by default): the keys are read at start-up from the
  environment variable the setting names, comma-separated. Every request but those to the probes
  (``/healthz``, ``/livez``, ``/readyz``), ``/metrics`` and the playground page (``GET /``) needs
  ``Authorization: Bearer <key>``; each key is compared with :func:`hmac.compare_digest`. A
  missing or wrong key gets a 401 with ``WWW-Authenticate: Bearer``; nothing in it tells of the
  keys.
- **The playground with keys.** ``GET /?key=<key>`` with a valid key answers with a redirect to
  ``/`` that sets the key as a cookie (``HttpOnly``, ``SameSite=Strict``, for the browser
  session); the page's own requests carry the cookie, which is accepted in place of the header.
  The cookie is ``Secure`` when the request came over HTTPS, as the server saw it or as a
  TLS-terminating proxy in front of it says (``X-Forwarded-Proto: https``), and always with
  ``auth.secure_cookie: true``.
- **No query string past here.** No endpoint reads one, so it is dropped from the request before
  BentoML sees it: a ``?key=`` never reaches BentoML's server span (its ``http.url`` and
  ``http.target``, when BentoML's tracing is on) or its access log.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import bentoml
from bentoml.exceptions import BentoMLException
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware

from ragfolio.serving.config import CORSConfig, ServingConfig
from ragfolio.serving.guard import OPENAI_PREFIX, ASGIApp, Receive, Send
from ragfolio.serving.openai_api import error_body

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/metrics"})
PLAYGROUND = "/"
KEY_QUERY = "key"
KEY_COOKIE = "ragfolio_key"
MIN_KEY_CHARS = 16
_KEY = re.compile(r"[A-Za-z0-9._~-]+")  # URL- and cookie-safe: a key travels in ?key= and a cookie
MISSING_KEY = "an API key is required: send the header Authorization: Bearer <key> (the playground: open /?key=<key>)"
WRONG_KEY = "the API key is not valid"
STARTING = "the service is starting"


@dataclass(frozen=True)
class AccessPolicy:
    """The keys accepted (none: open) and the CORS settings (None: off), fixed at start-up.

    Attributes:
        keys: The accepted keys, UTF-8; empty when no key is needed. Left out of ``repr``.
        keys_env: The environment variable they were read from (None: open).
        cors: Cross-origin settings, or None.
        secure_cookie: The key cookie is always ``Secure`` (else: over HTTPS only, :func:`over_https`).
    """

    keys: tuple[bytes, ...] = field(default=(), repr=False)
    keys_env: str | None = None
    cors: CORSConfig | None = None
    secure_cookie: bool = False

    @classmethod
    def from_config(cls, config: ServingConfig, env: Mapping[str, str] | None = None) -> AccessPolicy:
        """The policy of ``config``, the keys read from ``env`` (default: the process's environment).

        Raises:
            ValueError: ``auth.api_keys_env`` names a variable that is unset, holds no key, or
                holds a key shorter than ``MIN_KEY_CHARS`` or with a character outside
                ``[A-Za-z0-9._~-]`` (named by its position, never shown).
        """
        name = config.auth.api_keys_env
        if name is None:
            return cls(cors=config.cors, secure_cookie=config.auth.secure_cookie)
        env = os.environ if env is None else env
        keys = [key.strip() for key in env.get(name, "").split(",") if key.strip()]
        if not keys:
            raise ValueError(f"auth.api_keys_env={name}: ${name} is unset or holds no key; set it to "
                             "comma-separated keys, or set auth.api_keys_env: null for an open service")
        for position, key in enumerate(keys, start=1):
            if len(key) < MIN_KEY_CHARS or not _KEY.fullmatch(key):
                raise ValueError(f"auth.api_keys_env={name}: key {position} of ${name} is not {MIN_KEY_CHARS} "
                                 "or more of [A-Za-z0-9._~-] (e.g. secrets.token_urlsafe(32))")
        return cls(keys=tuple(key.encode() for key in keys), keys_env=name, cors=config.cors,
                   secure_cookie=config.auth.secure_cookie)

    @property
    def open(self) -> bool:
        """True when no key is needed."""
        return not self.keys

    def accepts(self, key: str | None) -> bool:
        """Whether ``key`` is one of the keys; every key is compared, in constant time each."""
        if key is None:
            return False
        given = key.encode()
        found = False
        for expected in self.keys:
            found |= hmac.compare_digest(given, expected)
        return found

    def describe(self) -> str:
        """One line for the start-up log: open or how many keys, and CORS."""
        cors = f"CORS for {', '.join(self.cors.allow_origins)}" if self.cors else "CORS off"
        if self.open:
            return ("API keys off (auth.api_keys_env: null): the service is open to anyone who can reach "
                    f"its port; {cors}")
        return f"API keys on: {len(self.keys)} key(s) from ${self.keys_env}; {cors}"


def access_policy(config: ServingConfig) -> AccessPolicy:
    """The running service's policy from ``config`` and the environment; logged once (an open service
    as a warning, so that ``bentoml serve``'s log shows it)."""
    policy = AccessPolicy.from_config(config)
    (logger.warning if policy.open else logger.info)("%s", policy.describe())
    return policy


def current_policy() -> AccessPolicy | None:
    """The running service's policy, or None while the service is not instantiated."""
    try:
        service = bentoml.get_current_service()
    except BentoMLException:
        return None
    return getattr(service, "access", None)


class AccessControl:
    """ASGI middleware: CORS, then API keys (module docstring).

    Args:
        app: The ASGI app it guards.
        policy: Returns the policy in force; asked once per request, so that it can come from the
            service instance created after the app was built. None: the service is not up yet
            (every request but the open paths gets a 503).
    """

    def __init__(self, app: ASGIApp, policy: Callable[[], AccessPolicy | None]) -> None:
        self.app = app
        self.policy = policy
        self._cors: tuple[CORSConfig, ASGIApp] | None = None  # the CORS settings and the app they wrap

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        policy = self.policy()
        if scope["type"] != "http" or policy is None or policy.cors is None:
            await self._check_key(scope, receive, send)
            return
        if self._cors is None or self._cors[0] != policy.cors:
            cors = policy.cors
            self._cors = (cors, CORSMiddleware(
                self._check_key, allow_origins=cors.allow_origins, allow_methods=cors.allow_methods,
                allow_headers=cors.allow_headers, expose_headers=cors.expose_headers,
                allow_credentials=cors.allow_credentials, max_age=cors.max_age))
        await self._cors[1](scope, receive, send)

    async def _check_key(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        path, method = scope.get("path", ""), scope.get("method", "")
        if scope["type"] != "http" or path in OPEN_PATHS:
            await self._pass(scope, receive, send)
            return
        policy = self.policy()
        if policy is None:
            await _refuse(send, 503, STARTING, path)
            return
        if policy.open:
            await self._pass(scope, receive, send)
            return
        if path == PLAYGROUND and method in ("GET", "HEAD"):
            offered = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(KEY_QUERY)
            if offered is None:  # the page itself; its requests need the key
                await self._pass(scope, receive, send)
            elif policy.accepts(offered[-1]):
                await _remember_key(send, offered[-1], secure=policy.secure_cookie or over_https(scope))
            else:
                await _refuse(send, 401, WRONG_KEY, path)
            return
        key = presented_key(Headers(scope=scope))
        if not policy.accepts(key):
            await _refuse(send, 401, MISSING_KEY if key is None else WRONG_KEY, path)
            return
        await self._pass(scope, receive, send)

    async def _pass(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Hand the request on without its query string (no endpoint reads one; see the module docstring)."""
        if scope.get("query_string"):
            scope = {**scope, "query_string": b""}
        await self.app(scope, receive, send)


def over_https(scope: MutableMapping[str, Any]) -> bool:
    """Whether the request came over HTTPS: the server's scheme, or the first ``X-Forwarded-Proto``
    (a TLS-terminating proxy's; a client that sends it only makes its own cookie stricter)."""
    forwarded = Headers(scope=scope).get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return scope.get("scheme") == "https" or forwarded == "https"


def presented_key(headers: Headers) -> str | None:
    """The key of ``Authorization: Bearer <key>``, else the playground's cookie, else None."""
    scheme, _, credentials = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    for pair in headers.get("cookie", "").split(";"):
        name, _, value = pair.strip().partition("=")
        if name == KEY_COOKIE and value:
            return value
    return None


async def _refuse(send: Send, status: int, message: str, path: str) -> None:
    """A JSON error (OpenAI's shape under ``/v1/``); a 401 says ``WWW-Authenticate: Bearer``."""
    code = "invalid_api_key" if status == 401 else None
    payload = error_body(status, message, code=code) if path.startswith(OPENAI_PREFIX) else {"error": message}
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="ragfolio"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _remember_key(send: Send, key: str, secure: bool) -> None:
    """A 303 to the playground that sets the key cookie (for this browser session, this site only)."""
    cookie = f"{KEY_COOKIE}={key}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")
    headers = [(b"location", PLAYGROUND.encode()), (b"set-cookie", cookie.encode("latin-1")),
               (b"cache-control", b"no-store"), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
