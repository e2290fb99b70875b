"""A bundle is registered once, however many runs rebuild it, and the aliases name the version to load:
``run-<label>`` each run's latest, ``served`` only the one a plain ``bentoml serve`` loads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from mlflow.pyfunc import PythonModel

from ragfolio.tracking.model import REGISTERED_NAME, SERVED_ALIAS, register_bundle, run_alias


class _Echo(PythonModel):
    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]  # MLflow reads hints as a schema
        return model_input


@pytest.fixture
def store(tmp_path: Path) -> Iterator[mlflow.MlflowClient]:
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_experiment("test")
    yield mlflow.MlflowClient()
    mlflow.set_tracking_uri(previous)


def _run(checksum: str, label: str, logged: list[str], served: str | None) -> str:
    """One run that builds the bundle with ``checksum`` while the service loads the one with ``served``;
    ``logged`` collects the runs that logged a model."""

    def log_model() -> str:
        logged.append(checksum)
        return mlflow.pyfunc.log_model(name="model", python_model=_Echo()).model_uri

    with mlflow.start_run():
        return register_bundle(log_model, tags={"bundle.checksum": checksum, "ragfolio.run_name": label},
                               description=f"Run {label}", label=label, served_checksum=served)


def _alias(store: mlflow.MlflowClient, alias: str) -> int:
    return int(store.get_model_version_by_alias(REGISTERED_NAME, alias).version)


def test_the_same_bundle_is_registered_once_with_the_served_alias(store: mlflow.MlflowClient) -> None:
    logged: list[str] = []
    assert _run("aaa", "sample", logged, served="aaa") == "1"
    assert _run("aaa", "sample", logged, served="aaa") == "1"  # `make run` again: the same bundle
    assert logged == ["aaa"] and len(store.search_model_versions(f"name='{REGISTERED_NAME}'")) == 1
    served = store.get_model_version_by_alias(REGISTERED_NAME, SERVED_ALIAS)
    assert int(served.version) == 1 and served.description == "Run sample" and served.tags["bundle.checksum"] == "aaa"


def test_a_named_run_gets_its_own_alias_and_served_stays_on_what_is_served(store: mlflow.MlflowClient) -> None:
    logged: list[str] = []
    _run("aaa", "sample", logged, served="aaa")
    assert _run("bbb", "team.wiki", logged, served="aaa") == "2"  # `bentoml serve` still loads the sample's
    assert _alias(store, SERVED_ALIAS) == 1 and _alias(store, run_alias("team.wiki")) == 2
    assert run_alias("team.wiki") == "run-team_wiki"
    assert _run("ccc", "sample", logged, served="ccc") == "3"  # the sample rebuilt: its new bundle is served
    assert _alias(store, SERVED_ALIAS) == 3 and _alias(store, run_alias("sample")) == 3
    assert _run("aaa", "sample", logged, served="aaa") == "1"  # rebuilt as before: back to its version, nothing added
    assert logged == ["aaa", "bbb", "ccc"]
    assert _alias(store, SERVED_ALIAS) == 1 and _alias(store, run_alias("team.wiki")) == 2
    assert mlflow.pyfunc.load_model(f"models:/{REGISTERED_NAME}@{SERVED_ALIAS}").predict(["q"]) == ["q"]


def test_the_served_alias_is_removed_when_the_served_bundle_was_never_registered(store: mlflow.MlflowClient) -> None:
    logged: list[str] = []
    _run("aaa", "sample", logged, served="aaa")
    _run("bbb", "teamwiki", logged, served="zzz")  # the sample rebuilt with tracking off, then a named run
    assert SERVED_ALIAS not in store.get_registered_model(REGISTERED_NAME).aliases
    _run("ccc", "other", logged, served=None)  # no bundle where `bentoml serve` looks: still none
    assert set(store.get_registered_model(REGISTERED_NAME).aliases) == {"run-sample", "run-teamwiki", "run-other"}


def test_the_logged_model_names_the_reader_its_bundle_carries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model retrieves only; its metadata says which reader answers with it (the bundle's)."""
    from ragfolio.core.llm.reader import ReaderSettings
    from ragfolio.tracking import model

    reader = {"llm": {"kind": "openai", "openai": {"base_url": "http://x/v1", "model": "m"}}, "answerer": {}}
    (tmp_path / "manifest.json").write_text(json.dumps({"scoring": {"encoders": {}}, "reader": reader}))
    logged: dict[str, object] = {}
    monkeypatch.setattr(model.mlflow.pyfunc, "log_model", lambda **kwargs: logged.update(kwargs))
    model.log_bundle_model(tmp_path, default_l=2)
    assert logged["metadata"] == {"reader": reader} and logged["artifacts"] == {"bundle": str(tmp_path)}
    assert model.model_metadata({}) == {"reader": ReaderSettings().to_dict()}  # a bundle from before readers
