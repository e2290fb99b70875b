"""``kedro run`` through the real CLI, default configuration, on a copy of the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragfolio_lab.answering.systems import PAPER_SYSTEMS

ANSWERED = tuple(s for s in PAPER_SYSTEMS if s != "vendi_rag_authors")  # the default; vendirag's own loop is opt-in
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


def _kedro(project: Path, env: dict[str, str], *args: str) -> str:
    kedro = Path(sys.executable).with_name("kedro")
    out = subprocess.run([str(kedro), *args], cwd=project, env=env, capture_output=True, text=True, timeout=900)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    return log


@pytest.fixture(scope="module")
def portfolio_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    """One `kedro run --pipelines=portfolio` on the split tiny fixtures, tracked in a temporary MLflow store."""
    tmp_path = tmp_path_factory.mktemp("kedro_run")
    project = _project_copy(tmp_path)
    raw, test = _split_fixture(tmp_path)
    env = {
        **os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "RAGFOLIO_MLFLOW": "1",
    }
    log = _kedro(project, env, "run", "--pipelines=portfolio", f"--params=run_name=tiny,data_prep.raw_dir={raw},data_prep.test_dir={test},"
                "packaging.answer_check.questions=2")
    return project, env, log


def test_kedro_run_portfolio_with_test_dir(portfolio_run: tuple[Path, dict[str, str], str]) -> None:
    project, _, log = portfolio_run
    assert "triviaqa" in log and "left out of retrieval metrics" in log

    metrics = json.loads((project / "runs/tiny/08_reporting/portfolio_metrics.json").read_text())
    assert metrics["n_candidates"] >= 200
    assert set(metrics["datasets"]) == {"hotpotqa", "musique", "all"}
    assert metrics["datasets"]["hotpotqa"]["n_test"] == 2 and metrics["datasets"]["all"]["n_test"] == 4
    assert len(metrics["datasets"]["all"]["test"]["greedy_at_k"]) == 8
    for png in ("best_of_k.png", "winners_by_type.png"):
        assert (project / "runs/tiny/08_reporting" / png).stat().st_size > 10_000
    assert "greedy@5" in log  # the summary table

    # router_training and answering_evaluation ran too (the embedded LLM, the default 1 test question per dataset)
    routers = json.loads((project / "runs/tiny/08_reporting/router_metrics.json").read_text())
    assert set(routers["datasets"]) == {"hotpotqa", "musique", "all"}
    assert len(routers["datasets"]["all"]["learned"]["best_of_l"]) == 5
    for key in ("hotpotqa", "musique", "all"):
        assert (project / "runs/tiny/06_models/routers" / key / "router.safetensors").exists()
        assert (project / "runs/tiny/06_models/bundles" / key / "manifest.json").exists()  # one bundle per portfolio
    answers = [json.loads(line) for line in (project / "runs/tiny/07_model_output/answers.jsonl").read_text().splitlines()]
    service = ("service_l1", "service_l2")  # the same questions answered as `bentoml serve` answers them by default
    assert len(answers) == 2 * (len(ANSWERED) + 2)  # 1 test question (max_questions_per_dataset) x 2 datasets, 6 + 2 systems
    assert {a["system"] for a in answers} == {*ANSWERED, *service} and all(a["prediction"] for a in answers)
    answer_metrics = json.loads((project / "runs/tiny/08_reporting/answer_metrics.json").read_text())
    assert set(answer_metrics["datasets"]) == {"hotpotqa", "musique", "all"}
    assert answer_metrics["datasets"]["all"]["post_retrieval_l2"]["tokens_mean"] > 0
    assert answer_metrics["datasets"]["all"]["served_l1"]["tokens_mean"] > 0  # what the bundles serve
    assert answer_metrics["foreign_query_hits"] == 0  # every system timed with its own cold query caches
    for png in ("router_best_of_l.png", "em_vs_tokens.png"):
        assert (project / "runs/tiny/08_reporting" / png).stat().st_size > 10_000
    for csv in ("best_of_k.csv", "em_vs_tokens.csv"):  # the plots' data for `dvc plots show`
        assert len((project / "runs/tiny/08_reporting" / csv).read_text().splitlines()) > 5
    assert not (project / "runs/tiny/06_models/bundle").exists()  # the served bundle is not copied: a pointer names it
    served = json.loads((project / "runs/tiny/06_models/served.json").read_text())
    assert served == {"portfolio": "all", "bundle": "bundles/all"}
    manifest = json.loads((project / "runs/tiny/06_models/bundles/all/manifest.json").read_text())
    assert manifest["name"] == "all" and manifest["k"] == 5 and len(manifest["checksum"]) == 64
    # the served corpus is the measured one: the union corpus (the default), named alike everywhere
    assert metrics["corpus"]["mode"] == "union"
    assert manifest["corpus"]["fingerprint"] == metrics["corpus"]["fingerprint"] == routers["corpus"]["fingerprint"]


def _mlflow_client(env: dict[str, str]):  # type: ignore[no-untyped-def]
    import mlflow

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    return mlflow.MlflowClient()


def test_mlflow_run_holds_params_metrics_artifacts_and_model(portfolio_run: tuple[Path, dict[str, str], str]) -> None:
    import mlflow

    project, env, _ = portfolio_run
    client = _mlflow_client(env)
    experiment = client.get_experiment_by_name("ragfolio")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI's model-training view
    (run,) = client.search_runs([experiment.experiment_id])
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert params["portfolio_selection.k"] == "5" and params["data_prep.test_fraction"] == "0.3"
    assert params["candidate_scoring.grid"] == "default" and len(params) <= 60  # the knobs; every parameter in params.json
    full = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/params.json")
    assert "bm25" in full["candidate_grids"]["default"] and "hidden" in full["router_training"]["router"]
    headline = json.loads((project / "runs/tiny/08_reporting/portfolio_headline.json").read_text())
    assert metrics["portfolio.greedy.hotpotqa"] == pytest.approx(headline["greedy"]["hotpotqa"])
    assert "router.best_of_1.learned" in metrics and "answers.em.served_l1" in metrics
    assert len(metrics) <= 60, sorted(metrics)  # the headlines; the full reports are artifacts
    assert tags["kedro.pipeline"] == "portfolio" and "data.sha256" in tags and "git.commit" in tags
    assert tags["numerics.MKL_CBWR"] in ("AVX2", "unset") and tags["numerics.torch_cpu_capability"]
    assert run.info.run_name == "tiny/portfolio k=5 pool=default" and tags["ragfolio.run_name"] == "tiny"
    assert tags["data.root"] == "runs/tiny" and not (project / "data/06_models/served.json").exists()
    assert tags["data.raw_dir"].endswith("raw") and tags["ragfolio.k"] == "5" and tags["ragfolio.pool"] == "default"
    manifest = json.loads((project / "runs/tiny/06_models/bundles/all/manifest.json").read_text())
    assert tags["bundle.checksum"] == manifest["checksum"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/best_of_k.png", "plots/router_best_of_l.png", "plots/em_vs_tokens.png", "plots/best_of_k.csv"} <= artifacts
    reports = {a.path for a in client.list_artifacts(run.info.run_id, "reports")}
    assert {"reports/portfolio_metrics.json", "reports/router_metrics.json", "reports/answer_headline.json"} <= reports
    (version,) = client.search_model_versions("name='ragfolio'")
    assert int(version.version) == 1 and version.run_id == run.info.run_id and tags["model.version"] == "1"
    assert version.description.startswith("Run tiny (data ") and version.tags["ragfolio.run_name"] == "tiny"
    assert int(client.get_model_version_by_alias("ragfolio", "run-tiny").version) == 1
    # a named run's bundle is not what a plain `bentoml serve` loads (data/06_models/bundle): not @served
    assert "served" not in client.get_registered_model("ragfolio").aliases and tags["model.served"] == "False"
    assert tags["corpus.fingerprint"] == manifest["corpus"]["fingerprint"] == version.tags["corpus.fingerprint"]


def test_registered_model_reloads_with_the_bundles_predictions(portfolio_run: tuple[Path, dict[str, str], str]) -> None:
    import mlflow
    import pandas as pd

    from ragfolio.core.bundle import load_bundle, resolve_bundle
    from ragfolio.core.system.request import RetrievalRequest
    from ragfolio.core.system.routed_system import RoutedSystem

    project, env, _ = portfolio_run
    _mlflow_client(env)
    model = mlflow.pyfunc.load_model("models:/ragfolio@run-tiny")
    questions = ["Which magazine was started first, Arthur's Magazine or First for Women?", "Who founded the city?"]
    predicted = model.predict(pd.DataFrame({"question": questions}), params={"l": 2})
    bundle = load_bundle(resolve_bundle(project / "runs/tiny/06_models/served.json"))
    system = RoutedSystem.from_bundle(bundle)
    for row, question in zip(predicted.itertuples(), questions, strict=True):
        routed = system.retrieve(RetrievalRequest(question, 2, system.depth))
        assert row.members == [bundle.members[j].name for j in routed.members]
        assert row.passages == [[bundle.corpus.ids[d] for d in run.doc_ids] for run in routed.results.ok_runs]


def test_same_seed_and_inputs_give_the_same_portfolio_router_and_metrics(
    portfolio_run: tuple[Path, dict[str, str], str],
) -> None:
    project, env, _ = portfolio_run
    files = ["runs/tiny/06_models/portfolios.json", "runs/tiny/06_models/routers/all/router.safetensors",
             "runs/tiny/06_models/router_selection.json", "runs/tiny/06_models/bundles/all/manifest.json",
             "runs/tiny/06_models/served.json"]
    before = {name: (project / name).read_bytes() for name in files}
    router_metrics = (project / "runs/tiny/08_reporting/router_metrics.json").read_bytes()
    _kedro(project, {**env, "RAGFOLIO_MLFLOW": "0"}, "run", "--pipelines=portfolio_selection", "--params=run_name=tiny")
    _kedro(project, env, "run", "--pipelines=router_training", "--params=run_name=tiny")  # tracked, no bundle
    _kedro(project, {**env, "RAGFOLIO_MLFLOW": "0"}, "run", "--pipelines=router_evaluation",  # from the stored hand-offs
           "--params=run_name=tiny")
    _kedro(project, env, "run", "--pipelines=packaging",  # tracked: it builds the bundle
           "--params=run_name=tiny,packaging.answer_check.questions=2")
    for name in files:
        assert (project / name).read_bytes() == before[name], f"{name} changed on a rerun with the same seed"
    rerun = (project / "runs/tiny/08_reporting/router_metrics.json").read_bytes()
    assert rerun == router_metrics, "router_metrics.json changed on a rerun with the same seed"
    # the same bundle again: no new version; the stage, which reads no data_prep parameter, is named
    # after the folder data_prep read
    client = _mlflow_client(env)
    (version,) = client.search_model_versions("name='ragfolio'")
    assert int(version.version) == 1 and int(client.get_model_version_by_alias("ragfolio", "run-tiny").version) == 1
    latest, training = client.search_runs([client.get_experiment_by_name("ragfolio").experiment_id],
                                          order_by=["attributes.start_time DESC"])[:2]
    assert latest.info.run_name == "tiny/packaging k=5 pool=default" and latest.data.tags["model.version"] == "1"
    assert training.info.run_name == "tiny/router_training k=5 pool=default"
    assert "model.version" not in training.data.tags  # router training registers no model: packaging does
    assert latest.data.tags["data.raw_dir"].endswith("raw")


def test_the_notebook_runs_on_a_run(portfolio_run: tuple[Path, dict[str, str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    """notebooks/explore_run.ipynb, every code cell in order in one namespace (as a kernel runs them), on the run."""
    project, _, _ = portfolio_run
    monkeypatch.chdir(project)
    monkeypatch.setenv("RAGFOLIO_RUN_NAME", "tiny")  # the catalog then reads runs/tiny/
    notebook = json.loads((ROOT / "notebooks" / "explore_run.ipynb").read_text())
    namespace: dict[str, Any] = {"__name__": "__main__"}
    cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert cells and all(not cell["outputs"] for cell in cells)  # committed without outputs
    for number, cell in enumerate(cells):
        exec(compile("".join(cell["source"]), f"explore_run.ipynb, code cell {number}", "exec"), namespace)  # noqa: S102
    assert namespace["RUN_NAME"] == "tiny" and len(namespace["names"]) == 5
    assert {row["dataset"] for row in namespace["rows"]} == {"hotpotqa", "musique"}
    assert all(0.0 <= row["routed recall"] <= row["oracle recall"] <= 1.0 for row in namespace["rows"])
    reply = namespace["reply"]
    assert reply.answer and reply.tokens > 0 and len(reply.candidates) >= 1
