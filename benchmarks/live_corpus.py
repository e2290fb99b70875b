"""The living corpus measured through a real ``bentoml serve``: updates, filters and a kill mid-update.

Given a run's bundle and its questions, this script copies the bundle, gives every passage two
metadata fields (``dataset``: the dataset of the first question whose contexts hold it, or
``corpus_dir`` for a passage only the corpus folder has; ``bucket``: ``crc32(id) % 100``, so that
``bucket == 0`` keeps 1% of the corpus and ``bucket < 50`` half of it), serves the copy and measures:

* **updates**: the time of ``POST /documents`` with 1, 100 and 1,000 new passages (the reply comes
  once they are logged and searchable) and, right after it, that a query made of a new passage's
  own title and first words finds it; ``/retrieve`` lone p50 and throughput at 16 in flight before
  and with a 1,000-passage delta; each member's list of every test question before and after the
  delta, where no added passage entered it (the list, added rows taken out, must be the old one's head);
* **faults**: concurrent queries during the updates (errors counted); the service SIGKILLed while
  a 1,000-passage update is in flight, restarted: every acknowledged passage present (``GET
  /documents/{id}``), the batch in flight all there or none of it;
* **filters**: every returned passage of a filtered query matches; recall@4 of the gold passages
  per dataset with the filter ``dataset == <the question's>`` against unfiltered; lone p50 with a
  filter that keeps 1% and 50%; a malformed filter is a 400.

New passages come from ``--added-from`` (a question file whose contexts are not in the corpus:
``../shared/data/extra/hotpotqa_fullwiki_dev.jsonl`` by default). The LLM is not used.

    .venv/bin/python benchmarks/live_corpus.py --run-data <run>/data --out docs/results_issue49/live_shared.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import yaml

from ragfolio.core.bundle import load_bundle, resolve_bundle, save_bundle
from ragfolio.core.data.loading import load_jsonl
from ragfolio.core.data.passages import Corpus
from ragfolio.core.llm.process import free_port

ROOT = Path(__file__).resolve().parents[1]


def origins(questions: list[dict], corpus: Corpus) -> list[str]:
    """The dataset of the first question holding each passage as a context (else ``corpus_dir``)."""
    from ragfolio.core.data.records import passage_id

    first: dict[str, str] = {}
    for q in questions:
        for c in q["contexts"]:
            first.setdefault(passage_id(c["title"], c["text"]), q["dataset"])
    return [first.get(pid, "corpus_dir") for pid in corpus.ids]


def with_metadata(bundle_dir: Path, questions: list[dict], out: Path) -> Path:
    """A copy of the bundle whose passages carry ``dataset`` and ``bucket`` metadata."""
    bundle = load_bundle(bundle_dir, verify=True, mmap=False)
    corpus = bundle.corpus
    metadata = tuple({"dataset": d, "bucket": zlib.crc32(pid.encode()) % 100}
                     for pid, d in zip(corpus.ids, origins(questions, corpus), strict=True))
    save_bundle(replace(bundle, corpus=replace(corpus, metadata=metadata)), out)
    return out


@contextlib.contextmanager
def serve(bundle: Path, home: Path, *, timeout_s: float = 600.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """``bentoml serve`` of ``bundle`` (an LLM nobody listens to: retrieval only); yields its URL and process."""
    config = home / "serving.yml"
    config.write_text(yaml.safe_dump({"serving": {
        "bundle": str(bundle), "warm_up": True, "max_batch": 1024, "request_timeout_s": 300,
        "llm": {"kind": "openai", "openai": {"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "none"}}}}))
    port = free_port()
    env = {**os.environ, "RAGFOLIO_SERVING_CONFIG": str(config), "BENTOML_HOME": str(home / "bentoml"),
           "BENTOML_DO_NOT_TRACK": "true"}
    log = (home / f"serve-{port}.log").open("w")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("bentoml")), "serve", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"bentoml serve exited: {(home / f'serve-{port}.log').read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("bentoml serve not ready")
            time.sleep(0.5)
        yield url, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def new_passages(path: Path, known: set[str], n: int) -> list[dict]:
    """``n`` passages of ``path``'s contexts that are not in the corpus, as documents with ids."""
    from ragfolio.core.data.records import passage_id

    out, seen = [], set(known)
    for q in load_jsonl(path):
        for c in q.contexts:
            pid = passage_id(c.title, c.text)
            if pid not in seen and len(c.text.split()) >= 8:
                seen.add(pid)
                out.append({"id": f"live-{pid}", "title": c.title, "text": c.text,
                            "metadata": {"dataset": "live", "bucket": zlib.crc32(pid.encode()) % 100}})
                if len(out) == n:
                    return out
    raise ValueError(f"{path} holds only {len(out)} new passages, {n} asked")


