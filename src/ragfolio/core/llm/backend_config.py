"""What an LLM config says, read without loading any backend: the kinds, their keys, the default.

:mod:`ragfolio.core.llm.backends` builds a backend from such a config; a record that only carries one
(the reader a bundle carries, :mod:`ragfolio.core.llm.reader`) checks it here, so reading a bundle
imports no LLM engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragfolio.core.llm.models import DEFAULT_READER

# The default LLM: the embedded reader (Qwen2.5-Coder-1.5B-Instruct) on llama.cpp in this process.
EMBEDDED_LLM: dict[str, Any] = {"kind": "llama_cpp", "llama_cpp": {"model": DEFAULT_READER, "n_ctx": 4096}}
_BACKEND_KEYS = {
    "transformers": {"model_path", "n_ctx", "n_threads", "seed", "chat_format"},
    "llama_cpp": {"model", "model_path", "n_ctx", "n_threads", "n_threads_batch", "n_batch", "seed", "chat_format",
                  "n_gpu_layers", "reuse_prefix", "logprobs"},
    "openai": {"base_url", "model", "api_key_env", "timeout_s", "max_retries", "backoff_s", "api", "logprobs"},
}


def backend_settings(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The backend kind a config names and the settings of that kind (see :func:`make_backend`).

    Raises:
        ValueError: On an unknown ``kind`` or unknown keys (named).
    """
    kind = config.get("kind")
    if not isinstance(kind, str) or kind not in _BACKEND_KEYS:
        raise ValueError(f"backend kind={kind!r} must be one of {sorted(_BACKEND_KEYS)}")
    # Settings may also sit in one block per kind ({"kind": "openai", "transformers": {...}, "openai": {...}}),
    # so switching backends is one setting: only the chosen kind's block is read.
    params = {**(config.get(kind) or {}), **{k: v for k, v in config.items() if k != "kind" and k not in _BACKEND_KEYS}}
    unknown = sorted(set(params) - _BACKEND_KEYS[kind])
    if unknown:
        raise ValueError(f"unknown keys {unknown} for backend kind={kind!r}; allowed: {sorted(_BACKEND_KEYS[kind])}")
    return kind, params
