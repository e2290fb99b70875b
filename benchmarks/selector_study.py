"""The selector's modes at l = 2 on the contested test questions of ``../shared/data`` (issue 50).

``benchmarks/selector_300.py answers`` stores, for the test questions where selection at l = 2 can
change exact match (issue 34's stored answers of the two routed members differ in EM from each other
or from the single best's) and a control set, the current reader's answer from each routed member's
4 passages and from the single best member's, with its confidence, explanation and cited passages
(``docs/results_issue50/selector_rows.jsonl``). This script then

- ``judge``: asks the LLM judge, without passages (``judge``) and with the cited passages
  (``judge_passages``), in both orders (top-routed first, then second first), storing every reply
  (``selector_judge_rows.jsonl``, resumed when rerun);
- ``report``: for each mode, the headroom found and lost against the single best member's answer,
  EM minus single best over the 300 (a question outside the contested set scores the same for every
  selector: there the members' stored answers agree in EM with the single best's), and the judge's
  position bias (the share of picks of the candidate shown first, and of questions picked the same
  in both orders).

    .venv/bin/python benchmarks/selector_study.py judge
    .venv/bin/python benchmarks/selector_study.py report > docs/results_issue50/selector.md
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from selector_300 import stored_rows

from ragfolio.core.answer_text import normalize_answer
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.selector import SELECT_MODES, pick_without_call
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.metrics import exact_match
from ragfolio.core.stats import interval_text, paired_difference

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results_issue50"
ROWS, JUDGED = OUT / "selector_rows.jsonl", OUT / "selector_judge_rows.jsonl"
READER = {"kind": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct"}
N_TEST, SEED = 300, 42  # the 300 test questions; the bundle's selector_seed (the order the service shows)


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def questions() -> dict[str, dict[str, Any]]:
    """Per question id: its text, answers, dataset, whether contested, and its ``top1``, ``top2`` and
    ``single_best`` rows (the reader's answer from that member's passages)."""
    out: dict[str, dict[str, Any]] = {}
    for row in _read(ROWS):
        q = out.setdefault(row["id"], {k: row[k] for k in ("id", "dataset", "question", "answers")})
        q.setdefault("set", row.get("group", "contested"))
        for role in row["roles"]:
            q[role] = row
    return {i: q for i, q in out.items() if all(r in q for r in ("top1", "top2", "single_best"))}


def judge(limit: int | None) -> None:
    answerer = Answerer(make_backend(READER), max_passage_words=80, shuffle_candidates=False, abstain="off")
    done = {(r["id"], r["mode"], r["order"]) for r in _read(JUDGED)}
    todo = []
    for q in questions().values():
        if len({normalize_answer(q[r]["prediction"]) for r in ("top1", "top2")} - {""}) < 2:
            continue  # one distinct answer: no mode calls
        todo += [(q, mode, order) for mode in ("judge", "judge_passages") for order in ("routed", "reversed")
                 if (q["id"], mode, order) not in done]
    todo = todo[:limit]
    print(f"{len(done)} stored, {len(todo)} judge calls to make", flush=True)
    with JUDGED.open("a") as sink:
        for n, (q, mode, order) in enumerate(todo, 1):
            rows = [q["top1"], q["top2"]][:: 1 if order == "routed" else -1]
            texts = [r["prediction"] for r in rows]
            if mode == "judge":
                sel = answerer.select(q["question"], texts, [r["explanation"] for r in rows])
            else:
                cited = [[tuple(r["passages"][k]) for k in r["used"] if k < len(r["passages"])] for r in rows]
                sel = answerer.select(q["question"], texts, cited=cited)
            picked_role = ("top1", "top2")[sel.index if order == "routed" else 1 - sel.index]
            c = sel.completion
            sink.write(json.dumps({"id": q["id"], "mode": mode, "order": order, "picked": picked_role,
                                   "position": sel.position, "fallback": sel.fallback, "reply": c.text,
                                   "prompt_tokens": c.prompt_tokens, "latency_ms": c.latency_ms}) + "\n")
            sink.flush()
            print(f"{n}/{len(todo)} {mode} {order} -> {picked_role} ({c.latency_ms / 1000:.1f}s)", flush=True)


class _NoCalls:
    def complete(self, messages: Any, **kwargs: Any) -> Any:
        raise AssertionError("the report makes no call")


def _picks(qs: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Per mode, per question, the role picked (``top1`` or ``top2``) as the service would: the judge
    modes in the order the bundle's seed shows the candidates."""
    judged: dict[tuple[str, str, str], str] = {(r["id"], r["mode"], r["order"]): r["picked"] for r in _read(JUDGED)}
    order_of = Answerer(_NoCalls(), seed=SEED)  # only its shown_order is used
    picks: dict[str, dict[str, str]] = defaultdict(dict)
    for i, q in qs.items():
        texts = [q["top1"]["prediction"], q["top2"]["prediction"]]
        for mode in SELECT_MODES:
            if mode not in ("judge", "judge_passages"):
                k = pick_without_call(mode, texts, [q["top1"].get("confidence"), q["top2"].get("confidence")])
                picks[mode][i] = ("top1", "top2")[k]
            elif len({normalize_answer(t) for t in texts} - {""}) < 2:
                picks[mode][i] = "top1" if normalize_answer(texts[0]) else "top2"
            else:
                shown = order_of.shown_order(q["question"], [0, 1])
                order = "routed" if shown == [0, 1] else "reversed"
                if (i, mode, order) in judged:
                    picks[mode][i] = judged[i, mode, order]
        picks["first (router top-1)"][i] = "top1"
        picks["oracle: max of top-2"][i] = max(("top1", "top2"), key=lambda r: q[r]["em"])
    return picks


