"""The MLflow hook on the project's parameters and the sample's reports, without a Kedro run: what a run
logs (headline metrics, knobs, the full reports as artifacts), what it is named after (uniquely), the
digest of its data, which registered bundle is ``@served``, and the experiment's kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlflow
import pytest
from kedro.config import OmegaConfigLoader

from ragfolio.runs import IDENTITY_FILE
from ragfolio.settings import CONFIG_LOADER_ARGS
from ragfolio.tracking.mlflow_hooks import HEADLINES, REPORTS, MlflowTrackingHook, data_digest, served_bundle

ROOT = Path(__file__).resolve().parents[2]
REPORTING = ROOT / "data" / "08_reporting"
MAX_METRICS, MAX_PARAMS = 60, 60


class _Catalog:
    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths

    def get(self, name: str) -> Any:
        return SimpleNamespace(_describe=lambda: {"filepath": str(self.paths[name])})


class _Pipeline:
    def __init__(self, groups: set[str], outputs: set[str]) -> None:
        self.groups, self.outputs = groups, outputs

    def inputs(self) -> set[str]:
        return {f"params:{group}" for group in self.groups}

    def all_outputs(self) -> set[str]:
        return self.outputs


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[mlflow.MlflowClient]:
    previous = mlflow.get_tracking_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("RAGFOLIO_MLFLOW", "1")
    monkeypatch.delenv("RAGFOLIO_RUN_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    yield mlflow.MlflowClient()
    mlflow.set_tracking_uri(previous)


def _params(**overrides: Any) -> dict[str, Any]:
    params = dict(OmegaConfigLoader(str(ROOT / "conf"), **CONFIG_LOADER_ARGS)["parameters"])
    for dotted, value in overrides.items():
        group, _, key = dotted.partition("__")
        if key:
            params[group] = {**params[group], key: value}
        else:
            params[group] = value
    return params


def _run(project: Path, params: dict[str, Any], name: str, groups: set[str], catalog: _Catalog | None = None) -> None:
    """One ``kedro run --pipelines=<name>`` as the hook sees it: a pipeline that reads ``groups``."""
    hook = MlflowTrackingHook()
    hook.after_context_created(SimpleNamespace(params=params))
    catalog = catalog or _Catalog({})
    pipeline = _Pipeline(groups, set(catalog.paths))
    run_params = {"project_path": str(project), "pipeline_names": [name], "run_id": "r"}
    hook.before_pipeline_run(run_params, pipeline, catalog)
    hook.after_pipeline_run(run_params, None, pipeline, catalog)


def _last_run(client: mlflow.MlflowClient) -> Any:
    experiment = client.get_experiment_by_name("ragfolio")
    return client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"])[0]


def test_a_run_logs_headlines_as_metrics_and_full_reports_as_artifacts(client: mlflow.MlflowClient, tmp_path: Path) -> None:
    reports = {name: REPORTING / f"{name}.json" for name in HEADLINES}
    reports |= {name: REPORTING / f"{name}.json" for name in REPORTS if not name.endswith("_timings")}
    timings = tmp_path / "timings" / "router_metrics.json"  # written by a run, not in a clean checkout
    timings.parent.mkdir()
    timings.write_text('{"nodes": {"train_routers": 1.5}}')
    reports |= {"router_timings": timings}
    params = _params()
    _run(tmp_path, params, "portfolio", set(params), _Catalog(reports))
    run = _last_run(client)
    metrics, logged_params = run.data.metrics, run.data.params
    assert 20 <= len(metrics) <= MAX_METRICS, sorted(metrics)  # was 3,633 on the sample's reports
    assert len(logged_params) <= MAX_PARAMS  # was 132
    assert metrics["portfolio.greedy.all"] > 0 and "router.best_of_1.learned" in metrics and "answers.em.no_retrieval" in metrics
    assert logged_params["portfolio_selection.k"] == "5" and logged_params["candidate_scoring.grid"] == "default"
    assert not any(key.startswith("candidate_grids.") for key in logged_params)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "reports")}
    assert {"reports/portfolio_metrics.json", "reports/router_metrics.json", "reports/portfolio_headline.json"} <= artifacts
    assert "reports/timings/router_metrics.json" in {a.path for a in client.list_artifacts(run.info.run_id, "reports/timings")}
    full = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/params.json")
    assert full["candidate_grids"] == params["candidate_grids"]
    assert run.info.run_name == "sample/portfolio k=5 pool=default"
    assert client.get_experiment_by_name("ragfolio").tags["mlflow.experimentKind"] == "custom_model_development"


def test_runs_that_differ_in_k_or_pool_have_different_names(client: mlflow.MlflowClient, tmp_path: Path) -> None:
    groups = {"portfolio_selection", "candidate_scoring"}
    _run(tmp_path, _params(portfolio_selection__k=3), "portfolio_selection", groups)
    assert _last_run(client).info.run_name == "sample/portfolio_selection k=3 pool=default"
    _run(tmp_path, _params(candidate_scoring__grid="paper"), "portfolio_selection", groups)
    run = _last_run(client)
    assert run.info.run_name == "sample/portfolio_selection k=5 pool=paper"
    assert run.data.tags["ragfolio.k"] == "5" and run.data.tags["ragfolio.pool"] == "paper"


def test_kubeflow_steps_are_named_after_the_folder_data_prep_read(client: mlflow.MlflowClient, tmp_path: Path) -> None:
    """Each KFP step gets the parameters of its own pipelines only, all under one data_root."""
    volume, q40 = tmp_path / "volume", tmp_path / "q40"
    q40.mkdir()
    _run(tmp_path, _params(data_root=str(volume), data_prep__raw_dir=str(q40)), "data_prep", {"data_prep"})
    assert _last_run(client).info.run_name == "q40/data_prep k=5 pool=default"
    _run(tmp_path, _params(data_root=str(volume)), "candidate_scoring", {"candidate_scoring", "candidate_grids"})
    _run(tmp_path, _params(data_root=str(volume), portfolio_selection__k=3), "portfolio_selection", {"portfolio_selection"})
    _run(tmp_path, _params(data_root=str(volume)), "router_training", {"router_training"})  # reads neither
    run = _last_run(client)
    assert run.info.run_name == "q40/router_training k=3 pool=default"
    assert run.data.tags["data.raw_dir"] == str(q40) and run.data.tags["ragfolio.run_name"] == "q40"
    assert run.data.tags["data.root"] == str(volume)
    in_one_go = tmp_path / "plain"  # the record is the same file a single run reading everything writes
    params = _params(data_root=str(in_one_go), data_prep__raw_dir=str(q40), portfolio_selection__k=3)
    _run(tmp_path, params, "portfolio", set(params))
    assert (volume / IDENTITY_FILE).read_bytes() == (in_one_go / IDENTITY_FILE).read_bytes()


def test_an_overwrite_sample_run_is_named_after_its_data(client: mlflow.MlflowClient, tmp_path: Path) -> None:
    teamwiki = tmp_path / "teamwiki"
    _run(tmp_path, _params(overwrite_sample=True, data_prep__raw_dir=str(teamwiki)), "portfolio", {"data_prep"})
    run = _last_run(client)
    assert run.info.run_name.startswith("teamwiki/portfolio ") and run.data.tags["data.raw_dir"] == str(teamwiki)
    assert run.data.tags["data.root"] == "data"


def test_the_bundle_is_registered_by_the_run_that_builds_it(client: mlflow.MlflowClient, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``packaging`` outputs the bundle, so its run registers the model (the bundle its pointer names,
    not the pointer); ``router_training``'s does not."""
    from ragfolio.core.bundle import save_served
    from ragfolio.pipeline_registry import register_pipelines

    registered: list[Path] = []
    monkeypatch.setattr(MlflowTrackingHook, "_register", lambda self, bundle, identity: registered.append(bundle))
    bundle = tmp_path / "06_models" / "bundles" / "all"
    bundle.mkdir(parents=True)
    (bundle / "manifest.json").write_text("{}")
    save_served(tmp_path / "06_models" / "served.json", bundle, "all")
    catalog, params, pipelines = _Catalog({"bundle": tmp_path / "06_models" / "served.json"}), _params(), register_pipelines()
    for name in ("router_training", "packaging"):
        hook = MlflowTrackingHook()
        hook.after_context_created(SimpleNamespace(params=params))
        run_params = {"project_path": str(tmp_path), "pipeline_names": [name], "run_id": "r"}
        hook.before_pipeline_run(run_params, pipelines[name], catalog)
        hook.after_pipeline_run(run_params, None, pipelines[name], catalog)
        assert registered == ([bundle] if name == "packaging" else []), name


