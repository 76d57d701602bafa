"""Load for `bench/run.py --contention`: what else runs on a user's machine.

    python bench/neighbour.py --busy CPU         one process spinning on CPU (pinned)
    python bench/neighbour.py --threads N        a multi-threaded ML-like job: N threads
                                                 of back-to-back NumPy float32 matmuls

Runs until killed. The matmul threads each use a single-threaded BLAS (set
before NumPy is imported) so the job keeps exactly N runnable threads, like a
framework's intra-op pool under a steady stream of kernels.
"""

from __future__ import annotations

import argparse
import os
import threading


def spin_on(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        pass


def matmul_threads(n: int, size: int) -> None:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"
    import numpy as np

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        c = np.empty_like(a)
        while True:
            np.matmul(a, b, out=c)  # releases the GIL: n threads really run at once

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--busy", type=int, metavar="CPU", help="spin on this CPU")
    g.add_argument("--threads", type=int, metavar="N", help="N threads of NumPy matmuls")
    p.add_argument("--size", type=int, default=256, help="matmul size (default 256: ~34 MFLOP a call)")
    a = p.parse_args()
    if a.busy is not None:
        spin_on(a.busy)
    else:
        matmul_threads(a.threads, a.size)


if __name__ == "__main__":
    main()
