"""The relevance judge: what it is asked about one (question, passage) pair, its verdict, one call each.

One short user message, the passage first (its title, then its first words) and the question last,
as the reader's own prompt (:func:`~ragfolio.core.answering.prompts.answer_messages`) is laid out:
on a CPU, reading the prompt is most of a call's time, and every pooled passage costs one call.
Two styles (:data:`STYLES`), each replying in JSON that llama.cpp enforces while decoding:

* ``yes_no``: ``{"relevant": true | false}`` (:data:`VERDICT_SCHEMA`);
* ``grade``: ``{"grade": 0 | 1 | 2 | 3}`` (:data:`GRADE_SCHEMA`), UMBRELA's scale for TREC RAG
  (Upadhyay et al., 2024) worded for support: 0 about something else, 1 related but needed for
  nothing, 2 a fact on the way to the answer, 3 the answer. A passage is relevant from a
  threshold grade, chosen when the verdicts are read, so changing it reuses every call.

``grade`` is the default because the embedded 1.5B reader, asked yes or no, said yes to 8 of the 9
pooled passages of a two-question smoke check (7 of them not gold, some plainly off-topic:
precision 0.25, recall 0.5), which would make nearly every pooled passage support; graded, it gave
those 7 a 0 or 1 and one of the two gold passages a 3 (from grade 2: precision 1.0, recall 0.25).
Two questions cannot choose between them: ``benchmarks/log_judging.py --verdict`` compares both.

A reply that is not the JSON asked for (a backend that cannot constrain its output, a cut-off
reply) reads as no verdict, which counts as not relevant and is reported.

The question asks whether the passage holds information *needed* to answer, not whether it holds
the answer: a two-hop question's first passage (the bridge) names no answer but is part of its
gold support, as HotpotQA's and MuSiQue's supporting passages are.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from ragfolio.core.data.records import normalize_whitespace
from ragfolio.core.llm.chat import ChatBackend, Messages
from ragfolio.core.synthesis.store import settings_hash

# The declared version of the prompt and its reading: part of every stored verdict's key, so a
# change here judges afresh instead of reusing verdicts given to another prompt (bump it).
VERDICT_PROMPT_VERSION: Final = 1

STYLES: Final = ("yes_no", "grade")
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}},
    "required": ["relevant"],
    "additionalProperties": False,
}
GRADE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"grade": {"type": "integer", "enum": [0, 1, 2, 3]}},
    "required": ["grade"],
    "additionalProperties": False,
}
_TASKS: Final = {
    "yes_no": ("Does the passage contain information needed to answer the question (the answer, or a fact on the "
               'way to it)? Reply in JSON with "relevant": true or false.'),
    "grade": ("Grade how the passage helps answer the question: 0 = it is about something else; 1 = related topic, "
              "but no fact the question needs; 2 = it states a fact needed on the way to the answer; 3 = it states "
              'the answer. Reply in JSON with "grade": 0, 1, 2 or 3.'),
}


def verdict_schema(style: str) -> dict[str, Any]:
    """The JSON schema of a ``style`` reply."""
    return GRADE_SCHEMA if style == "grade" else VERDICT_SCHEMA


def verdict_messages(question: str, title: str, text: str, *, style: str = "yes_no",
                     max_passage_words: int = 100) -> Messages:
    """The judge's prompt: does the passage ``title: text`` (its first ``max_passage_words`` words)
    contain information needed to answer ``question`` (``yes_no``), or how much (``grade``)?

    Raises:
        ValueError: ``style`` is unknown, or ``max_passage_words`` is below 1.
    """
    if style not in STYLES:
        raise ValueError(f"style={style!r} must be one of {STYLES}")
    if max_passage_words < 1:
        raise ValueError(f"max_passage_words={max_passage_words} must be >= 1")
    words = text.split()
    shown = " ".join(words[:max_passage_words]) + (" ..." if len(words) > max_passage_words else "")
    content = f"Passage:\n{title}: {shown}\n\nQuestion: {question}\n\n{_TASKS[style]}"
    return [{"role": "user", "content": content}]


def parse_verdict(text: str, style: str = "yes_no") -> int | None:
    """A reply as a grade: ``grade``'s 0-3, or ``yes_no``'s ``true`` as 1 and ``false`` as 0; None
    for a reply that is not the style's JSON."""
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(reply, dict):
        return None
    value = reply.get("grade" if style == "grade" else "relevant")
    if style == "grade":
        return value if type(value) is int and 0 <= value <= 3 else None
    return int(value) if isinstance(value, bool) else None


def question_hash(question: str) -> str:
    """16 hex digits of the sha1 of the whitespace-normalised question (part of a verdict's key)."""
    return hashlib.sha1(normalize_whitespace(question).encode("utf-8")).hexdigest()[:16]


class Judge:
    """Judges whether a passage holds information needed to answer a question.

    Args:
        backend: The judge's LLM (the embedded reader by default).
        style: The verdict asked for (:data:`~ragfolio.core.synthesis.verdicts.STYLES`).
        min_grade: A ``grade`` verdict's lowest relevant grade (read from stored records, so not in their key).
        max_passage_words: Words of the passage shown.
        max_tokens: Generation limit of a verdict.
        identity: What the backend's replies depend on (:func:`~ragfolio.core.llm.backends.backend_identity`):
            part of every verdict's key.
    """

    def __init__(self, backend: ChatBackend, *, style: str = "grade", min_grade: int = 2, max_passage_words: int = 100,
                 max_tokens: int = 16, identity: Any = None) -> None:
        self.backend, self.style, self.min_grade = backend, style, min_grade
        self.max_passage_words, self.max_tokens = max_passage_words, max_tokens
        self.settings = settings_hash({"prompt": VERDICT_PROMPT_VERSION, "style": style,
                                       "max_passage_words": max_passage_words, "max_tokens": max_tokens,
                                       "backend": identity})

    def key(self, question: str, passage: str) -> str:
        """The stored verdict's key: ``judge:<passage id>:<question hash>@<settings hash>``."""
        return f"judge:{passage}:{question_hash(question)}@{self.settings}"

    def judge(self, question: str, passage: str, title: str, text: str) -> dict[str, Any]:
        """One call: the verdict record ``{"key", "passage", "question", "grade": int | None, "reply",
        "prompt_tokens", "completion_tokens", "ms"}`` (``yes_no``: 1 or 0; None: the reply was not the
        JSON asked for)."""
        messages = verdict_messages(question, title, text, style=self.style, max_passage_words=self.max_passage_words)
        reply = self.backend.complete(messages, max_tokens=self.max_tokens, json_schema=verdict_schema(self.style))
        return {"key": self.key(question, passage), "passage": passage, "question": question_hash(question),
                "grade": parse_verdict(reply.text, self.style), "reply": reply.text,
                "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                "ms": round(reply.latency_ms, 1)}

    def relevant(self, record: dict[str, Any] | None) -> bool:
        """Whether a stored verdict calls its passage relevant (no verdict: not)."""
        if record is None or record["grade"] is None:
            return False
        return bool(record["grade"] >= (self.min_grade if self.style == "grade" else 1))
