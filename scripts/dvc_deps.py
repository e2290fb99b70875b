"""The code dependencies of every DVC stage, computed from imports instead of kept by hand.

Each stage of ``dvc.yaml`` is ``kedro run --pipelines=<name>``; its ``src/...`` deps must list every
module of this project that the run executes, or ``dvc repro`` skips a stage whose code changed,
and no module it does not, or ``dvc repro`` reruns a stage that nothing changed. A stage's modules
are the transitive closure of the ``ragfolio`` imports of:

- every file of its pipeline package, ``src/ragfolio/pipelines/<name>/`` (the lab's:
  ``src/ragfolio_lab/pipelines/<name>/``);
- ``ragfolio.settings``, which Kedro imports on every run (it registers the hooks, whose imports --
  ``ragfolio.tracking.*``, ``ragfolio.stage_inputs`` and what they import -- are followed like any
  other);
- the dataset classes of the catalog entries its pipeline reads or writes (Kedro's
  ``Pipeline.datasets()``): ``type: ragfolio.<module>.<Class>`` in ``conf/base/**/catalog*.yml``,
  and a ``record: ragfolio.<module>.<Class>`` that the dataset loads. Kedro imports a dataset's
  class when a run first uses its entry (checked with kedro 1.7: ``tests/test_dvc_deps.py`` runs
  ``data_prep`` and looks at what it imported), so the other entries' modules are not run;
- ``ragfolio.pipeline_registry`` itself, but of its imports only those outside the *other* stages'
  pipeline packages: it imports every pipeline to build the registry, yet a run executes the nodes of
  its own pipeline only, so a change to another stage's nodes must not rerun this one. (A module of
  another pipeline that this stage's own code imports is followed as usual.)

Two imports are followed only for the stages that need them: the registry's of the other stages'
pipelines (above), and the MLflow hook's of ``ragfolio.tracking.model``, which it imports to
register the served bundle after a run whose pipeline writes the ``bundle`` entry
(:data:`ON_OUTPUT`), and only then.

Imports are read with :mod:`ast` by :mod:`ragfolio.core.code_identity`, everywhere in a file
(inside functions and ``TYPE_CHECKING`` blocks too, which errs on the side of rerunning):
``import ragfolio.x``, ``from ragfolio.x import y`` (``ragfolio.x.y`` too when ``y`` is a
submodule) and relative imports. Importing a module runs its parent packages' ``__init__.py``, so
those are part of the closure. Dynamic imports (``importlib.import_module`` with a computed name)
are not seen.

A directory is listed instead of its files when every ``.py`` file under it is in the closure.

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
import functools
import logging
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parse import parse
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's ragfolio, not another one installed in the venv

from ragfolio.core.code_identity import (  # noqa: E402
    PACKAGE,
    PACKAGES,
    closure,
    in_package,
    module_file,
    module_files,
    module_name,
)

logger = logging.getLogger("dvc_deps")

SETTINGS = f"{PACKAGE}.settings"
REGISTRY = f"{PACKAGE}.pipeline_registry"
MLFLOW_HOOK = f"{PACKAGE}.tracking.mlflow_hooks"
# Modules the MLflow hook imports only after a run whose pipeline writes the catalog entry named:
# ragfolio.tracking.mlflow_hooks.BUNDLE, the served bundle, registered as an MLflow model.
ON_OUTPUT = {f"{PACKAGE}.tracking.model": "bundle", f"{PACKAGE}.core.bundle": "bundle"}
CATALOG_GLOB = "conf/base/**/catalog*.yml"
CLASS_KEYS = ("type", "record")  # the keys of a catalog entry that name a class the dataset imports
CODE_PREFIX = "src/"


@dataclass(frozen=True)
class StageData:
    """The catalog entries one stage's pipeline uses (``params:`` aside).

    Attributes:
        used: every entry it reads or writes (``Pipeline.datasets()``).
        outputs: the entries it writes (``Pipeline.all_outputs()``).
    """

    used: frozenset[str]
    outputs: frozenset[str]


def _pipeline_packages(root: Path = ROOT) -> dict[str, Path]:
    """``{name: folder}`` of the Kedro pipelines: the packages under ``src/<package>/pipelines`` of the
    product and of the lab (whose stages join through entry points)."""
    folders = [root / "src" / package / "pipelines" for package in PACKAGES]
    return {child.name: child for folder in folders if folder.is_dir()
            for child in folder.iterdir() if (child / "__init__.py").is_file()}


def pipelines(root: Path = ROOT) -> list[str]:
    """The names of the Kedro pipelines, sorted."""
    return sorted(_pipeline_packages(root))


@functools.cache
def stage_data() -> dict[str, StageData]:
    """Each stage's catalog entries, from this checkout's ``register_pipelines()`` (imports every pipeline)."""
    from ragfolio.pipeline_registry import register_pipelines

    registered = register_pipelines()
    return {
        stage: StageData(
            used=frozenset(n for n in registered[stage].datasets() if not n.startswith("params:") and n != "parameters"),
            outputs=frozenset(registered[stage].all_outputs()),
        )
        for stage in pipelines()
    }


def catalog_classes(root: Path = ROOT) -> dict[str, set[str]]:
    """Each entry of the base catalog files -> the classes of this package it names (``type``, ``record``).

    Entries named with ``{placeholders}`` (dataset factories) keep their pattern as the key.
    """
    yaml = YAML(typ="safe")
    classes: dict[str, set[str]] = {}
    for path in sorted(root.glob(CATALOG_GLOB)):
        for name, config in (yaml.load(path) or {}).items():
            if not str(name).startswith("_"):  # a YAML anchor or variable, such as _root
                classes.setdefault(str(name), set()).update(v for v in _class_values(config) if in_package(v))
    return classes


def _class_values(config: Any) -> Iterator[str]:
    """Every string under a :data:`CLASS_KEYS` key of a (nested) catalog entry."""
    if isinstance(config, dict):
        for key, value in config.items():
            if key in CLASS_KEYS and isinstance(value, str):
                yield value
            else:
                yield from _class_values(value)
    elif isinstance(config, list):
        for value in config:
            yield from _class_values(value)


def dataset_modules(entries: Iterable[str], root: Path = ROOT) -> set[str]:
    """The modules of this package whose classes the catalog ``entries`` name (class name dropped).

    An entry that is not in the catalog (an in-memory dataset) names none; one that a dataset
    factory pattern matches names the pattern's.

    Raises:
        ValueError: a class's module has no file under ``root/src``.
    """
    src = root / "src"
    catalog = catalog_classes(root)
    modules = set()
    for entry in entries:
        patterns = [name for name in catalog if "{" in name and parse(name, entry) is not None]
        for dotted in catalog.get(entry, set()).union(*(catalog[p] for p in patterns)):
            module = dotted.rpartition(".")[0]
            if module_file(module, src) is None:
                raise ValueError(f"catalog entry {entry!r}: {dotted!r} names no module {module!r} under {src}")
            modules.add(module)
    return modules


def stage_modules(stage: str, root: Path = ROOT, data: StageData | None = None) -> set[Path]:
    """The ``.py`` files that ``kedro run --pipelines=<stage>`` runs (see the module docstring).

    Args:
        stage: The stage (= pipeline) name.
        root: The project's root.
        data: The stage's catalog entries; default :func:`stage_data`'s (only for this checkout).
    """
    src = root / "src"
    packages = _pipeline_packages(root)
    package = packages.get(stage, src / PACKAGE / "pipelines" / stage)
    if not (package / "__init__.py").is_file():
        raise ValueError(f"stage {stage!r} has no pipeline package {package}")
    if data is None:
        if root != ROOT:
            raise ValueError(f"pass the catalog entries of stage {stage!r} for a project other than {ROOT}")
        data = stage_data()[stage]
    seeds = module_files(SETTINGS, src) | module_files(REGISTRY, src)
    for path in sorted(package.rglob("*.py")):
        seeds |= module_files(module_name(path, src), src)
    for module in dataset_modules(data.used, root):
        seeds |= module_files(module, src)
    registry = module_file(REGISTRY, src)
    hook = module_file(MLFLOW_HOOK, src)
    others = [folder for name, folder in packages.items() if name != stage]
    unused = {module_file(module, src) for module, entry in ON_OUTPUT.items() if entry not in data.outputs}

    def follow(importer: Path, imported: Path) -> bool:
        if importer == registry:
            return not any(imported.is_relative_to(other) for other in others)
        return not (importer == hook and imported in unused)

    return closure(seeds, src, follow)


def dep_paths(files: set[Path], root: Path = ROOT) -> list[str]:
    """``files`` as sorted repo-relative paths, a directory standing for its files when it holds no others.

    A directory is used when every ``.py`` file under it is in ``files``; the highest such one wins.
    """
    tops = [root / "src" / package for package in PACKAGES]
    paths = set()
    for path in files:
        chosen = path
        top = next((t for t in tops if path.is_relative_to(t)), tops[0])
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
