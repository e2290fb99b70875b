"""What code and which packages a value depends on: this package's import graph, package versions.

:func:`package_version` names the installed third-party packages that cache keys carry beside each
cached computation's declared version (an encoder kind's ``version``, a family's ``result_version``,
``BASE_VERSION``...: ``tests/test_cache_versions.py`` fails when a computation's output changes and
its version does not). Cache keys hold no digest of source code, so code can move and be edited
freely: only a change of what a computation returns misses the caches, through its version.

:func:`closure` is the import graph that ``scripts/dvc_deps.py`` computes each DVC stage's code
deps from: ``import ragfolio.x``, ``from ragfolio.x import y`` (``ragfolio.x.y`` too when ``y``
is a submodule) and relative imports, found with :mod:`ast` everywhere in a file (inside functions
and ``TYPE_CHECKING`` blocks too, which errs on the side of rerunning). Importing a module runs its
parent packages' ``__init__.py``, so those are part of the closure. Dynamic imports
(``importlib.import_module`` with a computed name) are not seen.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

PACKAGE = "ragfolio"
# The packages whose imports are followed: the product and the lab (which imports the product).
PACKAGES = (PACKAGE, "ragfolio_lab")
# The folder holding the ``ragfolio`` package (``src/`` of a checkout).
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def module_file(name: str, src: Path) -> Path | None:
    """The file of dotted module ``name`` under ``src`` (a package's ``__init__.py``), if it exists."""
    base = src.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def module_files(name: str, src: Path) -> set[Path]:
    """The files that ``import name`` runs: each parent package's ``__init__.py`` and the module.

    Raises:
        ValueError: ``name`` or one of its parents is not a module under ``src``.
    """
    parts = name.split(".")
    files = set()
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        path = module_file(prefix, src)
        if path is None:
            of = "" if prefix == name else f" (of {name!r})"
            raise ValueError(f"module {prefix!r}{of} has no file under {src}")
        files.add(path)
    return files


def module_name(path: Path, src: Path) -> str:
    """The dotted name of the module in ``path`` (``pkg/__init__.py`` -> ``pkg``)."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def in_package(name: str) -> bool:
    """Whether dotted ``name`` is one of :data:`PACKAGES` or one of their modules."""
    return any(name == package or name.startswith(f"{package}.") for package in PACKAGES)


def _import_targets(path: Path, src: Path) -> Iterator[tuple[str, bool, int]]:
    """``(dotted name, must exist, line)`` for each import in ``path``.

    ``from a import b`` yields ``a`` (must exist) and ``a.b`` (a submodule only if it exists).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    this = module_name(path, src)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, True, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level > len(parts):
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the top-level package")
                base = ".".join(parts[: len(parts) - node.level + 1])
                if node.module:
                    base = f"{base}.{node.module}"
            else:
                base = str(node.module)
            yield base, True, node.lineno
            for alias in node.names:
                if alias.name != "*":
                    yield f"{base}.{alias.name}", False, node.lineno


def imported_files(path: Path, src: Path) -> set[Path]:
    """The files of this package that the imports in ``path`` run (not transitively).

    Raises:
        ValueError: an import of this package names a module that does not exist (file and line).
    """
    files: set[Path] = set()
    for name, required, line in _import_targets(path, src):
        if not in_package(name) or (not required and module_file(name, src) is None):
            continue
        try:
            files |= module_files(name, src)
        except ValueError as error:
            raise ValueError(f"{path}:{line}: {error}") from error
    return files


def closure(seeds: Iterable[Path], src: Path, follow: Callable[[Path, Path], bool] | None = None) -> set[Path]:
    """``seeds`` and every file of this package that they import, transitively.

    Args:
        seeds: The files to start from.
        src: The folder holding the ``ragfolio`` package.
        follow: ``follow(importer, imported)``: whether to follow that import (default: every one).
    """
    todo = list(seeds)
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(f for f in imported_files(path, src) - seen if follow is None or follow(path, f))
    return seen


def source_files(modules: Iterable[str], src: Path | None = None) -> list[Path]:
    """The files that importing ``modules`` runs, sorted (a model's code path, to check its requirements).

    Modules of this package bring their closure under ``src`` (default :data:`SOURCE_ROOT`);
    others bring their own file, if they have one.

    Raises:
        ValueError: a module of this package has no file under ``src``.
    """
    root = SOURCE_ROOT if src is None else src
    seeds: set[Path] = set()
    outside: set[Path] = set()
    for name in modules:
        if in_package(name):
            seeds |= module_files(name, root)
            continue
        if (path := _outside_file(name)) is not None:
            outside.add(path)
    return sorted(closure(seeds, root) | outside)


def _outside_file(name: str) -> Path | None:
    """The source file of module ``name`` outside this package (loaded or importable), if any."""
    loaded = sys.modules.get(name)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if origin is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a parent package that is missing; __main__ without a spec
            spec = None
        origin = spec.origin if spec is not None else None
    return Path(origin) if origin and Path(origin).is_file() else None


def package_version(name: str) -> str:
    """The installed version of distribution ``name``, or ``"absent"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """``{name: version}`` of each distribution in ``names`` (``"absent"`` when not installed)."""
    return {name: package_version(name) for name in names}
