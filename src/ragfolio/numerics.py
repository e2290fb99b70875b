"""One instruction set for every numeric library, so the same inputs give the same bits on any machine.

torch (MKL's GEMM, ATen's vectorised kernels, oneDNN), FAISS and OpenBLAS each pick their kernels
at run time by what the processor offers. Kernels of different widths (AVX2, AVX-512) add in
another order, so the same passage gets an embedding that differs in the last bit on a machine
with AVX-512 (measured here: forcing another instruction set changes every one of 300 E5 and
MiniLM passage embeddings, by up to 1.3e-7; docs/benchmarks.md, "Same bits on every machine").
That is harmless for retrieval quality, but a candidate whose two passages score within 1e-7 ranks
them the other way round, one question's utility moves, and ``dvc repro`` on a colleague's machine
reports a changed utility matrix. numpy's own sorts do the same to exact ties (below), and that
is what happened on this project: the bundled sample's MuSiQue utilities differed between two
development machines, one with AVX-512, while each reproduced itself.

:func:`pin_instruction_set` sets each library's own switch to AVX2, the widest level that every
x86-64 machine of the last decade has, so every such machine runs the same kernels:

============================  ========  =================================================
variable                      value     library
============================  ========  =================================================
``MKL_CBWR``                  AVX2      MKL (torch's float32 GEMM): conditional reproducibility
``ATEN_CPU_CAPABILITY``       avx2      torch's own vectorised kernels (norms, softmax, GELU)
``ONEDNN_MAX_CPU_ISA``        AVX2      oneDNN (torch's mkldnn paths)
``FAISS_SIMD_LEVEL``          AVX2      FAISS's dynamically dispatched distance kernels
``OPENBLAS_CORETYPE``         Haswell   OpenBLAS (numpy's and FAISS's BLAS)
``NPY_DISABLE_CPU_FEATURES``  (below)   numpy's own dispatched loops, sorts and partitions
============================  ========  =================================================

numpy's value, ``X86_V4 AVX512_ICL AVX512_SPR``, turns off its AVX-512 targets (the names of numpy
2.4, the lock's version), leaving ``X86_V3`` (AVX2). It matters for ties, not only for last bits:
on AVX-512 numpy sorts and partitions with other networks (x86-simd-sort), so ``np.argpartition``
and ``np.argsort`` put equal scores in another order, and bm25s's top-k (``argpartition``, then
``argsort``) keeps another of two passages that score the same. On the bundled sample that moved
the random baseline's utility on an AVX-512 machine; with this pin its reports equal an AVX2
machine's to the byte (docs/benchmarks.md, "Same bits on every machine").

The libraries read these when they load, so they must be set before numpy or torch is imported:
``make`` puts ``scripts/ragfolio_numerics.pth`` into the venv, which calls this at the start of
every program there (``kedro``, ``dvc``'s stages, Dask workers, ``bentoml serve``, the tests). A
variable already set wins, nothing is pinned on a processor without AVX2 and FMA or that is not
x86-64 (where these libraries have other kernels, and another machine kind is another
reproducibility domain), and ``RAGFOLIO_NATIVE_ISA=1`` turns the pin off (for speed on AVX-512
machines, at the price of bits that match only machines like this one). On an AVX2 machine the pin
changes nothing: the libraries chose AVX2 already.

Standard library only: it runs at every interpreter start.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, MutableMapping

PINNED_ISA: dict[str, str] = {
    "MKL_CBWR": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "FAISS_SIMD_LEVEL": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}
"""Each library's switch and the AVX2 value it is pinned to."""

REQUIRED_FLAGS = frozenset({"avx2", "fma"})
OPT_OUT = "RAGFOLIO_NATIVE_ISA"


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The instruction-set flags of the first processor in ``path`` (empty where there is no such file)."""
    try:
        with open(path, encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def pin_instruction_set(
    environ: MutableMapping[str, str] | None = None,
    *,
    machine: str | None = None,
    flags: Iterable[str] | None = None,
) -> dict[str, str]:
    """Set :data:`PINNED_ISA` in ``environ`` (default ``os.environ``) where it applies.

    Args:
        environ: The environment to set; a variable already there is left as it is.
        machine: ``platform.machine()`` unless given.
        flags: The processor's flags, :func:`cpu_flags` unless given.

    Returns:
        The variables this call set (empty when the machine is not x86-64 with AVX2 and FMA, or
        ``RAGFOLIO_NATIVE_ISA=1``).
    """
    env = os.environ if environ is None else environ
    if env.get(OPT_OUT) == "1" or (machine or platform.machine()) not in ("x86_64", "AMD64"):
        return {}
    if not REQUIRED_FLAGS <= frozenset(cpu_flags() if flags is None else flags):
        return {}
    chosen = {name: value for name, value in PINNED_ISA.items() if name not in env}
    env.update(chosen)
    return chosen


def numerics_identity() -> dict[str, str]:
    """What decides the bits of this process's arithmetic, for a run's tags: the instruction set
    torch dispatches to and each pinned variable as set (``unset`` where it is not)."""
    identity = {name: os.environ.get(name, "unset") for name in PINNED_ISA}
    try:
        import torch

        identity["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return identity
