"""The service's settings: ``conf/base/serving.yml`` (key ``serving``) with overrides.

Three layers, each merged over the one before key by key (a nested section keeps the keys an
override leaves out, as Kedro's parameters do):

1. ``conf/base/serving.yml``;
2. the YAML file named by ``RAGFOLIO_SERVING_CONFIG`` (or ``load_config``'s ``path``), which names
   only what it changes;
3. environment variables ``RAGFOLIO_<FIELD>`` for a top-level field (``RAGFOLIO_BUNDLE``,
   ``RAGFOLIO_MEMBER_TIMEOUT_S=2``) and ``RAGFOLIO_<SECTION>__<KEY>`` for a nested one, ``__``
   between levels (``RAGFOLIO_LLM__KIND=openai``, ``RAGFOLIO_LLM__OPENAI__BASE_URL=http://...``).
   Values are read as YAML scalars (``2`` an int, ``true`` a bool, ``null`` None). Variables whose
   first part names no field (``RAGFOLIO_MODEL_CACHE``) are not settings and are left alone.

Settings come only from the operator: nothing in a request can change them.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragfolio.core.llm.backend_config import backend_settings
from ragfolio.core.llm.reader import merge
from ragfolio.serving.answering_config import AnswererConfig, ChatConfig
from ragfolio.serving.schemas import BATCH_CEILING, QUERY_CHARS_CEILING

DEFAULT_CONFIG = Path("conf/base/serving.yml")
CONFIG_ENV = "RAGFOLIO_SERVING_CONFIG"
ENV_PREFIX = "RAGFOLIO_"
MAX_BODY_BYTES_CEILING = 64 * 2**20
MAX_JSON_DEPTH_CEILING = 128  # pydantic's JSON parser refuses past 200 levels, Python's json past ~1,000
OTLP_MODULE = "opentelemetry.exporter.otlp.proto.http.trace_exporter"  # what exporter: otlp imports
OTLP_PACKAGE = "opentelemetry-exporter-otlp-proto-http"


class BatchingConfig(BaseModel):
    """How concurrent ``/retrieve`` and ``/batch_retrieve`` queries are gathered into batches.

    Attributes:
        max_batch_size: Most queries encoded, routed and retrieved together.
        max_wait_ms: Longest wait of a batch's first query for others (a lone query's added latency).
        concurrent_batches: Batches retrieved at once (threads; each runs its members concurrently).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_batch_size: int = Field(32, ge=1, le=BATCH_CEILING)
    max_wait_ms: float = Field(2.0, ge=0, le=1000)
    concurrent_batches: int = Field(1, ge=1, le=64)


class LLMProcessConfig(BaseModel):
    """How an in-process ``llm.kind`` (``transformers``, ``llama_cpp``) runs.

    Attributes:
        mode: ``subprocess``: in its own OpenAI-compatible server process, started and restarted by
            the service (:mod:`ragfolio.core.llm.process`); ``in_process``: inside the service's
            worker (a native crash there takes ``/retrieve`` down too).
        max_batch: Concurrent generate calls the server runs as one batch.
        max_wait_ms: The server's longest wait for a batch to fill.
        call_timeout_s: A call to the server slower than this fails (``/answer`` 503).
        max_call_s: A generation running longer than this is a hang: the process is restarted.
        health_interval_s: Seconds between the supervisor's health checks.
        unhealthy_after: Failed health checks in a row after which the process is restarted.
        backoff_s: Wait before the first restart, doubled for each further one...
        max_backoff_s: ...up to this.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["subprocess", "in_process"] = "subprocess"
    max_batch: int = Field(4, ge=1, le=64)
    max_wait_ms: float = Field(5.0, ge=0, le=1000)
    call_timeout_s: float = Field(60.0, gt=0)
    max_call_s: float = Field(120.0, gt=0)
    health_interval_s: float = Field(1.0, gt=0)
    unhealthy_after: int = Field(3, ge=1)
    backoff_s: float = Field(1.0, ge=0)
    max_backoff_s: float = Field(30.0, ge=0)


class FaultInjectionConfig(BaseModel):
    """For benchmarks and tests only: ``member`` sleeps ``delay_s`` before each run (:mod:`ragfolio.serving.faults`).

    Attributes:
        member: A member's name, as ``/portfolio`` lists it.
        delay_s: Seconds each of its runs sleeps first; past ``member_timeout_s`` it times out.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    member: str = Field(min_length=1)
    delay_s: float = Field(gt=0, le=600)


