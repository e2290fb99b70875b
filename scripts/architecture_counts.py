"""Counts that say how the source tree is arranged: the figures an architecture review compares.

    python scripts/architecture_counts.py [--src src/ragfolio]

- **artifact subscripts**: string subscripts and ``.get("...")`` lookups of a stage artifact
  (``portfolios["k"]``, ``router_metrics.get("served")``, ...) in ``pipelines/``, every artifact a
  node receives counted (:data:`ARTIFACTS`); nodes should read a record's attributes.
- **pipeline lines**: the lines of each pipeline package (every ``.py`` file under it), largest first;
  none should be above :data:`MAX_PIPELINE_LINES`.
- **largest room**: the package of ``ragfolio.core`` with the most modules directly in it.
- **twin names**: module basenames found in more than one folder (Kedro's ``nodes.py`` and
  ``pipeline.py``, and ``__init__.py``, are a convention, not twins).
- **packages**: the packages ("rooms"), the distinct package -> package imports ("arrows") and the
  lines of the product (``ragfolio``) and of the lab (``ragfolio_lab``).
- **upward arrows**: imports from a core stage of one that comes later in the method
  (``data -> retrieval -> scoring -> selection -> routing -> system -> answering``).

It reads files with :mod:`ast` only; nothing is imported.
"""

from __future__ import annotations

import argparse
import ast
import json
from collections import Counter, defaultdict
from pathlib import Path

STAGES = ("data", "retrieval", "scoring", "selection", "routing", "corpus", "system", "answering", "synthesis")  # in the method's order (corpus: the served corpus as it lives)
ARTIFACTS = ("corpora", "pool_settings", "query_sample", "portfolios", "utility_index", "router_features",
             "retrieval_features", "retrieval_inputs", "router_selection", "query_features", "router_metrics")
CONVENTIONAL = {"__init__.py", "nodes.py", "pipeline.py"}
MAX_PIPELINE_LINES = 500  # a pipeline package above this holds two stages' work


def artifact_subscripts(pipelines: Path) -> dict[str, int]:
    """``{artifact: count}`` of ``artifact["..."]`` subscripts and ``artifact.get("...")`` calls in the
    pipelines' modules."""
    counts: Counter[str] = Counter()
    for path in pipelines.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id in ARTIFACTS and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, str)):
                counts[node.value.id] += 1
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and isinstance(node.func.value, ast.Name) and node.func.value.id in ARTIFACTS
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                counts[node.func.value.id] += 1
    return dict(sorted(counts.items()))


def pipeline_lines(pipelines: Path) -> dict[str, int]:
    """``{pipeline: lines}`` of every pipeline package under ``pipelines``, largest first."""
    sizes = {init.parent.name: sum(len(path.read_text(encoding="utf-8").splitlines())
                                   for path in init.parent.rglob("*.py"))
             for init in pipelines.glob("*/__init__.py")}
    return dict(sorted(sizes.items(), key=lambda item: (-item[1], item[0])))


def rooms(core: Path) -> dict[str, int]:
    """Modules directly in each package of ``core`` (``__init__.py`` not counted)."""
    return {
        str(init.parent.relative_to(core)): sum(1 for p in init.parent.glob("*.py") if p.name != "__init__.py")
        for init in sorted(core.rglob("__init__.py"))
    }


def twins(src: Path) -> dict[str, list[str]]:
    """Basenames held by more than one module, with the folders holding them."""
    folders: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted(src.rglob("*.py")):
        if path.name not in CONVENTIONAL:
            folders[path.name].append(str(path.parent.relative_to(src.parent)))
    return {name: where for name, where in folders.items() if len(where) > 1}


def upward_arrows(core: Path) -> list[str]:
    """``"module -> imported"`` for each import of a later stage by an earlier one."""
    order = {stage: i for i, stage in enumerate(STAGES)}
    arrows = []
    for stage in STAGES:
        for path in sorted((core / stage).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                         else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                for name in names:
                    parts = name.split(".")
                    if parts[:2] == ["ragfolio", "core"] and len(parts) > 2 and parts[2] in order \
                            and order[parts[2]] > order[stage]:
                        arrows.append(f"{path.relative_to(core.parent)} -> {name}")
    return arrows


def package_graph(src: Path) -> dict[str, int]:
    """Packages (folders with an ``__init__.py``) under ``src``'s parent whose name starts with
    ``src``'s (``ragfolio`` and ``ragfolio_lab``), distinct package -> package imports among them,
    and each top package's lines: the "rooms and arrows" of an architecture review."""
    root, prefix = src.parent, src.name
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0].startswith(prefix) and "__pycache__" not in parts:
            init = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if init else parts)] = (path, init)

    def package(name: str) -> str:
        return name if modules[name][1] else name.rpartition(".")[0]

    def known(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    arrows, lines = set(), Counter[str]()
    for name, (path, _) in modules.items():
        text = path.read_text(encoding="utf-8")
        lines[name.split(".")[0]] += len(text.splitlines())
        here = package(name)
        for node in ast.walk(ast.parse(text)):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            for target in filter(None, map(known, targets)):
                if (there := package(target)) != here:
                    arrows.add((here, there))
    return {"rooms": sum(init for _, init in modules.values()), "arrows": len(arrows),
            **{f"lines:{top}": n for top, n in sorted(lines.items())}}


def counts(src: Path) -> dict[str, object]:
    """Every count, as the note reports them."""
    room_sizes = rooms(src / "core")
    largest = max(room_sizes, key=lambda room: room_sizes[room])
    twin_names = twins(src)
    arrows = upward_arrows(src / "core")
    return {
        "packages": package_graph(src),
        "artifact_subscripts_in_pipelines": artifact_subscripts(src / "pipelines"),
        "pipeline_lines": pipeline_lines(src / "pipelines"),
        "largest_room": {largest: room_sizes[largest]},
        "twin_names": len(twin_names),
        "twins": twin_names,
        "upward_arrows": len(arrows),
        "arrows": arrows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path("src/ragfolio"))
    print(json.dumps(counts(parser.parse_args().src), indent=2))


if __name__ == "__main__":
    main()
