"""Benchmark portfolio selection on a utility matrix stored on disk and memory-mapped.

Writes an ``(rows, cols)`` float16 ``.npy`` (2 GB at the default 1,000,000 x 1,000) in chunks, so
generation never holds more than one chunk, with a realistic structure: every candidate mixes a
few latent "skills" of the query (rank 8), plus noise, clipped to ``[0, 1]``, and a tenth of the
queries answered by no candidate. Then, in a fresh subprocess per method (so each peak is its
own), it runs ``select_greedy``, ``select_lazy_greedy`` and ``select_stochastic_greedy`` on
``np.load(path, mmap_mode="r")`` and records:

* wall time, with the page cache dropped first (cold: the first pass comes from disk) and again
  with the file cached (warm);
* peak memory: ``ru_maxrss`` of the child (which counts the file's mapped pages), the peak of its
  anonymous (heap) memory sampled from ``/proc/self/status``, and the child runs under an address
  space limit (``RLIMIT_AS``, ``--limit-gb``) so exceeding it would fail the run;
* bytes read, counted by a memmap subclass that adds up every block it hands out (a column read
  ``U[s:e, p]`` counts one 64-byte cache line a row);
* the floor: bytes read / read bandwidth, with the bandwidth measured on this machine: a cold
  sequential ``readinto`` of the file in 64 MB chunks (disk), the same warm (page cache), and a
  numpy sum over a 256 MB in-memory float32 array (memory).

Dropping the page cache needs root (``sync; echo 3 > /proc/sys/vm/drop_caches``); without it only
warm numbers are reported, and the report says so.

Run from the repository root::

    .venv/bin/python benchmarks/bench_out_of_core.py --rows 1000000 --cols 1000 --k 10
    .venv/bin/python benchmarks/bench_out_of_core.py --quick   # 100,000 x 200, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

METHODS = ("greedy", "lazy", "stochastic")
CHUNK_BYTES = 64 * 2**20
CACHE_LINE = 64


# --------------------------------------------------------------------------------------------
# the matrix on disk


def write_matrix(path: Path, rows: int, cols: int, seed: int, chunk_rows: int = 50_000) -> float:
    """Write a float16 ``.npy`` chunk by chunk; returns the seconds it took."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    rank = 8
    profiles = rng.dirichlet(np.full(rank, 0.3), size=cols).T.astype(np.float32)  # (rank, cols)
    quality = rng.uniform(0.4, 1.0, cols).astype(np.float32)  # some candidates are better overall
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
              "fortran_order": False, "shape": (rows, cols)}
    with path.open("wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for s in range(0, rows, chunk_rows):
            c = min(chunk_rows, rows - s)
            skills = rng.random((c, rank), dtype=np.float32)  # how much each skill answers q
            U = (skills @ profiles) * quality * 1.6
            U += rng.standard_normal((c, cols), dtype=np.float32) * 0.12
            U[rng.random(c) < 0.1] = 0.0  # unanswerable queries
            np.clip(U, 0.0, 1.0, out=U)
            f.write(U.astype(np.float16).tobytes())
    return time.perf_counter() - start


def drop_page_cache() -> bool:
    """``sync; echo 3 > /proc/sys/vm/drop_caches``; False where not permitted."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def file_read_bandwidth(path: Path) -> float:
    """Bytes per second of a sequential ``readinto`` of the whole file in 64 MB chunks."""
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    total = 0
    start = time.perf_counter()
    with path.open("rb", buffering=0) as f:
        while n := f.readinto(view):
            total += n
    return total / (time.perf_counter() - start)


def memory_read_bandwidth(repeats: int = 5) -> float:
    """Bytes per second of ``a.sum()`` over a 256 MB float32 array (best of ``repeats``)."""
    a = np.ones(64 * 2**20, dtype=np.float32)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - start)
    return a.nbytes / best


# --------------------------------------------------------------------------------------------
# the child: one method on the memmap


class CountingMemmap(np.memmap):
    """A memmap that adds up the bytes of every block read from it (top-level reads only)."""

    counted = 0
    _top = False

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        out = super().__getitem__(key)
        if self._top and isinstance(out, np.ndarray):
            if out.ndim == 2:
                CountingMemmap.counted += out.shape[0] * self.strides[0]
            elif out.ndim == 1:  # a column slice touches one cache line a row
                CountingMemmap.counted += out.shape[0] * min(CACHE_LINE, self.strides[0])
        return out

    def take(self, indices, axis=None, out=None, mode="raise"):  # type: ignore[no-untyped-def]
        if self._top:
            CountingMemmap.counted += (np.size(indices) if axis == 0 else self.shape[0]) * (
                self.strides[0]
            )
        return np.asarray(self).take(indices, axis=axis, out=out, mode=mode)


class MemorySampler(threading.Thread):
    """Peak ``RssAnon`` / ``RssFile`` of this process, sampled every 20 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = {"RssAnon": 0, "RssFile": 0}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for line in Path("/proc/self/status").read_text().splitlines():
                key = line.split(":")[0]
                if key in self.peak:
                    self.peak[key] = max(self.peak[key], int(line.split()[1]) * 1024)
            self.stop.wait(0.02)


def child(method: str, path: Path, k: int, limit_gb: float) -> dict[str, Any]:
    if limit_gb > 0:
        limit = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from ragfolio.core.selection.greedy import select_greedy, select_lazy_greedy, select_stochastic_greedy

    sampler = MemorySampler()
    sampler.start()
    U = np.load(path, mmap_mode="r").view(CountingMemmap)
    U._top = True
    select = {
        "greedy": lambda: select_greedy(U, k),
        "lazy": lambda: select_lazy_greedy(U, k),
        "stochastic": lambda: select_stochastic_greedy(U, k, epsilon=0.1, random_state=0),
    }[method]
    io_before = _proc_io()
    start = time.perf_counter()
    result = select()
    seconds = time.perf_counter() - start
    io_after = _proc_io()
    sampler.stop.set()
    sampler.join()
    return {
        "method": method,
        "seconds": seconds,
        "indices": result.indices,
        "value": result.value,
        "n_evaluations": result.n_evaluations,
        "bytes_counted": CountingMemmap.counted,
        "disk_read_bytes": io_after.get("read_bytes", 0) - io_before.get("read_bytes", 0),
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_anon": sampler.peak["RssAnon"],
        "peak_file": sampler.peak["RssFile"],
        "threads": os.cpu_count(),
    }


def _proc_io() -> dict[str, int]:
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return {}
    return {key: int(value) for key, value in (line.split(": ") for line in lines)}


def run_child(method: str, path: Path, k: int, limit_gb: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", method, "--path", str(path), "--k", str(k),
           "--limit-gb", str(limit_gb)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"{method} child failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# the report


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="queries (N)")
    parser.add_argument("--cols", type=int, default=1_000, help="candidates (m)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="100,000 x 200: a smoke run")
    parser.add_argument("--path", type=Path, default=Path("/tmp/ragfolio_bench_U_float16.npy"))
    parser.add_argument("--keep", action="store_true", help="keep the .npy file (and reuse it)")
    parser.add_argument("--no-cold", action="store_true", help="do not drop the page cache")
    parser.add_argument("--limit-gb", type=float, default=4.0,
                        help="RLIMIT_AS of each child in GiB (0: none)")
    parser.add_argument("--out", type=Path, help="also write the markdown report here")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.path, args.k, args.limit_gb)))
        return ""
    if args.quick:
        args.rows, args.cols = 100_000, 200

    expected = 128 + args.rows * args.cols * 2
    reuse = args.keep and args.path.exists() and abs(args.path.stat().st_size - expected) < 4096
    gen_seconds = 0.0 if reuse else write_matrix(args.path, args.rows, args.cols, args.seed)
    gen_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = args.path.stat().st_size
    print(f"matrix: {size / 1e9:.2f} GB, written in {gen_seconds:.1f} s", file=sys.stderr)
    try:
        cold = not args.no_cold and drop_page_cache()
        disk_bw = file_read_bandwidth(args.path) if cold else float("nan")
        cache_bw = max(file_read_bandwidth(args.path) for _ in range(3))
        mem_bw = memory_read_bandwidth()
        runs: dict[tuple[str, str], dict[str, Any]] = {}
        for method in METHODS:
            for state in ("cold", "warm") if cold else ("warm",):
                if state == "cold":
                    drop_page_cache()
                runs[method, state] = run_child(method, args.path, args.k, args.limit_gb)
                r = runs[method, state]
                print(f"  {method} {state}: {r['seconds']:.1f} s, "
                      f"maxrss {r['ru_maxrss'] / 2**30:.2f} GiB", file=sys.stderr)
    finally:
        if not args.keep:
            args.path.unlink(missing_ok=True)
    report = render(args, size, gen_seconds, gen_rss, cold, disk_bw, cache_bw, mem_bw, runs)
    print(report)
    if args.out is not None:
        args.out.write_text(report)
    return report


