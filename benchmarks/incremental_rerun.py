"""A rerun after adding documents does only the new work: timed against the full run, reports compared.

Three runs of the whole method (``kedro run --pipelines=portfolio``, what ``dvc repro`` runs stage
by stage), each under a data root of its own in ``--root``:

1. ``full``: the questions of ``--raw-dir`` and a copy of ``--corpus-dir``, from an empty cache;
2. ``rerun``: the same data root after ``--n`` new passages (contexts of ``--added-from`` that are
   not in the corpus) are written to the corpus folder as ``added.jsonl``: only they are encoded;
3. ``scratch`` (``--scratch``): the data of the rerun, from an empty cache.

It reports the wall time of each, the rerun's share of the full run's, and (with ``--scratch``) the
files of ``08_reporting`` that differ between the rerun and the run from scratch (timings left out).

    .venv/bin/python benchmarks/incremental_rerun.py --raw-dir ../shared/data --corpus-dir ../shared/data/corpus \\
        --root /tmp/inc --out docs/results_issue49/incremental_rerun.json
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEDRO = str(Path(sys.executable).with_name("kedro"))


def run(root: Path, raw_dir: Path, corpus: Path, log: Path, extra: str = "") -> float:
    """One ``kedro run --pipelines=portfolio`` under ``root``; its wall seconds."""
    params = f"data_root={root},data_prep.raw_dir={raw_dir},data_prep.corpus_dir={corpus}" + extra
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run([KEDRO, "run", "--pipelines=portfolio", f"--params={params}"], cwd=ROOT,
                              stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "TQDM_DISABLE": "1"})
    if done.returncode:
        raise RuntimeError(f"kedro run failed, see {log}")
    return time.perf_counter() - start


def new_passages(path: Path, corpus_dir: Path, n: int) -> list[dict]:
    """``n`` contexts of ``path`` whose passage is in no file of ``corpus_dir`` (a few may be contexts of
    raw_dir's questions: those are in the corpus already and add nothing)."""
    from ragfolio.core.data.loading import load_jsonl
    from ragfolio.core.data.records import passage_id

    known: set[str] = set()
    for f in corpus_dir.glob("*.jsonl"):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                known.add(passage_id(row["title"], row["text"]))
    out = []
    for q in load_jsonl(path):
        for c in q.contexts:
            pid = passage_id(c.title, c.text)
            if pid not in known:
                known.add(pid)
                out.append({"title": c.title, "text": c.text})
                if len(out) == n:
                    return out
    raise ValueError(f"{path}: only {len(out)} new passages")


def differing(a: Path, b: Path) -> list[str]:
    """Files of ``08_reporting`` that differ between two runs (timings, which are wall clock, left out)."""
    out = []
    for path in sorted((a / "08_reporting").rglob("*")):
        rel = path.relative_to(a)
        if path.is_file() and "timings" not in rel.parts and not filecmp.cmp(path, b / rel, shallow=False):
            out.append(str(rel))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw-dir", type=Path, required=True)
    parser.add_argument("--corpus-dir", type=Path, required=True)
    parser.add_argument("--added-from", type=Path, default=ROOT.parent / "shared/data/extra/hotpotqa_fullwiki_dev.jsonl")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--scratch", action="store_true", help="also run the rerun's data from an empty cache")
    parser.add_argument("--params", default="", help="more --params, e.g. ,candidate_scoring.encoders.e5.kind=e5_torch")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    raw, root = args.raw_dir.resolve(), args.root.resolve()
    corpus = root / "corpus"
    shutil.copytree(args.corpus_dir, corpus)
    report: dict = {"n_added": args.n}
    report["full_s"] = run(root / "data", raw, corpus, root / "full.log", args.params)
    added = new_passages(args.added_from, corpus, args.n)
    (corpus / "added.jsonl").write_text("".join(json.dumps(p) + "\n" for p in added), encoding="utf-8")
    report["rerun_s"] = run(root / "data", raw, corpus, root / "rerun.log", args.params)
    report["rerun_share"] = report["rerun_s"] / report["full_s"]
    report["encoded_in_rerun"] = [line.strip() for line in (root / "rerun.log").read_text().splitlines()
                                  if "encoding" in line and "passages" in line]
    if args.scratch:
        report["scratch_s"] = run(root / "scratch", raw, corpus, root / "scratch.log", args.params)
        report["reports_differing_from_scratch"] = differing(root / "data", root / "scratch")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
