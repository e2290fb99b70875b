"""The commit a run is tagged with is ``-dirty`` only when tracked code differs from HEAD: not for
``dvc.lock``, DVC's outputs (which ``dvc repro`` rewrites), untracked or ignored files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ragfolio.tracking.mlflow_hooks import dvc_outputs, git_commit

DVC_YAML = """stages:
  prep:
    cmd: kedro run
    deps: [src/code.py]
    outs:
      - data/02_intermediate/questions.json
      - data/06_models/bundle
    metrics:
      - data/08_reporting/headline.json:
          cache: false
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"dvc.yaml": DVC_YAML, "dvc.lock": "schema: '2.0'\n", "src/code.py": "X = 1\n", ".gitignore": "scratch/\n",
             "data/08_reporting/headline.json": "{}\n", "data/06_models/bundle/manifest.json": "{}\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return tmp_path


def test_a_clean_tree_is_not_dirty(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    assert git_commit(repo) == head
    (repo / "src/code.py").touch()  # a new mtime, the same content
    assert git_commit(repo) == head


def test_what_dvc_repro_rewrites_and_untracked_or_ignored_files_do_not_count(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    (repo / "data/08_reporting/headline.json").write_text('{"em": 0.5}\n')
    (repo / "data/06_models/bundle/manifest.json").write_text('{"k": 5}\n')
    (repo / "notes.txt").write_text("untracked\n")
    (repo / "scratch").mkdir()
    (repo / "scratch/log.txt").write_text("ignored\n")
    assert git_commit(repo) == head


@pytest.mark.parametrize("staged", [False, True])
def test_a_changed_tracked_source_file_is_dirty(repo: Path, staged: bool) -> None:
    (repo / "src/code.py").write_text("X = 2\n")
    if staged:
        _git(repo, "add", "src/code.py")
    assert git_commit(repo) == _git(repo, "rev-parse", "HEAD") + "-dirty"


def test_outside_a_checkout_the_commit_is_unknown(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == "unknown"


def test_dvc_outputs_are_its_outs_metrics_plots_and_lock(repo: Path) -> None:
    assert dvc_outputs(repo) == {"dvc.lock", "data/02_intermediate/questions.json", "data/06_models/bundle",
                                 "data/08_reporting/headline.json"}
