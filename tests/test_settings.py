"""The project's Kedro settings, through a real session: conf/local overrides and the registered hooks."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

ROOT = Path(__file__).resolve().parents[1]


def test_a_local_override_keeps_the_base_keys_and_the_credentials_reach_the_environment(tmp_path, monkeypatch) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "conf", tmp_path / "conf", ignore=shutil.ignore_patterns("local"))
    (tmp_path / "src").mkdir()  # bootstrap_project wants the source folder; ragfolio is installed
    local = tmp_path / "conf" / "local"
    local.mkdir()
    (local / "parameters_answering_evaluation.yml").write_text(
        yaml.safe_dump({"answering_evaluation": {"max_questions_per_dataset": 100, "vendi_rag": {"max_iterations": 2}}})
    )
    (local / "credentials.yml").write_text(yaml.safe_dump({"elasticsearch": {"url": "http://es.example:9200"}}))
    monkeypatch.delenv("ELASTICSEARCH_URL", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())

    bootstrap_project(tmp_path)
    with KedroSession.create(project_path=tmp_path) as session:
        context = session.load_context()
        params = context.params["answering_evaluation"]

    base = yaml.safe_load((ROOT / "conf/base/parameters_answering_evaluation.yml").read_text())["answering_evaluation"]
    assert params["max_questions_per_dataset"] == 100
    assert params["vendi_rag"] == {**base["vendi_rag"], "max_iterations": 2}  # nested keys merge too
    assert params["system_order"] == base["system_order"] and params["routed_l"] == base["routed_l"]  # untouched keys stay
    assert __import__("os").environ["ELASTICSEARCH_URL"] == "http://es.example:9200"  # CredentialsHook ran
