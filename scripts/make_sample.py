"""Build the bundled sample in ``data/01_raw/`` from the shared benchmark files.

For each of ``hotpotqa.jsonl``, ``2wikimultihopqa.jsonl`` and ``musique.jsonl`` the script draws
``--n`` questions (default 100) uniformly at random, with ``random.Random(--seed)`` (default 0),
from the rows that have contexts, and copies those lines **byte for byte** to
``data/01_raw/<same name>.jsonl``, in their original order. Every source file is validated with
:func:`ragfolio.core.data.loading.load_jsonl` first. The result is deterministic: the same source files
and seed give the same sample.

Usage::

    .venv/bin/python scripts/make_sample.py [--source ../shared/data] [--out data/01_raw]
                                            [--n 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import random
from pathlib import Path

from ragfolio.core.data.loading import load_jsonl
from ragfolio.core.data.passages import build_corpus

logger = logging.getLogger("make_sample")

REPO = Path(__file__).resolve().parents[1]
FILES = ("hotpotqa.jsonl", "2wikimultihopqa.jsonl", "musique.jsonl")


def sample_file(source: Path, out: Path, n: int, seed: int) -> tuple[int, int]:
    """Copy a seeded random choice of ``n`` rows with contexts from ``source`` to ``out``.

    Returns:
        ``(questions written, unique passages in the sample's pooled corpus)``.
    """
    questions = load_jsonl(source)  # validates the whole file
    lines = [line for line in source.read_text(encoding="utf-8").splitlines(keepends=True)
             if line.strip()]
    if len(lines) != len(questions):
        raise RuntimeError(f"{source}: {len(lines)} non-blank lines but {len(questions)} rows")
    eligible = [i for i, q in enumerate(questions) if q.has_contexts]
    if len(eligible) < n:
        raise ValueError(f"{source}: only {len(eligible)} rows with contexts, asked for n={n}")
    chosen = sorted(random.Random(seed).sample(eligible, n))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        f.writelines(lines[i] if lines[i].endswith("\n") else lines[i] + "\n" for i in chosen)
    n_passages = len(build_corpus(questions[i] for i in chosen))
    return n, n_passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "data" / "01_raw")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in FILES:
        n_q, n_p = sample_file(args.source / name, args.out / name, args.n, args.seed)
        logger.info("%s: %d questions, %d unique passages", args.out / name, n_q, n_p)


if __name__ == "__main__":
    main()
