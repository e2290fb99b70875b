"""``dvc.yaml`` lists, for every stage, each module its ``kedro run`` imports (scripts/dvc_deps.py)."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ragfolio.core.code_identity import imported_files

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
    """Relative, submodule and function-level imports are followed; other pipelines' packages are not; a
    stage depends on the dataset (and record) modules of the catalog entries it uses, and on the hook's
    bundle registration only when it writes the bundle."""
    package = "src/ragfolio"
    _write(tmp_path, {
        f"{package}/__init__.py": "",
        f"{package}/settings.py": "from ragfolio.tracking.mlflow_hooks import Hook\n",
        f"{package}/pipeline_registry.py": "from ragfolio.pipelines import alpha, beta\n",
        f"{package}/datasets/__init__.py": "",
        f"{package}/datasets/things.py": "",
        f"{package}/datasets/bundles.py": "",
        f"{package}/lazy.py": "",
        f"{package}/tracking/__init__.py": "",
        f"{package}/tracking/mlflow_hooks.py": "class Hook:\n    def after(self):\n        from . import model\n",
        f"{package}/tracking/model.py": "import ragfolio.core.shared\n",
        f"{package}/core/__init__.py": "",
        f"{package}/core/helpers.py": "from . import shared as _shared\n",
        f"{package}/core/shared.py": "",
        f"{package}/core/unused.py": "",
        f"{package}/core/record.py": "",
        f"{package}/pipelines/__init__.py": "",
        f"{package}/pipelines/alpha/__init__.py": "from .pipeline import create_pipeline\n",
        f"{package}/pipelines/alpha/pipeline.py": (
            "from ragfolio.core import helpers\n\n\ndef create_pipeline():\n    import ragfolio.lazy\n"
        ),
        f"{package}/pipelines/beta/__init__.py": "",
        f"{package}/pipelines/beta/nodes.py": "from ragfolio.core.unused import x\nfrom ..alpha import pipeline\n",
        "conf/base/catalog.yml": (
            "_root: data\nthings:\n  type: ragfolio.datasets.things.Things\n  record: ragfolio.core.record.Record\n"
            "bundle:\n  type: ragfolio.datasets.bundles.Bundle\nplain:\n  type: json.JSONDataset\n"
        ),
    })

    def deps(stage: str, used: set[str], outputs: set[str]) -> list[str]:
        data = dvc_deps.StageData(frozenset(used), frozenset(outputs))
        return dvc_deps.dep_paths(dvc_deps.stage_modules(stage, tmp_path, data), tmp_path)

    alpha = deps("alpha", {"things", "plain", "in_memory"}, {"plain"})
    assert alpha == [
        f"{package}/__init__.py", f"{package}/core/__init__.py", f"{package}/core/helpers.py",
        f"{package}/core/record.py", f"{package}/core/shared.py", f"{package}/datasets/__init__.py",
        f"{package}/datasets/things.py", f"{package}/lazy.py", f"{package}/pipeline_registry.py",
        f"{package}/pipelines/__init__.py", f"{package}/pipelines/alpha", f"{package}/settings.py",
        f"{package}/tracking/__init__.py", f"{package}/tracking/mlflow_hooks.py",
    ]
    beta = deps("beta", {"bundle"}, {"bundle"})
    assert f"{package}/core/unused.py" in beta and f"{package}/pipelines" in beta  # alpha's modules too
    assert {f"{package}/datasets/bundles.py", f"{package}/tracking"} <= set(beta)  # writes the bundle: registers it
    assert f"{package}/datasets/things.py" not in beta and f"{package}/core/record.py" not in beta
    with pytest.raises(ValueError, match="pass the catalog entries"):
        dvc_deps.stage_modules("alpha", tmp_path)


def test_a_catalog_class_without_a_module_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {"src/ragfolio/__init__.py": "", "conf/base/catalog.yml": "x:\n  type: ragfolio.gone.Thing\n"})
    with pytest.raises(ValueError, match="catalog entry 'x': 'ragfolio.gone.Thing' names no module"):
        dvc_deps.dataset_modules({"x"}, tmp_path)


def test_an_import_of_a_missing_module_names_the_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path, {"src/ragfolio/__init__.py": "", "src/ragfolio/a.py": "import os\nimport ragfolio.gone\n"})
    with pytest.raises(ValueError, match=r"a\.py:2: module 'ragfolio\.gone'"):
        imported_files(tmp_path / "src/ragfolio/a.py", tmp_path / "src")


def _covered(stage: str, path: str) -> bool:
    return any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in STAGES[stage])


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_no_stage_depends_on_the_service(stage: str) -> None:
    """``bentoml serve`` code runs in no stage, so an edit to it reruns none (``tests/test_dvc.py`` checks
    ``dvc status`` after one)."""
    serving = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "src/ragfolio/serving").rglob("*.py"))
    assert serving and [path for path in serving if _covered(stage, path)] == []


def test_a_stage_depends_on_the_datasets_of_its_own_entries_only() -> None:
    data = dvc_deps.stage_data()
    assert data["data_prep"].used == {"labelled_questions", "corpora"}
    assert _covered("data_prep", "src/ragfolio/datasets/record_files.py")
    assert _covered("data_prep", "src/ragfolio/core/data/corpora.py")  # the corpora entry's record
    for path in ("src/ragfolio/datasets/bundle_folders.py", "src/ragfolio/core/bundle.py",
                 "src/ragfolio_lab/datasets.py", "src/ragfolio/core/llm/backends.py",
                 "src/ragfolio/tracking/model.py"):
        assert not _covered("data_prep", path), path
    assert _covered("packaging", "src/ragfolio/tracking/model.py")  # writes the bundle, which the hook registers
    writers = {stage for stage, d in data.items() if "answer_store" in d.used}
    assert writers == {"answering_evaluation"}
    assert {stage for stage in STAGES if _covered(stage, "src/ragfolio_lab/datasets.py")} == writers


@pytest.mark.slow
def test_a_run_imports_the_datasets_of_its_own_entries_only(tmp_path: Path) -> None:
    """What the rules above assume, checked on the installed Kedro: ``data_prep`` (entries ``questions`` and
    ``corpora``, with MLflow logging on) imports no dataset module but the record's, nor the bundle's registration."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "src").mkdir()
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from kedro.framework.session import KedroSession\nfrom kedro.framework.startup import bootstrap_project\n"
        "bootstrap_project(Path.cwd())\n"
        f"params = {{'run_name': 'tiny', 'data_prep': {{'raw_dir': {str(ROOT / 'tests/fixtures/tiny')!r}}}}}\n"
        "with KedroSession.create(project_path=Path.cwd(), runtime_params=params) as session:\n"
        "    session.run(pipeline_names=['data_prep'])\n"
        "print('MODULES', sorted(m for m in sys.modules if m.startswith(('ragfolio.datasets', 'ragfolio.tracking'))))\n"
    )
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
           "RAGFOLIO_MLFLOW": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    out = subprocess.run([sys.executable, "-c", script], cwd=project, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert (project / "runs/tiny/03_primary/corpora.json").is_file()
    modules = next(line for line in out.stdout.splitlines() if line.startswith("MODULES "))
    assert ast.literal_eval(modules.removeprefix("MODULES ")) == [
        "ragfolio.datasets", "ragfolio.datasets.record_files", "ragfolio.tracking", "ragfolio.tracking.flatten",
        "ragfolio.tracking.mlflow_hooks",
    ]


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
