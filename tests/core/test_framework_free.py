"""ragfolio.core must import no framework: kedro, mlflow, bentoml or dvc."""

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
