"""A chat's follow-up answered with and without its standalone rewrite (issue 50), on HotpotQA conversations.

The chat endpoint rewrites a follow-up into a standalone question before it retrieves
(:mod:`ragfolio.core.answering.conversation`). This measures what that buys, on two-turn
conversations made from HotpotQA's bridge questions (``type == "bridge"``, dev split, in file order):

- the **subject** is the title of the question's first supporting passage (the first context flagged
  ``is_supporting``, in the row's order), without a trailing ``(...)`` disambiguation; a question whose
  text does not name the subject (case-insensitive, whole words) is skipped;
- **turn 1**: ``"Tell me about <subject>."``, and the assistant's turn is the reader's answer to it
  (its short answer, from the passages BM25 retrieves for it);
- **the follow-up** is the original question with the subject (and a ``the`` or quotes around it,
  not where it begins a longer name) replaced by a pronoun: for a person (the passage's first
  300 characters give a birth or life dates) ``he`` or ``she``, whichever of ``he/his/him`` and
  ``she/her/hers`` the passage uses more (``they`` on a tie), else ``it`` (``they`` before
  ``are``/``were``/``have``); the possessive before ``'s``, the object form after a preposition or
  at the end; capitalised at the start. A heuristic: it leaves some follow-ups clumsy ("the founder
  of it record label"), as a user's may be.

Each follow-up is then answered by the reader (the served default, Qwen2.5-Coder-1.5B-Instruct on
llama.cpp, with the packaged answerer limits) from the top ``--k`` passages that BM25 (bm25s, the
project's :class:`~ragfolio.core.retrieval.indexes.bm25_index.BM25Retriever`) retrieves over the
union of the chosen questions' contexts: **as is**, and **rewritten** (one rewrite call,
:func:`~ragfolio.core.answering.conversation.standalone_question`, then retrieval and the answer for
the rewrite; a rewrite that kept the follow-up reuses its answer). ``--original`` also answers the
original question, the ceiling. Prints EM and F1 of each with 95% bootstrap intervals, the rewritten
minus as-is paired difference (:mod:`ragfolio.core.stats`), the share of gold passages retrieved
(support recall@k) for each question form, and how many rewrites parsed; ``--out`` keeps one JSON
line per conversation (the turns, the rewrite, each answer and score).

    .venv/bin/python benchmarks/conversation_rewrite.py --conversations 30 --out data/08_reporting/conversation_rewrite.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.conversation import Turn, standalone_question
from ragfolio.core.data.loading import load_jsonl
from ragfolio.core.data.passages import Corpus, build_corpus
from ragfolio.core.data.records import Question
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.llm.models import DEFAULT_READER
from ragfolio.core.metrics import exact_match, f1_score
from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever
from ragfolio.core.retrieval.running.pool_runner import passage_texts
from ragfolio.core.stats import interval_text, mean_intervals, paired_differences

ANSWERER = {"max_answer_tokens": 64, "max_passage_words": 80}  # packaging.reader.answerer
PREPOSITIONS = {"about", "at", "by", "for", "from", "in", "into", "of", "on", "to", "with"}
FORMS = {"he": ("he", "him", "his"), "she": ("she", "her", "her"), "it": ("it", "it", "its"),
         "they": ("they", "them", "their")}  # subject, object, possessive
_GENDERED = {"he": {"he", "his", "him"}, "she": {"she", "her", "hers"}}
_PERSON = re.compile(r"\bborn\b|\([^()]*\d{3,4}\s*[–-]\s*[^()]*\d{3,4}\s*\)")  # "(born 1938)", "(31 May 1948 – 1980)"
_PLURAL_VERB = re.compile(r"\s+(?:are|were|have)\b")


@dataclass(frozen=True)
class Conversation:
    """A two-turn conversation made from one bridge question (see the module docstring)."""

    question: Question
    subject: str
    first_turn: str
    follow_up: str


def pronoun(passage: str) -> str:
    """The pronoun of the subject of ``passage``: a person (its first 300 characters give a birth or
    life dates) is ``he`` or ``she``, whichever the passage uses more, or ``they`` on a tie; anything else ``it``."""
    if not _PERSON.search(passage[:300]):
        return "it"
    words = re.findall(r"[a-z]+", passage.lower())
    he, she = (sum(w in forms for w in words) for forms in _GENDERED.values())
    return "he" if he > she else "she" if she > he else "they"


def follow_up(question: str, subject: str, kind: str) -> str | None:
    """``question`` with ``subject`` replaced by the pronoun ``kind``'s fitting form; None when it is not named."""
    # not inside a longer name ("Lecrae" of "Lecrae Devaughn Moore", "Their Lives" of "Their Lives: The Women ...")
    pattern = re.compile(rf"(?<!\w)(?:the\s+)?[\"“]?{re.escape(subject)}[\"”]?(?!\w)('s|’s)?(?!(?-i::?\s+[A-Z]))",
                         re.IGNORECASE)
    if len(subject) < 3 or not pattern.search(question):
        return None

    def form(match: re.Match[str]) -> str:
        plural = kind == "it" and _PLURAL_VERB.match(question, match.end())  # "The Joggers are a band"
        subject_form, object_form, possessive = FORMS["they" if plural else kind]
        before = question[:match.start()].split()
        at_end = not question[match.end():].strip(" ?")
        word = possessive if match.group(1) else (
            object_form if at_end or (before and before[-1].lower() in PREPOSITIONS) else subject_form)
        return word.capitalize() if match.start() == 0 else word

    return pattern.sub(form, question)