def report() -> str:
    qs = questions()
    judged = _read(JUDGED)
    em_sb = {i: float(q["single_best"]["em"]) for i, q in qs.items()}
    headroom = [i for i, q in qs.items() if max(q["top1"]["em"], q["top2"]["em"]) > em_sb[i]]
    risk = [i for i, q in qs.items() if min(q["top1"]["em"], q["top2"]["em"]) < em_sb[i]]
    differ = [i for i, q in qs.items() if normalize_answer(q["top1"]["prediction"]) != normalize_answer(q["top2"]["prediction"])]
    lines = [f"# The selector at l = 2 ({time.strftime('%Y-%m-%d')}; `benchmarks/selector_study.py report`)", "",
             f"{len(qs)} test questions re-answered by today's reader from each routed member's 4 passages and "
             f"the single best member's ({sum(q['set'] == 'contested' for q in qs.values())} contested, the rest "
             f"control); the two routed members' answers differ on {len(differ)}. Headroom (a routed member right, "
             f"the single best wrong): **{len(headroom)}** questions; at risk (the single best right, a routed "
             f"member wrong): **{len(risk)}**.", "",
             "EM minus single best is over the 300 test questions: outside the questions re-answered here every "
             "selector scores as the single best does (issue 34's answers agree there in EM), so those count 0.", "",
             "Minus `single_best_wide` (the single best's 8 passages in one prompt, what was served at l = 2) "
             "is over the 300 too, against issue 34's stored wide answers; outside the re-answered questions the "
             "routed answers are issue 34's (they agree in EM there).", "",
             "| mode | calls | found (of headroom) | lost (of at risk) | EM minus single best, 300 [95%] | "
             "EM minus single_best_wide, 300 [95%] | picks top-1 |",
             "|---|---|---|---|---|---|---|"]
    stored = stored_rows()
    others = sorted({i for i, s in stored if s == "single_best_wide"} - set(qs))
    wide = {i: exact_match(stored[i, "single_best_wide"]["prediction"], stored[i, "single_best_wide"]["answers"])
            for i in [*qs, *others]}
    routed_other = [exact_match(stored[i, "post_retrieval_l2"]["candidates"][0], stored[i, "post_retrieval_l2"]["answers"])
                    for i in others]
    for mode, picked in _picks(qs).items():
        ids = [i for i in qs if i in picked]
        if not ids:
            continue
        em = {i: float(qs[i][picked[i]]["em"]) for i in ids}
        found = sum(em[i] > em_sb[i] for i in headroom if i in em)
        lost = sum(em[i] < em_sb[i] for i in risk if i in em)
        diff = np.zeros(N_TEST)
        diff[: len(ids)] = [em[i] - em_sb[i] for i in ids]
        calls = "1" if mode.startswith("judge") else "0"
        served = np.array([em[i] for i in ids] + routed_other)
        against_wide = np.array([wide[i] for i in ids] + [wide[i] for i in others])
        lines.append(f"| {mode} | {calls} | {found} of {sum(i in em for i in headroom)} | "
                     f"{lost} of {sum(i in em for i in risk)} | {interval_text(paired_difference(diff, np.zeros(N_TEST)))} | "
                     f"{interval_text(paired_difference(served, against_wide))} (n={len(served)}) | "
                     f"{np.mean([picked[i] == 'top1' for i in ids]):.2f} |")
    if judged:
        lines += ["", "**Position bias of the judge** (each contested question judged in both orders):", "",
                  "| mode | judged | picks the candidate shown first | same pick in both orders | prompt tokens | s a call |",
                  "|---|---|---|---|---|---|"]
        for mode in ("judge", "judge_passages"):
            rows = [r for r in judged if r["mode"] == mode]
            both = defaultdict(dict)
            for r in rows:
                both[r["id"]][r["order"]] = r["picked"]
            pairs = [v for v in both.values() if len(v) == 2]
            lines.append(f"| {mode} | {len(pairs)} | {np.mean([r['position'] == 1 for r in rows]):.2f} | "
                         f"{np.mean([v['routed'] == v['reversed'] for v in pairs]):.2f} | "
                         f"{np.mean([r['prompt_tokens'] for r in rows]):.0f} | "
                         f"{np.median([r['latency_ms'] for r in rows]) / 1000:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("judge", "report"))
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    if args.command == "judge":
        judge(args.limit)
    else:
        print(report())


if __name__ == "__main__":
    main()
