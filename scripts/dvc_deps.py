"""The code dependencies of every DVC stage, computed from imports instead of kept by hand.

Each stage of ``dvc.yaml`` is ``kedro run --pipelines=<name>``; its ``src/...`` deps must list every
module of this project that the run executes, or ``dvc repro`` skips a stage whose code changed.
A stage's modules are the transitive closure of the ``ragfolio`` imports of:

- every file of its pipeline package, ``src/ragfolio/pipelines/<name>/`` (the lab's:
  ``src/ragfolio_lab/pipelines/<name>/``);
- ``ragfolio.settings``, which Kedro imports on every run (it registers the MLflow hook, whose
  imports -- ``ragfolio.tracking.*`` and what they import -- are followed like any other);
- the modules named by ``type: ragfolio.<module>.<Class>`` in ``conf/base/**/catalog*.yml``: the
  hook fetches the ``bundle`` entry after every run, so the catalog's own dataset classes load on
  every run, not only in the stages that read or write them;
- ``ragfolio.pipeline_registry`` itself, but of its imports only those outside the *other* stages'
  pipeline packages: it imports every pipeline to build the registry, yet a run executes the nodes of
  its own pipeline only, so a change to another stage's nodes must not rerun this one. (A module of
  another pipeline that this stage's own code imports is followed as usual.)

Imports are read with :mod:`ast` by :mod:`ragfolio.core.code_identity` (the same closure that
cache keys hash, so a stage reruns and its caches miss on the same edits), everywhere in a file
(inside functions and ``TYPE_CHECKING`` blocks too, which errs on the side of rerunning):
``import ragfolio.x``, ``from ragfolio.x import y`` (``ragfolio.x.y`` too when ``y`` is a
submodule) and relative imports. Importing a module runs its parent packages' ``__init__.py``, so
those are part of the closure. Dynamic imports (``importlib.import_module`` with a computed name)
are not seen.

A directory is listed instead of its files when every ``.py`` file under it is in the closure.

Through the hook (``tracking.model``, imported when a run builds the bundle) and the catalog's
datasets, both of which import ``core.artifacts``, every stage depends on most of ``core``; a stage
that reruns with unchanged outputs does not rerun the stages after it.

Usage::

    .venv/bin/python scripts/dvc_deps.py            # print each stage's code deps
    .venv/bin/python scripts/dvc_deps.py --write    # rewrite the src/ deps of dvc.yaml
    .venv/bin/python scripts/dvc_deps.py --check    # exit 1 when dvc.yaml differs, naming what

``--write`` replaces only the ``src/`` entries of each stage's ``deps`` (where the first of them
was), round-tripping the file through ruamel.yaml so data deps, params, outs, comments and layout
stay as they are. ``--check`` reports modules no ``src/`` dep covers and ``src/`` deps that
``--write`` would not write; ``tests/test_dvc_deps.py`` fails on the first kind.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's ragfolio, not another one installed in the venv

from ragfolio.core.code_identity import (  # noqa: E402
    PACKAGE,
    PACKAGES,
    closure,
    imported_files,
    in_package,
    module_file,
    module_files,
    module_name,
)

logger = logging.getLogger("dvc_deps")

SETTINGS = f"{PACKAGE}.settings"
REGISTRY = f"{PACKAGE}.pipeline_registry"
CATALOG_GLOB = "conf/base/**/catalog*.yml"
CODE_PREFIX = "src/"


def _pipeline_packages(root: Path = ROOT) -> dict[str, Path]:
    """``{name: folder}`` of the Kedro pipelines: the packages under ``src/<package>/pipelines`` of the
    product and of the lab (whose stages join through entry points)."""
    folders = [root / "src" / package / "pipelines" for package in PACKAGES]
    return {child.name: child for folder in folders if folder.is_dir()
            for child in folder.iterdir() if (child / "__init__.py").is_file()}


def pipelines(root: Path = ROOT) -> list[str]:
    """The names of the Kedro pipelines, sorted."""
    return sorted(_pipeline_packages(root))


def catalog_modules(root: Path = ROOT) -> set[str]:
    """The modules of this package named by a ``type:`` in the base catalog files (class name dropped)."""
    src = root / "src"
    yaml = YAML(typ="safe")
    types: set[str] = set()
    for path in sorted(root.glob(CATALOG_GLOB)):
        types |= set(_type_values(yaml.load(path)))
    modules = set()
    for dotted in types:
        if in_package(dotted):
            module = dotted.rpartition(".")[0]
            if module_file(module, src) is None:
                raise ValueError(f"catalog type {dotted!r}: no module {module!r} under {src}")
            modules.add(module)
    return modules


def _type_values(config: Any) -> Iterator[str]:
    """Every string under a ``type`` key of a (nested) catalog config."""
    if isinstance(config, dict):
        for key, value in config.items():
            if key == "type" and isinstance(value, str):
                yield value
            else:
                yield from _type_values(value)
    elif isinstance(config, list):
        for value in config:
            yield from _type_values(value)


def stage_modules(stage: str, root: Path = ROOT) -> set[Path]:
    """The ``.py`` files that ``kedro run --pipelines=<stage>`` runs (see the module docstring)."""
    src = root / "src"
    packages = _pipeline_packages(root)
    package = packages.get(stage, src / PACKAGE / "pipelines" / stage)
    if not (package / "__init__.py").is_file():
        raise ValueError(f"stage {stage!r} has no pipeline package {package}")
    seeds = set(module_files(SETTINGS, src))
    for path in sorted(package.rglob("*.py")):
        seeds |= module_files(module_name(path, src), src)
    for module in catalog_modules(root):
        seeds |= module_files(module, src)
    registry = module_files(REGISTRY, src)
    others = [folder for name, folder in packages.items() if name != stage]
    for path in registry:
        seeds |= {f for f in imported_files(path, src) if not any(f.is_relative_to(o) for o in others)}
    return closure(seeds, src) | registry


def dep_paths(files: set[Path], root: Path = ROOT) -> list[str]:
    """``files`` as sorted repo-relative paths, a directory standing for its files when it holds no others.

    A directory is used when every ``.py`` file under it is in ``files``; the highest such one wins.
    """
    top = root / "src" / PACKAGE
    paths = set()
    for path in files:
        chosen = path
        for parent in path.parents:
            if not parent.is_relative_to(top) or not all(f in files for f in parent.rglob("*.py")):
                break
            chosen = parent
        paths.add(chosen.relative_to(root).as_posix())
    return sorted(paths)


def uncovered(files: Iterable[Path], deps: Iterable[str], root: Path = ROOT) -> list[str]:
    """The repo-relative paths of ``files`` that no entry of ``deps`` (the file or a parent) covers."""
    covering = [root / dep for dep in deps]
    return sorted(
        path.relative_to(root).as_posix()
        for path in files
        if not any(path == dep or path.is_relative_to(dep) for dep in covering)
    )


@dataclass(frozen=True)
class StageDiff:
    """How one stage's code deps in ``dvc.yaml`` differ from the computed ones.

    Attributes:
        stage: the stage (= pipeline) name.
        missing: modules the stage runs that no ``src/`` dep covers (repo-relative paths).
        extra: ``src/`` deps that ``--write`` would not write (too broad, stale, or not collapsed).
    """

    stage: str
    missing: list[str]
    extra: list[str]


def diff_stage(stage: str, deps: Iterable[str], root: Path = ROOT) -> StageDiff:
    """Compare a stage's ``deps`` (data deps are ignored) with its computed code deps."""
    code = [dep for dep in deps if dep.startswith(CODE_PREFIX)]
    modules = stage_modules(stage, root)
    return StageDiff(
        stage=stage,
        missing=uncovered(modules, code, root),
        extra=sorted(set(code) - set(dep_paths(modules, root))),
    )