def conversations(path: Path, n: int) -> tuple[list[Conversation], int]:
    """The first ``n`` conversations of the dev bridge questions in ``path``, and how many were skipped."""
    made, skipped = [], 0
    dev = {json.loads(line)["id"] for line in path.read_text().splitlines() if '"split": "dev"' in line}
    for q in load_jsonl(path):
        if len(made) == n:
            break
        if q.type != "bridge" or q.id not in dev or not q.answers:
            continue
        first = next(c for c in q.contexts if c.is_supporting)
        subject = re.sub(r"\s*\([^)]*\)$", "", first.title).strip()
        asked = follow_up(q.question, subject, pronoun(first.text))
        if asked is None:
            skipped += 1
            continue
        made.append(Conversation(q, subject, f"Tell me about {subject}.", asked))
    return made, skipped


class Reader:
    """BM25 over the conversations' contexts, and the reader answering from its top ``k``."""

    def __init__(self, corpus: Corpus, answerer: Answerer, k: int) -> None:
        self.corpus, self.answerer, self.k = corpus, answerer, k
        self.bm25 = BM25Retriever().index(passage_texts(corpus.titles, corpus.texts))

    def retrieve(self, query: str) -> list[int]:
        return [int(i) for i in self.bm25.retrieve([query], self.k).doc_ids[0] if i >= 0]

    def answer(self, query: str) -> tuple[str, list[int], float]:
        """The reader's answer to ``query``, the rows it read, and the call's milliseconds."""
        rows = self.retrieve(query)
        said = self.answerer.answer(query, [(self.corpus.titles[i], self.corpus.texts[i]) for i in rows])
        return said.text, rows, said.completion.latency_ms


def recall(rows: list[int], gold: set[int]) -> float:
    return len(gold.intersection(rows)) / len(gold) if gold else 0.0


