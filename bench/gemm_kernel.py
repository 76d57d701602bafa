"""msir's own float32 GEMM against OpenBLAS, side by side: GFLOP/s and % of the FMA peak.

    python bench/gemm_kernel.py [--rounds 5] [--threads 1,2] [--shapes 512,1024,2048,256x784x512]

Three variants of `C = A @ B` (float32, row-major; a shape is n for n^3 or m x k x n), each in its own
process per thread count (thread environment and CPU affinity set before
anything loads, as `bench/run.py` does), in alternating rounds:

* `msir`: a jitted `a @ b` with `MSIR_GEMM=msir`, msir's packed GEMM
  (`msir.lowering.gemm_kernel`) on msir's pool;
* `msir-openblas`: the same function with `MSIR_GEMM=openblas`, OpenBLAS
  single-threaded per chunk of msir's pool (`msir.lowering.blas`);
* `numpy`: `np.matmul(a, b, out=c)`, NumPy's OpenBLAS with its own threads.

Each cell is the median over rounds of the process's median of repeated calls
(after warm-up); the FMA peak is `bench/fma_peak.py`'s best single-thread figure
times the thread count, measured in the same run. OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are removed (see bench/run.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

VARIANTS = ("msir", "msir-openblas", "numpy")


def _dims(shape: str) -> tuple[int, int, int]:
    """(m, k, n) of "n" (a cube) or "mxkxn"."""
    parts = [int(x) for x in shape.split("x")]
    return (parts[0],) * 3 if len(parts) == 1 else tuple(parts)  # type: ignore[return-value]


def worker(variant: str, sizes: list[str], calls: int) -> dict[str, float]:
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}
    if variant == "numpy":
        def make(a, b):
            c = np.empty((a.shape[0], b.shape[1]), np.float32)
            return lambda: np.matmul(a, b, out=c)
    else:
        import msir

        def mm(a, b):
            return a @ b

        def make(a, b):
            f = msir.jit(mm)
            return lambda: f(a, b)
    for s in sizes:
        m, k, n = _dims(s)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        run = make(a, b)
        for _ in range(3):
            run()
        flops = 2 * m * k * n
        reps = max(3, int(calls * 2 * 1024 ** 3 / flops)) if flops < 2 * 1024 ** 3 else calls
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        out[s] = flops / statistics.median(times) / 1e9
    if variant != "numpy":
        from msir.lowering import blas

        out["kernel"] = blas.sgemm_kernel()
    return out


def _run_worker(variant: str, threads: int, sizes: list[int], calls: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MSIR_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env["MSIR_GEMM"] = "openblas" if variant == "msir-openblas" else "msir"
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    code = (f"import os, json, sys; os.sched_setaffinity(0, {cpus!r}); sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import gemm_kernel; print(json.dumps(gemm_kernel.worker({variant!r}, {sizes!r}, {calls})))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} {threads}T failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--shapes", default="512,1024,2048")
    p.add_argument("--calls", type=int, default=20, help="timed calls at 1024^3 (scaled for other sizes)")
    a = p.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    sizes = a.shapes.split(",")
    sys.path.insert(0, os.path.dirname(__file__))
    import fma_peak

    peaks = {t: fma_peak.measure(t)["gflop_s_best"] for t in sorted({1, *threads})}
    peak1 = peaks[1]
    cells: dict[tuple[str, int], list[dict]] = {}
    kernel = {}
    for r in range(a.rounds):
        for t in threads:
            for v in VARIANTS:
                res = _run_worker(v, t, sizes, a.calls)
                kernel[v] = res.pop("kernel", "numpy's OpenBLAS")
                cells.setdefault((v, t), []).append(res)
        print(f"round {r + 1}/{a.rounds} done (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
    print(f"FMA peak: 1 thread {peak1:.1f} GFLOP/s (x threads is the % base); measured at once: "
          + ", ".join(f"{t} threads {g:.1f}" for t, g in peaks.items()))
    print("kernels: "
          + "; ".join(f"{v}: {kernel[v]}" for v in VARIANTS))
    print(f"median of {a.rounds} rounds, GFLOP/s [min-max] (% of FMA peak x threads)")
    print("| size | threads | " + " | ".join(VARIANTS) + " | msir / msir-openblas | msir / numpy |")
    print("| --- " * (4 + len(VARIANTS)) + "|")
    for s in sizes:
        for t in threads:
            row = []
            med = {}
            for v in VARIANTS:
                xs = [c[s] for c in cells[(v, t)]]
                med[v] = statistics.median(xs)
                row.append(f"{med[v]:.0f} [{min(xs):.0f}-{max(xs):.0f}] ({100 * med[v] / (peak1 * t):.0f}%)")
            ratios = [statistics.median(c1[s] / c2[s] for c1, c2 in zip(cells[("msir", t)], cells[(o, t)]))
                      for o in ("msir-openblas", "numpy")]
            label = f"{s}^3" if "x" not in s else s
            print(f"| {label} | {t} | " + " | ".join(row) + f" | {ratios[0]:.2f} | {ratios[1]:.2f} |")


if __name__ == "__main__":
    main()
