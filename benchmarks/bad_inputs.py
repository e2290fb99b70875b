"""Bad input against a running service: each kind's status and body, checked for 4xx and for leaks.

Sends each kind of malformed request in :func:`bad_cases` (blank and oversize queries, wrong
types of each field, unknown fields, malformed or non-UTF-8 JSON, bodies that are not an object,
JSON nested past ``max_json_depth`` (in an extra field too), out-of-range ``l`` and ``num_docs``,
empty and huge batches, oversize bodies with and without a ``Content-Length``, wrong or missing
content types, wrong methods, unknown paths, ...) to ``/retrieve``, ``/batch_retrieve``, ``/answer``
and OpenAI's ``/v1/chat/completions`` of a service, one at a time, and checks that

* every status is a 4xx (and the one named, where a kind has one: 413 for an oversize body, 415 for
  a body that is not plain JSON, 405 for a wrong method, 404 for an unknown path), under ``/v1/``
  in OpenAI's error shape;
* no body holds an internal: an exception class name, a traceback (``Traceback``, ``File "``), a
  file path (``/work``, ``site-packages``, ``.py"``), a URL (``http://``, ``https://``), the LLM
  process's address, or the echoed input.

Starts ``bentoml serve`` from the repository root on a free loopback port with the default settings,
or targets a running service with ``--url`` (loopback only). Writes a markdown table (kind,
endpoint, status, body; the request id shown as ``<id>``) with ``--out`` and exits with status 1
if any kind failed a check. Run from the repository root::

    .venv/bin/python benchmarks/bad_inputs.py --out docs/results_serving/bad_inputs.md
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from service_harness import llm_server, serve, served_target, service_args, service_parser, tiny_service

JSON = {"Content-Type": "application/json"}
CHAT = "/v1/chat/completions"
ENDPOINTS = ("/retrieve", "/batch_retrieve", "/answer", CHAT)
MARKER = "zq7marker"  # put into bad values, so that an echoed input can be seen
LEAKS = [
    ("traceback", re.compile(r"Traceback|File \"")),
    ("exception class", re.compile(r"\b[A-Z]\w*(Error|Exception|Warning)\b")),
    ("file path", re.compile(r"/work/|/home/|/tmp/|/usr/|site-packages|\.py\b")),
    ("URL", re.compile(r"https?://")),
    ("echoed input", re.compile(MARKER)),
]


@dataclass(frozen=True)
class Case:
    """One kind of bad request: ``body`` is JSON-encoded unless it is bytes (or a byte iterator)."""

    kind: str
    endpoint: str
    method: str = "POST"
    body: Any = None
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))
    expect: int | None = None  # the status this kind must get; None: any 4xx
    chunked: bool = False  # send ``body`` (bytes) in chunks without a Content-Length

    def content(self) -> bytes | Iterator[bytes] | None:
        if self.body is None:
            return None
        data = self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()
        if self.chunked:
            return iter([data[i:i + 65536] for i in range(0, len(data), 65536)])
        return data


@dataclass
class Outcome:
    case: Case
    status: int
    body: str
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def body_cases(ep: str, good: dict[str, Any], max_body: int, max_depth: int) -> list[Case]:
    """The kinds of bad body every JSON endpoint refuses alike: not JSON, not an object, too deep,
    too large, the wrong media type or method. ``good``: a valid body of ``ep``."""
    field_ = next(iter(good))
    over_body = {field_: MARKER + "x" * (max_body + 1)}
    nested = b'{"' + field_.encode() + b'": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # deeper than any parser's stack
    ignored = json.dumps(good)[:-1].encode() + b', "tools": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    return [
        Case("malformed JSON", ep, body=b'{"' + field_.encode() + b'": "' + MARKER.encode() + b'",'),
        Case("empty body", ep, body=b""),
        Case("JSON array instead of an object", ep, body=[good, good]),
        Case("JSON string instead of an object", ep, body=MARKER),
        Case("JSON null", ep, body=b"null"),
        Case("deeply nested JSON (100,000 levels)", ep, body=nested),
        Case(f"nesting past max_json_depth ({max_depth + 1} levels) in a field", ep,
             body={field_: json.loads("[" * max_depth + "]" * max_depth)}),
        Case("5,000 nested lists in an extra field (`tools`)", ep, body=ignored),
        Case("non-UTF-8 bytes", ep, body=b'{"' + field_.encode() + b'": "caf\xe9 \xff\xfe"}'),
        Case("JSON sent as Content-Type text/plain", ep, body=good, headers={"Content-Type": "text/plain"}, expect=415),
        Case("JSON without a Content-Type", ep, body=good, headers={}, expect=415),
        Case("form-encoded body", ep, body=f"{field_}={MARKER}".encode(),
             headers={"Content-Type": "application/x-www-form-urlencoded"}, expect=415),
        Case("multipart/form-data body", ep,
             body=(f'--b\r\nContent-Disposition: form-data; name="{field_}"\r\n\r\n{MARKER}\r\n--b--\r\n').encode(),
             headers={"Content-Type": "multipart/form-data; boundary=b"}, expect=415),
        Case("pickle (application/vnd.bentoml+pickle)", ep, body=b"\x80\x04N.",
             headers={"Content-Type": "application/vnd.bentoml+pickle"}, expect=415),
        Case("JSON with Content-Encoding gzip", ep, body=good, headers={**JSON, "Content-Encoding": "gzip"}, expect=415),
        Case(f"body over max_body_bytes ({max_body + 1}+ bytes)", ep, body=over_body, expect=413),
        Case("chunked body over max_body_bytes (no Content-Length)", ep, body=over_body, expect=413, chunked=True),
        Case("GET on a POST endpoint", ep, method="GET", body=None, headers={}, expect=405),
        Case("PUT on a POST endpoint", ep, method="PUT", body=good, expect=405),
    ]


def routing_cases(ep: str, good: dict[str, Any], k: int) -> list[Case]:
    """Bad values of ``l``, the routing extension every endpoint has."""
    return [
        Case("`l` = 0", ep, body={**good, "l": 0}),
        Case("`l` negative", ep, body={**good, "l": -3}),
        Case(f"`l` > k ({k + 1})", ep, body={**good, "l": k + 1}),
        Case("`l` as a string", ep, body={**good, "l": "2"}),
        Case("`l` as a float", ep, body={**good, "l": 1.5}),
        Case("`l` as a boolean", ep, body={**good, "l": True}),
        Case("`l` of 10^30", ep, body={**good, "l": 10**30}),
        Case("`l` NaN (non-standard JSON)", ep, body=json.dumps(good)[:-1].encode() + b', "l": NaN}'),
    ]


def chat_cases(q: str, max_chars: int) -> list[Case]:
    """Bad chat requests (``/v1/chat/completions``): the question is the last user message."""
    ep = CHAT

    def asking(content: Any, role: str = "user", **extra: Any) -> dict[str, Any]:
        return {"model": "ragfolio", "messages": [{"role": role, "content": content}], **extra}

    return [
        Case("blank query", ep, body=asking("")),
        Case("whitespace-only query", ep, body=asking(" \n\t ")),
        Case(f"query of max_query_chars+1 ({max_chars + 1}) characters", ep,
             body=asking(MARKER + "x" * (max_chars + 1 - len(MARKER)))),
        Case("query over the schema's ceiling (100,001 characters)", ep, body=asking(MARKER + "x" * (100_001 - len(MARKER)))),
        Case("query as a number", ep, body=asking(42)),
        Case("query as null", ep, body=asking(None)),
        Case("query as an object", ep, body=asking({"text": MARKER})),
        Case("missing `messages`", ep, body={"model": "ragfolio"}),
        Case("empty `messages`", ep, body={"messages": []}),
        Case("no user message", ep, body=asking(q, role="system")),
        Case("an image part in the question", ep, body=asking([{"type": "image_url", "image_url": {"url": MARKER}}])),
        Case("`n` = 2", ep, body=asking(q, n=2)),
        Case("`temperature` = 3", ep, body=asking(q, temperature=3)),
        Case("`max_tokens` = 0", ep, body=asking(q, max_tokens=0)),
        Case("`stream` as a string", ep, body=asking(q, stream="yes")),
        Case("lone surrogate escape in the query", ep, body=json.dumps(asking(MARKER + "\ud800")).encode()),
        Case("POST on GET /v1/models", "/v1/models", body=asking(q), expect=405),
    ]


def bad_cases(limits: dict[str, Any], k: int) -> list[Case]:
    """The kinds of bad request, given the service's ``limits`` (``/portfolio``) and its k."""
    q = "Who was the father of Hermann II, Landgrave of Hesse?"
    max_chars, max_batch, max_body = limits["max_query_chars"], limits["max_batch"], limits["max_body_bytes"]
    max_docs, max_depth = limits["max_num_docs"], limits.get("max_json_depth", 32)
    cases: list[Case] = []
    for ep in ENDPOINTS[:3]:
        batch = ep == "/batch_retrieve"
        field_ = "queries" if batch else "query"

        def good(value: Any = None, field_: str = field_, batch: bool = batch) -> dict[str, Any]:
            if value is None:
                value = q
            return {field_: [value] if batch and not isinstance(value, list) else value}

        cases += [
            Case("blank query", ep, body=good("")),
            Case("whitespace-only query", ep, body=good(" \n\t ")),
            Case(f"query of max_query_chars+1 ({max_chars + 1}) characters", ep,
                 body=good(MARKER + "x" * (max_chars + 1 - len(MARKER)))),
            Case("query over the schema's ceiling (100,001 characters)", ep,
                 body=good(MARKER + "x" * (100_001 - len(MARKER)))),
            Case("query as a number", ep, body={field_: 42}),
            Case("query as null", ep, body={field_: None}),
            Case("query as an object", ep, body={field_: {"text": MARKER}}),
            Case(f"missing `{field_}`", ep, body={"l": 1}),
            Case("unknown field", ep, body={**good(), "dataset": MARKER}),
            *routing_cases(ep, good(), k),
            Case("lone surrogate escape in the query", ep, body=json.dumps(good(MARKER + "\ud800")).encode()),
            *body_cases(ep, good(), max_body, max_depth),
        ]
        if ep != "/answer":
            cases += [
                Case("`num_docs` = 0", ep, body={**good(), "num_docs": 0}),
                Case("`num_docs` negative", ep, body={**good(), "num_docs": -1}),
                Case(f"`num_docs` > max_num_docs ({max_docs + 1})", ep, body={**good(), "num_docs": max_docs + 1}),
                Case("`num_docs` as a string", ep, body={**good(), "num_docs": "4"}),
            ]
        else:
            cases.append(Case("`num_docs` (not a field of /answer)", ep, body={**good(), "num_docs": 2}))
        if batch:
            cases += [
                Case("empty batch", ep, body={"queries": []}),
                Case(f"batch of max_batch+1 ({max_batch + 1}) queries", ep, body={"queries": [q] * (max_batch + 1)}),
                Case("huge batch (1,025 queries, over the schema's ceiling)", ep, body={"queries": ["q"] * 1025}),
                Case("huge batch (20,000 queries, under max_body_bytes)", ep, body={"queries": ["q"] * 20_000}),
                Case("batch with one blank query", ep, body={"queries": [q, ""]}),
                Case("batch with a number", ep, body={"queries": [q, 7]}),
                Case("`queries` as a string", ep, body={"queries": q}),
                Case("`query` instead of `queries`", ep, body={"query": q}),
            ]
    chat = {"messages": [{"role": "user", "content": q}]}
    cases += [*chat_cases(q, max_chars), *routing_cases(CHAT, chat, k), *body_cases(CHAT, chat, max_body, max_depth)]
    cases += [
        Case("unknown path", "/retrieve_all", body={"query": q}, expect=404),
        Case("path traversal (`/../../etc/passwd`)", "/../../etc/passwd", method="GET", body=None, headers={}, expect=404),
        Case("POST on GET /portfolio", "/portfolio", body={"query": q}, expect=405),
    ]
    return cases


