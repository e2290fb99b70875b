"""The LLM backend a configuration names: the embedded model, llama.cpp, or an OpenAI-compatible endpoint.

:func:`make_backend` builds the :class:`~ragfolio.core.answering.llm.ChatBackend` a config names: the
embedded Gemma-3-270M on transformers (``transformers``, the default; wheels only), llama.cpp
(``llama_cpp``, an optional extra that compiles) or any OpenAI-compatible endpoint (``openai``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from ragfolio.core.answering.embedded_llm import LlamaCppBackend, TransformersBackend
from ragfolio.core.answering.llm import ChatBackend, OpenAICompatibleClient

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
