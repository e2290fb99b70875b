"""What code and which packages produce a value: the identity that cache keys carry.

A cache is only as good as its key. Keys of rankings, embeddings and stored answers name the
inputs and settings, and with them the *code* that computed the value: :func:`source_digest`
hashes the source of the modules that produce it together with every module of this package they
import, transitively, so an edit to any of them misses the cache instead of serving a stale
result; :func:`package_version` names the third-party packages.

Imports are found with :mod:`ast`, the same way ``scripts/dvc_deps.py`` finds a DVC stage's code
deps (which reuses the functions here): ``import ragfolio.x``, ``from ragfolio.x import y``
(``ragfolio.x.y`` too when ``y`` is a submodule) and relative imports, read everywhere in a file
(inside functions and ``TYPE_CHECKING`` blocks too, which errs on the side of recomputing).
Importing a module runs its parent packages' ``__init__.py``, so those are part of the closure.
Dynamic imports (``importlib.import_module`` with a computed name) are not seen: the key
functions name such modules (a plugin family's module) themselves. A module outside this
package is hashed alone (its own file; its imports are not followed).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

PACKAGE = "ragfolio"
# The folder holding the ``ragfolio`` package (``src/`` of a checkout); tests point it at a copy.
SOURCE_ROOT = Path(__file__).resolve().parents[2]
# CPython 3.11 keeps the AST builder's recursion depth in interpreter-wide state, so two threads
# inside ast.parse at once (the portfolio executor's members computing their first cache key) can
# fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905, fixed
# in 3.12 and later): one parse at a time.
_PARSE_LOCK = threading.Lock()


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
    """Whether dotted ``name`` is this package or one of its modules."""
    return name == PACKAGE or name.startswith(f"{PACKAGE}.")


def _import_targets(path: Path, src: Path) -> Iterator[tuple[str, bool, int]]:
    """``(dotted name, must exist, line)`` for each import in ``path``.

    ``from a import b`` yields ``a`` (must exist) and ``a.b`` (a submodule only if it exists).
    """
    source = path.read_text(encoding="utf-8")
    with _PARSE_LOCK:
        tree = ast.parse(source, filename=str(path))
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
    """The files whose source :func:`source_digest` hashes for ``modules``, sorted.

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


def source_digest(modules: Iterable[str], src: Path | None = None) -> str:
    """A short sha256 of the source of ``modules`` and of what they import in this package.

    Computed once per process for a set of modules and a root: the code a process runs is what it
    imported, so an edit made while it runs does not change its digest.

    Args:
        modules: Dotted module names (order and duplicates do not matter).
        src: The folder holding the ``ragfolio`` package; default :data:`SOURCE_ROOT`.

    Returns:
        The first 20 hex digits of the sha256 over each file's path (relative to ``src`` for this
        package's files, the module's file name otherwise) and bytes, in path order.
    """
    return _digest(tuple(sorted(set(modules))), SOURCE_ROOT if src is None else src)


@functools.cache
def _digest(modules: tuple[str, ...], src: Path) -> str:
    digest = hashlib.sha256()
    for path in source_files(modules, src):
        label = path.relative_to(src).as_posix() if path.is_relative_to(src) else path.name
        digest.update(label.encode("utf-8"))
        digest.update(b"\x00")
        digest.update(path.read_bytes())
        digest.update(b"\x00")
    return digest.hexdigest()[:20]


def package_version(name: str) -> str:
    """The installed version of distribution ``name``, or ``"absent"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """``{name: version}`` of each distribution in ``names`` (``"absent"`` when not installed)."""
    return {name: package_version(name) for name in names}
