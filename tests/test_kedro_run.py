"""``kedro run`` through the real CLI, default configuration, on a copy of the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"

pytestmark = pytest.mark.slow


def _project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "src").mkdir()  # kedro wants source_dir; the package itself is installed
    return project


def _split_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """raw: part of each tiny file plus TriviaQA (no contexts); test: the rest of each tiny file."""
    raw, test = tmp_path / "raw", tmp_path / "test"
    raw.mkdir(), test.mkdir()
    for source in sorted((FIXTURES / "tiny").glob("*.jsonl")):
        lines = source.read_text().splitlines()
        (raw / source.name).write_text("\n".join(lines[:-2]) + "\n")
        (test / source.name).write_text("\n".join(lines[-2:]) + "\n")
    shutil.copy(FIXTURES / "tiny_triviaqa" / "triviaqa.jsonl", raw / "triviaqa.jsonl")
    (raw / "nested").mkdir()  # only top-level files are read
    (raw / "nested" / "broken.jsonl").write_text("not json\n")
    return raw, test


def test_kedro_run_portfolio_with_test_dir(tmp_path: Path) -> None:
    project = _project_copy(tmp_path)
    raw, test = _split_fixture(tmp_path)
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
    kedro = Path(sys.executable).with_name("kedro")
    out = subprocess.run(
        [str(kedro), "run", "--pipeline=portfolio", f"--params=data_prep.raw_dir={raw},data_prep.test_dir={test}"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert "triviaqa" in log and "left out of retrieval metrics" in log

    metrics = json.loads((project / "data/08_reporting/portfolio_metrics.json").read_text())
    assert metrics["n_candidates"] >= 200
    assert set(metrics["datasets"]) == {"hotpotqa", "musique", "all"}
    assert metrics["datasets"]["hotpotqa"]["n_test"] == 2 and metrics["datasets"]["all"]["n_test"] == 4
    assert len(metrics["datasets"]["all"]["test"]["greedy_at_k"]) == 8
    for png in ("best_of_k.png", "winners_by_type.png"):
        assert (project / "data/08_reporting" / png).stat().st_size > 10_000
    assert "greedy@5" in log  # the summary table

    # router_training and answering_evaluation ran too (the embedded LLM, both test questions per dataset)
    routers = json.loads((project / "data/08_reporting/router_metrics.json").read_text())
    assert set(routers["datasets"]) == {"hotpotqa", "musique", "all"}
    assert len(routers["datasets"]["all"]["learned"]["best_of_l"]) == 5
    for key in ("hotpotqa", "musique", "all"):
        assert (project / "data/06_models/routers" / key / "router.safetensors").exists()
    answers = [json.loads(line) for line in (project / "data/07_model_output/answers.jsonl").read_text().splitlines()]
    assert len(answers) == 4 * 7  # 2 test questions x 2 datasets, 7 systems
    answer_metrics = json.loads((project / "data/08_reporting/answer_metrics.json").read_text())
    assert set(answer_metrics["datasets"]) == {"hotpotqa", "musique", "all"}
    assert answer_metrics["datasets"]["all"]["vendi_rag"]["tokens_mean"] > 0
    for png in ("router_best_of_l.png", "em_vs_tokens.png"):
        assert (project / "data/08_reporting" / png).stat().st_size > 10_000