class AuthConfig(BaseModel):
    """API keys (:mod:`ragfolio.serving.access`); the keys themselves never sit in a settings file.

    Attributes:
        api_keys_env: The environment variable that holds the accepted keys, comma-separated (each
            at least 16 characters); every endpoint but the probes, ``/metrics`` and ``GET /`` then
            needs ``Authorization: Bearer <key>``. None: no key is needed (the service is open).
        secure_cookie: The playground's key cookie is always ``Secure`` (sent back over HTTPS
            only). False: it is ``Secure`` when the request came over HTTPS, as the server saw
            it or as a TLS-terminating proxy says (``X-Forwarded-Proto: https``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_keys_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    secure_cookie: bool = False


class CORSConfig(BaseModel):
    """Which web origins may call the service from a browser (Starlette's ``CORSMiddleware``).

    Attributes:
        allow_origins: Origins as a browser sends them, ``scheme://host[:port]`` (no path, no
            trailing slash), or ``"*"`` for any.
        allow_methods: Methods a cross-origin request may use.
        allow_headers: Request headers it may send (``Authorization`` for an API key).
        expose_headers: Response headers its script may read.
        allow_credentials: Whether the browser may send cookies (the playground's key) with it.
        max_age: Seconds a browser may cache a preflight's answer.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_origins: tuple[str, ...] = Field(min_length=1)
    allow_methods: tuple[str, ...] = ("GET", "POST")
    allow_headers: tuple[str, ...] = ("Authorization", "Content-Type", "X-Request-Id")
    expose_headers: tuple[str, ...] = ("X-Request-Id",)
    allow_credentials: bool = False
    max_age: int = Field(600, ge=0, le=86_400)

    @field_validator("allow_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if origin != "*" and not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ValueError(f"allow_origins: {origin!r} is not an origin: scheme://host[:port], "
                                 "no path or trailing slash (or '*')")
        return value

    @model_validator(mode="after")
    def _no_credentials_for_any_origin(self) -> CORSConfig:
        if self.allow_credentials and "*" in self.allow_origins:
            raise ValueError("allow_credentials: true with allow_origins '*' would let any web page send "
                             "a user's cookies; name the origins")
        return self


def module_available(name: str) -> bool:
    """Whether ``name`` can be imported (its parent packages are imported to find it; nothing else is)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


class TracingConfig(BaseModel):
    """OpenTelemetry spans per request (:mod:`ragfolio.serving.tracing`); off by default.

    Attributes:
        exporter: ``none`` (off: nothing is set up), ``console`` (each span a JSON line on stderr)
            or ``otlp`` (OTLP over HTTP/protobuf; needs ``OTLP_PACKAGE``, which is not a dependency).
        endpoint: The OTLP traces URL, e.g. ``http://127.0.0.1:4318/v1/traces``; None: the exporter's
            default (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``http://localhost:4318/v1/traces``).
        sample_rate: Share of requests traced (by trace id); a request whose BentoML span is
            sampled is always traced, so that its trace is whole.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    exporter: Literal["none", "console", "otlp"] = "none"
    endpoint: str | None = Field(None, min_length=1)
    sample_rate: float = Field(1.0, ge=0.0, le=1.0)

    @field_validator("exporter", mode="before")
    @classmethod
    def _none_is_a_name(cls, value: Any) -> Any:
        return "none" if value is None else value  # RAGFOLIO_TRACING__EXPORTER=none reads as null

    @model_validator(mode="after")
    def _exporter_usable(self) -> TracingConfig:
        if self.endpoint is not None and self.exporter != "otlp":
            raise ValueError(f"endpoint={self.endpoint!r} is read only with exporter: otlp, not {self.exporter!r}")
        if self.exporter == "otlp" and not module_available(OTLP_MODULE):
            raise ValueError(f"exporter: otlp needs the OTLP exporter ({OTLP_MODULE}), which is not installed: "
                             f"pip install {OTLP_PACKAGE} (or bentoml[tracing-otlp])")
        return self


class LiveUpdatesConfig(BaseModel):
    """Documents added, replaced and deleted while serving (``POST /documents``, ``DELETE /documents/{id}``).

    Attributes:
        enabled: Whether the service takes updates (off: the two routes answer 403).
        log: The update log's name, in the bundle's live folder (:func:`ragfolio.core.bundle.live_folder`:
            ``06_models/live/<key>`` beside packaging's bundles, outside the pipeline's outputs, so a
            rerun keeps it): written ahead of every update, replayed at start, carried over onto a
            rebuilt bundle (:mod:`ragfolio.core.corpus.carry_over`).
        max_documents: Most documents in one ``POST /documents``.
        stale_share: The delta (added plus removed passages) as a share of the corpus the portfolio
            was chosen on, above which ``/portfolio`` and the log warn that the portfolio may be stale.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    log: str = Field("updates.jsonl", pattern=r"^[A-Za-z0-9_.-]+$")
    max_documents: int = Field(1000, ge=1, le=100_000)
    stale_share: float = Field(0.1, gt=0)


class ServingConfig(BaseModel):
    """Settings of :class:`ragfolio.serving.service.RagfolioService` (see conf/base/serving.yml).

    Attributes:
        bundle: The portfolio bundle: its folder, or the pointer to the served one that packaging writes
            (``06_models/served.json``) or a folder holding that pointer
            (:func:`~ragfolio.core.bundle.resolve_bundle`); relative paths: to the working directory.
        default_l: Members a query is routed to when the request does not say; None: the bundle's.
        max_query_chars: Longest query accepted, in characters (at most the schemas' ceiling,
            ``QUERY_CHARS_CEILING``).
        max_batch: Most queries in one ``/batch_retrieve`` request (at most ``BATCH_CEILING``).
        max_body_bytes: Largest request body accepted, in bytes; a larger one gets a 413 before
            it is parsed.
        max_json_depth: Deepest nesting of arrays and objects in a JSON body; a deeper one gets
            a 400 before it is parsed (at most ``MAX_JSON_DEPTH_CEILING``, below every parser's
            recursion limit).
        max_num_docs: Largest ``num_docs`` a request may ask for.
        member_timeout_s: Deadline of each routed member, counted from when members start.
        request_timeout_s: Deadline of a ``/retrieve`` or ``/batch_retrieve`` request.
        answer_timeout_s: Deadline of an ``/answer`` request.
        answer_threads: ``/answer`` requests in progress at once.
        warm_up: Build the corpus parts (indexes, passage graph, encoders) before the service
            reports ready (the LLM loads meanwhile or after, never on the readiness path).
        query_engine: What encodes queries for every encoder that has the setting (``torch`` or
            ``onnxruntime``: the same vectors to float32 rounding, docs/benchmarks.md, "The query
            path"); None: as the bundle's encoders say.
        batching: How concurrent retrieval queries are batched.
        llm: Overrides of the bundle's reader's LLM (a :func:`ragfolio.core.llm.backends.make_backend`
            config laid over the bundle's key by key, :meth:`ragfolio.core.llm.reader.ReaderSettings.overridden`);
            None: the bundle's, the one answering evaluation answered with.
        llm_process: How an in-process LLM kind runs (its own process by default).
        answerer: Overrides of the bundle's answer and selector prompt limits (None each: the bundle's).
        chat: The OpenAI-compatible chat's follow-ups (:class:`ChatConfig`).
        fault_injection: Off (None) but in benchmarks and tests: a member made slow on purpose.
        auth: API keys; off (open) unless ``api_keys_env`` names a variable.
        cors: Cross-origin browser access; None (the default): none.
        tracing: OpenTelemetry spans per request; off (``exporter: none``) by default.
        live_updates: Documents added and deleted while serving (:class:`LiveUpdatesConfig`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bundle: Path = Path("data/06_models/served.json")
    default_l: int | None = Field(None, ge=1)
    max_query_chars: int = Field(2000, ge=1, le=QUERY_CHARS_CEILING)
    max_batch: int = Field(64, ge=1, le=BATCH_CEILING)
    max_body_bytes: int = Field(1_048_576, ge=1, le=MAX_BODY_BYTES_CEILING)
    max_json_depth: int = Field(32, ge=4, le=MAX_JSON_DEPTH_CEILING)  # 4: a chat request's content parts
    max_num_docs: int = Field(20, ge=1)
    member_timeout_s: float = Field(10.0, gt=0)
    request_timeout_s: float = Field(30.0, gt=0)
    answer_timeout_s: float = Field(120.0, gt=0)
    answer_threads: int = Field(4, ge=1)
    warm_up: bool = True
    query_engine: Literal["torch", "onnxruntime"] | None = None
    batching: BatchingConfig = Field(default_factory=BatchingConfig)
    llm: dict[str, Any] | None = None
    llm_process: LLMProcessConfig = Field(default_factory=LLMProcessConfig)
    answerer: AnswererConfig = Field(default_factory=AnswererConfig)
    chat: ChatConfig = Field(default_factory=ChatConfig)
    fault_injection: FaultInjectionConfig | None = None
    auth: AuthConfig = Field(default_factory=AuthConfig)
    cors: CORSConfig | None = None
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    live_updates: LiveUpdatesConfig = Field(default_factory=LiveUpdatesConfig)

    @field_validator("llm")
    @classmethod
    def _llm_overrides(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """The overrides' kind and each kind's block, as make_backend will read them once laid over
        the bundle's (which the engine checks whole)."""
        for kind, block in (value or {}).items():
            if isinstance(block, Mapping):
                backend_settings({"kind": kind, kind: block})
        if value and "kind" in value:
            backend_settings(value)
        return value


def _read(file: Path) -> dict[str, Any]:
    raw = yaml.safe_load(file.read_text()) or {}
    if not isinstance(raw, dict) or "serving" not in raw:
        raise ValueError(f"{file}: expected a top-level 'serving' key, found {sorted(raw) if isinstance(raw, dict) else raw!r}")
    return dict(raw["serving"] or {})


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings that ``RAGFOLIO_<FIELD>`` and ``RAGFOLIO_<SECTION>__<KEY>`` variables set, nested.

    Raises:
        ValueError: A variable sets a key below a top-level field that holds no section.
    """
    values: dict[str, Any] = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        if path[0] not in ServingConfig.model_fields or not all(path):
            continue
        if len(path) > 1 and path[0] not in SECTION_FIELDS:
            raise ValueError(f"{name}: {path[0]!r} is a single value; set it as {ENV_PREFIX}{path[0].upper()}")
        raw = env[name]
        value: Any = None if raw.strip().lower() in ("", "null", "none") else yaml.safe_load(raw)
        if path[0] == "bundle":
            value = raw  # a path, even one that reads as a number
        node = values
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return values


SECTION_FIELDS = ("batching", "llm", "llm_process", "answerer", "chat", "fault_injection", "auth", "cors", "tracing")


def load_config(
    path: str | Path | None = None, env: Mapping[str, str] | None = None, root: str | Path | None = None
) -> ServingConfig:
    """The settings: conf/base/serving.yml, then the file ``path`` (or ``$RAGFOLIO_SERVING_CONFIG``), then the environment.

    Each layer merges over the one before key by key (see the module docstring). A missing
    conf/base/serving.yml means the code's defaults; a missing named file is an error. Relative paths
    (the config file's, the bundle's) are taken from ``root``, the service's working directory
    (the project root, or a bento's ``src`` folder; default: the current directory).

    Raises:
        FileNotFoundError: The named config file does not exist.
        ValueError: A file has no top-level ``serving`` key.
        pydantic.ValidationError: A setting is unknown or out of range (named).
    """
    env = os.environ if env is None else env
    base = Path(root) if root is not None else Path.cwd()
    values: dict[str, Any] = {}
    if (default := base / DEFAULT_CONFIG).is_file():
        values = _read(default)
    named = path if path is not None else env.get(CONFIG_ENV)
    if named:
        file = base / Path(named)  # an absolute path stays as it is
        if not file.is_file():
            raise FileNotFoundError(f"{file} does not exist (named by {'the path argument' if path else CONFIG_ENV})")
        if file.resolve() != default.resolve():
            values = merge(values, _read(file))
    config = ServingConfig(**merge(values, env_overrides(env)))
    return config.model_copy(update={"bundle": base / config.bundle})
