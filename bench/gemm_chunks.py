"""What splitting a product into row chunks costs: the chunk size behind
`msir.lowering.blas.GEMM_MIN_CHUNK_ROWS`.

    python bench/gemm_chunks.py [--reps 7]

Each chunk of a split product is a gemm call of its own, which packs the shared
operand again. This times, single-threaded, NumPy's matmul (OpenBLAS, the same
kernels as scipy-openblas32) on r-row pieces of A against the whole product, in
CPU time (`time.process_time`: on a loaded machine it leaves out the time other
processes held the core), best of `reps`, and prints each r's time over the
whole product's. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed and OpenBLAS
is single-threaded before NumPy loads it.
"""

from __future__ import annotations

import argparse
import os

for _k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_k, None)
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import time  # noqa: E402

import numpy as np  # noqa: E402

SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (256, 784, 512)]
PIECES = (64, 128, 256, 512)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"r-row pieces over the whole product, CPU time, best of {a.reps} (load {os.getloadavg()[0]:.1f})")
    for m, k, n in SHAPES:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((k, n), dtype=np.float32)
        c = np.empty((m, n), np.float32)
        sizes = [r for r in PIECES if r < m] + [m]
        best = {r: float("inf") for r in sizes}
        for _ in range(a.reps):
            for r in sizes:
                t = time.process_time()
                for lo in range(0, m, r):
                    np.matmul(x[lo:lo + r], w, out=c[lo:lo + r])
                best[r] = min(best[r], time.process_time() - t)
        whole = best[m]
        cells = "  ".join(f"{r}: {best[r] / whole:.3f}" for r in sizes[:-1])
        print(f"  {m}x{k}x{n}: {cells}   (whole: {2 * m * k * n / whole / 1e9:.0f} GFLOP/s)")


if __name__ == "__main__":
    main()
