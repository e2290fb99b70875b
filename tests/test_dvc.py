"""``dvc repro`` on the tiny fixtures in a copy of the repository: run, skip, rerun what changed, push/pull."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
STAGES = ["data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection", "evaluation", "router_training", "router_evaluation",
          "packaging", "answering_evaluation"]

pytestmark = pytest.mark.slow

SMALL_GRID = {
    "bm25": [{"k1": [0.9, 1.5], "b": 0.75}],
    "dense": [{"encoder": ["minilm", "e5"]}],
    "hybrid": [{"encoder": "minilm", "method": "rrf"}],
    "mmr": [{"prefilter": "bm25", "encoder": "e5", "lambda": 0.7}],
    "graph": [{"seeds": "bm25", "n_seeds": 2, "rank": "ppr"}],
    "two_hop": [{"first": "bm25", "append": "title", "second": "bm25"}],
}


def _repository_copy(tmp_path: Path) -> Path:
    """The repository's files (tracked and new, not ignored) with the tiny fixtures as the raw data."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()
    project = tmp_path / "project"
    for name in files:
        source = ROOT / name
        if name.startswith(("data/01_raw/", "tests/", "notebooks/")) or not source.is_file():
            continue
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, project / name)
    (project / "data/01_raw").mkdir(parents=True, exist_ok=True)
    for source in (FIXTURES / "tiny").glob("*.jsonl"):
        shutil.copy(source, project / "data/01_raw" / source.name)
    _edit_params(project / "conf/base/parameters_candidate_scoring.yml", lambda p: p["candidate_scoring"].update(grid=SMALL_GRID))
    _edit_params(
        project / "conf/base/parameters_answering_evaluation.yml",
        lambda p: p["answering_evaluation"].update(max_questions_per_dataset=1, datasets=["hotpotqa"]),
    )
    # the project's venv where `make` puts it: the stages' scripts/kedro finds the interpreter there
    (project / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    return project


def _commit(project: Path, message: str) -> None:
    git = ["git", "-c", "user.name=ragfolio test", "-c", "user.email=test@ragfolio.invalid"]
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], cwd=project, check=True)


def _edit_params(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    params = yaml.safe_load(path.read_text())
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def _dvc(project: Path, *args: str, stdout_only: bool = False) -> str:
    # The venv is not on PATH (not activated), as when a user types `.venv/bin/dvc repro`.
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != Path(sys.executable).parent)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "RAGFOLIO_PYTHON")}, "PATH": path,
        "RAGFOLIO_MLFLOW": "0",  # MLflow has its own test; here only DVC's bookkeeping is under test
        "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
    }
    out = subprocess.run(
        [str(Path(sys.executable).with_name("dvc")), *args], cwd=project, env=env, capture_output=True, text=True,
        timeout=900,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, f"dvc {' '.join(args)} failed:\n{log[-4000:]}"
    return out.stdout if stdout_only else log


def _ran(log: str) -> list[str]:
    return [stage for stage in STAGES if f"Running stage '{stage}'" in log]


def test_dvc_repro_skips_unchanged_and_reruns_dependents(tmp_path: Path) -> None:
    project = _repository_copy(tmp_path)

    first = _dvc(project, "repro")
    assert _ran(first) == STAGES, first[-3000:]
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert set(lock) == set(STAGES)
    assert (project / "data/06_models/bundles/all/manifest.json").exists() and (project / "data/06_models/served.json").exists()

    second = _dvc(project, "repro")
    assert _ran(second) == [], second[-3000:]
    for stage in STAGES:
        assert f"Stage '{stage}' didn't change, skipping" in second

    # An edit to the service, which no stage runs, changes no stage; one to a dataset's module changes
    # the stages whose catalog entries use it (scripts/dvc_deps.py), and no other.
    for edited, changed in (("src/ragfolio/serving/service.py", set()),
                            ("src/ragfolio_lab/datasets.py", {"answering_evaluation"})):
        source = project / edited
        original = source.read_text()
        source.write_text(original + "\n# edited\n")
        assert set(json.loads(_dvc(project, "status", "--json", stdout_only=True))) == changed, edited
        source.write_text(original)

    metrics = json.loads(_dvc(project, "metrics", "show", "--json", stdout_only=True))
    workspace = next(iter(metrics.values()))["data"]  # the workspace (keyed "" outside a git commit)
    assert set(workspace) == {f"data/08_reporting/{name}_headline.json" for name in ("portfolio", "router", "answer")}
    headline = workspace["data/08_reporting/portfolio_headline.json"]["data"]
    assert 0.0 < headline["greedy"]["all"] <= headline["oracle"] <= 1.0
    assert 0.0 < workspace["data/08_reporting/router_headline.json"]["data"]["best_of_1"]["learned"] <= 1.0
    assert "single_best" in workspace["data/08_reporting/answer_headline.json"]["data"]["em"]
    table = _dvc(project, "metrics", "show", stdout_only=True)  # readable: a few short lines
    assert max(len(line) for line in table.splitlines()) < 1500 and "latency" not in table, table[:3000]

    # A change to evaluation's parameters reruns evaluation only: nothing downstream reads its outputs.
    _commit(project, "first reproduction")  # `dvc params diff` compares with the last commit
    _edit_params(project / "conf/base/parameters_evaluation.yml", lambda p: p["evaluation"].update(report_k=[1, 2]))
    assert "evaluation.report_k" in _dvc(project, "params", "diff")
    third = _dvc(project, "repro")
    assert _ran(third) == ["evaluation"], third[-3000:]

    # A change to the portfolio size reruns selection and everything that reads the portfolio.
    _edit_params(project / "conf/base/parameters_portfolio_selection.yml", lambda p: p["portfolio_selection"].update(k=3))
    status = _dvc(project, "status")
    assert "portfolio_selection" in status and "data_prep" not in status and "candidate_scoring" not in status


def test_dvc_push_pull_round_trip(tmp_path: Path) -> None:
    project = _repository_copy(tmp_path)
    _dvc(project, "repro", "portfolio_selection")  # with its upstream stages
    remote = tmp_path / "remote"
    _dvc(project, "remote", "add", "--default", "local", str(remote))
    _dvc(project, "push")
    portfolios = project / "data/06_models/portfolios.json"
    expected = portfolios.read_bytes()
    shutil.rmtree(project / "data/05_model_input/utility")
    portfolios.unlink()
    shutil.rmtree(project / ".dvc/cache")  # only the remote has them now
    _dvc(project, "pull", "--with-deps", "portfolio_selection")
    assert portfolios.read_bytes() == expected
    assert (project / "data/05_model_input/utility/index.json").exists()
    assert "Data and pipelines are up to date" in _dvc(project, "status", "--with-deps", "portfolio_selection")