def render(args: argparse.Namespace, size: int, gen_seconds: float, gen_rss: int, cold: bool,
           disk_bw: float, cache_bw: float, mem_bw: float,
           runs: dict[tuple[str, str], dict[str, Any]]) -> str:
    gib = 2**30
    load = os.getloadavg()
    greedy = runs["greedy", "warm"]
    lines = [
        f"### Out-of-core selection: {args.rows:,} x {args.cols:,} float16 ({size / 1e9:.2f} GB "
        f"`.npy`, memory-mapped), k = {args.k}",
        "",
        f"Generation: {gen_seconds:.1f} s, peak RSS of the writer {gen_rss / gib:.2f} GiB. "
        f"Read bandwidth: disk (cold `readinto`, 64 MB chunks) "
        + (f"{disk_bw / 1e9:.2f} GB/s" if cold else "not measured (page cache not dropped)")
        + f"; page cache (warm `readinto`, best of 3) {cache_bw / 1e9:.2f} GB/s; memory "
        f"(numpy sum of 256 MB float32) {mem_bw / 1e9:.2f} GB/s. Each child ran under "
        f"RLIMIT_AS = {args.limit_gb:g} GiB (address space, the 2 GB mapping included). "
        f"Load average after the runs: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.",
        "",
        "| method | state | time (s) | bytes read (GB, counted) | passes over the file "
        "| floor (s) | time / floor | disk reads (GB) | peak RSS, ru_maxrss (GiB) "
        "| peak anon RSS (GiB) | column evaluations | F(S) | picks = greedy |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for (method, state), r in runs.items():
        read = r["bytes_counted"]
        # Cold: the first pass comes from disk, the rest from the page cache (the file fits in
        # RAM); warm: everything at memory bandwidth.
        floor = (size / disk_bw + max(read - size, 0) / mem_bw) if state == "cold" else (
            read / mem_bw)
        lines.append(
            f"| {method} | {state} | {r['seconds']:.1f} | {read / 1e9:.2f} | {read / size:.2f} "
            f"| {floor:.2f} | {r['seconds'] / floor:.1f}x | {r['disk_read_bytes'] / 1e9:.2f} "
            f"| {r['ru_maxrss'] / gib:.2f} | {r['peak_anon'] / gib:.3f} | {r['n_evaluations']:,} "
            f"| {r['value']:.4f} | {'yes' if r['indices'] == greedy['indices'] else 'no'} |")
    lines += [
        "",
        f"Greedy picks: {greedy['indices']}; lazy greedy picks the same "
        f"({'yes' if runs['lazy', 'warm']['indices'] == greedy['indices'] else 'NO'}); "
        f"stochastic greedy (epsilon = 0.1, seed 0) reaches "
        f"{runs['stochastic', 'warm']['value'] / greedy['value']:.4f} of greedy's F.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
