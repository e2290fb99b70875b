"""A user's mistakes print one clear line: a malformed row, a bad parameter, an unnamed run on other data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from ragfolio.core.data.loading import load_jsonl
from ragfolio.core.data.records import DataFormatError
from ragfolio.errors import one_line, user_error

ROOT = Path(__file__).resolve().parents[1]
ROW = {"id": "q1", "dataset": "teamwiki", "question": "Who?", "answers": ["A"], "type": None,
       "contexts": [{"title": "T", "text": "A did it.", "is_supporting": True}]}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: int = 5


def test_an_invalid_json_row_names_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "teamwiki.jsonl"
    path.write_text(json.dumps(ROW) + "\n" + '{"id": "q2", "question": "tab\there"}\n')
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert str(info.value) == f"{path}:2: field '<row>': invalid JSON at column 30: Invalid control character"


def test_a_bad_parameter_is_one_line_naming_each_key() -> None:
    with pytest.raises(ValidationError) as info:
        Params.model_validate({"k": "five", "kk": 3})
    line = one_line(info.value)
    assert "\n" not in line and line.startswith("invalid parameters (Params): ")
    assert "k: Input should be a valid integer" in line and "(got 'five')" in line and "kk: Extra inputs" in line


def test_a_user_error_is_found_under_the_error_raised_from_it() -> None:
    cause = DataFormatError("f.jsonl", 3, "answers", "expected a list, got str")
    try:
        raise RuntimeError("node failed") from cause
    except RuntimeError as error:
        assert user_error(error) is cause
    assert user_error(KeyError("x")) is None


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "src").mkdir()
    return project


def _kedro(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGFOLIO_MLFLOW": "0", "KEDRO_DISABLE_TELEMETRY": "true"}
    env.pop("RAGFOLIO_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "kedro", "run", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_kedro_run_on_a_malformed_row_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    project, raw = _project(tmp_path), tmp_path / "teamwiki"
    raw.mkdir()
    (raw / "teamwiki.jsonl").write_text(json.dumps(ROW) + "\n" + json.dumps({**ROW, "id": "q2", "answers": "A"}) + "\n")
    out = _kedro(project, "--pipelines=data_prep", f"--params=run_name=teamwiki,data_prep.raw_dir={raw}")
    assert out.returncode == 1
    expected = f"error: {raw / 'teamwiki.jsonl'}:2: field 'answers': expected a list, got str"
    assert expected in out.stderr.splitlines(), out.stderr[-2000:]
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) < 40, out.stderr[-2000:]


@pytest.mark.slow
def test_kedro_run_on_other_data_without_a_name_stops_before_touching_data(tmp_path: Path) -> None:
    project, raw = _project(tmp_path), tmp_path / "teamwiki"
    raw.mkdir()
    (raw / "teamwiki.jsonl").write_text(json.dumps(ROW) + "\n")
    out = _kedro(project, "--pipelines=data_prep", f"--params=data_prep.raw_dir={raw}")
    assert out.returncode == 1
    assert any(line.startswith("error: data_prep.raw_dir=") for line in out.stderr.splitlines()), out.stderr[-2000:]
    assert not (project / "data").exists()


@pytest.mark.slow
def test_kedro_run_of_a_stage_before_its_inputs_exist_prints_one_line_naming_the_stage_first(tmp_path: Path) -> None:
    project = _project(tmp_path)
    out = _kedro(project, "--pipelines=router_training", f"--params=data_root={tmp_path / 'fresh'}")
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: this run needs ")]
    assert len(errors) == 1 and "utility_matrices (written by candidate_scoring)" in errors[0], out.stderr[-2000:]
    assert ("run `kedro run --pipelines=data_prep` then `kedro run --pipelines=question_synthesis` then "
            "`kedro run --pipelines=candidate_scoring`") in errors[0]
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) < 40, out.stderr[-2000:]
