"""``bentoml build`` packs the service, its settings and the bundle, and nothing else of the project.

The build runs on a copy of the files bentofile.yaml names, with the tiny bundle in place of the
pipeline's, so the test does not depend on (or race with) a pipeline run. ``scripts/build_bento.py``
ships the served bundle only, of the two there, as packaging's pointer names it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragfolio.core.bundle import save_served

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BENTOML = str(Path(sys.executable).with_name("bentoml"))


def test_build_packs_the_service_settings_and_bundle_only(tiny_bundle, tmp_path) -> None:
    ctx = tmp_path / "ctx"
    for part in ("src/ragfolio/core", "src/ragfolio/serving", "src/ragfolio/pipelines"):
        shutil.copytree(ROOT / part, ctx / part, ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "scripts").mkdir()
    for part in ("src/ragfolio/__init__.py", "src/ragfolio/settings.py", "conf/base/serving.yml",
                 "conf/base/catalog.yml", "bentofile.yaml", "pyproject.toml"):
        (ctx / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, ctx / part)
    for key in ("served", "other"):  # packaging's layout: every portfolio's bundle, and a pointer to one
        shutil.copytree(tiny_bundle, ctx / "data/06_models/bundles" / key)
    save_served(ctx / "data/06_models/served.json", ctx / "data/06_models/bundles/served", "served")
    shutil.copy(ROOT / "scripts/build_bento.py", ctx / "scripts/build_bento.py")
    (ctx / "tests").mkdir()
    (ctx / "tests/test_nothing.py").write_text("")
    env = {**os.environ, "BENTOML_HOME": str(tmp_path / "home"), "BENTOML_DO_NOT_TRACK": "true", "DO_NOT_TRACK": "1"}

    built = subprocess.run([sys.executable, "scripts/build_bento.py"], cwd=ctx, env=env, capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    listed = subprocess.run([BENTOML, "list"], env=env, capture_output=True, text=True, timeout=120)
    assert "ragfolio:" in listed.stdout, listed.stdout + listed.stderr

    # The tag folder, not the `latest` pointer beside it (a random tag may itself start with "l").
    (bento,) = [p for p in (tmp_path / "home" / "bentos" / "ragfolio").iterdir() if p.name != "latest"]
    files = {p.relative_to(bento / "src").as_posix() for p in (bento / "src").rglob("*") if p.is_file()}
    assert {"ragfolio/__init__.py", "ragfolio/serving/service.py", "ragfolio/serving/static/playground.html",
            "ragfolio/core/bundle.py", "conf/base/serving.yml", "data/06_models/served.json"} <= files
    bundle_files = {f.removeprefix("data/06_models/bundles/served/") for f in files if f.startswith("data/")} - {
        "data/06_models/served.json"}
    assert bundle_files == {p.relative_to(tiny_bundle).as_posix() for p in tiny_bundle.rglob("*") if p.is_file()}
    unexpected = [f for f in files if f.startswith(("ragfolio/pipelines", "tests", "src/")) or f in (
        "ragfolio/settings.py", "ragfolio/hooks.py") or f.endswith(("catalog.yml", "pyproject.toml", ".pyc"))]
    assert unexpected == []
