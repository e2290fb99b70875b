"""Answer selectors at l = 2 on the test questions of ``../shared/data`` (issue 50): the members' answers.

Issue 34 stored, per test question, the answers of the served systems
(``docs/results_issue34/full``, restored by ``git restore --source=b54132d -- docs/results_issue34/full``).
Selection at l = 2 can change EM against single best only where the two routed members' stored
answers differ in EM from each other or from single best's: the contested set (35 questions). A
control set adds 15 (5 per dataset, seeded by the crc32 of the id) whose two answers differ as
strings but not in EM.

Stage ``answers``: for each of those questions, the two routed members (``post_retrieval_l2``'s
``members``, router order: ``top1``, ``top2``) and the single best member (``single_best``'s) are
rebuilt from their names over the union corpus (35,230 passages, the data-prep nodes') with the pool
settings of ``conf/base/parameters_candidate_scoring.yml``; each retrieves its top 4 as the served
system does (the stored single best lists check that), and the reader (the embedded
Qwen2.5-Coder-1.5B-Instruct, 64 answer tokens, 80 words a passage, no abstention) answers once per
(question, distinct member). One JSON row per call (:func:`load_rows`), resumed when rerun:

    .venv/bin/python benchmarks/selector_300.py answers --out docs/results_issue50/selector_rows.jsonl

The passage embeddings of the two encoders are kept in ``--cache`` (minutes to build, once).
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from trust_300 import stored_rows

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.cache import ArrayCache
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.metrics import exact_match
from ragfolio.core.retrieval.pool import CandidateSpec, expand_grid, resolve_grid
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.scoring.runners import PoolSettings
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout (a worktree under <repo>/../wt/<name> finds it one level up)
DATA = next((p / "shared" / "data" for p in ROOT.parents[:2] if (p / "shared" / "data").exists()), ROOT.parent / "shared" / "data")
ROWS = ROOT / "docs" / "results_issue50" / "selector_rows.jsonl"
CACHE = ROOT / "data" / "04_feature" / "retrieval_cache"
READER = {"kind": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct"}
ROLES = ("top1", "top2", "single_best")
N_CONTROL_PER_DATASET = 5


def contested(stored: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """Test questions where selection at l = 2 can change EM against single best: the two routed
    members' stored answers differ in EM from each other, or either from single best's answer."""
    ids = []
    for (i, system), row in sorted(stored.items()):
        if system != "post_retrieval_l2":
            continue
        ems = {exact_match(c, row["answers"]) for c in row["candidates"]}
        ems.add(exact_match(stored[i, "single_best"]["prediction"], row["answers"]))
        if len(ems) > 1:
            ids.append(i)
    return ids


def controls(stored: dict[tuple[str, str], dict[str, Any]], exclude: set[str],
             per_dataset: int = N_CONTROL_PER_DATASET) -> list[str]:
    """``per_dataset`` questions per dataset (crc32 of the id order) outside ``exclude`` whose two
    stored candidates differ as strings (case and outer spaces aside) but not in EM."""
    by_dataset: dict[str, list[str]] = {}
    for (i, system), row in stored.items():
        answers = row["candidates"] if system == "post_retrieval_l2" else []
        if len(answers) == 2 and i not in exclude and answers[0].strip().lower() != answers[1].strip().lower() \
                and exact_match(answers[0], row["answers"]) == exact_match(answers[1], row["answers"]):
            by_dataset.setdefault(row["dataset"], []).append(i)
    return [i for d in sorted(by_dataset)
            for i in sorted(by_dataset[d], key=lambda i: (zlib.crc32(i.encode()), i))[:per_dataset]]


def plan(stored: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """One call per (question, distinct member), contested questions first: the member's roles,
    the stored answer of each role and the member's stored list (``single_best``'s, or
    ``post_retrieval_l1``'s where it routed to this member; None for the others)."""
    s = contested(stored)
    calls = []
    for group, ids in (("contested", s), ("control", controls(stored, set(s)))):
        for i in ids:
            l2, best, l1 = stored[i, "post_retrieval_l2"], stored[i, "single_best"], stored[i, "post_retrieval_l1"]
            by_role = {"top1": l2["members"][0], "top2": l2["members"][1], "single_best": best["members"][0]}
            said = {"top1": l2["candidates"][0], "top2": l2["candidates"][1], "single_best": best["prediction"]}
            lists = {l1["members"][0]: l1["doc_ids"], best["members"][0]: best["doc_ids"]}
            for member in dict.fromkeys(by_role.values()):
                roles = [r for r in ROLES if by_role[r] == member]
                calls.append({"id": i, "dataset": l2["dataset"], "group": group, "answers": l2["answers"],
                              "member": member, "roles": roles,
                              "stored_predictions": {r: said[r] for r in roles},
                              "stored_doc_ids": lists.get(member)})
    return calls


