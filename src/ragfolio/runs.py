"""Named runs: where a ``kedro run``'s outputs go, so a run on your own data keeps the sample's apart.

A run is named by the runtime parameter ``run_name`` (``kedro run --params=run_name=teamwiki``) or,
without it, by ``RAGFOLIO_RUN_NAME``. The bundled sample's run is ``sample`` (the default) and
writes the ``data/`` layers that DVC tracks; any other name writes the same layers under
``runs/<name>/`` (git- and DVC-ignored). ``data_root`` still moves everything to one place of your
choice (a Kubeflow volume). The catalog reads the root through the ``run_root`` resolver that
``settings.py`` registers; the MLflow hook names the run, tags it and describes its model version
with the same name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

SAMPLE = "sample"
SAMPLE_ROOT = "data"
SAMPLE_RAW_DIR = "data/01_raw"
RUNS_FOLDER = "runs"
ENV = "RAGFOLIO_RUN_NAME"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class RunNameError(ValueError):
    """A run name that cannot name a folder, or a run on other data that would overwrite the sample's."""


def check_name(name: str) -> str:
    """``name`` if it can name a run's folder (letters, digits, ``.``, ``_``, ``-``; up to 64).

    Raises:
        RunNameError: It cannot.
    """
    if not _NAME.fullmatch(name):
        raise RunNameError(f"run_name={name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def run_root(name: str | None = None) -> str:
    """The folder a run's data layers go in: ``data`` for the sample, ``runs/<name>`` otherwise.

    ``None`` or an empty name: ``$RAGFOLIO_RUN_NAME``, else the sample.
    """
    name = name or os.environ.get(ENV) or SAMPLE
    return SAMPLE_ROOT if check_name(name) == SAMPLE else f"{RUNS_FOLDER}/{name}"


def run_name(params: Mapping[str, Any]) -> str:
    """The run's name from its parameters (``run_name``), the environment, or the sample's."""
    return check_name(str(params.get("run_name") or os.environ.get(ENV) or SAMPLE))


def check_not_clobbering(params: Mapping[str, Any]) -> None:
    """Refuse a run on other data that would write into the sample's layers.

    A run whose ``data_prep.raw_dir`` (or ``test_dir``) is not the bundled sample but that has no
    name of its own and no ``data_root`` would replace the sample's outputs and served bundle.

    Raises:
        RunNameError: Such a run, with the two ways out.
    """
    prep = params.get("data_prep") or {}
    raw_dir, test_dir = str(prep.get("raw_dir") or SAMPLE_RAW_DIR), prep.get("test_dir")
    own_data = os.path.normpath(raw_dir) != os.path.normpath(SAMPLE_RAW_DIR) or bool(test_dir)
    if own_data and run_name(params) == SAMPLE and not params.get("data_root") and not params.get("overwrite_sample"):
        raise RunNameError(
            f"data_prep.raw_dir={raw_dir} is not the bundled sample, and this run has no name: it would overwrite "
            f"the sample's outputs in data/. Name it (--params=run_name=NAME,...; outputs go to runs/NAME/), "
            f"or pass overwrite_sample=true to write into data/ anyway."
        )
