"""Where models made on this machine live: assembled GGUFs, converted LLMs, split encoders, ONNX exports.

``$RAGFOLIO_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ragfolio/models`` (``~/.cache/ragfolio/models``).
Its own module so that the encoders' cache identity does not follow the LLM code that shares it.
"""

from __future__ import annotations

import os
from pathlib import Path

MODEL_CACHE_ENV = "RAGFOLIO_MODEL_CACHE"


def model_cache_dir() -> Path:
    """``$RAGFOLIO_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ragfolio/models``."""
    if os.environ.get(MODEL_CACHE_ENV):
        return Path(os.environ[MODEL_CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragfolio" / "models"
