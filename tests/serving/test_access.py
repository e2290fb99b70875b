"""API keys, CORS and the request id in the log, through ``RagfolioService.to_asgi()``.

The tests of the open service (keys and CORS off) start their own service and come first: the
module-wide client with keys and CORS on must not be open while another starts (conftest.asgi_app).
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import service_client, write_config
from pydantic import ValidationError
from tiny_bundle import questions

from ragfolio.serving.access import KEY_COOKIE, MISSING_KEY, WRONG_KEY, AccessControl, AccessPolicy
from ragfolio.serving.config import ServingConfig, load_config
from ragfolio.serving.engine import ServingEngine
from ragfolio.serving.guard import INTERNAL_ERROR, RequestGuard, RequestIdFilter, install_request_logging
from ragfolio.serving.service import RagfolioService

KEYS_ENV = "RAGFOLIO_TEST_API_KEYS"
KEY = "test-key-0123456789abcdef"
SECOND_KEY = "second.key_0123456789~"
ALLOWED = "https://app.example.com"
BEARER = {"Authorization": f"Bearer {KEY}"}
PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}


# --- keys and CORS off: open, as before ----------------------------------------------------------
def test_without_keys_the_service_is_open_and_says_so(tiny_bundle, fake_llm_url, tmp_path, caplog) -> None:
    config = write_config(tmp_path / "serving.yml", tiny_bundle, fake_llm_url)
    with caplog.at_level(logging.INFO, logger="ragfolio.serving.access"), service_client(config) as client:
        assert any(r.levelno == logging.WARNING and "the service is open" in r.getMessage() for r in caplog.records)
        bogus = {"Authorization": "Bearer not-a-key-at-all"}
        assert client.post("/retrieve", json={"query": questions()[0]}, headers=bogus).status_code == 200
        assert client.get("/portfolio").status_code == 200 and client.get("/v1/models").status_code == 200
        preflight = client.options("/retrieve", headers={"Origin": ALLOWED, **PREFLIGHT})
        assert preflight.status_code == 405 and "access-control-allow-origin" not in preflight.headers


# --- settings -------------------------------------------------------------------------------------
def test_keys_are_refused_in_the_settings_file(tmp_path) -> None:
    file = tmp_path / "serving.yml"
    file.write_text(f"serving:\n  auth:\n    api_keys: [{KEY}]\n")
    with pytest.raises(ValidationError, match="api_keys"):
        load_config(file, env={}, root=tmp_path)


def test_a_key_variable_that_is_unset_empty_or_weak_stops_the_start_naming_the_variable_only() -> None:
    config = ServingConfig(auth={"api_keys_env": KEYS_ENV})
    for env in ({}, {KEYS_ENV: " , "}):
        with pytest.raises(ValueError, match=f"{KEYS_ENV} is unset or holds no key"):
            AccessPolicy.from_config(config, env)
    for weak in ("short-key", "a key with spaces in it", "caf\u00e9-caf\u00e9-caf\u00e9-caf\u00e9"):
        with pytest.raises(ValueError, match=f"key 2 of \\${KEYS_ENV}") as raised:
            AccessPolicy.from_config(config, {KEYS_ENV: f"{KEY},{weak}"})
        assert weak not in str(raised.value) and KEY not in str(raised.value)
    policy = AccessPolicy.from_config(config, {KEYS_ENV: f" {KEY} ,{SECOND_KEY}"})
    assert policy.accepts(KEY) and policy.accepts(SECOND_KEY) and not policy.accepts(KEY[:-1])
    assert not policy.accepts(None) and KEY not in repr(policy) and KEY not in policy.describe()


def test_auth_and_cors_come_from_the_environment_too(tmp_path) -> None:
    config = load_config(env={"RAGFOLIO_AUTH__API_KEYS_ENV": KEYS_ENV,
                              "RAGFOLIO_CORS__ALLOW_ORIGINS": f"[{ALLOWED}]"}, root=tmp_path)
    assert config.auth.api_keys_env == KEYS_ENV and config.cors is not None
    assert config.cors.allow_origins == (ALLOWED,) and ServingConfig().cors is None
    assert ServingConfig().auth.api_keys_env is None


@pytest.mark.parametrize("cors", [{"allow_origins": [f"{ALLOWED}/"]}, {"allow_origins": ["app.example.com"]},
                                  {"allow_origins": []}, {"allow_origins": ["*"], "allow_credentials": True}])
def test_bad_cors_settings_are_refused(cors) -> None:
    with pytest.raises(ValidationError, match="allow_origins|allow_credentials"):
        ServingConfig(cors=cors)


def test_a_handler_filter_puts_the_request_id_into_every_line_of_a_request() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    log = logging.getLogger("ragfolio.tests.access")
    log.addHandler(handler)

    async def app(scope, receive, send) -> None:
        log.warning("found %d passages", 3)
        log.warning("request %s: names its id already", "rid-7")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        pass

    scope = {"type": "http", "method": "GET", "path": "/x", "headers": [(b"x-request-id", b"rid-7")]}
    try:
        asyncio.run(RequestGuard(app, lambda: 10)(scope, receive, send))
        log.warning("outside any request")
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().splitlines() == ["request rid-7: found 3 passages", "request rid-7: names its id already",
                                              "outside any request"]


# --- keys and CORS on ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tiny_bundle: Path, fake_llm_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    config = write_config(tmp_path_factory.mktemp("conf") / "serving.yml", tiny_bundle, fake_llm_url,
                          auth={"api_keys_env": KEYS_ENV}, cors={"allow_origins": [ALLOWED]})
    with service_client(config, **{KEYS_ENV: f"{KEY},{SECOND_KEY}"}) as c:
        c.cookies.clear()
        yield c


def assert_refused(response, message: str) -> dict:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert KEY not in response.text and SECOND_KEY not in response.text
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["error"] == message or body["error"]["message"] == message, body
    return body


@pytest.mark.parametrize(("method", "path", "payload"), [
    ("POST", "/retrieve", {"query": "q"}), ("POST", "/batch_retrieve", {"queries": ["q"]}),
    ("POST", "/answer", {"query": "q"}), ("GET", "/portfolio", None), ("GET", "/docs.json", None),
])
def test_without_a_key_or_with_a_wrong_one_is_a_401(client, method, path, payload) -> None:
    missing = client.request(method, path, json=payload)
    assert assert_refused(missing, MISSING_KEY) == {"error": MISSING_KEY, "request_id": missing.headers["x-request-id"]}
    for wrong in (f"Bearer {KEY[:-1]}", f"Bearer {KEY}x", f"Basic {KEY}", "Bearer"):
        response = client.request(method, path, json=payload, headers={"Authorization": wrong})
        assert_refused(response, MISSING_KEY if wrong.startswith("Basic") or wrong == "Bearer" else WRONG_KEY)


def test_under_v1_the_401_is_in_openai_shape(client) -> None:
    for headers, message in (({}, MISSING_KEY), ({"Authorization": "Bearer sk-wrong-wrong-wrong"}, WRONG_KEY)):
        response = client.post("/v1/chat/completions", headers=headers,
                               json={"model": "ragfolio", "messages": [{"role": "user", "content": "q"}]})
        body = assert_refused(response, message)
        assert body["error"] == {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_api_key"}
        assert assert_refused(client.get("/v1/models", headers=headers), message)["error"]["code"] == "invalid_api_key"


def test_with_a_right_key_every_endpoint_answers(client) -> None:
    query = questions()[0]
    for key in (KEY, SECOND_KEY):
        headers = {"Authorization": f"bearer  {key}"}
        assert client.post("/retrieve", json={"query": query}, headers=headers).status_code == 200
    assert client.post("/batch_retrieve", json={"queries": [query]}, headers=BEARER).status_code == 200
    assert client.post("/answer", json={"query": query}, headers=BEARER).status_code == 200
    assert client.get("/portfolio", headers=BEARER).status_code == 200
    assert client.get("/v1/models", headers=BEARER).json()["data"][0]["id"] == "ragfolio"
    chat = client.post("/v1/chat/completions", headers=BEARER,
                       json={"model": "ragfolio", "messages": [{"role": "user", "content": query}]})
    assert chat.status_code == 200, chat.text


def test_probes_metrics_and_the_playground_page_need_no_key(client) -> None:
    for path in ("/healthz", "/livez", "/readyz", "/metrics", "/"):
        assert client.get(path).status_code == 200, path
    assert "<html" in client.get("/").text.lower()


def test_the_playground_takes_the_key_once_as_a_cookie(client) -> None:
    try:
        wrong = client.get("/", params={"key": KEY[:-1]}, follow_redirects=False)
        assert_refused(wrong, WRONG_KEY)
        assert "set-cookie" not in wrong.headers
        taken = client.get("/", params={"key": KEY}, follow_redirects=False)
        assert taken.status_code == 303 and taken.headers["location"] == "/"
        cookie = taken.headers["set-cookie"]
        assert cookie.startswith(f"{KEY_COOKIE}={KEY};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        # the page's own requests (fetch, same origin) carry the cookie
        assert client.get("/portfolio").status_code == 200
        assert client.post("/retrieve", json={"query": questions()[0]}).status_code == 200
    finally:
        client.cookies.clear()
    stale = client.get("/portfolio", headers={"Cookie": f"{KEY_COOKIE}={KEY[:-1]}"})
    assert_refused(stale, WRONG_KEY)
    assert_refused(client.get("/portfolio"), MISSING_KEY)


def test_a_preflight_from_an_allowed_origin_gets_the_cors_headers_without_a_key(client) -> None:
    response = client.options("/retrieve", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert response.status_code in (200, 204), response.text
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "authorization" in response.headers["access-control-allow-headers"].lower()
    answered = client.post("/retrieve", json={"query": questions()[0]}, headers={"Origin": ALLOWED, **BEARER})
    assert answered.status_code == 200 and answered.headers["access-control-allow-origin"] == ALLOWED
    assert "x-request-id" in answered.headers["access-control-expose-headers"].lower()
    refused = client.post("/retrieve", json={"query": "q"}, headers={"Origin": ALLOWED})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ALLOWED


def test_another_origin_gets_no_cors_headers(client) -> None:
    preflight = client.options("/retrieve", headers={"Origin": "https://evil.example", **PREFLIGHT})
    assert preflight.status_code >= 400 and "access-control-allow-origin" not in preflight.headers
    answered = client.post("/retrieve", json={"query": questions()[0]},
                           headers={"Origin": "https://evil.example", **BEARER})
    assert answered.status_code == 200 and "access-control-allow-origin" not in answered.headers


# --- logs ---------------------------------------------------------------------------------------
def test_a_400_is_one_warning_line_with_the_request_id_and_no_traceback(client, caplog) -> None:
    secret = "do-not-log-this-question"
    with caplog.at_level(logging.INFO):
        response = client.post("/retrieve", json={"query": secret, "l": 99},
                               headers={"x-request-id": "bad-input-400", **BEARER})
    assert response.status_code == 400
    mine = [r for r in caplog.records if "bad-input-400" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(mine) == 1, caplog.text  # (and BentoML's access line, INFO, names the id too)
    (line,) = mine
    assert line.levelno == logging.WARNING and not line.exc_info
    assert "POST /retrieve answered 400" in line.getMessage() and "l=99 must be in 1.." in line.getMessage()
    assert not any(r.exc_info for r in caplog.records), caplog.text
    assert "Exception on" not in caplog.text and "Traceback" not in caplog.text and secret not in caplog.text


def test_a_401_is_logged_as_one_warning_line(client, caplog) -> None:
    with caplog.at_level(logging.INFO):
        client.get("/portfolio", headers={"x-request-id": "no-key-401", "Authorization": f"Bearer {KEY}x"})
    (line,) = [r for r in caplog.records if "no-key-401" in r.getMessage() and r.levelno >= logging.WARNING]
    assert line.levelno == logging.WARNING and "GET /portfolio answered 401: the API key is not valid" in line.getMessage()
    assert KEY not in caplog.text


def test_a_500_keeps_its_traceback_under_the_request_id(client, monkeypatch, caplog) -> None:
    def fail(*args, **kwargs):
        raise RuntimeError("index file unreadable: hunter2")

    monkeypatch.setattr(ServingEngine, "retrieve_many", fail)
    with caplog.at_level(logging.INFO):
        response = client.post("/retrieve", json={"query": "q"}, headers={"x-request-id": "boom-500", **BEARER})
    assert response.status_code == 500 and response.json()["error"] == INTERNAL_ERROR
    traced = [r for r in caplog.records if "boom-500" in r.getMessage() and r.exc_text]
    assert traced and "hunter2" in traced[0].exc_text, caplog.text


def test_a_500_that_bentoml_logs_names_the_request_id(client, monkeypatch, caplog) -> None:
    def fail(*args, **kwargs):
        raise RuntimeError("validator crashed: hunter2")

    monkeypatch.setattr(RagfolioService.inner, "_validate", fail)  # raised in the API: BentoML logs it
    with caplog.at_level(logging.INFO):
        response = client.post("/retrieve", json={"query": "q"}, headers={"x-request-id": "bentoml-500", **BEARER})
    assert response.status_code == 500 and "hunter2" not in response.text
    (traced,) = [r for r in caplog.records if r.exc_text and "hunter2" in r.exc_text]
    assert traced.getMessage() == "request bentoml-500: Exception on /retrieve [POST]", caplog.text


def test_installing_the_log_filters_twice_adds_them_once() -> None:
    install_request_logging()
    install_request_logging()
    error_logger = logging.getLogger("bentoml._internal.server.http_app")
    assert sum(type(f).__name__ == "ClientErrorLogFilter" for f in error_logger.filters) == 1


# --- the key cookie and the query string, at the middleware -------------------------------------
def _through_access(policy: AccessPolicy, path: str, query: bytes, headers: list[tuple[bytes, bytes]],
                    scheme: str = "http", app=None) -> list[dict]:  # noqa: ANN001
    """One GET through :class:`AccessControl` (around ``app``, default: a 200); the messages sent back."""
    async def ok(scope, receive, send) -> None:  # noqa: ANN001
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": headers, "scheme": scheme, "server": ("127.0.0.1", 3000), "client": ("127.0.0.1", 5000),
             "http_version": "1.1", "root_path": ""}
    asyncio.run(AccessControl(app or ok, lambda: policy)(scope, receive, send))
    return sent


@pytest.mark.parametrize(("secure_cookie", "scheme", "headers", "secure"), [
    (False, "http", [], False),
    (False, "https", [], True),
    (False, "http", [(b"x-forwarded-proto", b"https")], True),  # behind a TLS-terminating proxy
    (False, "http", [(b"x-forwarded-proto", b"https, http")], True),  # the first proxy's word
    (False, "http", [(b"x-forwarded-proto", b"http")], False),
    (True, "http", [], True),  # auth.secure_cookie: always
])
def test_the_key_cookie_is_secure_over_https_as_a_proxy_says_or_always_when_set(
        secure_cookie, scheme, headers, secure) -> None:
    policy = AccessPolicy(keys=(KEY.encode(),), **({"secure_cookie": True} if secure_cookie else {}))
    start = _through_access(policy, "/", f"key={KEY}".encode(), headers, scheme)[0]
    assert start["status"] == 303
    cookie = dict(start["headers"])[b"set-cookie"].decode()
    assert cookie.startswith(f"{KEY_COOKIE}={KEY};") and ("; Secure" in cookie) is secure, cookie


def test_the_secure_cookie_setting_reaches_the_policy(tmp_path) -> None:
    config = ServingConfig(auth={"api_keys_env": KEYS_ENV, "secure_cookie": True})
    assert AccessPolicy.from_config(config, {KEYS_ENV: KEY}).secure_cookie
    assert not AccessPolicy.from_config(ServingConfig(), {}).secure_cookie


@pytest.mark.parametrize("policy", [AccessPolicy(), AccessPolicy(keys=(KEY.encode(),))], ids=["open", "keys"])
def test_a_query_string_never_reaches_bentomls_server_span(policy) -> None:
    """BentoML's OpenTelemetry middleware runs inside ours and records the URL, query included, as
    the server span's ``http.url``/``http.target``: a ``?key=`` would be exported with every trace."""
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list[bytes] = []

    async def endpoint(scope, receive, send) -> None:  # noqa: ANN001
        seen.append(scope["query_string"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    traced = OpenTelemetryMiddleware(endpoint, tracer_provider=provider)
    for path in ("/portfolio", "/"):
        sent = _through_access(policy, path, f"key={KEY}&x=1".encode(), [(b"authorization", f"Bearer {KEY}".encode())],
                               app=traced)
        assert sent[0]["status"] in (200, 303), sent[0]
    spans = exporter.get_finished_spans()
    assert spans and all(q == b"" for q in seen), seen
    recorded = [str(v) for span in spans for v in (span.attributes or {}).values()]
    assert any("/portfolio" in v for v in recorded), recorded  # the URL is recorded...
    assert not [v for v in recorded if KEY in v or "key=" in v], recorded  # ...without its query string
