"""The source tree stays readable: no module over 400 lines, no pipeline package over 500 (in the
product and in the lab alike),
``ragfolio.core`` in stage packages with no import of a later stage, no two modules of one name, and
tests in folders that mirror ``src``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ragfolio"
LAB = ROOT / "src" / "ragfolio_lab"
MAX_LINES = 400
def _counts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture_counts", ROOT / "scripts" / "architecture_counts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


COUNTS = _counts()  # scripts/architecture_counts.py: the stages in order, twins, arrows
STAGES = set(COUNTS.STAGES)
RUNTIME = {"llm"}  # the LLM runtime, used by several stages, is a package beside them
SHARED = {"__init__.py", "bundle.py", "batching.py", "cache.py", "code_identity.py", "metrics.py", "record_checks.py", "stats.py",
          "timings.py", "model_cache.py", "answer_text.py", "folder_swap.py"}


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(SRC.parent)): n
        for package in (SRC, LAB) for path in package.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules (lines over {MAX_LINES}): {long}"


def test_no_pipeline_package_is_over_500_lines() -> None:
    long = {name: n for package in (SRC, LAB) for name, n in COUNTS.pipeline_lines(package / "pipelines").items()
            if n > COUNTS.MAX_PIPELINE_LINES}
    assert long == {}, f"split these pipelines (lines over {COUNTS.MAX_PIPELINE_LINES}): {long}"


def test_core_is_stage_packages_and_a_few_shared_modules() -> None:
    core = SRC / "core"
    packages = {p.name for p in core.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.name for p in core.glob("*.py")}
    assert packages == STAGES | RUNTIME, f"core's packages are {sorted(packages)}; the stages are {sorted(STAGES)}"
    assert modules <= SHARED, f"modules at core's top level that belong in a stage: {sorted(modules - SHARED)}"


def test_no_stage_imports_a_later_one() -> None:
    assert COUNTS.upward_arrows(SRC / "core") == []


def test_no_two_modules_share_a_name() -> None:
    assert COUNTS.twins(SRC) == {}, "name each module for what it holds"


def test_core_tests_mirror_the_core_packages() -> None:
    tests = ROOT / "tests" / "core"
    folders = {str(p.relative_to(tests)) for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    packages = {str(p.parent.relative_to(SRC / "core")) for p in (SRC / "core").rglob("__init__.py")} - {"."}
    assert folders <= packages, f"test folders with no package of that name: {sorted(folders - packages)}"
    stages = {p.name for p in tests.iterdir() if p.is_dir()}
    assert STAGES | RUNTIME <= stages, f"core packages without a test folder: {sorted(STAGES | RUNTIME - stages)}"
