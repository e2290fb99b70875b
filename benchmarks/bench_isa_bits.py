"""Do the instruction sets the numeric libraries pick change an embedding's bits? (``ragfolio.numerics``)

Encodes the first ``--passages`` passages of the bundled sample with both embedded encoders in a
fresh interpreter per setting, then counts, per setting, the rows that differ from the first
(``pinned``: the venv as ``make`` installs it) and by how much::

    .venv/bin/python benchmarks/bench_isa_bits.py --passages 300

Settings: ``pinned`` (scripts/ragfolio_numerics.pth: AVX2 everywhere), ``native`` (the pin off:
each library's own choice on this processor), ``mkl_compatible`` (MKL's GEMM on its generic SSE
path), ``aten_default`` (torch's unvectorised kernels). A machine with AVX-512 should show
``native`` differing and ``pinned`` equal to an AVX2 machine's ``pinned``; on an AVX2 machine
``native`` equals ``pinned``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {
    "pinned": {},
    "native": {"RAGFOLIO_NATIVE_ISA": "1"},
    "mkl_compatible": {"MKL_CBWR": "COMPATIBLE"},
    "aten_default": {"ATEN_CPU_CAPABILITY": "default"},
}
ENCODE = """
import json, sys, numpy as np
from ragfolio.core.retrieval.encoders.kinds import make_encoder
texts = json.load(open(sys.argv[1]))
for kind in ("e5_torch", "sentence_transformers"):
    emb = make_encoder({"kind": kind, "show_progress": False}).encode_passages(texts)
    np.save(f"{sys.argv[2]}_{kind}.npy", emb)
"""


def sample_passages(n: int) -> list[str]:
    texts: list[str] = []
    for path in sorted((ROOT / "data" / "01_raw").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            texts += [f"{c['title']} {c['text']}" for c in json.loads(line).get("contexts", [])]
    return texts[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        texts = Path(tmp) / "texts.json"
        texts.write_text(json.dumps(sample_passages(args.passages)))
        for name, extra in SETTINGS.items():
            env = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                                                      "FAISS_SIMD_LEVEL", "OPENBLAS_CORETYPE")}
            subprocess.run([sys.executable, "-c", ENCODE, str(texts), f"{tmp}/{name}"], env={**env, **extra},
                           check=True, capture_output=True)
        print(f"| setting | encoder | rows differing from pinned (of {args.passages}) | max abs difference |")
        print("|---|---|---|---|")
        for kind in ("e5_torch", "sentence_transformers"):
            base = np.load(f"{tmp}/pinned_{kind}.npy")
            for name in SETTINGS:
                emb = np.load(f"{tmp}/{name}_{kind}.npy")
                print(f"| {name} | {kind} | {int((emb != base).any(axis=1).sum())} | {float(np.abs(emb - base).max()):.2e} |")


if __name__ == "__main__":
    main()
