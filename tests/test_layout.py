"""The source tree stays readable: no module over 400 lines, and ``ragfolio.core`` in stage packages."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ragfolio"
MAX_LINES = 400
STAGES = {"data", "retrieval", "scoring", "selection", "routing", "answering"}
SHARED = {"__init__.py", "bundle.py", "batching.py", "cache.py", "code_identity.py", "metrics.py", "stats.py",
          "timings.py"}


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in SRC.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules (lines over {MAX_LINES}): {long}"


def test_core_is_stage_packages_and_a_few_shared_modules() -> None:
    core = SRC / "core"
    packages = {p.name for p in core.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.name for p in core.glob("*.py")}
    assert packages == STAGES, f"core's packages are {sorted(packages)}; the stages are {sorted(STAGES)}"
    assert modules <= SHARED, f"modules at core's top level that belong in a stage: {sorted(modules - SHARED)}"
