"""What a user generates from tracked files stays out of git, and `dvc plots show` says what it cannot draw offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_outputs_are_git_ignored() -> None:
    for path in ("dvc_plots/index.html", "dvc_plots/static/best_of_k.png", "portfolio_pipeline.yaml"):
        out = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, f"{path} is not git-ignored"


def test_dvc_plots_page_draws_the_pngs_and_notes_the_vega_plots_offline(tmp_path: Path) -> None:
    dvc = Path(sys.executable).with_name("dvc")
    out = subprocess.run([str(dvc), "plots", "show", "-o", str(tmp_path / "plots")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    page = (tmp_path / "plots" / "index.html").read_text()
    assert page.count('vegaEmbed(') == 2 and "needs Vega" in page  # the .dvc/plots_template.html note
    pngs = {p.name for p in (tmp_path / "plots" / "static").glob("*.png")}
    assert {"workspace_data_08_reporting_best_of_k.png", "workspace_data_08_reporting_em_vs_tokens.png"} <= pngs
    for png in pngs:
        assert f'src="static/{png}"' in page  # relative: the page and its images open from disk
