"""Where models made on this machine live: assembled GGUFs, converted LLMs, split encoders, ONNX exports.

``$RAGFOLIO_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ragfolio/models`` (``~/.cache/ragfolio/models``).
Its own module so that the encoders' cache identity does not follow the LLM code that shares it.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

MODEL_CACHE_ENV = "RAGFOLIO_MODEL_CACHE"


def model_cache_dir() -> Path:
    """``$RAGFOLIO_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ragfolio/models``."""
    if os.environ.get(MODEL_CACHE_ENV):
        return Path(os.environ[MODEL_CACHE_ENV])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragfolio" / "models"


def packaged_piece(dist: str, marker: str, hint: str) -> Path:
    """The one file of installed distribution ``dist`` whose name contains ``marker`` (a model piece).

    Raises:
        ImportError: ``dist`` is not installed (``hint`` says how to install it).
        FileNotFoundError: It holds no such file, or more than one.
    """
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError as err:
        raise ImportError(f"{hint} (missing: {dist})") from err
    found = [f for f in files if marker in f.name]
    if len(found) != 1:
        raise FileNotFoundError(f"{dist} holds {len(found)} files named *{marker}*, expected 1")
    return Path(str(found[0].locate()))
