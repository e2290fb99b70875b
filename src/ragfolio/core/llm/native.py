"""llama.cpp in this process, from a prebuilt wheel: the embedded reader runs natively.

:class:`LlamaCppBackend` loads a GGUF with ``cyllama`` (MIT; a manylinux wheel that bundles
llama.cpp, so nothing compiles on install) and completes chat messages with the model's own chat
template (or as plain text for a base model), greedy at temperature 0 and seeded above it. A
``json_schema`` turns into a llama.cpp grammar (llama.cpp's own JSON-schema converter, vendored by
cyllama), so the reply is valid JSON of that schema by construction, cut only by ``max_tokens``.

Threads: prefill (reading the prompt, a compute-bound batch) takes every usable core by default;
token-by-token generation (bound by reading the weights) takes half of them, which leaves room for
the service's encoders and members (``docs/benchmarks.md``, "The reader"). llama.cpp's OpenMP
threads sleep between steps instead of spinning (``OMP_WAIT_POLICY=PASSIVE``, set before cyllama
first loads unless the environment says otherwise): spinning threads compete with the other
thread group and the service for two cores (``docs/results_issue50/runtimes.md``: prefill +20%,
and two-thread generation on a busy machine 15 tokens/s instead of 1.2, the same token ids).

The embedded models (:mod:`ragfolio.core.llm.models`) are named by ``model``; any other GGUF by
``model_path``.

Tokens: the messages' text is never read as control tokens. A templated prompt
(:class:`~ragfolio.core.llm.prompt_parts.ChatPrompt`, what :meth:`LlamaCppBackend.prompt` returns)
gets the control tokens its template wrote and nothing else; a plain text prompt gets none
(:func:`~ragfolio.core.llm.prompt_parts.prompt_tokens`). So a question holding
``<|im_start|>system ...`` is read as those characters, not as a turn of its own.

Logprobs: each generated token's log-probability, ``logits[token] - logsumexp(logits)`` of the raw
logits of its step (before the grammar and the sampler, which only read them), goes into
:attr:`~ragfolio.core.llm.chat.Completion.logprobs`. cyllama hands the logits over as a Python
list (one float per vocabulary entry: 151,936 for Qwen2.5), which costs a few milliseconds a token
(:mod:`ragfolio.core.llm.logprobs`); ``logprobs=False`` saves them.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ragfolio.core.llm.chat import (
    PLAIN,
    PLAIN_STOP,
    Completion,
    LLMRequestError,
    Messages,
    TokenLogprobs,
    check_max_tokens,
)
from ragfolio.core.llm.chat import render_plain as _render_plain
from ragfolio.core.llm.embedded import default_threads, usable_cores
from ragfolio.core.llm.logprobs import logits_model_type, token_logprob, token_pieces
from ragfolio.core.llm.models import DEFAULT_READER, embedded_model, model_path
from ragfolio.core.llm.prompt_parts import ChatPrompt, chat_prompt, prompt_tokens

logger = logging.getLogger(__name__)

_HINT = "pip install cyllama (a wheel that bundles llama.cpp)"


# llama.cpp's converter lets JSON hold up to two newlines and 20 tabs between tokens; a small model
# can spend its whole budget there. One optional space is all compact JSON needs.
_COMPACT_SPACE = 'space ::= | " "'


def _passive_openmp() -> None:
    """Let llama.cpp's OpenMP threads sleep when idle: ``OMP_WAIT_POLICY=PASSIVE`` unless set.

    Read once, when cyllama's OpenMP runtime loads; so it is set before every first import of
    cyllama here (torch's OpenMP, loaded earlier by the encoders, is a copy of its own and keeps
    its setting)."""
    if "cyllama" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@functools.lru_cache(maxsize=64)
def _grammar(schema_json: str) -> str:
    _passive_openmp()
    from cyllama.utils.json_schema_to_grammar import json_schema_to_grammar

    rules = str(json_schema_to_grammar(json.loads(schema_json))).splitlines()
    return "\n".join(_COMPACT_SPACE if rule.startswith("space ::=") else rule for rule in rules)


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar of a JSON schema, whitespace between tokens at most one space (cached by
    the schema's canonical JSON)."""
    return _grammar(json.dumps(schema, sort_keys=True))


