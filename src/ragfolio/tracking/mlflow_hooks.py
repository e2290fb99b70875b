"""A Kedro hook that logs every ``kedro run`` to MLflow.

One MLflow run per ``kedro run``, in the experiment ``ragfolio`` of the tracking store at
``MLFLOW_TRACKING_URI`` (default ``sqlite:///<project>/mlflow.db``, which MLflow 3 accepts), an
experiment of the classic model-training kind (the ``mlflow.experimentKind`` tag). It logs:

- the run's knobs as parameters (``portfolio_selection.k``, ``candidate_scoring.grid``: every
  non-mapping value of the parameter groups its pipelines read), and every parameter as
  ``params.json``;
- the headline numbers as metrics (the ``*_headline.json`` reports ``dvc metrics show`` prints,
  under ``portfolio.``, ``router.`` and ``answers.``: a few dozen), and the full reports and timings
  as artifacts (``reports/``, ``reports/timings/``), with the plots (``plots/``);
- the run's bundle as a ``pyfunc`` model registered as ``ragfolio`` once per bundle, the alias
  ``run-<label>`` on its version (:func:`ragfolio.tracking.model.register_bundle`), by the run whose
  pipeline outputs ``bundle`` (packaging's pointer to the served bundle,
  :func:`ragfolio.core.bundle.resolve_bundle`): the ``packaging`` stage (or ``portfolio``, which holds it).
  The alias ``served`` names only the version of the bundle a plain ``bentoml serve`` loads
  (:func:`served_bundle`), so a named run's bundle is ``@run-<label>`` and never ``@served``;
- tags: the run's identity (:class:`ragfolio.runs.RunIdentity`: the MLflow run is named
  ``<label>/<pipeline> k=<k> pool=<pool>`` after the data folder really read, ``k`` and the pool,
  with `` #2``, `` #3``... when a run of that name exists), its data folders and output root, the
  pipeline, the git commit (``-dirty`` when a tracked file other than ``dvc.lock`` and DVC's outputs
  differs from it), a digest of the data its questions and corpus came from (:func:`data_digest`) and
  the bundle's corpus fingerprint.

Set ``RAGFOLIO_MLFLOW=0`` to run without tracking; the run's identity is still recorded for later stages.
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
from ragfolio.runs import IDENTITY_FILE, RunIdentity, identity_record, run_name, run_root

logger = logging.getLogger(__name__)

EXPERIMENT = "ragfolio"
# The UI opens an experiment of this kind on its runs and models, not on GenAI traces.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
# The headline reports (what `dvc metrics show` prints), logged as metrics under these prefixes.
HEADLINES = {"portfolio_headline": "portfolio", "router_headline": "router", "answer_headline": "answers"}
# The full reports and their timings (ragfolio.core.timings): artifacts only, thousands of numbers each.
REPORTS = ("portfolio_metrics", "router_metrics", "answer_metrics", "sample_complexity", "router_timings",
           "answer_timings")
BUNDLE = "bundle"
SERVING_CONFIG = "conf/base/serving.yml"
DEFAULT_SERVED_BUNDLE = "data/06_models/served.json"  # ServingConfig.bundle's default, when the file names none


def _enabled() -> bool:
    return os.environ.get("RAGFOLIO_MLFLOW", "1").lower() not in ("0", "false", "no")


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, check=True).stdout


def dvc_outputs(project: Path) -> set[str]:
    """``dvc.lock`` and every path ``dvc.yaml`` declares as an output (outs, metrics, plots): what
    ``dvc repro`` rewrites, so not a change of the code a run ran."""
    import yaml

    dvc_yaml = project / "dvc.yaml"
    stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {}) if dvc_yaml.exists() else {}
    entries = [entry for stage in stages.values() for kind in ("outs", "metrics", "plots") for entry in stage.get(kind, [])]
    return {"dvc.lock"} | {os.path.normpath(next(iter(e)) if isinstance(e, dict) else str(e)) for e in entries}


def git_commit(project: Path) -> str:
    """HEAD's commit, ``-dirty`` when a tracked file differs from it, ``dvc.lock`` and DVC's outputs
    aside (untracked and ignored files never count); ``unknown`` outside a git checkout."""
    try:
        head = _git(project, "rev-parse", "HEAD").strip()
        changed = _git(project, "diff", "--name-only", "--relative", "-z", "HEAD").split("\0")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    outputs = dvc_outputs(project)
    code = [path for path in changed if path and not any(
        path == out or path.startswith(out + "/") for out in outputs)]
    return head + ("-dirty" if code else "")


def data_digest(project: Path, dirs: dict[str, str]) -> tuple[str, str]:
    """``(tag name, hash)`` of the data a run's questions and corpus were read from.

    ``dirs`` are the folders by role (:attr:`ragfolio.runs.RunIdentity.data_dirs`: ``raw``, and ``test`` and
    ``corpus`` when set). The raw folder alone, as ``dvc.lock``'s ``data_prep`` stage records it: DVC's
    md5 (``dvc.data_md5``). Otherwise ``data.sha256``: a sha256 of the top-level ``*.jsonl`` files (name
    and bytes) of the raw folder, then of each other folder after its role, so two runs on the same
    questions and different corpora (or test questions) differ.
    """
    lock = project / "dvc.lock"
    if set(dirs) == {"raw"} and lock.exists():
        import yaml

        stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
        for dep in stages.get("data_prep", {}).get("deps", []):
            if Path(dep["path"]) == Path(dirs["raw"]) and "md5" in dep:
                return "dvc.data_md5", dep["md5"]
    digest = hashlib.sha256()
    for role in sorted(dirs, key=lambda role: (role != "raw", role)):  # the raw folder alone hashes as it did before
        if role != "raw":
            digest.update(f"\0{role}\0".encode())
        folder = Path(dirs[role]) if Path(dirs[role]).is_absolute() else project / dirs[role]
        for path in sorted(folder.glob("*.jsonl")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return "data.sha256", digest.hexdigest()


def served_bundle(project: Path) -> Path:
    """The bundle folder a plain ``bentoml serve`` in ``project`` loads: ``serving.bundle`` of
    conf/base/serving.yml (relative to the project; packaging's pointer followed,
    :func:`~ragfolio.core.bundle.resolve_bundle`), whatever the environment says.

    The one place that knows where the default service's bundle is: the ``served`` alias follows it
    (:func:`ragfolio.tracking.model.place_served_alias`). Read here, not through
    ``ragfolio.serving.config``, so that no pipeline stage depends on the service's code.
    """
    import yaml

    from ragfolio.core.bundle import resolve_bundle  # after a run that wrote the bundle only

    config = project / SERVING_CONFIG
    serving = ((yaml.safe_load(config.read_text()) or {}).get("serving") or {}) if config.is_file() else {}
    folder = Path(str(serving.get("bundle") or DEFAULT_SERVED_BUNDLE))
    return resolve_bundle(folder if folder.is_absolute() else project / folder)


def bundle_checksum(bundle: Path) -> str | None:
    """The ``checksum`` of the bundle manifest in ``bundle``; None when there is no bundle."""
    manifest = bundle / "manifest.json"
    return str(json.loads(manifest.read_text())["checksum"]) if manifest.is_file() else None


def unique_run_name(experiment_id: str, title: str, label: str) -> str:
    """``title`` if no run of the experiment (deleted ones too) of the run label ``label`` has that name,
    else ``title #n`` with the smallest free ``n >= 2``: the same run twice gets two names."""
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    runs = MlflowClient().search_runs([experiment_id], filter_string=f"tags.`ragfolio.run_name` = '{label}'",
                                      run_view_type=ViewType.ALL, max_results=50_000)
    taken = {run.info.run_name for run in runs}
    n = 1
    while (name := title if n == 1 else f"{title} #{n}") in taken:
        n += 1
    return name


