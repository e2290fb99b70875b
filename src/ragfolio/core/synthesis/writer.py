"""The question writer: a seed's passages in, a checked question in the row format out.

:class:`QuestionWriter` asks the LLM for a question (:mod:`~ragfolio.core.synthesis.writer_prompts`),
then runs :mod:`~ragfolio.core.synthesis.checks` on it, making the reader's two calls (closed-book,
then from the gold passages) only for a question the free checks keep. Each seed's record (the
reply, each answer the reader gave, the calls' tokens and time) is stored as it is made
(:class:`~ragfolio.core.synthesis.store.RecordStore`); whether a record is kept is decided from it
and the check settings (:meth:`QuestionWriter.verdict`), so changing a threshold reuses every
call already made. :func:`write_questions` walks the seeds until enough questions are kept.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tqdm.auto import tqdm

from ragfolio.core.answer_text import normalize_answer
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.sources import SYNTHETIC
from ragfolio.core.llm.chat import ChatBackend, Completion
from ragfolio.core.synthesis.checks import (
    REASONS,
    answer_in_passages,
    answer_in_question,
    answers_match,
    copied_share,
)
from ragfolio.core.synthesis.seeds import Seed, passages_of
from ragfolio.core.synthesis.store import RecordStore, settings_hash
from ragfolio.core.synthesis.writer_prompts import PROMPT_VERSION, QUESTION_SCHEMA, parse_written, writer_messages

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckSettings:
    """When a written question is kept (:mod:`~ragfolio.core.synthesis.checks`).

    Attributes:
        max_copied: Largest share of the question's word trigrams that may occur in its passages.
        min_answer_f1: Token F1 from which the reader's answer counts as the written one.
    """

    max_copied: float = 0.5
    min_answer_f1: float = 0.5


@dataclass
class WriteStats:
    """What writing cost and kept: seeds tried, each drop reason's count, and the calls, tokens and
    LLM time behind every seed tried (made by this run or read back: what the questions cost), of
    which ``calls_now`` were made by this run."""

    tried: int = 0
    kept: int = 0
    reused: int = 0
    dropped: Counter[str] | None = None
    calls: int = 0
    calls_now: int = 0
    tokens: int = 0
    llm_s: float = 0.0

    def __post_init__(self) -> None:
        self.dropped = Counter({reason: 0 for reason in REASONS})

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["dropped"] = dict(self.dropped or {})
        out["kept_share"] = round(self.kept / self.tried, 4) if self.tried else None
        return out


class QuestionWriter:
    """Writes a question from a seed's passages and checks it with the reader.

    Args:
        backend: The writer's LLM (the embedded reader by default); the reader's checks use it too.
        answerer: The reader that checks each question (same backend).
        checks: When a question is kept.
        max_passage_words: Words of each passage shown to the writer.
        max_tokens: Generation limit of a written question.
        identity: What the backend's replies depend on (:func:`~ragfolio.core.llm.backends.backend_identity`):
            part of every stored record's key.
    """

    def __init__(self, backend: ChatBackend, answerer: Answerer, *, checks: CheckSettings = CheckSettings(),
                 max_passage_words: int = 120, max_tokens: int = 96, identity: Any = None) -> None:
        self.backend, self.answerer, self.checks = backend, answerer, checks
        self.max_passage_words, self.max_tokens = max_passage_words, max_tokens
        self.settings = settings_hash({"prompt": PROMPT_VERSION, "max_passage_words": max_passage_words,
                                       "max_tokens": max_tokens, "backend": identity,
                                       "answerer": {"max_answer_tokens": answerer.max_answer_tokens,
                                                    "max_passage_words": answerer.max_passage_words}})

    def record_key(self, seed: Seed, corpus: Corpus) -> str:
        return f"{seed.key(corpus)}@{self.settings}"

    def write(self, seed: Seed, corpus: Corpus, record: dict[str, Any] | None = None) -> dict[str, Any]:
        """The seed's record, making only the calls ``record`` (a stored one, or None) lacks and the checks need."""
        passages = passages_of(corpus, seed.rows)
        rec: dict[str, Any] = dict(record) if record else {
            "key": self.record_key(seed, corpus), "seed": seed.key(corpus), "kind": seed.kind, "link": seed.link,
            "calls": []}
        if "question" not in rec:
            reply = self.backend.complete(writer_messages(seed.kind, passages, max_passage_words=self.max_passage_words),
                                          max_tokens=self.max_tokens, json_schema=QUESTION_SCHEMA)
            written = parse_written(reply.text)
            rec |= {"question": written.question, "answer": written.answer, "reply": reply.text,
                    "copied": round(copied_share(written.question, passages), 4) if written.ok else None}
            rec["calls"] = [*rec["calls"], _call("write", reply)]
        if self._free_reason(rec, passages) is None:
            if "closed_book" not in rec:
                answer = self.answerer.answer(rec["question"], [])
                rec |= {"closed_book": answer.text, "calls": [*rec["calls"], _call("closed_book", answer.completion)]}
            if not self._matches(rec["closed_book"], rec["answer"]) and "from_gold" not in rec:
                answer = self.answerer.answer(rec["question"], passages)
                rec |= {"from_gold": answer.text, "calls": [*rec["calls"], _call("from_gold", answer.completion)]}
        return rec

    def _matches(self, predicted: str, written: str) -> bool:
        return answers_match(predicted, written, self.checks.min_answer_f1)

    def _free_reason(self, rec: dict[str, Any], passages: Sequence[tuple[str, str]]) -> str | None:
        if not rec.get("question") or not rec.get("answer"):
            return "unparsed"
        if rec["copied"] > self.checks.max_copied:
            return "copied"
        if not answer_in_passages(rec["answer"], passages):
            return "answer_not_in_passages"
        if answer_in_question(rec["answer"], rec["question"], comparison=rec["kind"] == "comparison"):
            return "answer_in_question"
        return None

    def verdict(self, rec: dict[str, Any], corpus: Corpus, seed: Seed) -> str | None:
        """Why ``rec`` is dropped (one of :data:`~ragfolio.core.synthesis.checks.REASONS` but
        ``duplicate``), or None when it is kept. A record lacking a call the checks need is not
        decided here: :meth:`write` it first."""
        if (reason := self._free_reason(rec, passages_of(corpus, seed.rows))) is not None:
            return reason
        if self._matches(rec["closed_book"], rec["answer"]):
            return "answered_closed_book"
        if not self._matches(rec["from_gold"], rec["answer"]):
            return "not_answered_from_gold"
        return None

    def complete(self, rec: dict[str, Any], corpus: Corpus, seed: Seed) -> bool:
        """Whether ``rec`` has every call the checks need."""
        if "question" not in rec:
            return False
        if self._free_reason(rec, passages_of(corpus, seed.rows)) is not None:
            return True
        return "closed_book" in rec and ("from_gold" in rec or self._matches(rec["closed_book"], rec["answer"]))


