"""The numeric libraries run one instruction set (AVX2) on every x86-64 machine: ``ragfolio.numerics``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragfolio.numerics import OPT_OUT, PINNED_ISA, cpu_flags, pin_instruction_set

ROOT = Path(__file__).resolve().parents[1]
AVX2 = {"sse4_2", "avx", "avx2", "fma"}


def test_pins_every_library_on_an_avx2_machine() -> None:
    env: dict[str, str] = {}
    assert pin_instruction_set(env, machine="x86_64", flags=AVX2 | {"avx512f"}) == PINNED_ISA
    assert env == PINNED_ISA


def test_a_variable_already_set_wins() -> None:
    env = {"MKL_CBWR": "COMPATIBLE"}
    chosen = pin_instruction_set(env, machine="x86_64", flags=AVX2)
    assert env["MKL_CBWR"] == "COMPATIBLE" and "MKL_CBWR" not in chosen
    assert env["FAISS_SIMD_LEVEL"] == "AVX2"


@pytest.mark.parametrize(("machine", "flags", "extra"), [
    ("aarch64", AVX2, {}),                      # other kernels altogether: nothing to pin
    ("x86_64", {"sse4_2", "avx"}, {}),          # no AVX2: pinning it would ask for what is missing
    ("x86_64", AVX2, {OPT_OUT: "1"}),           # the user's choice of native speed
])
def test_pins_nothing_where_it_does_not_apply(machine: str, flags: set[str], extra: dict[str, str]) -> None:
    env = dict(extra)
    assert pin_instruction_set(env, machine=machine, flags=flags) == {}
    assert env == extra


def test_cpu_flags_reads_the_first_processor(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(str(info)) == {"fpu", "sse", "avx2", "fma"}
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


# A fresh interpreter of the project's venv (which `make` gives scripts/ragfolio_numerics.pth), with
# only what it needs to find its own packages in the environment.
in_the_venv = pytest.mark.skipif(
    not (ROOT / ".venv").exists() or Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="runs in the project's venv, which make installs with scripts/ragfolio_numerics.pth")
BARE_ENV = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}


@in_the_venv
def test_every_program_of_the_venv_starts_pinned() -> None:
    """A fresh interpreter of the venv, with no ragfolio import of its own, already has the pins:
    torch dispatches to AVX2 and numpy to nothing beyond it (on a machine without AVX2 nothing is
    pinned: the check says so)."""
    code = ("import json, os, numpy, torch; from numpy._core._multiarray_umath import __cpu_features__ as f; "
            f"print(json.dumps([{{k: os.environ.get(k, 'unset') for k in {sorted(PINNED_ISA)!r}}}, "
            "str(torch.backends.cpu.get_cpu_capability()), f['X86_V4'], f['AVX512_ICL']]))")
    out = subprocess.run([sys.executable, "-c", code], env=BARE_ENV, capture_output=True, text=True, timeout=120,
                         check=True)
    pinned, capability, *numpy_avx512 = json.loads(out.stdout)
    if not {"avx2", "fma"} <= cpu_flags():
        assert set(pinned.values()) == {"unset"}
        return
    assert pinned == PINNED_ISA
    assert capability == "AVX2"
    assert numpy_avx512 == [False, False]
    assert "NPY_DISABLE_CPU_FEATURES" not in out.stderr  # numpy knows every name (it warns on one it does not)


@in_the_venv
@pytest.mark.skipif(not {"avx2", "fma"} <= cpu_flags(), reason="the pin applies to x86-64 machines with AVX2 and FMA")
def test_pinned_numpy_breaks_ties_as_an_avx2_machine_does() -> None:
    """What the numpy pin is for: np.argpartition keeps other tied elements with AVX-512 networks.
    Pinned, the top-4 of a tied score vector is the one an AVX2 machine gives (numpy 2.4's
    X86_V3 kernels); RAGFOLIO_NATIVE_ISA=1 on an AVX-512 machine gives another."""
    code = ("import numpy as np; s = np.random.default_rng(0).integers(0, 20, 3477).astype(np.float32); "
            "print(sorted(np.argpartition(s, -4)[-4:].tolist()))")
    pinned = subprocess.run([sys.executable, "-c", code], env=BARE_ENV, capture_output=True, text=True, timeout=60,
                            check=True).stdout.strip()
    assert pinned == "[14, 53, 55, 3455]"
    if "avx512f" in cpu_flags():
        native = subprocess.run([sys.executable, "-c", code], env={**BARE_ENV, OPT_OUT: "1"}, capture_output=True,
                                text=True, timeout=60, check=True).stdout.strip()
        assert native != pinned
