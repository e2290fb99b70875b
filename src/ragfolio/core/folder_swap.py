"""Replace a folder as a whole: write the new one beside it, then rename it into place.

A reader (the service loading a bundle, a stage loading a model folder) never sees half a folder:
:func:`replace_folder` hands the writer a fresh sibling folder and renames it over the target only
once the writer returned; if the writer raises, the sibling is removed and the target is left as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def replace_folder(path: str | Path, write: Callable[[Path], T]) -> T:
    """``write(folder)`` into a new folder beside ``path``, then that folder renamed to ``path``
    (replacing it); returns what ``write`` returned. The folder is world-readable, as ``mkdir`` makes one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        result = write(tmp)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
        target.chmod(0o755)  # mkdtemp makes the folder private
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result