def _call(step: str, completion: Completion) -> dict[str, Any]:
    return {"step": step, "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "ms": round(completion.latency_ms, 1)}


def question_row(rec: dict[str, Any], seed: Seed, corpus: Corpus) -> dict[str, Any]:
    """A kept record as a question of the row format (:mod:`ragfolio.core.data.records`): its passages
    are its supporting contexts, its answer the one gold answer, its kind the ``type``."""
    digest = hashlib.sha1(rec["key"].encode("utf-8")).hexdigest()[:12]
    return {"id": f"syn-{digest}", "dataset": SYNTHETIC, "question": rec["question"], "answers": [rec["answer"]],
            "type": seed.kind,
            "contexts": [{"title": t, "text": x, "is_supporting": True} for t, x in passages_of(corpus, seed.rows)],
            "synthetic": {"seed": rec["seed"], "link": seed.link, "copied": rec["copied"]}}


def write_questions(writer: QuestionWriter, seeds: Sequence[Seed], corpus: Corpus, store: RecordStore,
                    target: int, *, progress: bool = True) -> tuple[list[dict[str, Any]], WriteStats]:
    """Questions written from ``seeds`` in order until ``target`` are kept (or the seeds run out).

    Each seed's record is read back from ``store`` when it holds every call the checks need, else
    made (the missing calls only) and stored at once, so a stopped run resumes where it stopped and
    a rerun with the same settings makes no call.

    Returns:
        ``(rows, stats)``: the kept questions in the row format, in seed order, and what it cost.
    """
    stats, rows, seen = WriteStats(), [], set()
    bar = tqdm(total=target, desc="writing questions", unit="q", disable=not progress)
    for seed in seeds:
        if stats.kept >= target:
            break
        stored = store.get(writer.record_key(seed, corpus))
        if stored is not None and writer.complete(stored, corpus, seed):
            rec, stats.reused = stored, stats.reused + 1
        else:
            rec = writer.write(seed, corpus, stored)
            store.put(rec)
            stats.calls_now += len(rec["calls"]) - (len(stored["calls"]) if stored else 0)
        stats.calls += len(rec["calls"])
        stats.tokens += sum(c["prompt_tokens"] + c["completion_tokens"] for c in rec["calls"])
        stats.llm_s += sum(c["ms"] for c in rec["calls"]) / 1000
        stats.tried += 1
        reason = writer.verdict(rec, corpus, seed)
        if reason is None and normalize_answer(rec["question"]) in seen:
            reason = "duplicate"
        if reason is None:
            seen.add(normalize_answer(rec["question"]))
            rows.append(question_row(rec, seed, corpus))
            stats.kept += 1
            bar.update(1)
        else:
            assert stats.dropped is not None
            stats.dropped[reason] += 1
        bar.set_postfix(tried=stats.tried, refresh=False)
    bar.close()
    if stats.kept < target:
        logger.warning("kept %d of the %d questions asked for: the %d seeds ran out (raise "
                       "question_synthesis.max_seeds_factor, or lower num_questions)", stats.kept, target, len(seeds))
    return rows, stats
