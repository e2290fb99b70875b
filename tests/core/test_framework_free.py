"""ragfolio.core must import no framework (kedro, mlflow, bentoml or dvc); the bundle format no runtime."""

import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys
import ragfolio.core
for mod in pkgutil.walk_packages(ragfolio.core.__path__, "ragfolio.core."):
    importlib.import_module(mod.name)
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"kedro", "mlflow", "bentoml", "dvc"})
print(",".join(loaded))
"""


def test_core_imports_no_framework() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"ragfolio.core loaded {out.stdout.strip()}"


RUNTIME = ("torch", "transformers", "bm25s", "faiss", "ragfolio.core.retrieval.running.pool_runner",
           "ragfolio.core.answering", "ragfolio.core.routing.routers.learned", "ragfolio.core.routing.registry")
BUNDLE_CHECK = f"""
import sys
import ragfolio.core.bundle
print(",".join(sorted(name for name in {RUNTIME!r} if name in sys.modules)))
"""


def test_the_bundle_format_imports_no_runtime() -> None:
    """Reading or writing a bundle's folder needs no retriever, encoder, LLM or router class."""
    out = subprocess.run([sys.executable, "-c", BUNDLE_CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"ragfolio.core.bundle loaded {out.stdout.strip()}"
