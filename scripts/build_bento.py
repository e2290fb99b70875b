"""``bentoml build`` with the served bundle only, instead of every portfolio's.

Packaging writes one bundle per portfolio key (``data/06_models/bundles/<key>/``) and a pointer to
the served one (``data/06_models/served.json``). ``bentofile.yaml`` includes the pointer and every
bundle, so a plain ``bentoml build`` works; this script builds from the same file with its
``bundles/**`` include narrowed to the folder the service loads
(:func:`ragfolio.core.bundle.resolve_bundle` of ``serving.bundle`` in conf/base/serving.yml), so
the bento carries one bundle. Other ``bentoml build`` options are passed on.

Usage::

    .venv/bin/python scripts/build_bento.py [--version 1.0]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's ragfolio

from ragfolio.core.bundle import resolve_bundle  # noqa: E402
from ragfolio.serving.config import DEFAULT_CONFIG, load_config  # noqa: E402

BUNDLES = "data/06_models/bundles/**"  # bentofile.yaml's include of every bundle


def narrowed(bentofile: dict, bundle: Path, root: Path) -> dict:
    """``bentofile`` with its :data:`BUNDLES` include replaced by ``bundle``'s folder (inside ``root``).

    Raises:
        ValueError: ``bundle`` is outside ``root`` (a bento holds the build context's files only), or
            the bentofile has no :data:`BUNDLES` include.
    """
    if BUNDLES not in bentofile.get("include", []):
        raise ValueError(f"bentofile.yaml does not include {BUNDLES!r}: nothing to narrow")
    try:
        relative = bundle.resolve().relative_to(root.resolve()).as_posix()
    except ValueError as e:
        raise ValueError(f"{bundle} is outside {root}: copy it into the project to ship it in a bento") from e
    include = [pattern for pattern in bentofile["include"] if pattern != BUNDLES]
    return {**bentofile, "include": [*include, f"{relative}/**"]}


def main(argv: list[str]) -> int:
    bundle = resolve_bundle(load_config(path=DEFAULT_CONFIG, env={}, root=ROOT).bundle)  # as `bentoml serve` does
    spec = narrowed(yaml.safe_load((ROOT / "bentofile.yaml").read_text()), bundle, ROOT)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=ROOT, prefix=".bentofile-", delete=False) as handle:
        yaml.safe_dump(spec, handle, sort_keys=False)
    try:
        bentoml = Path(sys.executable).with_name("bentoml")
        return subprocess.run([str(bentoml), "build", "-f", handle.name, *argv, str(ROOT)], cwd=ROOT).returncode
    finally:
        Path(handle.name).unlink()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
