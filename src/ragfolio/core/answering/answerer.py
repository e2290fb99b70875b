"""RAG answering with an LLM: the backend chosen by configuration, short-answer prompts, the selector.

:func:`make_backend` builds the :class:`~ragfolio.core.answering.llm.ChatBackend` a config names: the
embedded Gemma-3-270M on transformers (``transformers``, the default; wheels only), llama.cpp
(``llama_cpp``, an optional extra that compiles) or any OpenAI-compatible endpoint (``openai``).
:class:`Answerer` builds the prompts, cleans the replies and, given the answers of several
portfolio members, asks the LLM to select one, shown in a seeded random order (the order the
members were routed in would tell a model that copies the first candidate which one the router
preferred). Prompts carry no ``system`` message because
Gemma's chat template rejects that role; instructions and one worked example go into the user
message, which ends with ``"Answer:"`` so that base models (prompted as plain text, see
:data:`~ragfolio.core.answering.llm.PLAIN`) continue with the answer too.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragfolio.core.answering.embedded_llm import LlamaCppBackend, TransformersBackend
from ragfolio.core.answering.llm import ChatBackend, Completion, Messages, OpenAICompatibleClient
from ragfolio.core.metrics import normalize_answer

logger = logging.getLogger(__name__)

# The default LLM: the embedded Gemma-3-270M, run by transformers in this process.
EMBEDDED_LLM: dict[str, Any] = {"kind": "transformers", "transformers": {"n_ctx": 2048, "n_threads": None}}
_LOCAL_KEYS = {"model_path", "n_ctx", "n_threads", "seed", "chat_format"}
_BACKEND_KEYS = {
    "transformers": _LOCAL_KEYS,
    "llama_cpp": _LOCAL_KEYS,
    "openai": {"base_url", "model", "api_key_env", "timeout_s", "max_retries", "backoff_s", "api"},
}


def make_backend(config: Mapping[str, Any]) -> ChatBackend:
    """Build a backend from a config mapping.

    ``{"kind": "transformers" | "llama_cpp", "model_path": None, "n_ctx": 2048, "n_threads": None,
    "seed": 0, "chat_format": None}`` or ``{"kind": "openai", "base_url": ..., "model": ...,
    "api_key_env": "OPENAI_API_KEY", "timeout_s": 60, "max_retries": 2, "backoff_s": 0.5,
    "api": "chat"}`` (the key is read from the named environment variable, if set). Missing keys
    take the constructors' defaults. The settings may instead sit in a block named after each
    kind, of which only ``kind``'s is read. Building loads nothing: a local model loads on its
    first call.

    Raises:
        ValueError: On an unknown ``kind`` or unknown keys (named), or ``openai`` without ``model``.
    """
    kind = config.get("kind")
    if kind not in _BACKEND_KEYS:
        raise ValueError(f"backend kind={kind!r} must be one of {sorted(_BACKEND_KEYS)}")
    # Settings may also sit in one block per kind ({"kind": "openai", "transformers": {...}, "openai": {...}}),
    # so switching backends is one setting: only the chosen kind's block is read.
    params = {**(config.get(kind) or {}), **{k: v for k, v in config.items() if k != "kind" and k not in _BACKEND_KEYS}}
    unknown = sorted(set(params) - _BACKEND_KEYS[kind])
    if unknown:
        raise ValueError(f"unknown keys {unknown} for backend kind={kind!r}; allowed: {sorted(_BACKEND_KEYS[kind])}")
    if kind == "transformers":
        return TransformersBackend(**params)
    if kind == "llama_cpp":
        return LlamaCppBackend(**params)
    if "model" not in params:
        raise ValueError("backend kind='openai' needs a 'model'")
    env = params.pop("api_key_env", "OPENAI_API_KEY")
    params.setdefault("base_url", "http://127.0.0.1:8000/v1")
    return OpenAICompatibleClient(api_key=os.environ.get(env) if env else None, **params)


def _truncate(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def format_passages(passages: Sequence[tuple[str, str]], max_passage_words: int) -> str:
    """``"[1] <title>: <first max_passage_words words of text>"``, one passage per line."""
    if max_passage_words < 1:
        raise ValueError(f"max_passage_words={max_passage_words} must be >= 1")
    return "\n".join(f"[{i}] {t}: {_truncate(x, max_passage_words)}" for i, (t, x) in enumerate(passages, 1))


# One worked example per prompt: it shows a base model the expected shape (a few words on the
# "Answer:" line) and costs an instruction-tuned model ~40 prompt tokens.
_DEMO_QUESTION, _DEMO_ANSWER = "In which city is the Eiffel Tower?", "Paris"
_DEMO_PASSAGE = ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.")
# The selector's worked examples put the right candidate once second and once first, so that
# neither position is what the examples teach.
_SELECT_DEMOS = (
    (_DEMO_QUESTION, ("London", "Paris"), _DEMO_ANSWER),
    ("Who wrote the play Hamlet?", ("William Shakespeare", "Charles Dickens"), "William Shakespeare"),
)


def answer_messages(
    question: str, passages: Sequence[tuple[str, str]], *, max_passage_words: int = 100
) -> Messages:
    """The short-answer prompt over ``(title, text)`` passages; closed-book when there are none.

    One worked example precedes the question; the prompt ends with ``"Answer:"``.
    """
    if not passages:
        content = (
            "Answer the question with a few words, no explanation.\n\n"
            f"Question: {_DEMO_QUESTION}\nAnswer: {_DEMO_ANSWER}\n\nQuestion: {question}\nAnswer:"
        )
    else:
        content = (
            "Answer the question using the passages. Reply with the answer only: a few words, no explanation."
            f"\n\nPassages:\n{format_passages([_DEMO_PASSAGE], max_passage_words)}\n\n"
            f"Question: {_DEMO_QUESTION}\nAnswer: {_DEMO_ANSWER}"
            f"\n\nPassages:\n{format_passages(passages, max_passage_words)}\n\nQuestion: {question}\nAnswer:"
        )
    return [{"role": "user", "content": content}]


def _numbered(candidates: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(candidates, 1))


def selector_messages(question: str, candidates: Sequence[str]) -> Messages:
    """Asks which of the numbered candidate answers is right, replying with exactly one of them.

    Two worked examples precede the question, their right answers at positions 2 and 1 (neutral
    about position); the prompt ends with ``"Answer:"``.
    """
    demos = "".join(
        f"Question: {q}\nCandidate answers:\n{_numbered(options)}\nAnswer: {right}\n\n"
        for q, options, right in _SELECT_DEMOS
    )
    content = (
        "Which candidate answers the question correctly? Reply with exactly one of the candidate answers, "
        f"copied as written, and nothing else.\n\n{demos}"
        f"Question: {question}\nCandidate answers:\n{_numbered(candidates)}\nAnswer:"
    )
    return [{"role": "user", "content": content}]


_PREFIX = re.compile(r"^(?:(?:the|final|short)\s+)?answer(?:\s+is)?(?:\s*[:\-]\s*|\s+)|^a:\s*", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[#>]+|[-*•])\s+")
_NUMBER = re.compile(r"^(?:answer|candidate|option)?\s*(?:#|no\.?\s*)?[\[(]?(\d+)[\])]?[.:]?$", re.IGNORECASE)
_ENUMERATED = re.compile(r"^[\[(]?(\d+)[\]).:]\s+(.+)$")
_QUOTES = "\"'`“”‘’«»"


def _clean_line(line: str) -> str:
    line = _BULLET.sub("", line.strip().replace("**", "").replace("__", ""), count=1).strip("*_ ")
    while (stripped := _PREFIX.sub("", line, count=1)) != line:
        line = stripped.strip()
    if line.lower().rstrip(":") in ("answer", "final answer"):
        return ""
    line = line.strip(_QUOTES + " ")
    if line.endswith(".") and not line.endswith(".."):
        line = line[:-1].strip(_QUOTES + " ")
    return line


def clean_answer(text: str) -> str:
    """The first non-empty line with ``Answer:`` prefixes, markdown, quotes and a final period removed."""
    for line in text.splitlines():
        if cleaned := _clean_line(line):
            return cleaned
    return ""


def parse_selection(text: str, candidates: Sequence[str]) -> int | None:
    """Index of the candidate the selector reply names, or ``None`` when it names none.

    Tried in order on the cleaned reply (SQuAD normalisation for text): equal to a candidate;
    a bare number ``2``/``[2]``/``Answer 2`` (1-based); an enumerated copy ``2. text``; a
    candidate contained in the reply (the longest wins); the reply contained in a candidate (the
    first in order wins).
    """
    if not candidates:
        raise ValueError("parse_selection needs at least one candidate")
    reply = clean_answer(text)
    norms = [normalize_answer(c) for c in candidates]

    def by_text(said: str) -> int | None:
        norm = normalize_answer(said)
        if not norm:
            return None
        if norm in norms:
            return norms.index(norm)
        inside = [i for i, c in enumerate(norms) if c and f" {c} " in f" {norm} "]
        if inside:
            return max(inside, key=lambda i: len(norms[i]))
        return next((i for i, c in enumerate(norms) if f" {norm} " in f" {c} "), None)

    if (number := _NUMBER.match(reply)) and normalize_answer(reply) not in norms:
        n = int(number.group(1))
        return n - 1 if 1 <= n <= len(candidates) else None
    if enumerated := _ENUMERATED.match(reply):
        found = by_text(enumerated.group(2))
        n = int(enumerated.group(1))
        return found if found is not None else (n - 1 if 1 <= n <= len(candidates) else None)
    return by_text(reply)


@dataclass(frozen=True)
class Selection:
    """The selector's choice among candidate answers.

    Attributes:
        index: Position of the chosen candidate in the list given (router order).
        answer: That candidate.
        fallback: Whether the reply named no candidate, so the top-routed one was taken.
        completion: The selector call; :meth:`Completion.none` when no call was needed.
        shown: Indices into the list given of the candidates the selector was shown, in the order
            shown (distinct non-empty answers only); empty when no call was needed.
        position: 1-based position, in the order shown, of the candidate the selector named;
            None when no call was made or the reply named none.
    """

    index: int
    answer: str
    fallback: bool
    completion: Completion
    shown: tuple[int, ...] = ()
    position: int | None = None


class Answerer:
    """Answers questions from passages, and selects among candidate answers, with one backend.

    Args:
        backend: The chat backend every call goes to.
        max_answer_tokens: Generation limit of an answer.
        max_selector_tokens: Generation limit of a selection.
        max_passage_words: Words kept of each passage in a prompt.
        shuffle_candidates: Show the selector the candidates in a random order drawn from
            ``seed`` and the question (the same question always gets the same order); False: in
            the order given.
        seed: Seed of those orders.
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        max_answer_tokens: int = 16,
        max_selector_tokens: int = 16,
        max_passage_words: int = 100,
        shuffle_candidates: bool = True,
        seed: int = 0,
    ) -> None:
        self.backend = backend
        self.max_answer_tokens, self.max_selector_tokens = max_answer_tokens, max_selector_tokens
        self.max_passage_words = max_passage_words
        self.shuffle_candidates, self.seed = shuffle_candidates, seed

    def answer(self, question: str, passages: Sequence[tuple[str, str]]) -> tuple[str, Completion]:
        """The cleaned answer to ``question`` from ``(title, text)`` passages (closed-book if none)."""
        messages = answer_messages(question, passages, max_passage_words=self.max_passage_words)
        completion = self.backend.complete(messages, max_tokens=self.max_answer_tokens)
        return clean_answer(completion.text), completion

    def select(self, question: str, candidates: Sequence[str]) -> Selection:
        """Choose one of the candidates (router order: index 0 is the top-routed member's answer).

        Candidates equal after SQuAD normalisation are offered once, and empty ones not at all,
        in the order of :meth:`shown_order`. With a single distinct non-empty candidate (or none)
        no call is made and the first of them (or index 0) is returned. A reply naming no
        candidate falls back to the first non-empty candidate, which is index 0 unless the top
        member answered nothing.
        """
        if not candidates:
            raise ValueError("select needs at least one candidate")
        first: dict[str, int] = {}  # normalised option -> first index among candidates
        for i, c in enumerate(candidates):
            if norm := normalize_answer(c):
                first.setdefault(norm, i)
        options = list(first.values())
        if len(options) <= 1:
            index = options[0] if options else 0
            return Selection(index, candidates[index], False, Completion.none())
        order = self.shown_order(question, options)
        shown = [candidates[i] for i in order]
        completion = self.backend.complete(selector_messages(question, shown), max_tokens=self.max_selector_tokens)
        picked = parse_selection(completion.text, shown)
        if picked is None:
            logger.debug("selector reply %r names no candidate of %s", completion.text, shown)
        index = options[0] if picked is None else order[picked]
        position = None if picked is None else picked + 1
        return Selection(index, candidates[index], picked is None, completion, tuple(order), position)

    def shown_order(self, question: str, options: Sequence[int]) -> list[int]:
        """``options`` in the order the selector sees them: a permutation drawn from ``(seed,
        crc32(question))`` when :attr:`shuffle_candidates`, else as given."""
        if not self.shuffle_candidates:
            return list(options)
        rng = np.random.default_rng([self.seed, zlib.crc32(question.encode("utf-8"))])
        return [options[i] for i in rng.permutation(len(options))]