def leaks(body: str, extra: list[str]) -> list[str]:
    """The internals ``body`` shows (:data:`LEAKS`, and any string of ``extra``: e.g. the LLM's port)."""
    found = [name for name, pattern in LEAKS if pattern.search(body)]
    return found + [f"internal {s!r}" for s in extra if s and s in body]


def send(client: httpx.Client, case: Case) -> tuple[int, str]:
    """The status and text of ``case``'s response (status 0: the connection failed)."""
    try:
        response = client.request(case.method, case.endpoint, content=case.content(), headers=case.headers)
    except httpx.HTTPError as exc:
        return 0, f"(no response: {type(exc).__name__})"
    return response.status_code, response.text


async def send_async(client: httpx.AsyncClient, case: Case) -> tuple[int, str]:
    """:func:`send` on an async client."""
    content = case.content()
    if isinstance(content, Iterator):  # an async client streams an async iterator
        chunks = list(content)

        async def stream() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        content = stream()  # type: ignore[assignment]
    try:
        response = await client.request(case.method, case.endpoint, content=content, headers=case.headers)
    except httpx.HTTPError as exc:
        return 0, f"(no response: {type(exc).__name__})"
    return response.status_code, response.text


def openai_shaped(body: str) -> bool:
    """Whether ``body`` is OpenAI's error object, ``{"error": {"message", "type", "param", "code"}}``."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)


def check(case: Case, status: int, body: str, internals: list[str]) -> Outcome:
    problems = []
    if not 400 <= status < 500:
        problems.append(f"status {status} is not a 4xx")
    elif case.expect is not None and status != case.expect:
        problems.append(f"status {status}, expected {case.expect}")
    if case.endpoint.startswith("/v1/") and 400 <= status and not openai_shaped(body):
        problems.append("not OpenAI's error shape")
    problems += [f"leaks {what}" for what in leaks(body, internals)]
    return Outcome(case, status, body, problems)


def internal_strings(pid: int | None) -> list[str]:
    """Strings no body may hold: the LLM server's address (``127.0.0.1:<port>``) when it can be found."""
    if pid is None or (proc := llm_server(pid)) is None:
        return []
    cmd = proc.cmdline()
    port = cmd[cmd.index("--port") + 1] if "--port" in cmd else None
    return [f"127.0.0.1:{port}", f"localhost:{port}"] if port else []