def corpus_and_questions() -> tuple[Any, dict[str, dict[str, Any]]]:
    """The union corpus of ``../shared/data`` (35,230 passages) and its questions by id."""
    params = {"raw_dir": str(DATA), "corpus_dir": str(DATA / "corpus"), "test_fraction": 0.3,
              "dev_fraction": 0.2, "seed": 42, "corpus": "union"}
    questions = {q["id"]: q for q in load_questions(params)}
    return build_corpora(list(questions.values()), params).corpus_for("hotpotqa"), questions


def members(names: Sequence[str]) -> list[CandidateSpec]:
    """The candidates named ``names``, from the default grid (conf/base/parameters_candidate_grids.yml)."""
    grids = yaml.safe_load((ROOT / "conf" / "base" / "parameters_candidate_grids.yml").read_text())["candidate_grids"]
    pool = {c.name: c for c in expand_grid(resolve_grid("default", grids))}
    missing = [n for n in names if n not in pool]
    if missing:
        raise ValueError(f"members not in the default grid: {missing}")
    return [pool[n] for n in names]


def runner(corpus: Any, cache: Path) -> PoolRunner:
    """A pool runner over ``corpus`` at depth 4 with candidate scoring's settings (conf/base)."""
    params = yaml.safe_load((ROOT / "conf" / "base" / "parameters_candidate_scoring.yml").read_text())
    p = params["candidate_scoring"]
    settings = PoolSettings.from_dict({"num_docs": p["num_docs"], "prefilter_depth": p["prefilter_depth"],
                                       "bm25_base": p["bm25_base"], "graph_max_degree": p["graph_max_degree"],
                                       "encoders": p["encoders"], "score": p["score"]})
    return settings.runner(corpus, ArrayCache(cache))


def retrieve(calls: list[dict[str, Any]], corpus: Any, questions: dict[str, dict[str, Any]],
             cache: Path) -> dict[tuple[str, str], list[int]]:
    """Each call's member's top 4 for its question, by ``(id, member)``; prints the stages' timings."""
    pool = runner(corpus, cache)
    specs = members(list(dict.fromkeys(c["member"] for c in calls)))
    ids = list(dict.fromkeys(c["id"] for c in calls))
    texts = [questions[i]["question"] for i in ids]
    t0 = time.perf_counter()
    pool.prepare(specs, texts)  # passage embeddings (cached on disk), indexes, graph, first stages
    t1 = time.perf_counter()
    lists = {spec.name: pool.run(spec, texts).doc_ids for spec in specs}
    t2 = time.perf_counter()
    print(f"retrieval: {len(specs)} members over {len(ids)} questions; shared parts {t1 - t0:.1f} s, "
          f"members {t2 - t1:.1f} s", flush=True)
    row = {i: k for k, i in enumerate(ids)}
    return {(c["id"], c["member"]): [int(d) for d in lists[c["member"]][row[c["id"]]]] for c in calls}