def _round_trip_yaml() -> YAML:
    """A ruamel.yaml loader/dumper that writes ``dvc.yaml`` back byte for byte when nothing changed."""
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    yaml.preserve_quotes = True
    return yaml


def read_stage_deps(dvc_yaml: Path) -> dict[str, list[str]]:
    """Each stage's ``deps`` in ``dvc_yaml``, in file order."""
    stages = YAML(typ="safe").load(dvc_yaml)["stages"]
    return {name: [str(dep) for dep in stage.get("deps", [])] for name, stage in stages.items()}


def write_code_deps(dvc_yaml: Path, root: Path = ROOT) -> None:
    """Replace the ``src/`` deps of every stage in ``dvc_yaml`` with the computed ones, in place.

    The new entries go where the first ``src/`` entry was (at the end when there was none).
    """
    yaml = _round_trip_yaml()
    document = yaml.load(dvc_yaml)
    for stage, config in document["stages"].items():
        deps = config["deps"]
        code = [i for i, dep in enumerate(deps) if str(dep).startswith(CODE_PREFIX)]
        at = code[0] if code else len(deps)
        for i in reversed(code):
            del deps[i]
        for offset, path in enumerate(dep_paths(stage_modules(stage, root), root)):
            deps.insert(at + offset, path)
    with dvc_yaml.open("w", encoding="utf-8") as stream:
        yaml.dump(document, stream)


def check(dvc_yaml: Path, root: Path = ROOT) -> list[str]:
    """One line per problem with the stages and code deps of ``dvc_yaml``; empty when it is up to date."""
    stages = read_stage_deps(dvc_yaml)
    problems = []
    if sorted(stages) != pipelines(root):
        problems.append(f"stages {sorted(stages)} != pipelines {pipelines(root)}")
    for stage in sorted(set(stages) & set(pipelines(root))):
        result = diff_stage(stage, stages[stage], root)
        problems += [f"{stage}: missing {path}" for path in result.missing]
        problems += [f"{stage}: extra {path}" for path in result.extra]
    return problems


def main(argv: list[str] | None = None) -> int:
    """Print, write (``--write``) or check (``--check``) the code deps; the exit status of the script."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the src/ deps of dvc.yaml")
    mode.add_argument("--check", action="store_true", help="exit 1 when dvc.yaml's stages or src/ deps differ")
    parser.add_argument("--dvc-yaml", type=Path, default=ROOT / "dvc.yaml")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    if args.write:
        write_code_deps(args.dvc_yaml)
        logger.info("%s: code deps of %d stages written", args.dvc_yaml, len(read_stage_deps(args.dvc_yaml)))
        return 0
    if args.check:
        problems = check(args.dvc_yaml)
        for problem in problems:
            logger.error(problem)
        if problems:
            logger.error("fix with: .venv/bin/python scripts/dvc_deps.py --write")
            return 1
        logger.info("%s: code deps are up to date", args.dvc_yaml)
        return 0
    for stage in pipelines():
        print(f"{stage}:")
        print("\n".join(f"  - {path}" for path in dep_paths(stage_modules(stage))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
