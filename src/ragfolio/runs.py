"""Named runs: where a ``kedro run``'s outputs go, so a run on your own data keeps the sample's apart.

A run is named by the runtime parameter ``run_name`` (``kedro run --params=run_name=teamwiki``) or,
without it, by ``RAGFOLIO_RUN_NAME``. The bundled sample's run is ``sample`` (the default) and
writes the ``data/`` layers that DVC tracks; any other name writes the same layers under
``runs/<name>/`` (git- and DVC-ignored). ``data_root`` still moves everything to one place of your
choice (a Kubeflow volume). The catalog reads the root through the ``run_root`` resolver that
``settings.py`` registers.

The MLflow hook names a run by its :class:`RunIdentity`: the run's name, or for an unnamed run on
other data (``overwrite_sample=true``, a Kubeflow step under ``data_root``) the name of the data
folder it really read, with ``k`` and the candidate pool: ``teamwiki/portfolio k=5 pool=default``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
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


# A run's identity: what its outputs were made from. Each field is read from the parameter group of the
# stage that uses it; a run whose pipelines do not read that group (a DVC stage, a Kubeflow step, which
# gets only its own pipelines' parameters) takes it from the record the stage that did read it left in
# the run's root, so every stage of a run is named after the data folder it was really made from.
IDENTITY_FILE = "02_intermediate/run_identity.json"
IDENTITY_GROUPS = {"raw_dir": "data_prep", "test_dir": "data_prep", "corpus_dir": "data_prep", "k": "portfolio_selection",
                   "pool": "candidate_scoring"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def identity_fields(params: Mapping[str, Any]) -> dict[str, Any]:
    """``raw_dir``, ``test_dir``, ``corpus_dir``, ``k`` and ``pool`` (the grid preset's name, ``inline`` for a
    grid written out) as the parameters give them."""
    prep, grid = params.get("data_prep") or {}, (params.get("candidate_scoring") or {}).get("grid", "default")
    k = (params.get("portfolio_selection") or {}).get("k")
    if isinstance(k, float) and k.is_integer():  # a KFP step passes 5 as 5.0, which the stage reads as 5
        k = int(k)
    return {"raw_dir": str(prep.get("raw_dir") or SAMPLE_RAW_DIR), "test_dir": prep.get("test_dir"),
            "corpus_dir": prep.get("corpus_dir"), "k": k, "pool": grid if isinstance(grid, str) else "inline"}


def identity_record(params: Mapping[str, Any], groups: set[str], recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The identity fields a run knows: from ``params`` those of the parameter ``groups`` its pipelines
    read, the others as ``recorded`` by an earlier run in the same root (what this run writes back)."""
    read = {key: value for key, value in identity_fields(params).items() if IDENTITY_GROUPS[key] in groups}
    return {**{key: value for key, value in recorded.items() if key in IDENTITY_GROUPS}, **read}


@dataclass(frozen=True)
class RunIdentity:
    """What a run's outputs were made from, and the names a user tells it apart by.

    Attributes:
        name: The run's name (:func:`run_name`): ``sample`` unless the run was given one.
        raw_dir: The data folder its questions were read from.
        test_dir: The folder of its test questions, if any.
        corpus_dir: The folder of passage files added to its corpus, if any.
        k: Portfolio size.
        pool: The candidate grid preset (``inline`` for a grid written out in the parameters).
    """

    name: str
    raw_dir: str
    test_dir: str | None
    corpus_dir: str | None
    k: int | None
    pool: str

    @classmethod
    def of(cls, params: Mapping[str, Any], record: Mapping[str, Any]) -> RunIdentity:
        """The identity from a :func:`identity_record`, fields it lacks from ``params``."""
        fields = {**identity_fields(params), **record}
        return cls(name=run_name(params), raw_dir=str(fields["raw_dir"]), test_dir=fields["test_dir"],
                   corpus_dir=fields["corpus_dir"], k=fields["k"], pool=str(fields["pool"]))

    @property
    def data_dirs(self) -> dict[str, str]:
        """The folders its questions and corpus were read from, by role (``raw``, ``test``, ``corpus``)."""
        dirs = {"raw": self.raw_dir, "test": self.test_dir, "corpus": self.corpus_dir}
        return {role: str(folder) for role, folder in dirs.items() if folder}

    @property
    def label(self) -> str:
        """The run's own name if it has one, else ``sample`` on the bundled sample, else its data folder's name."""
        if self.name != SAMPLE or os.path.normpath(self.raw_dir) == os.path.normpath(SAMPLE_RAW_DIR):
            return self.name
        folder = _UNSAFE.sub("-", os.path.basename(os.path.normpath(self.raw_dir))).strip(".-_")
        return folder[:64] or "data"

    def title(self, pipelines: str) -> str:
        """The MLflow run name: ``<label>/<pipelines> k=<k> pool=<pool>``."""
        return f"{self.label}/{pipelines} k={self.k} pool={self.pool}"
