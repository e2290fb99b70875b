"""Fuzz the service from its own OpenAPI document: schemathesis against every operation of ``/docs.json``.

Starts ``bentoml serve`` from the repository root (``--tiny``: on the service tests' tiny bundle
with a fake LLM, no pipeline run needed; default: the default settings and bundle), or targets a
running service with ``--url`` (loopback only), and runs ``schemathesis run <url>/docs.json`` for
``--max-time`` seconds with every check: positive and negative cases, from the document's examples,
its boundary values (the coverage phase) and random ones (fuzzing, repeated until the time is
spent). It reports, per operation, the requests sent and their statuses, the server errors (a 5xx)
and the schema violations (a response, or a server-sent event, off its documented schema), then
every other check that failed, with what schemathesis said. Writes a markdown report with ``--out``
and exits with status 1 on any server error or schema violation. Run from the repository root::

    .venv/bin/python benchmarks/fuzz_service.py --tiny --max-time 240 --out docs/results_serving/fuzz_service.md
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from service_harness import serve, served_target, service_args, service_parser, tiny_service

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
SCHEMA_CHECK = "response_schema_conformance"
SERVER_ERROR_CHECK = "not_a_server_error"


def fuzz(url: str, max_time: int, seed: int, report_dir: Path) -> tuple[int, float, Path]:
    """Run schemathesis on ``url``'s document; its exit status, seconds, and the NDJSON events file."""
    events = report_dir / "events.ndjson"
    command = [SCHEMATHESIS, "run", f"{url}/docs.json", "--checks", "all", "--max-time", str(max_time),
               "--phases", "examples,coverage,fuzzing", "--workers", "1", "--seed", str(seed), "--request-timeout", "60",
               "--report", "ndjson", "--report-ndjson-path", str(events)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=report_dir, capture_output=True, text=True)
    (report_dir / "schemathesis.log").write_text(done.stdout + done.stderr)
    return done.returncode, time.perf_counter() - start, events


def summarize(events: Path) -> tuple[dict[str, Counter[str]], list[dict[str, Any]]]:
    """Per operation, counts of ``requests``, each status class and each failed check; and every failure.

    Reads schemathesis's NDJSON events: each finished scenario records its cases' requests and
    responses (``interactions``) and the checks run on each (``checks``).
    """
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    failures: list[dict[str, Any]] = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        scenario = event.get("ScenarioFinished")
        if scenario is None:
            continue
        recorder = scenario["recorder"]
        operation = recorder["label"]
        for interaction in (recorder.get("interactions") or {}).values():
            response = interaction.get("response")
            counts[operation]["requests"] += 1
            counts[operation]["no response" if response is None else f"{response['status_code'] // 100}xx"] += 1
        for checks in (recorder.get("checks") or {}).values():
            for check in checks:
                if check["status"] == "failure":
                    counts[operation][check["name"]] += 1
                    failure = (check.get("failure_info") or {}).get("failure") or {}
                    failures.append({"operation": operation, "check": check["name"], "code": failure.get("code"),
                                     "title": failure.get("title"), "message": failure.get("message", "")})
    return counts, failures


def report(counts: dict[str, Counter[str]], failures: list[dict[str, Any]], command: str, target: str,
           seconds: float) -> tuple[str, bool]:
    """The markdown report, and whether it is clean (no server error, no schema violation)."""
    total = Counter[str]()
    rows = []
    for operation in sorted(counts, key=lambda op: op.split(" ", 1)[::-1]):
        c = counts[operation]
        total.update(c)
        server_errors = max(c["5xx"], c[SERVER_ERROR_CHECK])
        others = ", ".join(f"{name} {n}" for name, n in sorted(c.items())
                           if name not in ("requests", "2xx", "3xx", "4xx", "5xx", "no response", SCHEMA_CHECK,
                                           SERVER_ERROR_CHECK)) or "none"
        rows.append(f"| `{operation}` | {c['requests']:,} | {c['2xx']:,} | {c['4xx']:,} | {server_errors} | "
                    f"{c[SCHEMA_CHECK]} | {others} |")
    server_errors, violations = max(total["5xx"], total[SERVER_ERROR_CHECK]), total[SCHEMA_CHECK]
    unique: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for failure in failures:
        unique.setdefault((failure["operation"], failure["check"], failure["code"]), failure)
    found = [f"- `{f['operation']}`, {f['check']} ({f['code']} {f['title']}): {_gist(f['message'])}"
             for f in unique.values()]
    text = "\n".join([
        "# Fuzzing the service from its OpenAPI document", "",
        f"Command: `python {command}` (from the repository root), against {target}: schemathesis "
        f"{schemathesis_version()} on every operation of `/docs.json`, every check, positive and negative cases, "
        f"{seconds:.0f} s.", "",
        f"{total['requests']:,} requests to {len(counts)} operations: {total['2xx']:,} x 2xx, {total['4xx']:,} x 4xx, "
        f"**{server_errors} server errors (5xx), {violations} schema violations**.", "",
        "| operation | requests | 2xx | 4xx | server errors | schema violations | other checks failed |",
        "|---|---|---|---|---|---|---|", *rows,
        f"| all | {total['requests']:,} | {total['2xx']:,} | {total['4xx']:,} | {server_errors} | {violations} | |", "",
        "## What schemathesis reported", "", *(found or ["Nothing: every check passed."]), "",
    ])
    return text, server_errors == 0 and violations == 0


def _gist(message: str, limit: int = 400) -> str:
    """A failure's message on one line (its non-empty lines joined), at most ``limit`` characters."""
    text = " / ".join(line.strip() for line in message.splitlines() if line.strip())[:limit] if message else ""
    return text.replace("|", "\\|")


def schemathesis_version() -> str:
    from importlib.metadata import version

    return version("schemathesis")


def main() -> None:
    parser = service_parser(__doc__.split("\n")[0])
    parser.add_argument("--max-time", type=int, default=240, help="seconds of fuzzing")
    parser.add_argument("--seed", type=int, default=46)
    args = service_args(parser, "fuzzed")
    with contextlib.ExitStack() as stack:
        if args.url:
            url = args.url.rstrip("/")
        else:
            url = stack.enter_context((tiny_service if args.tiny else serve)(args.ready_timeout_s)).url
        report_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fuzz_service_")))
        _, seconds, events = fuzz(url, args.max_time, args.seed, report_dir)
        counts, failures = summarize(events)
    text, clean = report(counts, failures, shlex.join(sys.argv), served_target(args), seconds)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