def test_the_same_run_twice_gets_two_names_and_one_label(client: mlflow.MlflowClient, tmp_path: Path) -> None:
    groups = {"portfolio_selection", "candidate_scoring"}
    for _ in range(3):
        _run(tmp_path, _params(), "portfolio_selection", groups)
    runs = client.search_runs([client.get_experiment_by_name("ragfolio").experiment_id])
    title = "sample/portfolio_selection k=5 pool=default"
    assert sorted(run.info.run_name for run in runs) == [title, f"{title} #2", f"{title} #3"]
    assert {run.data.tags["ragfolio.run_name"] for run in runs} == {"sample"}


def _jsonl(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


def test_the_data_digest_covers_the_corpus_and_test_questions(client: mlflow.MlflowClient, tmp_path: Path) -> None:
    raw = _jsonl(tmp_path / "q", "a.jsonl", '{"id": "1"}\n')
    wiki, news = _jsonl(tmp_path / "wiki", "p.jsonl", '{"title": "A", "text": "a"}\n'), _jsonl(tmp_path / "news", "p.jsonl", "{}\n")
    digests = []
    for corpus_dir in (None, wiki, news):
        _run(tmp_path, _params(data_prep__raw_dir=str(raw), data_prep__corpus_dir=corpus_dir and str(corpus_dir),
                               run_name="q"), "data_prep", {"data_prep"})
        tags = _last_run(client).data.tags
        digests.append(tags["data.sha256"])
        assert tags["data.corpus_dir"] == str(corpus_dir)
    assert len(set(digests)) == 3  # the same questions, three corpora
    _run(tmp_path, _params(run_name="q"), "router_training", {"router_training"})  # reads no data_prep: the record's
    assert _last_run(client).data.tags["data.sha256"] == digests[2]
    assert data_digest(tmp_path, {"raw": str(raw), "test": str(wiki)})[1] != data_digest(tmp_path, {"raw": str(raw), "corpus": str(wiki)})[1]


def test_the_data_digest_of_the_raw_folder_alone_is_dvc_s(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text("stages:\n  data_prep:\n    deps:\n    - path: data/01_raw\n      md5: abc.dir\n")
    _jsonl(tmp_path / "data" / "01_raw", "a.jsonl", "{}\n")
    assert data_digest(tmp_path, {"raw": "data/01_raw"}) == ("dvc.data_md5", "abc.dir")
    assert data_digest(tmp_path, {"raw": "data/01_raw", "corpus": "data/01_raw"})[0] == "data.sha256"  # DVC hashes raw only


def test_served_bundle_is_the_one_the_service_loads_without_overrides(tmp_path: Path) -> None:
    from ragfolio.core.bundle import resolve_bundle, save_served
    from ragfolio.serving.config import load_config

    def service(root: Path) -> Path:  # the folder the service loads: its setting, the pointer followed
        return resolve_bundle(load_config(env={}, root=root).bundle)

    assert served_bundle(ROOT) == service(ROOT)  # with or without a run's served.json
    (tmp_path / "conf" / "base").mkdir(parents=True)
    (tmp_path / "conf" / "base" / "serving.yml").write_text("serving:\n  bundle: data/06_models/bundles/all\n")
    assert served_bundle(tmp_path) == service(tmp_path) == tmp_path / "data/06_models/bundles/all"
    (tmp_path / "conf" / "base" / "serving.yml").unlink()
    assert served_bundle(tmp_path) == service(tmp_path)  # the default, no pointer yet
    _bundle(tmp_path / "data" / "06_models" / "bundles" / "all", "c" * 64)
    save_served(tmp_path / "data" / "06_models" / "served.json", tmp_path / "data" / "06_models" / "bundles" / "all", "all")
    assert served_bundle(tmp_path) == service(tmp_path) == tmp_path / "data/06_models/bundles/all"  # followed


def _bundle(folder: Path, checksum: str) -> Path:
    folder.mkdir(parents=True)
    manifest = {"checksum": checksum, "version": checksum[:12], "default_l": 1, "corpus": {"fingerprint": "f"}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_served_names_the_bundle_bentoml_serve_loads_not_the_last_named_run(
        client: mlflow.MlflowClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.pyfunc import PythonModel

    from ragfolio.tracking import model
    from ragfolio.tracking.model import REGISTERED_NAME, SERVED_ALIAS

    class _Echo(PythonModel):
        def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
            return model_input

    monkeypatch.setattr(model, "log_bundle_model", lambda bundle, default_l: mlflow.pyfunc.log_model(
        name="model", python_model=_Echo()))
    from ragfolio.core.bundle import save_served

    sample = _bundle(tmp_path / "data" / "06_models" / "bundles" / "all", "a" * 64)
    save_served(tmp_path / "data" / "06_models" / "served.json", sample, "all")  # what `bentoml serve` loads
    named = _bundle(tmp_path / "runs" / "teamwiki" / "06_models" / "bundles" / "all", "b" * 64)
    _run(tmp_path, _params(), "packaging", {"portfolio_selection"}, _Catalog({"bundle": sample}))
    assert _last_run(client).data.tags["model.served"] == "True"
    _run(tmp_path, _params(run_name="teamwiki"), "packaging", {"portfolio_selection"}, _Catalog({"bundle": named}))
    assert _last_run(client).data.tags["model.served"] == "False"
    served = client.get_model_version_by_alias(REGISTERED_NAME, SERVED_ALIAS)
    assert served.tags["bundle.checksum"] == "a" * 64  # what a plain `bentoml serve` still loads
    assert client.get_model_version_by_alias(REGISTERED_NAME, "run-teamwiki").tags["bundle.checksum"] == "b" * 64
