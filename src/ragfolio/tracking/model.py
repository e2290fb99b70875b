"""The portfolio bundle as an MLflow ``pyfunc`` model: questions in, routed members and passages out.

``predict`` takes a DataFrame with a ``question`` column (or a list of strings) and an optional
``l`` parameter, routes and retrieves the questions as one batch (whatever the router:
:meth:`~ragfolio.core.system.routed_system.RoutedSystem.retrieve_batch`), and returns one row per
question: the routed members (best first), their router scores, and each member's passages. Loading it
back with ``mlflow.pyfunc.load_model("models:/ragfolio@served")`` (the bundle ``bentoml serve`` loads by
default; or ``models:/ragfolio/<version>``, ``models:/ragfolio@run-<label>``) verifies the bundle's
checksums, then gives the same predictions as the pipeline's bundle. The model answers no question itself;
its metadata (``MLmodel``'s ``metadata.reader``, :func:`model_metadata`) names the reader the bundle carries,
the one ``bentoml serve`` and answering evaluation answer with.

A bundle is registered once (:func:`register_bundle`): a run that rebuilds a bundle already registered,
checksum for checksum, adds no version and moves its ``run-<label>`` alias to the existing one. The
``served`` alias names the version of the bundle a plain ``bentoml serve`` loads, whichever run built
it (:func:`place_served_alias`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.pyfunc import PythonModel, PythonModelContext
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

REGISTERED_NAME = "ragfolio"
SERVED_ALIAS = "served"  # the version of the bundle a plain `bentoml serve` loads, and no other


class RagfolioModel(PythonModel):
    """Routes questions to the bundle's members and runs them (retrieval only, no LLM)."""

    def load_context(self, context: PythonModelContext) -> None:
        from ragfolio.core.bundle import load_bundle
        from ragfolio.core.system.routed_system import RoutedSystem

        self.bundle = load_bundle(context.artifacts["bundle"])
        self.system = RoutedSystem.from_bundle(self.bundle, timeout_s=60.0)
        self.rules = self.system.rules(self.bundle.default_l)  # the edge: l resolved and checked once

    def predict(
        self, context: PythonModelContext, model_input: Any, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        questions = list(model_input["question"]) if isinstance(model_input, pd.DataFrame) else list(model_input)
        l = (params or {}).get("l")  # noqa: E741 - None: the bundle's default_l
        requests = [self.rules.request(str(q), l) for q in questions]
        rows = []
        routings = self.system.retrieve_batch(requests) if requests else []
        for question, routed in zip(questions, routings, strict=True):  # the batch routed together
            runs = {run.name: run for run in routed.results.ok_runs}
            members = [self.bundle.members[j].name for j in routed.members]
            rows.append({
                "question": question,
                "members": members,
                "router_scores": routed.router_scores,
                "passages": [
                    [self.bundle.corpus.ids[int(d)] for d in runs[name].doc_ids] if name in runs else []
                    for name in members
                ],
            })
        return pd.DataFrame(rows, columns=["question", "members", "router_scores", "passages"])


# What the model's code path needs whatever the bundle holds: the routers, indexes and retrieval (members
# with backend: elasticsearch included).
BASE_REQUIREMENTS = ("mlflow", "torch", "numpy", "pandas", "scikit-learn", "safetensors", "faiss-cpu", "bm25s",
                     "sentence-transformers", "pydantic", "tqdm", "pyyaml", "elasticsearch")


def model_requirements(scoring: Mapping[str, Any]) -> list[str]:
    """The pinned pip requirements of the bundle's model: :data:`BASE_REQUIREMENTS` and every
    package the bundle's encoders need as configured (their weights' packages, and ONNX Runtime
    and ONNX for ``query_engine: onnxruntime``;
    :func:`~ragfolio.core.retrieval.encoders.kinds.encoder_identity`), at this environment's versions
    without a local label (:func:`public_version`)."""
    from ragfolio.core.retrieval.encoders.kinds import encoder_identity

    names = dict.fromkeys(BASE_REQUIREMENTS)
    for spec in (scoring.get("encoders") or {}).values():
        names.update(dict.fromkeys(encoder_identity(spec)["packages"]))
    return [f"{name}=={public_version(version(name))}" for name in names]


def public_version(installed: str) -> str:
    """``installed`` without its local label: ``2.13.0+cpu`` -> ``2.13.0``. A local label names one
    index's build (PyTorch's CPU wheels); PyPI serves none, so ``torch==2.13.0+cpu`` cannot be
    installed from it, while ``torch==2.13.0`` installs from any index (bentofile.yaml pins it so)."""
    return installed.split("+", 1)[0]


def model_metadata(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The model's metadata: the reader its bundle carries (the manifest's ``reader``; a bundle written
    before bundles carried one: the defaults, :class:`~ragfolio.core.llm.reader.ReaderSettings`)."""
    from ragfolio.core.llm.reader import ReaderSettings

    return {"reader": manifest.get("reader") or ReaderSettings().to_dict()}


def log_bundle_model(bundle_path: str | Path, *, default_l: int, register: bool = False) -> Any:
    """Log the bundle at ``bundle_path`` as the active run's ``model`` (and register it as ``ragfolio``
    with ``register``); the ``ModelInfo``."""
    signature = ModelSignature(
        inputs=Schema([ColSpec("string", "question")]),
        params=ParamSchema([ParamSpec("l", "long", default_l)]),
    )
    src = Path(__file__).resolve().parents[1]  # the ragfolio package, shipped with the model
    manifest = json.loads((Path(bundle_path) / "manifest.json").read_text())
    return mlflow.pyfunc.log_model(
        name="model",
        python_model=str(Path(__file__).with_name("model_code.py")),  # models from code: nothing pickled
        artifacts={"bundle": str(bundle_path)},
        code_paths=[str(src)],
        signature=signature,
        pip_requirements=model_requirements(manifest["scoring"]),
        registered_model_name=REGISTERED_NAME if register else None,
        metadata=model_metadata(manifest),
    )


def run_alias(label: str) -> str:
    """The alias of a run's latest bundle, ``run-<label>`` (MLflow aliases allow letters, digits, ``_`` and ``-``)."""
    return "run-" + re.sub(r"[^\w-]", "_", label)