def _filepath(catalog: Any, name: str) -> Path | None:
    """The local file or folder behind a catalog entry, if it has one."""
    try:
        described = catalog.get(name)._describe()
    except Exception:  # noqa: BLE001 - a dataset without a describable path is simply not logged
        return None
    path = described.get("filepath") or described.get("path")
    return Path(str(path)) if path else None


def _param_groups(pipeline: Any) -> set[str]:
    """Top-level parameter keys the pipeline reads (``params:data_prep`` -> ``data_prep``)."""
    return {name.removeprefix("params:").split(".")[0] for name in pipeline.inputs() if name.startswith("params:")}


class MlflowTrackingHook:
    """Opens an MLflow run before a pipeline runs and logs params, metrics, artifacts and the model after."""

    def __init__(self) -> None:
        self._params: dict[str, Any] = {}
        self._active = False
        self._record: dict[str, Any] = {}
        self._record_path: Path | None = None
        self._identity: RunIdentity | None = None
        self._project = Path()
        self._commit = "unknown"

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        self._params = dict(context.params)

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        self._project = project = Path(run_params["project_path"])
        root = str(self._params.get("data_root") or run_root(run_name(self._params)))
        self._record_path = project / root / IDENTITY_FILE
        recorded = json.loads(self._record_path.read_text()) if self._record_path.exists() else {}
        groups = _param_groups(pipeline)
        self._record = identity_record(self._params, groups, recorded)
        self._identity = identity = RunIdentity.of(self._params, self._record)
        if not _enabled():
            return
        import mlflow

        from ragfolio.tracking.flatten import knob_params

        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{project / 'mlflow.db'}"
        mlflow.set_tracking_uri(uri)
        experiment = mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", EXPERIMENT))
        for key, value in EXPERIMENT_KIND.items():
            if key not in experiment.tags:  # a kind chosen in the UI stays
                mlflow.set_experiment_tag(key, value)
        names = run_params.get("pipeline_names") or ["__default__"]
        title = identity.title("+".join(names))
        mlflow.start_run(run_name=unique_run_name(experiment.experiment_id, title, identity.label))
        self._active = True
        data_tag, data_hash = data_digest(project, identity.data_dirs)
        self._commit = git_commit(project)
        mlflow.set_tags({
            "kedro.pipeline": ",".join(names), "kedro.run_id": str(run_params.get("run_id")),
            "git.commit": self._commit, data_tag: data_hash, "ragfolio.run_name": identity.label,
            "ragfolio.k": str(identity.k), "ragfolio.pool": identity.pool,
            "data.raw_dir": identity.raw_dir, "data.test_dir": str(identity.test_dir),
            "data.corpus_dir": str(identity.corpus_dir), "data.root": root,
            **{f"numerics.{name}": value for name, value in numerics_identity().items()},
        })
        mlflow.log_params(knob_params(self._params, groups))
        mlflow.log_dict(self._params, "params.json")
        logger.info("MLflow: logging this run to %s (experiment %s)", uri, experiment.name)

    @hook_impl
    def after_pipeline_run(self, run_params: dict[str, Any], run_result: Any, pipeline: Any, catalog: Any) -> None:
        if self._record_path is not None and self._record:
            self._record_path.parent.mkdir(parents=True, exist_ok=True)  # sorted: in one go or in steps, the same bytes
            self._record_path.write_text(json.dumps(self._record, indent=1, sort_keys=True) + "\n")
        if not self._active:
            return
        import mlflow

        from ragfolio.tracking.flatten import flatten_metrics

        # Only the entries this pipeline writes: Kedro imports a dataset's module when its entry is
        # first used, and a stage's DVC deps hold the dataset modules of its own entries alone.
        outputs = pipeline.all_outputs()
        for name in [name for name in [*HEADLINES, *REPORTS] if name in outputs]:
            path = _filepath(catalog, name)
            if path is not None and path.exists():
                if name in HEADLINES:
                    mlflow.log_metrics(flatten_metrics(json.loads(path.read_text()), HEADLINES[name]))
                mlflow.log_artifact(str(path), artifact_path="reports/timings" if name.endswith("_timings") else "reports")
        for name in sorted(outputs):
            path = _filepath(catalog, name)
            if path is not None and path.suffix in (".png", ".csv") and path.exists():
                mlflow.log_artifact(str(path), artifact_path="plots")
        if BUNDLE in outputs and self._identity:  # only then the bundle's modules (scripts/dvc_deps.py ON_OUTPUT)
            from ragfolio.core.bundle import resolve_bundle

            pointer = _filepath(catalog, BUNDLE)  # packaging's pointer to the served bundle, or a bundle folder
            bundle = resolve_bundle(pointer) if pointer is not None and pointer.exists() else None
            if bundle is not None and (bundle / "manifest.json").exists():
                self._register(bundle, self._identity)
        mlflow.end_run()
        self._active = False

    def _register(self, bundle: Path, identity: RunIdentity) -> None:
        import mlflow

        from ragfolio.tracking.model import REGISTERED_NAME, log_bundle_model, register_bundle, run_alias

        manifest = json.loads((bundle / "manifest.json").read_text())
        fingerprint = str(manifest.get("corpus", {}).get("fingerprint", "unknown"))
        tags = {"ragfolio.run_name": identity.label, "bundle.path": str(bundle),
                "bundle.version": manifest["version"], "bundle.checksum": manifest["checksum"],
                "corpus.fingerprint": fingerprint, "git.commit": self._commit}
        description = (f"Run {identity.label} (data {identity.raw_dir}, k={identity.k}, pool {identity.pool}): "
                       f"bundle {manifest['version']} at {bundle}, corpus {fingerprint}, commit {self._commit}.")
        served = bundle_checksum(served_bundle(self._project))
        version = register_bundle(
            lambda: log_bundle_model(bundle, default_l=int(manifest["default_l"])).model_uri,
            tags=tags, description=description, label=identity.label, served_checksum=served,
        )
        is_served = served == manifest["checksum"]
        mlflow.set_tags({"bundle.version": manifest["version"], "bundle.checksum": manifest["checksum"],
                         "corpus.fingerprint": fingerprint, "model.version": version, "model.served": str(is_served)})
        logger.info("MLflow: bundle %s of run %s is models:/%s/%s (@%s%s)", manifest["version"], identity.label,
                    REGISTERED_NAME, version, run_alias(identity.label),
                    ", @served" if is_served else f"; not what `bentoml serve` loads by default, "
                    f"{served_bundle(self._project)}, so not @served")

    @hook_impl
    def on_pipeline_error(self, error: Exception, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        if self._active:
            import mlflow

            mlflow.end_run(status="FAILED")
            self._active = False