def answers(out: Path, cache: Path, limit: int | None) -> None:
    """Stage ``answers``: retrieve, check against the stored lists, answer each call not yet stored."""
    t0 = time.perf_counter()
    calls = plan(stored_rows())
    corpus, questions = corpus_and_questions()
    print(f"{len(calls)} calls over {len({c['id'] for c in calls})} questions; corpus {len(corpus.texts)} passages "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    lists = retrieve(calls, corpus, questions, cache)
    for what, checked in (("single best member", [c for c in calls if "single_best" in c["roles"]]),
                          ("other routed members", [c for c in calls if "single_best" not in c["roles"]
                                                    and c["stored_doc_ids"] is not None])):
        same = sum(lists[c["id"], c["member"]] == c["stored_doc_ids"] for c in checked)
        print(f"faithfulness, {what}: top 4 equal to the stored list on {same} of {len(checked)}", flush=True)
    done = {(r["id"], r["member"]) for r in load_rows(out)}
    todo = [c for c in calls if (c["id"], c["member"]) not in done][:limit]
    print(f"{len(done)} stored, {len(todo)} to answer", flush=True)
    if not todo:
        return
    answerer = Answerer(make_backend(READER), max_answer_tokens=64, max_passage_words=80, abstain="off")
    out.parent.mkdir(parents=True, exist_ok=True)
    t1 = time.perf_counter()
    with out.open("a") as sink:
        for n, call in enumerate(todo, 1):
            doc_ids = lists[call["id"], call["member"]]
            passages = [(corpus.titles[r], corpus.texts[r]) for r in doc_ids]
            question = questions[call["id"]]["question"]
            said = answerer.answer(question, passages)
            c = said.completion
            row = {"id": call["id"], "dataset": call["dataset"], "group": call["group"], "question": question,
                   "answers": call["answers"], "member": call["member"], "roles": call["roles"],
                   "doc_ids": doc_ids, "passages": [list(p) for p in passages], "prediction": said.text,
                   "explanation": said.explanation, "used": list(said.used), "parsed": said.parsed,
                   "confidence": said.confidence, "em": exact_match(said.text, call["answers"]),
                   "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                   "latency_ms": c.latency_ms, "stored_predictions": call["stored_predictions"],
                   "stored_doc_ids": call["stored_doc_ids"]}
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"{n}/{len(todo)} {call['group']} {'+'.join(call['roles'])} {c.latency_ms / 1000:.1f}s "
                  f"em={row['em']:.0f} {said.text!r} (stored {call['stored_predictions']})", flush=True)
    print(f"answered {len(todo)} calls in {time.perf_counter() - t1:.0f} s", flush=True)


def load_rows(out: Path = ROWS) -> list[dict[str, Any]]:
    """The rows stage ``answers`` stored, one per (question, distinct member), in call order.

    Each row: ``id``, ``dataset``, ``group`` (``contested`` or ``control``), ``question``,
    ``answers``, ``member`` (its name), ``roles`` (which of ``top1``, ``top2``, ``single_best`` it
    plays: the routed members in router order and the single best member), ``doc_ids`` (its top 4,
    rows of the union corpus), ``passages`` (``[title, text]`` as handed to the reader, which keeps
    the first 80 words of each), ``prediction``, ``explanation``, ``used`` (0-based positions in
    ``passages``), ``parsed``, ``confidence`` (mean token log-probability), ``em``,
    ``prompt_tokens``, ``completion_tokens``, ``latency_ms``; ``stored_predictions`` (issue 34's
    answer of each role) and ``stored_doc_ids`` (issue 34's list of this member: single best's, or
    ``post_retrieval_l1``'s where it routed to it; else None). Use :func:`by_role` to get each question's three answers.
    """
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if out.exists() else []


def by_role(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{question id: {role: row}}``: every question's ``top1``, ``top2`` and ``single_best`` rows
    (one row under two roles where the single best member is a routed one)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        for role in row["roles"]:
            out.setdefault(row["id"], {})[role] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("answers",))
    parser.add_argument("--out", type=Path, default=ROWS)
    parser.add_argument("--cache", type=Path, default=CACHE, help="retrieval cache (passage embeddings)")
    parser.add_argument("--limit", type=int, default=None, help="answer at most this many calls")
    args = parser.parse_args()
    answers(args.out, args.cache, args.limit)


if __name__ == "__main__":
    main()
