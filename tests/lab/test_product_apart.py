"""The product (``ragfolio``) imports nothing from the lab (``ragfolio_lab``); the lab joins through entry points."""

import ast
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from ragfolio.core.routing.registry import router_class
from ragfolio.pipeline_registry import register_pipelines

SRC = Path(__file__).resolve().parents[2] / "src"
LAB = "ragfolio_lab"


def _lab_imports(path: Path) -> list[str]:
    """``file:line`` of each import of the lab in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(name == LAB or name.startswith(f"{LAB}.") for name in names):
            found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_no_module_of_the_product_imports_the_lab() -> None:
    found = [hit for path in sorted((SRC / "ragfolio").rglob("*.py")) for hit in _lab_imports(path)]
    assert found == []


def test_the_check_sees_an_import_of_the_lab(tmp_path: Path) -> None:
    """The scan above is not blind: it finds both forms of import, and not a name that merely starts alike."""
    module = SRC / "ragfolio" / "_probe_for_test.py"
    source = "import ragfolio_lab.routers\nfrom ragfolio_lab.answering import store\nimport ragfolio_labs\n"
    try:
        module.write_text(source)
        assert _lab_imports(module) == ["ragfolio/_probe_for_test.py:1", "ragfolio/_probe_for_test.py:2"]
    finally:
        module.unlink()


BLOCKED = """
import importlib, importlib.abc, pkgutil, sys

class NoLab(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "ragfolio_lab" or name.startswith("ragfolio_lab."):
            raise ImportError(f"the lab is not installed: {name}")
        return None

sys.meta_path.insert(0, NoLab())
import ragfolio
for module in pkgutil.walk_packages(ragfolio.__path__, "ragfolio."):
    importlib.import_module(module.name)
import ragfolio.serving.service
print("imported", len([m for m in sys.modules if m.startswith("ragfolio.")]))
"""


def test_every_module_of_the_product_imports_without_the_lab() -> None:
    """With any import of ``ragfolio_lab`` refused, every product module (the service's included) imports."""
    out = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) > 100


def test_the_lab_joins_through_entry_points() -> None:
    """Its stages are registered pipelines, and the paper's router is found by name, both loaded lazily."""
    plugins = {plugin.name: plugin.value for plugin in entry_points(group="ragfolio.pipelines")}
    assert plugins == {"router_evaluation": "ragfolio_lab.pipelines.router_evaluation:create_pipeline",
                       "answering_evaluation": "ragfolio_lab.pipelines.answering_evaluation:create_pipeline"}
    pipelines = register_pipelines()
    assert {"router_evaluation", "answering_evaluation"} <= set(pipelines)
    assert pipelines["router_evaluation"].nodes[0].func.__module__.startswith(f"{LAB}.")
    assert router_class("paper").__module__ == f"{LAB}.routers.paper"