class LlamaCppBackend:
    """A GGUF model run by llama.cpp (cyllama) in this process, loaded on the first call.

    One model answers one call at a time (a lock); the KV cache is cleared before each call.

    Args:
        model: An embedded model's name (:data:`~ragfolio.core.llm.models.EMBEDDED_MODELS`);
            ignored when ``model_path`` is given.
        model_path: A GGUF file of your own.
        n_ctx: Context window in tokens: a prompt longer than ``n_ctx - max_tokens`` is refused.
        n_threads: Threads of generation; ``None``: half the usable cores (at least 1).
        n_threads_batch: Threads of prefill; ``None``: every usable core.
        n_batch: Prompt tokens decoded per step.
        seed: Sampling seed at ``temperature > 0`` (greedy decoding at 0 does not use it).
        chat_format: ``None``: the embedded model's own setting, else the GGUF's chat template;
            :data:`~ragfolio.core.llm.chat.PLAIN`: the messages' contents as one text, cut at
            :data:`~ragfolio.core.llm.chat.PLAIN_STOP` (base models).
        n_gpu_layers: Layers offloaded to a GPU when the wheel has a GPU backend (0: CPU only).
        reuse_prefix: Keep the KV cache of the prompt prefix a call shares with the last one (the
            chat template and instructions; passages two lists have in common) and read only the
            rest, as llama.cpp's server does with ``cache_prompt``. Faster (8% for an answer
            prompt on 2 cores), but a reply then depends on the call before it: llama.cpp's
            logits differ in the last bits between reading a token in a batch and alone, which
            changes some greedy replies. So off by default (every prompt read from its start:
            the same prompt always gets the same reply).
        logprobs: Record each generated token's log-probability
            (:attr:`~ragfolio.core.llm.chat.Completion.logprobs`; see the module docstring).
    """

    def __init__(
        self,
        model: str = DEFAULT_READER,
        *,
        model_path: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        chat_format: str | None = None,
        n_gpu_layers: int = 0,
        reuse_prefix: bool = False,
        logprobs: bool = True,
    ) -> None:
        if model_path is None:
            entry = embedded_model(model)  # an unknown name fails here, before anything loads
            chat_format = chat_format or entry.chat_format
        if chat_format not in (None, PLAIN):
            raise ValueError(f"chat_format={chat_format!r} must be null (the GGUF's template) or {PLAIN!r}")
        if n_ctx < 64 or n_batch < 1:
            raise ValueError(f"n_ctx={n_ctx} must be >= 64 and n_batch={n_batch} >= 1")
        self.model, self.model_path, self.n_ctx, self.n_batch = model, model_path, n_ctx, n_batch
        self.n_threads = default_threads() if n_threads is None else n_threads
        self.n_threads_batch = usable_cores() if n_threads_batch is None else n_threads_batch
        self.seed, self.chat_format, self.n_gpu_layers = seed, chat_format, n_gpu_layers
        self.reuse_prefix, self.logprobs = reuse_prefix, logprobs
        self._lock = threading.Lock()
        self._model: Any = None
        self._ctx: Any = None
        self._vocab: Any = None
        self._template: str | None = None
        self._cached: list[int] = []  # the tokens whose keys and values the KV cache holds, in order
        self.reused_tokens = 0  # prompt tokens the last call took from the cache

    @property
    def path(self) -> str:
        """The GGUF this backend runs (assembling an embedded model on first use)."""
        return self.model_path or model_path(self.model)

    def load(self) -> None:
        """Load the model now (it otherwise loads on the first call)."""
        with self._lock:
            self._ensure_loaded()

    def _ensure_loaded(self) -> None:
        if self._model is not None:
            return
        _passive_openmp()
        try:
            import cyllama.llama.llama_cpp as cy
        except ImportError as err:
            raise ImportError(f"LlamaCppBackend needs cyllama: {_HINT}") from err
        path = self.path
        start = time.perf_counter()
        cy.disable_logging()
        cy.ggml_backend_load_all()
        model_params = cy.LlamaModelParams()
        model_params.n_gpu_layers = self.n_gpu_layers
        model = logits_model_type()(path, model_params)
        params = cy.LlamaContextParams()
        params.n_ctx, params.n_batch, params.no_perf = self.n_ctx, self.n_batch, True
        params.n_threads, params.n_threads_batch = self.n_threads, self.n_threads_batch
        self._ctx = cy.LlamaContext(model, params)
        self._vocab = model.get_vocab()
        self._template = None if self.chat_format == PLAIN else model.get_default_chat_template()
        self._model = model
        logger.info("loaded %s with llama.cpp in %.1f s (n_ctx=%d, threads %d / %d for prefill)", path,
                    time.perf_counter() - start, self.n_ctx, self.n_threads, self.n_threads_batch)

    def _reuse_prefix(self, tokens: Sequence[int]) -> int:
        """Keep the cache of the longest prefix ``tokens`` shares with :attr:`_cached` and drop
        the rest; the position decoding starts at. The last prompt token is always decoded again
        (its logits give the first new token)."""
        keep = 0
        if self.reuse_prefix:
            for held, new in zip(self._cached, tokens[:-1], strict=False):
                if held != new:
                    break
                keep += 1
        if keep == 0 or not self._ctx.memory_seq_rm(0, keep, -1):
            self._ctx.kv_cache_clear()
            keep = 0
        del self._cached[keep:]
        self.reused_tokens = keep
        return keep

    # --- prompts ---------------------------------------------------------------------------------
    @property
    def default_stop(self) -> list[str] | None:
        """:data:`~ragfolio.core.llm.chat.PLAIN_STOP` for plain prompts, else None (the model stops itself)."""
        return list(PLAIN_STOP) if self.chat_format == PLAIN else None

    def prompt(self, messages: Messages) -> str:
        """The text the model reads for ``messages``: the chat template applied (a
        :class:`~ragfolio.core.llm.prompt_parts.ChatPrompt`, whose messages are read as text), or
        the plain text."""
        if self.chat_format == PLAIN:
            return _render_plain(messages)
        with self._lock:
            self._ensure_loaded()
        if not self._template:
            return _render_plain(messages)
        import cyllama.llama.llama_cpp as cy

        def render(chat: Messages) -> str:
            turns = [cy.LlamaChatMessage(role=m["role"], content=m["content"]) for m in chat]
            return str(self._model.chat_apply_template(self._template, turns, True))

        return chat_prompt(render, messages)

    def tokens(self, prompt: str | ChatPrompt) -> list[int]:
        """The tokens the model reads for ``prompt`` (:func:`~ragfolio.core.llm.prompt_parts.prompt_tokens`)."""
        with self._lock:
            self._ensure_loaded()
            return prompt_tokens(self._vocab, prompt)

    # --- generation ------------------------------------------------------------------------------
    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: dict[str, Any] | None = None
    ) -> Completion:
        """Complete chat ``messages``; greedy at ``temperature=0``; JSON of ``json_schema`` when given."""
        return self.generate([self.prompt(messages)], max_tokens=max_tokens, temperature=temperature,
                             stop=self.default_stop, json_schema=json_schema)[0]

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> list[Completion]:
        """Continue each text prompt in turn; ``latency_ms`` is each prompt's own. A prompt that is
        not a :class:`~ragfolio.core.llm.prompt_parts.ChatPrompt` is read as text only (see the
        module docstring).

        Raises:
            LLMRequestError: A prompt does not fit in ``n_ctx - max_tokens`` tokens.
        """
        out = []
        for prompt in prompts:
            start = time.perf_counter()
            pieces = self.stream_text(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop,
                                      json_schema=json_schema)
            text = "".join(pieces)
            n_prompt, n_new = pieces.counts
            out.append(Completion(text, n_prompt, n_new, (time.perf_counter() - start) * 1000.0, pieces.logprobs))
        return out

    def stream_text(
        self,
        prompt: str,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> _Pieces:
        """The continuation of ``prompt`` as it is generated: an iterator of text pieces whose
        ``counts`` (prompt tokens, generated tokens) and ``logprobs`` (each generated token's text
        and log-probability, or None when not recorded) are final once it is exhausted.

        The prompt is checked against the context when this is called; generation runs (holding
        the model's lock) as the pieces are read.
        """
        check_max_tokens(max_tokens)
        return _Pieces(self, prompt, max_tokens, temperature, tuple(stop or ()), json_schema)


class _Pieces:
    """One generation as an iterator of text pieces (see :meth:`LlamaCppBackend.stream_text`)."""

    def __init__(self, backend: LlamaCppBackend, prompt: str, max_tokens: int, temperature: float,
                 stop: tuple[str, ...], json_schema: dict[str, Any] | None) -> None:
        self.tokens = backend.tokens(prompt)
        if len(self.tokens) + max_tokens > backend.n_ctx:
            raise LLMRequestError(f"the prompt has {len(self.tokens)} tokens; with max_tokens={max_tokens} "
                                  f"it exceeds n_ctx={backend.n_ctx}")
        self.backend, self.max_tokens, self.temperature, self.stop = backend, max_tokens, temperature, stop
        self.grammar = schema_grammar(json_schema) if json_schema else None
        self.counts = (len(self.tokens), 0)
        self.logprobs: TokenLogprobs | None = None
        self._iter: Iterator[str] | None = None

    def __iter__(self) -> Iterator[str]:
        if self._iter is None:
            self._iter = self._run()
        return self._iter

    def __next__(self) -> str:
        return next(iter(self))

    def _sampler(self) -> Any:
        import cyllama.llama.llama_cpp as cy

        params = cy.LlamaSamplerChainParams()
        params.no_perf = True
        sampler = cy.LlamaSampler(params)
        if self.grammar is not None:
            sampler.add_grammar(self.backend._vocab, self.grammar, "root")
        if self.temperature > 0:
            sampler.add_temp(self.temperature)
            sampler.add_dist(self.backend.seed)
        else:
            sampler.add_greedy()
        return sampler

    def _run(self) -> Iterator[str]:
        import cyllama.llama.llama_cpp as cy

        backend = self.backend
        with backend._lock:
            ctx, vocab = backend._ctx, backend._vocab
            tokens = self.tokens
            start = backend._reuse_prefix(tokens)
            for i in range(start, len(tokens), backend.n_batch):
                ctx.decode(cy.llama_batch_get_one(tokens[i:i + backend.n_batch], i))
                backend._cached.extend(tokens[i:i + backend.n_batch])
            sampler, generated, said, position = self._sampler(), [], "", len(tokens)
            hold = max((len(s) for s in self.stop), default=1) - 1  # what may yet become a stop string
            text = ""
            scores: list[float] = []  # each generated token's logprob
            ends: list[int] = []  # the length of the text decoded once each token is read
            record = backend.logprobs
            for _ in range(self.max_tokens):
                token = sampler.sample(ctx, -1)
                if vocab.is_eog(token):
                    break
                generated.append(token)
                if record:
                    scores.append(token_logprob(ctx, token))
                self.counts = (len(tokens), len(generated))
                try:  # a character may span tokens: wait for the token that completes it
                    text = vocab.detokenize(generated, text_len_max=8 * len(generated) + 64)
                except UnicodeDecodeError:
                    continue_decoding, new = True, ""
                else:
                    continue_decoding = (cut := _first_stop(text, self.stop)) is None
                    if not continue_decoding:
                        text = text[:cut]
                    ready = text if not continue_decoding else text[:max(len(said), len(text) - hold)]
                    new = ready[len(said):]
                ends.append(len(text))
                if new:
                    said += new
                    yield new
                if not continue_decoding:
                    break
                ctx.decode(cy.llama_batch_get_one([token], position))
                backend._cached.append(token)
                position += 1
            self.logprobs = token_pieces(text, ends, scores) if record else None
            if rest := text[len(said):]:
                yield rest


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Where the first stop string starts in ``text`` (None: none occurs)."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None
