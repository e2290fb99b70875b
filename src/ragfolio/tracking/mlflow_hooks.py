"""A Kedro hook that logs every ``kedro run`` to MLflow.

One MLflow run per ``kedro run``, in the experiment ``ragfolio`` of the tracking store at
``MLFLOW_TRACKING_URI`` (default ``sqlite:///<project>/mlflow.db``, which MLflow 3 accepts). It logs:

- every parameter, flattened (``portfolio_selection.k``, ``candidate_grids.paper.ds``, ...);
- every numeric leaf of the JSON reports the run wrote, flattened (``hotpotqa.test.greedy_at_5``;
  the router and answering reports under ``router.`` and ``answers.``);
- the reports and plots as artifacts (``reports/``, ``plots/``);
- the served bundle as a ``pyfunc`` model registered as ``ragfolio`` (when the run built it);
- tags: the run's name (:mod:`ragfolio.runs`; the MLflow run is named ``<run name>/<pipeline>``),
  its data folder and output root, the pipeline, the git commit (``-dirty`` with uncommitted
  changes), the DVC hash of the raw data from ``dvc.lock`` (or a sha256 of the raw folder when no
  lock matches) and the served corpus's fingerprint; the registered model version gets a
  description and tags naming the run, bundle, corpus and commit.

Set ``RAGFOLIO_MLFLOW=0`` to run without tracking.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from ragfolio.numerics import numerics_identity
from ragfolio.runs import SAMPLE, run_name, run_root

logger = logging.getLogger(__name__)

EXPERIMENT = "ragfolio"
# Report datasets and the prefix of their metrics; a report's timings (ragfolio.core.timings) are
# logged under the same prefix, so the names are the report's own keys.
REPORTS = {
    "portfolio_metrics": "", "router_metrics": "router", "answer_metrics": "answers",
    "sample_complexity": "sample_complexity", "router_timings": "router", "answer_timings": "answers",
}
BUNDLE = "bundle"


def _enabled() -> bool:
    return os.environ.get("RAGFOLIO_MLFLOW", "1").lower() not in ("0", "false", "no")


def _git_commit(project: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=project,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _data_hash(project: Path, raw_dir: str) -> tuple[str, str]:
    """``(tag name, hash)`` of the raw data: DVC's md5 from ``dvc.lock``, else a sha256 of its files."""
    lock = project / "dvc.lock"
    if lock.exists():
        import yaml

        stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
        for dep in stages.get("data_prep", {}).get("deps", []):
            if Path(dep["path"]) == Path(raw_dir) and "md5" in dep:
                return "dvc.data_md5", dep["md5"]
    folder = Path(raw_dir) if Path(raw_dir).is_absolute() else project / raw_dir
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.jsonl")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return "data.sha256", digest.hexdigest()


def _filepath(catalog: Any, name: str) -> Path | None:
    """The local file or folder behind a catalog entry, if it has one."""
    try:
        described = catalog.get(name)._describe()
    except Exception:  # noqa: BLE001 - a dataset without a describable path is simply not logged
        return None
    path = described.get("filepath") or described.get("path")
    return Path(str(path)) if path else None


def describe_model_version(version: str | int | None, tags: dict[str, str]) -> None:
    """Give a registered version of the ``ragfolio`` model a description and ``tags``, so runs' versions tell apart."""
    if version is None:
        return
    from mlflow import MlflowClient

    from ragfolio.tracking.model import REGISTERED_NAME

    client = MlflowClient()
    description = (f"Run {tags['ragfolio.run_name']}: bundle {tags['bundle.version']} at {tags['bundle.path']}, "
                   f"corpus {tags['corpus.fingerprint']}, commit {tags['git.commit']}.")
    client.update_model_version(REGISTERED_NAME, str(version), description=description)
    for key, value in tags.items():
        client.set_model_version_tag(REGISTERED_NAME, str(version), key, value)


class MlflowTrackingHook:
    """Opens an MLflow run before a pipeline runs and logs params, metrics, artifacts and the model after."""

    def __init__(self) -> None:
        self._params: dict[str, Any] = {}
        self._active = False
        self._run_name = SAMPLE
        self._commit = "unknown"

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        self._params = dict(context.params)

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        if not _enabled():
            return
        import mlflow

        from ragfolio.tracking.flatten import flatten_params

        project = Path(run_params["project_path"])
        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{project / 'mlflow.db'}"
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", EXPERIMENT))
        names = run_params.get("pipeline_names") or ["__default__"]
        self._run_name = run_name(self._params)
        mlflow.start_run(run_name=f"{self._run_name}/{'+'.join(names)}")
        self._active = True
        raw_dir = str(self._params.get("data_prep", {}).get("raw_dir", "data/01_raw"))
        data_tag, data_hash = _data_hash(project, raw_dir)
        self._commit = _git_commit(project)
        mlflow.set_tags({
            "kedro.pipeline": ",".join(names), "kedro.run_id": str(run_params.get("run_id")),
            "git.commit": self._commit, data_tag: data_hash, "ragfolio.run_name": self._run_name,
            "data.raw_dir": raw_dir, "data.root": str(self._params.get("data_root") or run_root(self._run_name)),
            **{f"numerics.{name}": value for name, value in numerics_identity().items()},
        })
        mlflow.log_params(flatten_params(self._params))
        logger.info("MLflow: logging this run to %s (experiment %s)", uri, EXPERIMENT)

    @hook_impl
    def after_pipeline_run(self, run_params: dict[str, Any], run_result: Any, pipeline: Any, catalog: Any) -> None:
        if not self._active:
            return
        import mlflow

        from ragfolio.tracking.flatten import flatten_metrics

        outputs = pipeline.all_outputs()
        for name, prefix in REPORTS.items():
            path = _filepath(catalog, name)
            if name in outputs and path is not None and path.exists():
                mlflow.log_metrics(flatten_metrics(json.loads(path.read_text()), prefix))
                mlflow.log_artifact(str(path), artifact_path="reports/timings" if name.endswith("_timings") else "reports")
        for name in sorted(outputs):
            path = _filepath(catalog, name)
            if path is not None and path.suffix in (".png", ".csv") and path.exists():
                mlflow.log_artifact(str(path), artifact_path="plots")
        bundle = _filepath(catalog, BUNDLE)
        if BUNDLE in outputs and bundle is not None and (bundle / "manifest.json").exists():
            from ragfolio.tracking.model import log_bundle_model

            manifest = json.loads((bundle / "manifest.json").read_text())
            fingerprint = str(manifest.get("corpus", {}).get("fingerprint", "unknown"))
            mlflow.set_tags({"bundle.version": manifest["version"], "bundle.checksum": manifest["checksum"],
                             "corpus.fingerprint": fingerprint})
            info = log_bundle_model(bundle, default_l=int(manifest["default_l"]))
            describe_model_version(info.registered_model_version, {
                "ragfolio.run_name": self._run_name, "bundle.path": str(bundle), "bundle.version": manifest["version"],
                "corpus.fingerprint": fingerprint, "git.commit": self._commit,
            })
            logger.info("MLflow: bundle %s of run %s registered as models:/ragfolio/%s", manifest["version"],
                        self._run_name, info.registered_model_version)
        mlflow.end_run()
        self._active = False

    @hook_impl
    def on_pipeline_error(self, error: Exception, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        if self._active:
            import mlflow

            mlflow.end_run(status="FAILED")
            self._active = False
