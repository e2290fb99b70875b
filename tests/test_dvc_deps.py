"""``dvc.yaml`` lists, for every stage, each module its ``kedro run`` imports (scripts/dvc_deps.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DVC_YAML = ROOT / "dvc.yaml"


def _load_script() -> ModuleType:
    """``scripts/dvc_deps.py`` as a module (``scripts/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("dvc_deps", ROOT / "scripts" / "dvc_deps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


dvc_deps = _load_script()
STAGES = dvc_deps.read_stage_deps(DVC_YAML)
FIX = "run: .venv/bin/python scripts/dvc_deps.py --write"


def test_stages_are_the_pipelines() -> None:
    assert sorted(STAGES) == dvc_deps.pipelines()


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_imported_module_is_a_dep(stage: str) -> None:
    missing = dvc_deps.uncovered(dvc_deps.stage_modules(stage), STAGES[stage])
    assert missing == [], f"{stage} imports modules dvc.yaml does not list as deps: {missing}; {FIX}"


def test_check_reports_a_missing_module() -> None:
    stage = "candidate_scoring"
    expected = dvc_deps.dep_paths(dvc_deps.stage_modules(stage))
    data = [dep for dep in STAGES[stage] if not dep.startswith("src/")]
    assert dvc_deps.diff_stage(stage, data + expected) == dvc_deps.StageDiff(stage, missing=[], extra=[])

    dropped = "src/ragfolio/core/cache.py"
    assert dropped in expected
    result = dvc_deps.diff_stage(stage, [dep for dep in data + expected if dep != dropped])
    assert result.missing == [dropped] and result.extra == []

    lab = [dep for dep in expected if dep.startswith("src/ragfolio_lab/")]
    result = dvc_deps.diff_stage(stage, [*data, *lab, "src/ragfolio"])  # covers the product, but too broadly
    assert result.missing == [] and result.extra == ["src/ragfolio"]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_closure_rules_on_a_small_package(tmp_path: Path) -> None:
    """Relative, submodule and function-level imports are followed; other pipelines' packages are not."""
    package = "src/ragfolio"
    _write(tmp_path, {
        f"{package}/__init__.py": "",
        f"{package}/settings.py": "from ragfolio.tracking.mlflow_hooks import Hook\n",
        f"{package}/pipeline_registry.py": "from ragfolio.pipelines import alpha, beta\n",
        f"{package}/datasets.py": "",
        f"{package}/lazy.py": "",
        f"{package}/tracking/__init__.py": "",
        f"{package}/tracking/mlflow_hooks.py": "class Hook:\n    pass\n",
        f"{package}/core/__init__.py": "",
        f"{package}/core/helpers.py": "from . import shared as _shared\n",
        f"{package}/core/shared.py": "",
        f"{package}/core/unused.py": "",
        f"{package}/core/orphan.py": "",
        f"{package}/pipelines/__init__.py": "",
        f"{package}/pipelines/alpha/__init__.py": "from .pipeline import create_pipeline\n",
        f"{package}/pipelines/alpha/pipeline.py": (
            "from ragfolio.core import helpers\n\n\ndef create_pipeline():\n    import ragfolio.lazy\n"
        ),
        f"{package}/pipelines/beta/__init__.py": "",
        f"{package}/pipelines/beta/nodes.py": "from ragfolio.core.unused import x\nfrom ..alpha import pipeline\n",
        "conf/base/catalog.yml": "things:\n  type: ragfolio.datasets.Things\nplain:\n  type: json.JSONDataset\n",
    })

    alpha = dvc_deps.dep_paths(dvc_deps.stage_modules("alpha", tmp_path), tmp_path)
    assert alpha == [
        f"{package}/__init__.py", f"{package}/core/__init__.py", f"{package}/core/helpers.py",
        f"{package}/core/shared.py", f"{package}/datasets.py", f"{package}/lazy.py",
        f"{package}/pipeline_registry.py", f"{package}/pipelines/__init__.py", f"{package}/pipelines/alpha",
        f"{package}/settings.py", f"{package}/tracking",
    ]
    beta = dvc_deps.dep_paths(dvc_deps.stage_modules("beta", tmp_path), tmp_path)
    assert f"{package}/core/unused.py" in beta and f"{package}/pipelines" in beta  # alpha's modules too


def test_an_import_of_a_missing_module_names_the_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path, {"src/ragfolio/__init__.py": "", "src/ragfolio/a.py": "import os\nimport ragfolio.gone\n"})
    with pytest.raises(ValueError, match=r"a\.py:2: module 'ragfolio\.gone'"):
        dvc_deps.imported_files(tmp_path / "src/ragfolio/a.py", tmp_path / "src")


def _source_hashes(project: Path, deps: list[str]) -> dict[str, str]:
    """DVC's md5 of each dep, as ``dvc repro`` records it in ``dvc.lock`` (the project's .dvcignore applies)."""
    from dvc.repo import Repo
    from dvc_data.hashfile.build import build

    repo = Repo(str(project))
    try:
        return {dep: str(build(repo.cache.local, str(project / dep), repo.fs, "md5", ignore=repo.dvcignore,
                               dry_run=True)[2].hash_info) for dep in deps}
    finally:
        repo.close()


def test_source_deps_hash_the_same_with_and_without_bytecode(tmp_path: Path) -> None:
    """A fresh clone has no ``__pycache__``; the development tree has hundreds of ``.pyc`` files. The
    lock must not tell them apart (issue 46: it recorded 89 files for ``core/retrieval``, a clone has 46)."""
    import compileall
    import shutil

    from dvc.repo import Repo

    project = tmp_path / "project"
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / ".dvcignore", project / ".dvcignore")
    Repo.init(str(project), no_scm=True).close()
    deps = sorted({dep for stage in STAGES.values() for dep in stage if dep.startswith("src/")})
    clean = _source_hashes(project, deps)
    assert compileall.compile_dir(str(project / "src"), quiet=1)
    assert any((project / "src").rglob("*.pyc"))
    assert _source_hashes(project, deps) == clean