def converse(c: Conversation, reader: Reader, original: bool) -> dict[str, Any]:
    """One conversation: turn 1, the follow-up as is and rewritten (and the original): answers and scores."""
    q = c.question
    gold = {reader.corpus.ids.index(pid) for pid in q.gold_passage_ids()}
    assistant, _, _ = reader.answer(c.first_turn)
    turns: list[Turn] = [("user", c.first_turn), ("assistant", assistant)]
    rewrite = standalone_question(reader.answerer.backend, turns, c.follow_up)
    row: dict[str, Any] = {"id": q.id, "question": q.question, "answers": list(q.answers), "subject": c.subject,
                           "turns": turns, "follow_up": c.follow_up, "rewritten": rewrite.question,
                           "rewrite_parsed": rewrite.rewritten, "rewrite_ms": rewrite.completion.latency_ms}
    asked = {"as_is": c.follow_up, "rewritten": rewrite.question, "original": q.question}
    answered: dict[str, tuple[str, list[int], float]] = {"as_is": reader.answer(c.follow_up)}
    answered["rewritten"] = answered["as_is"] if rewrite.question == c.follow_up else reader.answer(rewrite.question)
    if original:
        answered["original"] = reader.answer(q.question)
    for form, text in asked.items():
        rows = answered[form][1] if form in answered else reader.retrieve(text)
        row[f"recall_{form}"] = recall(rows, gold)
        if form in answered:
            prediction = answered[form][0]
            row[f"prediction_{form}"] = prediction
            row[f"em_{form}"], row[f"f1_{form}"] = exact_match(prediction, q.answers), f1_score(prediction, q.answers)
    return row


def report(rows: list[dict[str, Any]], k: int) -> None:
    forms = [f for f in ("as_is", "rewritten", "original") if f"em_{f}" in rows[0]]
    print(f"=== {len(rows)} conversations; rewrites parsed: {sum(r['rewrite_parsed'] for r in rows)}, "
          f"changed the follow-up: {sum(r['rewritten'] != r['follow_up'] for r in rows)}; "
          f"rewrite call {np.mean([r['rewrite_ms'] for r in rows]):.0f} ms on average")
    scores = {f: np.array([[r[f"em_{f}"], r[f"f1_{f}"]] for r in rows]) for f in forms}
    for form in forms:
        em, f1 = mean_intervals(scores[form])
        print(f"{form}: EM {interval_text(em)} F1 {interval_text(f1)}")
    em, f1 = paired_differences(scores["rewritten"], scores["as_is"])
    mine, theirs = scores["rewritten"][:, 0], scores["as_is"][:, 0]
    print(f"rewritten minus as_is (paired): EM {interval_text(em)} F1 {interval_text(f1)}; right where as_is is "
          f"wrong on {int((mine > theirs).sum())}, the reverse on {int((mine < theirs).sum())}")
    recalls = mean_intervals(np.array([[r[f"recall_{f}"] for f in ("as_is", "rewritten", "original")] for r in rows]))
    print(f"support recall@{k}: " + ", ".join(
        f"{f} {interval_text(iv)}" for f, iv in zip(("as_is", "rewritten", "original"), recalls, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/hotpotqa.jsonl"))
    parser.add_argument("--conversations", type=int, default=30)
    parser.add_argument("--k", type=int, default=4, help="passages the reader reads")
    parser.add_argument("--reader", default=DEFAULT_READER, help="an embedded model (ragfolio.core.llm.models)")
    parser.add_argument("--original", action="store_true", help="also answer the original question (the ceiling)")
    parser.add_argument("--out", type=Path, help="a JSONL file of one row per conversation")
    args = parser.parse_args()
    chosen, skipped = conversations(args.data, args.conversations)
    print(f"{len(chosen)} conversations from {args.data} ({skipped} bridge questions skipped: the subject "
          f"is not named in the question)", flush=True)
    corpus = build_corpus(c.question for c in chosen)
    backend = make_backend({"kind": "llama_cpp", "llama_cpp": {"model": args.reader}})
    reader = Reader(corpus, Answerer(backend, **ANSWERER), args.k)
    rows, start = [], time.perf_counter()
    for i, c in enumerate(chosen, 1):
        rows.append(row := converse(c, reader, args.original))
        print(f"[{i}/{len(chosen)}, {time.perf_counter() - start:.0f} s] {c.follow_up!r} -> {row['rewritten']!r}: "
              f"as_is {row['prediction_as_is']!r} ({row['em_as_is']:.0f}), rewritten "
              f"{row['prediction_rewritten']!r} ({row['em_rewritten']:.0f}); gold {list(c.question.answers)}",
              flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report(rows, args.k)
    print(f"{len(corpus)} passages; {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
