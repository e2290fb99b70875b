"""One folder per key plus ``index.json``: how the router and bundle datasets store a mapping."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kedro.io import DatasetError


def folder_keys(root: Path, what: str, stage: str) -> list[str]:
    """The keys of ``root/index.json`` (folders by key, as :func:`save_folders` writes them).

    Raises:
        DatasetError: there is no index, naming ``what`` is missing and the ``stage`` that writes it.
    """
    index_file = root / "index.json"
    if not index_file.exists():
        raise DatasetError(f"no {what} at {root} (missing {index_file.name}): run the {stage} pipeline")
    return list(json.loads(index_file.read_text())["keys"])


def save_folders(root: Path, data: Mapping[str, Any], save_one: Callable[[Any, Path], Any], what: str) -> None:
    """``root/<key>/`` for each item of ``data`` (``save_one(item, folder)``) and ``root/index.json``, afresh.

    Raises:
        DatasetError: a key is no valid folder name (``what`` names what the keys are).
    """
    if root.exists():
        shutil.rmtree(root)
    for key, item in data.items():
        if "/" in key or key.startswith("."):
            raise DatasetError(f"{what} {key!r} is not a valid folder name")
        save_one(item, root / key)
    (root / "index.json").write_text(json.dumps({"keys": list(data)}, indent=1))