def shown(body: str, width: int = 200) -> str:
    """The body for a table cell: without ``request_id`` (every error body has one), compact, cut to
    ``width`` characters, pipes escaped."""
    with contextlib.suppress(ValueError):
        payload = json.loads(body)
        if isinstance(payload, dict):
            payload.pop("request_id", None)
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    body = body if len(body) <= width else body[: width - 1] + "…"
    return body.replace("|", "\\|").replace("\n", " ")


def run(url: str, pid: int | None) -> list[Outcome]:
    portfolio = httpx.get(f"{url}/portfolio", timeout=30).json()
    internals = internal_strings(pid)
    with httpx.Client(base_url=url, timeout=120) as client:
        return [check(case, *send(client, case), internals)
                for case in bad_cases(portfolio["limits"], portfolio["k"])]


def table(outcomes: list[Outcome]) -> str:
    lines = ["| # | kind | endpoint | status | body | check |", "|---|---|---|---|---|---|"]
    for i, o in enumerate(outcomes, 1):
        method = "" if o.case.method == "POST" else f"{o.case.method} "
        verdict = "ok" if o.ok else "**" + "; ".join(o.problems) + "**"
        lines.append(f"| {i} | {o.case.kind} | {method}`{o.case.endpoint}` | {o.status} | `{shown(o.body)}` | {verdict} |")
    return "\n".join(lines)


