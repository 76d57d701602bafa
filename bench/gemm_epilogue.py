"""Matmul epilogues fused into the GEMM against the same code unfused, in one process.

    python bench/gemm_epilogue.py [--threads 2] [--rounds 21] [--only dense,W5-b256]

Each case is one msir function compiled twice: with the bias/activation epilogue
run on each chunk of C's rows right after the chunk's gemm (`msir.lowering.blas`,
"Epilogues"; the default) and with it off (`blas.fuse_epilogues = False`, what
`MSIR_GEMM_EPILOGUE=0` does: the product in a buffer of its own, the epilogue a
second pass). Both stay in msir.jit's in-memory cache, which keys on that switch,
and the switch is set before every call, so the two alternate within each round
(A B, then B A in the next round). Printed per case: the median time of each, the
median over rounds of unfused / fused (> 1: fusing is faster) with its spread
(min-max over rounds), the ratio of the two fastest runs, the same ratio of the
process's CPU time (`time.process_time`: on a loaded machine it leaves out the
time other processes held the core, so at 1 thread it is the steadier figure;
at 2 threads it includes the pool's spinning), and checks that the fused path ran
(`blas.fused_epilogues()`) and that both give the same bits. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are
removed before the BLAS loads, as in bench/run.py.

Cases: `dense` relu(x @ w + b) 1024^3 f32 (the harness's W4-1024-relu), `dense-k64`
the same with k = 64 and a 4096x2048 C (little arithmetic per element of C, C larger
than the L3 cache: where a second pass over C costs most), and the W5 training
steps of bench/workloads.py (`W5-b256`, `W5-b128`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

for _k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_k, None)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads as W  # noqa: E402


def _cases(quick: bool):
    import msir

    yield "dense", "relu(x @ w + b) 1024^3 f32", msir.jit(W.dense_relu_numpy), W.REGISTRY["W4-1024-relu"]
    yield "dense-k64", "relu(x @ w + b) 4096x64 @ 64x2048 f32 (C 32 MiB, beyond L3)", \
        msir.jit(W.dense_relu_numpy), _Inputs(lambda quick, rng: (
            rng.standard_normal((512 if quick else 4096, 64), dtype=np.float32),
            rng.standard_normal((64, 256 if quick else 2048), dtype=np.float32),
            rng.standard_normal(256 if quick else 2048, dtype=np.float32)))
    for name in ("W5-b256", "W5-b128"):
        w = W.REGISTRY[name]
        yield name, w.desc.split(";")[0], w.impls["msir"]({"msir": msir}), w


class _Inputs:
    """A case's inputs, as a workload's `make_inputs(quick, rng)`."""

    def __init__(self, make):
        self.make_inputs = make


def _outputs(out) -> list[np.ndarray]:
    outs = getattr(out, "outs", None)
    return [np.asarray(o) for o in (outs if outs is not None else (out,))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--only", default="")
    p.add_argument("--quick", action="store_true", help="small sizes, 5 rounds (smoke run)")
    a = p.parse_args()
    import msir
    from msir.lowering import blas

    msir.set_num_threads(a.threads)
    rounds = 5 if a.quick else a.rounds
    only = {s for s in a.only.split(",") if s}
    print(f"matmul epilogues, fused vs unfused, {a.threads} thread(s), {rounds} alternating rounds, "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, desc, fn, w in _cases(a.quick):
        if only and name not in only:
            continue
        args = w.make_inputs(a.quick, np.random.default_rng(0))
        res, ran = {}, {}
        for fuse in (True, False):  # compile both, check both
            blas.fuse_epilogues = fuse
            before = blas.fused_epilogues()
            res[fuse] = _outputs(fn(*args))
            ran[fuse] = blas.fused_epilogues() - before
        same = all(x.tobytes() == y.tobytes() for x, y in zip(res[True], res[False]))
        times: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        ratios, cpu_ratios = [], []
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            t, c = {}, {}
            for fuse in order:
                blas.fuse_epilogues = fuse
                c0, t0 = time.process_time(), time.perf_counter()
                _outputs(fn(*args))
                t[fuse], c[fuse] = time.perf_counter() - t0, time.process_time() - c0
                times[fuse].append(t[fuse])
                cpu[fuse].append(c[fuse])
            ratios.append(t[False] / t[True])
            cpu_ratios.append(c[False] / max(c[True], 1e-9))
        blas.fuse_epilogues = True
        print(f"  {name:8s} {desc}")
        print(f"           fused {statistics.median(times[True]) * 1e3:8.3f} ms   unfused "
              f"{statistics.median(times[False]) * 1e3:8.3f} ms   unfused/fused median "
              f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}), "
              f"of the fastest runs {min(times[False]) / min(times[True]):.3f}")
        print(f"           CPU time unfused/fused median {statistics.median(cpu_ratios):.3f} "
              f"(min {min(cpu_ratios):.3f}, max {max(cpu_ratios):.3f}), of the least "
              f"{min(cpu[False]) / max(min(cpu[True]), 1e-9):.3f}; epilogues run per chunk: {ran[True]} fused, "
              f"{ran[False]} unfused; same bits: {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