def _versions(client: Any, checksum: str) -> list[int]:
    """The registered ``ragfolio`` versions whose ``bundle.checksum`` tag is ``checksum``."""
    return [int(v.version) for v in client.search_model_versions(f"name='{REGISTERED_NAME}'")
            if v.tags.get("bundle.checksum") == checksum]


def register_bundle(log_model: Callable[[], str], *, tags: Mapping[str, str], description: str, label: str,
                    served_checksum: str | None) -> str:
    """The registered ``ragfolio`` version of the bundle whose ``bundle.checksum`` tag is ``tags``': the newest
    one already registered, else a new version of the model ``log_model()`` logs (it returns the model's
    URI) with ``tags`` and ``description``. Either way the alias :func:`run_alias` of ``label`` then points
    at it, and :data:`SERVED_ALIAS` at the version of ``served_checksum`` (:func:`place_served_alias`)."""
    from mlflow import MlflowClient

    client = MlflowClient()
    same = _versions(client, tags["bundle.checksum"])
    if same:
        version = str(max(same))
    else:
        version = str(mlflow.register_model(log_model(), REGISTERED_NAME, tags=dict(tags)).version)
        client.update_model_version(REGISTERED_NAME, version, description=description)
    client.set_registered_model_alias(REGISTERED_NAME, run_alias(label), version)
    place_served_alias(served_checksum)
    return version


def place_served_alias(checksum: str | None) -> str | None:
    """Point :data:`SERVED_ALIAS` at the newest version of the bundle with ``checksum`` (the one a plain
    ``bentoml serve`` loads) and return it; with no such version (or ``checksum`` None: nothing is served)
    remove the alias, so it never names a bundle the service does not load."""
    from mlflow import MlflowClient

    client = MlflowClient()
    same = _versions(client, checksum) if checksum else []
    if same:
        client.set_registered_model_alias(REGISTERED_NAME, SERVED_ALIAS, str(max(same)))
        return str(max(same))
    if SERVED_ALIAS in client.get_registered_model(REGISTERED_NAME).aliases:
        client.delete_registered_model_alias(REGISTERED_NAME, SERVED_ALIAS)
    return None