def p50_ms(client: httpx.Client, url: str, queries: list[str], **extra) -> float:
    times = []
    for q in queries:
        start = time.perf_counter()
        r = client.post(f"{url}/retrieve", json={"query": q, **extra})
        r.raise_for_status()
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def throughput(url: str, queries: list[str], in_flight: int = 16) -> dict:
    errors = 0

    def one(q: str) -> None:
        nonlocal errors
        with httpx.Client(timeout=300) as c:
            if c.post(f"{url}/retrieve", json={"query": q}).status_code != 200:
                errors += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, queries))
    return {"queries_per_s": len(queries) / (time.perf_counter() - start), "errors": errors, "queries": len(queries)}


def member_lists(client: httpx.Client, url: str, queries: list[str], k: int) -> list[dict[str, list[str]]]:
    out = []
    for start in range(0, len(queries), 128):
        body = client.post(f"{url}/batch_retrieve", json={"queries": queries[start:start + 128], "l": k}).json()
        out += [{m["name"]: [p["id"] for p in m["passages"]] for m in r["members"] if m["ok"]} for r in body["results"]]
    return out


def unchanged(before: list[dict], after: list[dict], added: set[str]) -> dict:
    lists = same = entered = 0
    for old, new in zip(before, after, strict=True):
        for name, ids in old.items():
            lists += 1
            kept = [i for i in new[name] if i not in added]
            entered += len(kept) < len(new[name])
            same += kept == ids[: len(kept)]
    return {"lists": lists, "lists_an_added_passage_entered": entered, "unchanged_where_none_outranks": same}