def table_by_kind(outcomes: list[Outcome]) -> str:
    """One row per kind: its status on each endpoint it was sent to, and the body of the first."""
    kinds: dict[str, list[Outcome]] = {}
    for o in outcomes:
        kinds.setdefault(o.case.kind, []).append(o)
    lines = [f"| kind | {' | '.join(f'`{ep}`' for ep in ENDPOINTS)} | body (the first endpoint's) |",
             "|---|---|---|---|---|---|"]
    for kind, group in kinds.items():
        status = {o.case.endpoint: str(o.status) + ("" if o.ok else " **fails**") for o in group}
        cells = [status.get(ep, "") for ep in ENDPOINTS]
        if not any(cells):  # a kind of its own path
            cells[0] = " ".join(f"{o.case.method} `{o.case.endpoint}`: {o.status}" for o in group)
        lines.append(f"| {kind} | {' | '.join(cells)} | `{shown(group[0].body, 220)}` |")
    return "\n".join(lines)


def summary(outcomes: list[Outcome]) -> str:
    statuses: dict[int, int] = {}
    for o in outcomes:
        statuses[o.status] = statuses.get(o.status, 0) + 1
    kinds = len({o.case.kind for o in outcomes})
    failed = [o for o in outcomes if not o.ok]
    by_status = ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items()))
    return (f"{len(outcomes)} requests of {kinds} kinds: {by_status}; "
            f"{len(outcomes) - len(failed)} passed every check, {len(failed)} failed.")


def main() -> None:
    args = service_args(service_parser(__doc__.split("\n")[0]), "sent bad input")
    with contextlib.ExitStack() as stack:
        if args.url:
            url, pid = args.url.rstrip("/"), None
        else:
            served = stack.enter_context((tiny_service if args.tiny else serve)(args.ready_timeout_s))
            url, pid = served.url, served.pid
        outcomes = run(url, pid)
    target = served_target(args)
    text = "\n".join([
        "# Bad input", "",
        f"Command: `python {shlex.join(sys.argv)}` (from the repository root), against {target}.", "",
        summary(outcomes) + " Every error body also holds `request_id` (left out below).", "",
        "## By kind", "", table_by_kind(outcomes), "",
        "## Every request", "", table(outcomes), "",
    ])
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    sys.exit(0 if all(o.ok for o in outcomes) else 1)


if __name__ == "__main__":
    main()
