"""Answers to trust on the test questions of ``../shared/data`` (issue 50): abstention and citations.

The reader (the embedded Qwen2.5-Coder-1.5B-Instruct, the packaging reader's settings: 64 answer
tokens, 80 words a passage) answers with today's prompt (``"answer"``, ``"used"``,
``"explanation"``) in two conditions:

- ``lists``: a test question with its single best member's 4 passages, the lists issue 34 stored
  (``docs/results_issue34/full``, restored by ``git restore --source=b54132d -- docs/results_issue34/full``;
  their ``doc_ids`` are rows of the union corpus of ``../shared/data`` with ``corpus/``, 35,230
  passages, rebuilt here by the data-prep nodes);
- ``no_gold``: 100 of those questions (seeded, a third per dataset) without their gold: the same
  member's 8 passages (``single_best_wide``) less the supporting ones, the first 4 left.

The dev questions (``dev`` split of the same data prep) calibrate the abstention rule: their lists
are BM25's top 4 over the same corpus (no stored member lists exist for dev), and without gold
BM25's top 8 less the supporting ones. Every reply is stored (``--out``, one JSON row per call,
resumed when rerun), so the rules are compared afterwards without calling the reader again:

    .venv/bin/python benchmarks/trust_300.py run --out docs/results_issue50/trust_rows.jsonl
    .venv/bin/python benchmarks/trust_300.py report --out docs/results_issue50/trust_rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.answering.abstention import ABSTAIN_RULES, unsupported
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.confidence import answer_confidence
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.metrics import exact_match
from ragfolio.core.stats import interval_text, mean_interval, paired_difference
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "docs" / "results_issue34" / "full"
STORED_FILES = ("answers_qwen2.5-coder-1.5b-instruct.jsonl", "answers_core_6f95c21.jsonl", "answers_rest_6f95c21.jsonl")
DATA = ROOT.parent / "shared" / "data"
READER = {"kind": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct"}
N_NO_GOLD, N_DEV = 100, 30
MAX_FALSE = 0.10  # the target: at most 10% false abstentions


def stored_rows() -> dict[tuple[str, str], dict[str, Any]]:
    rows = {}
    for name in STORED_FILES:
        if not (STORED / name).exists():
            sys.exit(f"{STORED / name} is missing: git restore --source=b54132d -- docs/results_issue34/full")
        for line in (STORED / name).read_text().splitlines():
            row = json.loads(line)
            rows[row["id"], row["system"]] = row
    return rows


def _order(ids: list[str]) -> list[str]:
    """A seeded order (crc32 of the id): the same questions come first on every run."""
    return sorted(ids, key=lambda i: (zlib.crc32(i.encode()), i))


def _interleave(ids: list[str], dataset: dict[str, str]) -> list[str]:
    """``ids`` in seeded order, the datasets taking turns (so any prefix is balanced)."""
    queues = {d: [i for i in _order(ids) if dataset[i] == d] for d in sorted(set(dataset[i] for i in ids))}
    out: list[str] = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                out.append(queue.pop(0))
    return out


def plan() -> tuple[list[dict[str, Any]], Any]:
    """Every call to make, in order (dev first, then no_gold, then lists), and the corpus."""
    params = {"raw_dir": str(DATA), "corpus_dir": str(DATA / "corpus"), "test_fraction": 0.3,
              "dev_fraction": 0.2, "seed": 42, "corpus": "union"}
    questions = {q["id"]: q for q in load_questions(params)}
    corpus = build_corpora(list(questions.values()), params).corpus_for("hotpotqa")
    row_of = {(t, x): i for i, (t, x) in enumerate(zip(corpus.titles, corpus.texts, strict=True))}

    def gold_rows(q: dict[str, Any]) -> set[int]:
        return {row_of.get((" ".join(c["title"].split()), " ".join(c["text"].split())), -1)
                for c in q["contexts"] if c.get("is_supporting")} - {-1}

    stored = stored_rows()
    test = [i for (i, s) in stored if s == "single_best"]
    dataset = {i: questions[i]["dataset"] for i in questions}
    calls = []
    dev = _interleave([i for i, q in questions.items() if q["split"] == "dev" and q["contexts"]], dataset)[:N_DEV]
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{t} {x}" for t, x in zip(corpus.titles, corpus.texts, strict=True)],
                                   stopwords="en", show_progress=False), show_progress=False)
    for i in dev:
        q = questions[i]
        ranked, _ = retriever.retrieve(bm25s.tokenize([q["question"]], stopwords="en", show_progress=False), k=8,
                                       show_progress=False)
        top, gold = [int(r) for r in ranked[0]], gold_rows(q)
        calls.append({"split": "dev", "condition": "lists", "id": i, "rows": top[:4], "gold": sorted(gold)})
        calls.append({"split": "dev", "condition": "no_gold", "id": i, "rows": [r for r in top if r not in gold][:4],
                      "gold": sorted(gold)})
    for i in _interleave(test, dataset)[:N_NO_GOLD]:
        gold = gold_rows(questions[i])
        wide = stored[i, "single_best_wide"]["doc_ids"]
        calls.append({"split": "test", "condition": "no_gold", "id": i, "rows": [r for r in wide if r not in gold][:4],
                      "gold": sorted(gold)})
    for i in _interleave(test, dataset):
        calls.append({"split": "test", "condition": "lists", "id": i, "rows": stored[i, "single_best"]["doc_ids"],
                      "gold": sorted(gold_rows(questions[i])), "stored_prediction": stored[i, "single_best"]["prediction"]})
    for call in calls:
        q = questions[call["id"]]
        call.update(dataset=q["dataset"], question=q["question"], answers=q["answers"])
    return calls, corpus


def run(out: Path, limit: int | None) -> None:
    calls, corpus = plan()
    done = {(r["split"], r["condition"], r["id"]) for r in _read(out)}
    answerer = Answerer(make_backend(READER), max_answer_tokens=64, max_passage_words=80, abstain="off")
    todo = [c for c in calls if (c["split"], c["condition"], c["id"]) not in done][:limit]
    print(f"{len(done)} stored, {len(todo)} to answer", flush=True)
    with out.open("a") as sink:
        for n, call in enumerate(todo, 1):
            passages = [(corpus.titles[r], corpus.texts[r]) for r in call["rows"]]
            said = answerer.answer(call["question"], passages)
            c = said.completion
            row = {**call, "prediction": said.text, "explanation": said.explanation, "parsed": said.parsed,
                   "used": [call["rows"][k] for k in said.used], "reply": c.text, "prompt_tokens": c.prompt_tokens,
                   "completion_tokens": c.completion_tokens, "latency_ms": c.latency_ms,
                   "confidence": answer_confidence(c), "logprobs": c.logprobs}
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"{n}/{len(todo)} {call['split']} {call['condition']} {c.latency_ms / 1000:.1f}s "
                  f"{said.text!r} {said.explanation!r} used={list(said.used)}", flush=True)


def _read(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def _abstains(row: dict[str, Any], rule: str, min_confidence: float | None = None) -> bool:
    return unsupported(rule, row["explanation"], row["used"], len(row["rows"]), confidence=row.get("confidence"),
                       min_confidence=min_confidence)


def calibrate(rows: list[dict[str, Any]], rule: str, max_false: float = MAX_FALSE) -> float | None:
    """The confidence threshold that abstains most often on the dev questions without their gold
    while abstaining on at most ``max_false`` of the dev questions with their lists whose answer
    is right; None when no threshold keeps that (or there are no dev rows)."""
    lists = [r for r in rows if r["split"] == "dev" and r["condition"] == "lists"]
    no_gold = [r for r in rows if r["split"] == "dev" and r["condition"] == "no_gold"]
    if not lists or not no_gold:
        return None
    em = np.array([exact_match(r["prediction"], r["answers"]) for r in lists], dtype=float)
    best, best_share = None, -1.0
    for tau in sorted({round(r["confidence"], 3) for r in lists + no_gold if r.get("confidence") is not None}):
        threshold = tau + 1e-9  # abstain below and at tau
        false = np.mean([_abstains(r, rule, threshold) for r in lists] * em)
        share = np.mean([_abstains(r, rule, threshold) for r in no_gold])
        if false <= max_false and share > best_share:
            best, best_share = threshold, share
    return best


def report(out: Path) -> str:
    rows = _read(out)
    lines = [f"# Abstention and citations ({time.strftime('%Y-%m-%d')}; `benchmarks/trust_300.py report`)", ""]
    settings = [(rule, None) for rule in ABSTAIN_RULES if rule != "confidence"]
    for rule in ("confidence", "guess_or_no_passage"):
        tau = calibrate(rows, rule)
        if tau is not None:
            settings.append((rule, tau))
    lines += ["Confidence thresholds chosen on dev: the one that abstains most often without the gold while "
              f"abstaining on at most {MAX_FALSE:.0%} of the questions whose answer is right.", ""]
    for split in ("dev", "test"):
        lists = [r for r in rows if r["split"] == split and r["condition"] == "lists"]
        no_gold = [r for r in rows if r["split"] == split and r["condition"] == "no_gold"]
        if not lists and not no_gold:
            continue
        lines += [f"## {split}: {len(lists)} questions with their lists, {len(no_gold)} without their gold", "",
                  "| rule | min_confidence | abstains without gold | abstains with lists | right answers abstained on "
                  "(share of all) | EM answered | EM all |", "|---|---|---|---|---|---|---|"]
        em = np.array([exact_match(r["prediction"], r["answers"]) for r in lists], dtype=float)
        for rule, tau in settings:
            a_ng = np.array([_abstains(r, rule, tau) for r in no_gold], dtype=float)
            a_l = np.array([_abstains(r, rule, tau) for r in lists], dtype=float)
            answered = em[a_l == 0]
            lines.append(f"| {rule} | {'-' if tau is None else f'{tau:.3f}'} | "
                         f"{interval_text(mean_interval(a_ng)) if len(a_ng) else '-'} | "
                         f"{interval_text(mean_interval(a_l)) if len(a_l) else '-'} | "
                         f"{interval_text(mean_interval(a_l * em)) if len(a_l) else '-'} | "
                         f"{interval_text(mean_interval(answered)) if len(answered) else '-'} (n={len(answered)}) | "
                         f"{interval_text(mean_interval(em)) if len(em) else '-'} |")
        confident = [r["confidence"] for r in lists if r.get("confidence") is not None]
        unsure = [r["confidence"] for r in no_gold if r.get("confidence") is not None]
        if confident and unsure:
            lines += ["", f"Mean answer confidence: {np.mean(confident):.3f} with the lists, {np.mean(unsure):.3f} "
                          f"without the gold; right answers {np.mean([r['confidence'] for r, e in zip(lists, em, strict=True) if e and r.get('confidence') is not None] or [np.nan]):.3f}, "
                          f"wrong {np.mean([r['confidence'] for r, e in zip(lists, em, strict=True) if not e and r.get('confidence') is not None] or [np.nan]):.3f}."]
        if lists:
            lines += ["", *_citations(lists)]
        stored = [r for r in lists if "stored_prediction" in r]
        if stored:
            old = np.array([exact_match(r["stored_prediction"], r["answers"]) for r in stored], dtype=float)
            new = np.array([exact_match(r["prediction"], r["answers"]) for r in stored], dtype=float)
            same = sum(r["prediction"] == r["stored_prediction"] for r in stored)
            lines += ["", f"Against the stored replies of issue 34 (the prompt without `used`): {same} of {len(stored)} "
                          f"answers the same; EM {new.mean():.3f} against {old.mean():.3f}, "
                          f"difference {interval_text(paired_difference(new, old))}; "
                          f"prompt tokens {np.mean([r['prompt_tokens'] for r in stored]):.0f}, completion tokens "
                          f"{np.mean([r['completion_tokens'] for r in stored]):.1f}, reply "
                          f"{np.median([r['latency_ms'] for r in stored]) / 1000:.1f} s median."]
        lines.append("")
    return "\n".join(lines)


def _citations(lists: list[dict[str, Any]]) -> list[str]:
    """Precision against the gold passages of the cited passages and of every passage handed over."""
    cited = [r for r in lists if r["used"]]
    if not cited:
        return ["No reply named a passage."]
    p_cited = np.array([len(set(r["used"]) & set(r["gold"])) / len(r["used"]) for r in cited])
    p_all = np.array([len(set(r["rows"]) & set(r["gold"])) / len(r["rows"]) for r in cited])
    recall = np.array([len(set(r["used"]) & set(r["gold"])) / max(1, len(set(r["rows"]) & set(r["gold"])))
                       for r in cited if set(r["rows"]) & set(r["gold"])])
    return [f"Citations ({len(cited)} of {len(lists)} replies name a passage; {np.mean([len(r['used']) for r in cited]):.2f} "
            f"cited of {np.mean([len(r['rows']) for r in cited]):.0f}): precision against the gold passages "
            f"{interval_text(mean_interval(p_cited))}, every passage handed over {interval_text(mean_interval(p_all))}, "
            f"difference {interval_text(paired_difference(p_cited, p_all))}; the cited share of the gold passages "
            f"handed over {interval_text(mean_interval(recall))}."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "report"))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results_issue50" / "trust_rows.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="answer at most this many calls")
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.limit)
    else:
        print(report(args.out))


if __name__ == "__main__":
    main()
