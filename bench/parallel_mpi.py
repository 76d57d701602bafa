"""A data-parallel training step on MPI ranks, its all-reduce share, and the
machine's measured MPI all-reduce cost (issue 12's MPI target).

    python bench/parallel_mpi.py [--ranks 2] [--steps 10] [--json out.json]

Run without a launcher, the script times W5's SGD step (MLP 784-512-512-10,
batch 256, ReLU, softmax cross-entropy, float32) in this one process, then
launches itself on `--ranks` ranks (`msir.parallel.launch`). Each rank runs
the data-parallel step: the compiled `msir.value_and_grad` of the loss on its
1/N of the batch, one MPI all-reduce (sum) per gradient (what `msir-shard`
emits as a data-parallel step's gradient sync), the mean and the update. It
reports the step's median wall time, the all-reduce share of it, and an
all-reduce sweep (8 B to 16 MiB) priced as the cost model prices it
(`alpha + 2(n-1)/n * s / B`): the 8-byte latency is `alpha`, and the bus
bandwidth B of the large messages is the `bandwidth` a `CostModel` for this
machine takes. The ranks' new parameters must equal the single-process
step's (|a - b| <= 1e-5 |b| + 1e-5 max|b|).

The data-parallel step is written by hand around `Plan`-free msir.jit code:
plans of whole training steps (backward sharding) are another step of issue
12; once they land, the step here should be `plan.run` of the planned step.
Timings on a shared 2-core machine are rough.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads as W  # noqa: E402

import msir  # noqa: E402
from msir.parallel import get_group_size, get_rank, launch  # noqa: E402

SIZES, BATCH = (784, 512, 512, 10), 256
SWEEP_BYTES = (8, 64 << 10, 1 << 20, 16 << 20)
LR = 0.01


def grads3(w1, b1, w2, b2, w3, b3, x, onehot):
    return msir.value_and_grad(W.w5_loss3, argnums=(0, 1, 2, 3, 4, 5))(w1, b1, w2, b2, w3, b3, x, onehot)


def step3(w1, b1, w2, b2, w3, b3, x, onehot):
    loss, grads = grads3(w1, b1, w2, b2, w3, b3, x, onehot)
    return (*[p - LR * g for p, g in zip((w1, b1, w2, b2, w3, b3), grads)], loss)


def inputs():
    return W._w5_inputs(SIZES, BATCH, SIZES, BATCH)(False, np.random.default_rng(0))


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- one rank ------------------------------------------------------------------------------


def rank_main(steps: int, out: Path) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, n = get_rank(), get_group_size()
    *params, x, onehot = inputs()
    rows = slice(rank * BATCH // n, (rank + 1) * BATCH // n)
    x, onehot = x[rows], onehot[rows]
    grad_fn = msir.jit(grads3)
    grad_fn(*params, x, onehot)  # compile
    summed = [np.empty_like(p) for p in params]
    step_times, reduce_times = [], []
    first = None
    for _ in range(steps):
        comm.Barrier()
        start = time.perf_counter()
        loss, grads = grad_fn(*params, x, onehot)
        reduce_start = time.perf_counter()
        for g, s in zip(grads, summed):
            comm.Allreduce(np.ascontiguousarray(g), s, op=MPI.SUM)
        reduce_end = time.perf_counter()
        # every rank's loss and gradient are means over its 1/n of the batch: the global mean is their mean
        new = [p - np.float32(LR) * (s / np.float32(n)) for p, s in zip(params, summed)]
        step_times.append(time.perf_counter() - start)
        reduce_times.append(reduce_end - reduce_start)
        if first is None:  # every step starts from the same parameters: the first is compared
            total = np.empty((), np.float32)
            comm.Allreduce(np.asarray(loss, np.float32), total, op=MPI.SUM)
            first = (*new, total / np.float32(n))
    sweep = {}
    for size in SWEEP_BYTES:
        a = np.ones(size // 4, np.float32)
        b = np.empty_like(a)
        repeats = 50 if size <= 1 << 20 else 5
        comm.Barrier()
        sweep[size] = _median_time(lambda: comm.Allreduce(a, b, op=MPI.SUM), repeats)
    if rank == 0:
        np.savez(out / "step.npz", *first)
        (out / "timings.json").write_text(json.dumps({
            "ranks": n, "threads": msir.get_num_threads(), "step_s": statistics.median(step_times),
            "allreduce_s": statistics.median(reduce_times),
            "gradient_bytes": int(sum(p.nbytes for p in params)), "sweep_s": sweep}))


# -- the launching process -----------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("--rank-out", help=argparse.SUPPRESS)  # set when the script runs as a rank
    options = parser.parse_args()
    if options.rank_out:
        rank_main(options.steps, Path(options.rank_out))
        return

    args = inputs()
    step = msir.jit(step3)
    want = step(*args)
    cores = msir.get_num_threads()
    single = {}  # threads -> the one-process step's time: with all cores, and with one (what each rank gets)
    for threads in dict.fromkeys((cores, 1)):
        msir.set_num_threads(threads)
        single[threads] = _median_time(lambda: step(*args), options.steps)
    msir.set_num_threads(cores)
    with tempfile.TemporaryDirectory() as tmp:
        launch(__file__, options.ranks, ["--steps", str(options.steps), "--rank-out", tmp], timeout=300)
        got = list(np.load(Path(tmp) / "step.npz").values())
        t = json.loads((Path(tmp) / "timings.json").read_text())
    for name, g, w in zip(("w1", "b1", "w2", "b2", "w3", "b3", "loss"), got, want):
        bound = 1e-5 * np.abs(w) + 1e-5 * np.abs(w).max()
        if not np.all(np.abs(g - w) <= bound):
            raise SystemExit(f"the {options.ranks}-rank step's {name} differs from the single-process step's: "
                             f"max |a - b| = {np.abs(g - w).max():.3g}")
    n = t["ranks"]
    sweep = {int(k): v for k, v in t["sweep_s"].items()}
    alpha = sweep[min(sweep)]
    bus = {s: 2 * (n - 1) / n * s / v for s, v in sweep.items()}
    print(f"W5 SGD step, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32 (rough: a shared 2-core machine)")
    for threads, v in single.items():
        print(f"  one process, {threads} thread(s):               {v * 1e3:8.3f} ms")
    print(f"  {n} ranks, data parallel, {t['threads']} thread(s) each: {t['step_s'] * 1e3:8.3f} ms "
          f"({t['step_s'] / single[cores]:.2f}x the one-process step on {cores} thread(s)); results equal the "
          f"one-process step's")
    print(f"  gradient all-reduce:                    {t['allreduce_s'] * 1e3:8.3f} ms "
          f"({100 * t['allreduce_s'] / t['step_s']:.1f}% of the step; {t['gradient_bytes'] / 2**20:.2f} MiB in 6 "
          f"all-reduces, {2 * (n - 1) / n * t['gradient_bytes'] / t['allreduce_s'] / 1e9:.2f} GB/s bus)")
    print(f"MPI all-reduce on {n} ranks (cost model: alpha + 2(n-1)/n * s / B):")
    for s, v in sweep.items():
        print(f"  {s:>10} B  {v * 1e6:10.1f} us   bus bandwidth {bus[s] / 1e9:7.2f} GB/s")
    print(f"  => CostModel(alpha=[{alpha:.3g}], bandwidth=[{bus[max(bus)]:.3g}]) for this machine")
    if options.json:
        Path(options.json).write_text(json.dumps({"single_step_s": single, **t, "alpha_s": alpha,
                                                  "bandwidth_Bps": bus[max(bus)]}, indent=2))


if __name__ == "__main__":
    main()
