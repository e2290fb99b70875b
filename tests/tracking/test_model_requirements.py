"""The registered MLflow model's requirements hold what its code path imports for the bundle's
settings: an environment built from them alone can run it."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import yaml

from ragfolio.core.code_identity import source_files
from ragfolio.core.retrieval.encoders.kinds import ENCODER_KINDS
from ragfolio.tracking.model import model_requirements

ROOT = Path(__file__).resolve().parents[2]


def _closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` install (their dependencies, transitively, extras left out)."""
    seen: set[str] = set()
    stack = [re.split(r"[=<>!~ ]", r)[0] for r in requirements]
    while stack:
        name = stack.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        stack += [m.group(0) for r in requires if "extra ==" not in r and (m := re.match(r"[A-Za-z0-9_.\-]+", r))]
    return seen


def _imported_distributions(files: list[Path]) -> dict[str, str]:
    """Distribution -> a module that imports it, for every third-party import in ``files``."""
    by_module, out = md.packages_distributions(), {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                if top == "ragfolio" or top in sys.stdlib_module_names:
                    continue
                dists = by_module.get(top, [])
                if len(dists) > 1:  # a namespace package (google, opentelemetry): its second level names it
                    dists = [d for d in dists if name.split(".")[1:2] and name.split(".")[1] in d.replace("-", "")]
                for dist in dists:
                    out.setdefault(dist.lower().replace("_", "-"), path.name)
    return out


def test_the_models_requirements_cover_what_its_code_path_imports() -> None:
    encoders = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())[
        "candidate_scoring"]["encoders"]
    assert any(spec.get("query_engine") == "onnxruntime" for spec in encoders.values())  # the shipped setting
    requirements = model_requirements({"encoders": encoders})
    assert {"onnxruntime", "onnx"} <= {r.split("==")[0] for r in requirements}
    # the model's code: the pyfunc class, the runtime it builds from a bundle, every router kind and the
    # encoder kinds the bundle's settings name
    modules = ["ragfolio.tracking.model_code", "ragfolio.core.system.routed_system", "ragfolio.core.routing.registry",
               *{ENCODER_KINDS[spec["kind"]].__module__ for spec in encoders.values()},
               "ragfolio.core.retrieval.encoders.onnx_queries"]
    imported = _imported_distributions(source_files(modules))
    installed = _closure(requirements)
    missing = {dist: module for dist, module in imported.items() if dist not in installed}
    assert not missing, f"the model's code imports {missing} (distribution: module), not in {requirements}"


def test_the_pins_are_installable_from_any_index(monkeypatch) -> None:
    """This environment's torch is PyTorch's CPU build, ``2.13.0+cpu``: no index serves that name, so
    the model pins ``torch==2.13.0`` (as bentofile.yaml does), never a local label."""
    from ragfolio.tracking import model

    real = model.version
    monkeypatch.setattr(model, "version", lambda name: "2.13.0+cpu" if name == "torch" else real(name))
    requirements = model_requirements({})
    assert "torch==2.13.0" in requirements
    assert not [r for r in requirements if "+" in r], requirements
    bento = yaml.safe_load((ROOT / "bentofile.yaml").read_text())["python"]["packages"]
    assert "torch==2.13.0" in bento
