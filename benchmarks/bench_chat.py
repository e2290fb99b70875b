"""Time to first token of the OpenAI-compatible chat endpoint, lone requests, split by stage.

Starts ``bentoml serve`` from the repository root with the default settings (the pipeline's bundle,
the embedded reader in its supervised process), waits for the reader to answer once, then sends
``--requests`` lone ``POST /v1/chat/completions`` with ``stream: true`` at ``l`` = 1 (the reader's
tokens stream as they come) and, for the same questions, lone ``POST /answer`` whose ``latency_ms``
gives the stages: routing, retrieval, the reader's call (prefill and generation together: the
supervised process reports one latency per call) and the selector (none at l = 1). Reported per
request and as medians: time to the first content chunk, time to the last, and the ``/answer``
stages; the first token must leave long before the answer is complete.

Run from the repository root on an otherwise idle machine::

    .venv/bin/python benchmarks/bench_chat.py --requests 10 --out docs/results_issue36/bench_chat.md
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx
import numpy as np
from service_harness import load_average, machine, questions, serve, wait_for_llm


def streamed(url: str, question: str, l: int) -> tuple[float, float, str]:  # noqa: E741
    """``(seconds to the first content chunk, seconds to [DONE], the content)`` of one streamed chat."""
    body = {"model": "ragfolio", "messages": [{"role": "user", "content": question}], "stream": True, "l": l}
    start, first, pieces = time.perf_counter(), float("nan"), []
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:])["choices"]
            delta = choices[0]["delta"].get("content") if choices else None
            if delta:
                if not pieces:
                    first = time.perf_counter() - start
                pieces.append(delta)
    return first, time.perf_counter() - start, "".join(pieces)


def reader_split(prompts: list[tuple[str, list[tuple[str, str]]]]) -> list[tuple[float, float, int, int]]:
    """Per ``(question, passages)``: the embedded reader in this process on the answer prompt the
    service builds, ``(seconds to its first piece: prefill and one token, seconds after it, prompt
    tokens, generated tokens)``."""
    from ragfolio.core.answering.prompts import ANSWER_SCHEMA, answer_messages
    from ragfolio.core.llm.models import DEFAULT_READER
    from ragfolio.core.llm.native import LlamaCppBackend

    reader = LlamaCppBackend(DEFAULT_READER)
    reader.load()
    out = []
    for question, passages in prompts:
        start = time.perf_counter()
        pieces = reader.stream_text(reader.prompt(answer_messages(question, passages)), max_tokens=64,
                                    stop=reader.default_stop, json_schema=ANSWER_SCHEMA)
        first = float("nan")
        for _ in pieces:
            if first != first:  # the first piece
                first = time.perf_counter() - start
        n_prompt, n_new = pieces.counts
        out.append((first, time.perf_counter() - start - first, n_prompt, n_new))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--l", type=int, default=1)
    parser.add_argument("--ready-timeout-s", type=float, default=180.0)
    parser.add_argument("--reader-split", action="store_true",
                        help="after the service stops, run the reader in process on the same prompts to split "
                             "its call into prefill (time to its first piece) and generation")
    parser.add_argument("--out", type=Path, help="write the markdown report here (and print it)")
    args = parser.parse_args()
    queries = questions()[: args.requests]
    load_before = load_average()
    rows: list[dict] = []
    prompts: list[tuple[str, list[tuple[str, str]]]] = []
    with serve(args.ready_timeout_s) as served:
        waited = wait_for_llm(served.url, queries[-1], 600.0)
        for question in queries:
            first, total, content = streamed(served.url, question, args.l)
            answer = httpx.post(f"{served.url}/answer", json={"query": question, "l": args.l}, timeout=600).json()
            stages = answer["latency_ms"]
            passages = [(p["title"], p["text"]) for p in answer["members"][0]["passages"]] if answer["members"] else []
            prompts.append((question, passages))
            rows.append({"first_s": first, "total_s": total, "same": content == answer["answer"],
                         **{k: stages.get(k, 0.0) / 1000 for k in ("route", "retrieve", "answer", "select", "total")}})
            print(json.dumps(rows[-1]), flush=True)
    split = reader_split(prompts) if args.reader_split else []  # the service is stopped: the cores are the reader's
    for row, (prefill, generation, n_prompt, n_new) in zip(rows, split, strict=False):
        row.update({"prefill_s": prefill, "generation_s": generation, "n_prompt": n_prompt, "n_new": n_new})
    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0] if k != "same"}
    lines = [
        f"# Chat: time to first token, lone requests (l = {args.l})", "",
        f"Machine: {machine()}; load average before {load_before}, after {load_average()}; "
        f"{len(rows)} questions of the sample; the reader first answered {waited:.1f} s after the service was ready.",
        "", "| request | first token s | last token s | /answer: route s | retrieve s | reader s | select s | total s "
        "| streamed = /answer |", "|---|---|---|---|---|---|---|---|---|",
        *(f"| {i + 1} | {r['first_s']:.2f} | {r['total_s']:.2f} | {r['route']:.3f} | {r['retrieve']:.3f} | "
          f"{r['answer']:.2f} | {r['select']:.2f} | {r['total']:.2f} | {r['same']} |" for i, r in enumerate(rows)),
        f"| median | {med['first_s']:.2f} | {med['total_s']:.2f} | {med['route']:.3f} | {med['retrieve']:.3f} | "
        f"{med['answer']:.2f} | {med['select']:.2f} | {med['total']:.2f} | "
        f"{sum(r['same'] for r in rows)}/{len(rows)} |",
    ]
    if "prefill_s" in med:
        lines += ["", "The reader alone in this process on the same answer prompts (service stopped), median: "
                  f"prefill and first token {med['prefill_s']:.2f} s ({med['n_prompt']:.0f} prompt tokens), "
                  f"generation after it {med['generation_s']:.2f} s ({med['n_new']:.0f} tokens)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