def recall_at(lists: list[list[str]], gold: list[set[str]], n: int = 4) -> float:
    return float(np.mean([len(set(ids[:n]) & g) / len(g) for ids, g in zip(lists, gold, strict=True) if g]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-data", type=Path, required=True, help="the run's data root (06_models, 02_intermediate)")
    parser.add_argument("--added-from", type=Path, default=ROOT.parent / "shared/data/extra/hotpotqa_fullwiki_dev.jsonl")
    parser.add_argument("--queries", type=int, default=100, help="test questions timed lone")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from ragfolio.core.data.records import passage_id

    questions = json.loads((args.run_data / "02_intermediate/questions.json").read_text())
    test = [q for q in questions if q["split"] == "test"]
    work = Path(tempfile.mkdtemp(prefix="live-bench-"))
    bundle = with_metadata(resolve_bundle(args.run_data / "06_models/served.json"), questions, work / "bundle")
    served = load_bundle(bundle, verify=False)
    corpus, k = served.corpus, served.k
    report: dict = {"passages": len(corpus), "members": [m.name for m in served.members], "k": k}
    docs = new_passages(args.added_from, set(corpus.ids), 1101 + 100 + 1000)  # updates, small acked ones, the killed one
    timed = [q["question"] for q in test[: args.queries]]
    with serve(bundle, work) as (url, _), httpx.Client(timeout=600) as client:
        report["lone_p50_ms_before"] = p50_ms(client, url, timed)
        report["throughput_before"] = throughput(url, [q["question"] for q in test[:320]])
        before = member_lists(client, url, [q["question"] for q in test], k)
        # filters
        rows = {pid: row for row, pid in enumerate(corpus.ids)}
        by_dataset: dict[str, dict] = {}
        for dataset in sorted({q["dataset"] for q in test}):
            qs = [q for q in test if q["dataset"] == dataset]
            gold = [{passage_id(c["title"], c["text"]) for c in q["contexts"] if c.get("is_supporting")} for q in qs]
            texts = [q["question"] for q in qs]
            plain = client.post(f"{url}/batch_retrieve", json={"queries": texts, "l": 1}).json()["results"]
            kept = client.post(f"{url}/batch_retrieve", json={"queries": texts, "l": 1,
                                                               "filter": {"dataset": dataset}}).json()["results"]
            ok = all(corpus.metadata[rows[p["id"]]]["dataset"] == dataset for r in kept for p in r["passages"])
            by_dataset[dataset] = {
                "questions": len(qs), "every_passage_matches": ok,
                "recall@4_unfiltered": recall_at([[p["id"] for p in r["passages"]] for r in plain], gold),
                "recall@4_filtered": recall_at([[p["id"] for p in r["passages"]] for r in kept], gold)}
        report["filters"] = {
            "by_dataset": by_dataset,
            "lone_p50_ms_keep_1pct": p50_ms(client, url, timed, filter={"bucket": 0}),
            "lone_p50_ms_keep_50pct": p50_ms(client, url, timed, filter={"bucket": {"lt": 50}}),
            "lone_p50_ms_unfiltered": p50_ms(client, url, timed),
            "malformed_status": client.post(f"{url}/retrieve", json={"query": "x", "filter": {"bucket": {"near": 1}}}
                                            ).status_code}
        # updates, with queries running beside them
        stop, errors, served_q = threading.Event(), [0], [0]

        def query_loop() -> None:
            with httpx.Client(timeout=300) as c:
                i = 0
                while not stop.is_set():
                    r = c.post(f"{url}/retrieve", json={"query": timed[i % len(timed)]})
                    errors[0] += r.status_code != 200
                    served_q[0] += 1
                    i += 1

        loops = [threading.Thread(target=query_loop) for _ in range(4)]
        for t in loops:
            t.start()
        updates, used = {}, 0
        for n in (1, 100, 1000):
            batch = docs[used:used + n]
            used += n
            start = time.perf_counter()
            r = client.post(f"{url}/documents", json={"documents": batch})
            acked = time.perf_counter() - start
            r.raise_for_status()
            probe = batch[-1]
            found = client.post(f"{url}/retrieve", json={"query": f"{probe['title']} {' '.join(probe['text'].split()[:12])}",
                                                         "l": k}).json()
            updates[str(n)] = {"post_to_searchable_s": acked, "found_right_after": probe["id"] in
                               {p["id"] for p in found["passages"]}}
        stop.set()
        for t in loops:
            t.join()
        report["updates"] = updates
        report["queries_during_updates"] = {"served": served_q[0], "errors": errors[0]}
        added = {d["id"] for d in docs[:used]}
        report["lists_with_delta"] = unchanged(before, member_lists(client, url, [q["question"] for q in test], k), added)
        report["lone_p50_ms_with_1000_delta"] = p50_ms(client, url, timed)
        report["throughput_with_1000_delta"] = throughput(url, [q["question"] for q in test[:320]])
        report["portfolio_live"] = client.get(f"{url}/portfolio").json()["live"]
    # a kill in the middle of a 1,000-passage update
    acked: list[str] = [d["id"] for d in docs[:used]]  # acknowledged by the first service, stopped since
    in_flight = docs[used + 100:used + 1100]
    with serve(bundle, work) as (url, proc):
        with httpx.Client(timeout=600) as client:
            for d in docs[used:used + 100]:  # small acknowledged updates first
                if client.post(f"{url}/documents", json={"documents": [d]}).status_code == 200:
                    acked.append(d["id"])
        def send() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the service dies under it
                httpx.post(f"{url}/documents", json={"documents": in_flight}, timeout=600)

        threading.Thread(target=send, daemon=True).start()
        time.sleep(2.0)  # the batch is being encoded (or written)
        os.killpg(proc.pid, signal.SIGKILL)
    with serve(bundle, work) as (url, _), httpx.Client(timeout=60) as client:
        present = sum(client.get(f"{url}/documents/{i}").status_code == 200 for i in acked)
        batch_there = [client.get(f"{url}/documents/{d['id']}").status_code == 200 for d in in_flight]
        report["kill"] = {"acknowledged": len(acked), "acknowledged_present": present,
                          "in_flight_batch_present": sum(batch_there), "in_flight_batch": len(in_flight),
                          "half_applied": 0 < sum(batch_there) < len(in_flight)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
