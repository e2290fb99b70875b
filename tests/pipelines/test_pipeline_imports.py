"""Pipelines share only catalog datasets: none imports another pipeline's package or reads its parameters."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINES = Path(__file__).resolve().parents[2] / "src" / "ragfolio" / "pipelines"
PREFIX = "ragfolio.pipelines"


def imported_pipelines(path: Path, root: Path = PIPELINES) -> list[tuple[int, str]]:
    """``(line, pipeline)`` for each import of a pipeline package in ``path``, a module under ``root``.

    Reads ``import ragfolio.pipelines.q``, ``from ragfolio.pipelines.q... import x``,
    ``from ragfolio.pipelines import q`` and relative imports (``from ..q import x``).
    """
    here = [*PREFIX.split("."), *path.relative_to(root).parts[:-1]]  # the module's package
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            modules = [module] if node.module else []
            modules += [f"{module}.{alias.name}" for alias in node.names if module == PREFIX]
        else:
            continue
        for module in modules:
            if module.startswith(f"{PREFIX}."):
                found.append((node.lineno, module.split(".")[2]))
    return found


def _pipeline_modules() -> list[tuple[str, Path]]:
    return [(folder.name, path) for folder in sorted(PIPELINES.iterdir()) if (folder / "__init__.py").is_file()
            for path in sorted(folder.rglob("*.py"))]


@pytest.mark.parametrize(("package", "path"), _pipeline_modules(), ids=lambda v: getattr(v, "name", v))
def test_a_pipeline_imports_no_other_pipeline(package: str, path: Path) -> None:
    others = [(line, q) for line, q in imported_pipelines(path) if q != package]
    assert not others, (
        f"{path.relative_to(PIPELINES.parents[2])} imports other pipelines "
        f"{[f'{q} (line {line})' for line, q in others]}: pass what it needs as a catalog dataset, "
        "or move shared code to ragfolio.core"
    )


def test_the_check_sees_every_import_form(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines" / "alpha"
    folder.mkdir(parents=True)
    (folder / "nodes.py").write_text(
        "import ragfolio.pipelines.beta.nodes\n"
        "from ragfolio.pipelines.gamma.nodes import f\n"
        "from ragfolio.pipelines import delta\n"
        "from ..epsilon import nodes\n"
        "from .pipeline import g\n"
        "from ragfolio.core.routing.base import RouteInputs\n"
    )
    found = imported_pipelines(folder / "nodes.py", tmp_path / "pipelines")
    assert found == [(1, "beta"), (2, "gamma"), (3, "delta"), (4, "epsilon"), (5, "alpha")]


def test_a_pipeline_reads_only_its_own_parameters() -> None:
    """What a later stage needs of an earlier one's settings it reads from a dataset the earlier one wrote.

    The additions: ``candidate_scoring`` also reads the grid presets (``candidate_grids``, their
    own parameters file), which no other pipeline reads; ``packaging`` reads ``router_training.bundle``
    (:class:`~ragfolio.bundle_params.BundleParams`), the settings router training chose the served
    router under, kept under that name when the bundle moved to a stage of its own; ``router_evaluation``
    reads the keys it judges under (``seed``, ``logistic_c``, ``encoders``, ``bundle``), each on its
    own, kept there when router training's test half became a stage of its own (:mod:`ragfolio.router_params`),
    and the lab's ``paper_router`` (its study of the paper's router, a block of its own).
    """
    from ragfolio.pipeline_registry import stage_pipelines

    judged_under = {f"params:router_training.{key}" for key in ("seed", "logistic_c", "encoders", "bundle")}
    extra = {"candidate_scoring": {"params:candidate_grids"}, "packaging": {"params:router_training.bundle"},
             "router_evaluation": judged_under | {"params:paper_router"}}

    for name, pipe in stage_pipelines().items():
        read = {i for i in pipe.inputs() if i.startswith("params:")}
        own = {i for i in read if i == f"params:{name}" or i.startswith(f"params:{name}.")} | extra.get(name, set())
        assert read <= own, f"{name} reads the parameters {sorted(read - own)}"
