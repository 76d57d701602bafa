"""W5's data-parallel training step on MPI ranks, its all-reduce share as
the runtime measures it, and the machine's measured MPI all-reduce cost
(issue 12's MPI target).

    python bench/parallel_mpi.py [--ranks 2] [--steps 10] [--json out.json]

Run without a launcher, the script times W5's SGD step (MLP 784-512-512-10,
batch 256, ReLU, softmax cross-entropy, float32) in this one process, then
launches itself on `--ranks` ranks (`msir.parallel.launch`). Each rank runs
the same step the way README's user does: `msir.set_auto_parallel_context(
parallel_mode="data_parallel", device_num=ranks)` and the `msir.jit` step,
which runs its plan (`plan.run`): the batch split over a mesh of the rank
count, the parameters replicated, each gradient (and the loss) synced by the
`all_reduce` `msir-shard` put in the per-device step, through MPI. Every
rank passes the global arguments and gets the global new parameters. The
step's all-reduce share is the runtime's own profile of each call
(`msir.parallel.last_profile()`: native segments, collectives, the rest);
a collective's time includes waiting for the slower rank. For comparison
the ranks also run, interleaved with it, the step written by hand around
`msir.jit` (the gradient of the loss on the rank's rows, one `Allreduce` per
gradient, the mean and the update in NumPy).

Then an all-reduce sweep (8 B to 16 MiB) priced as the cost model prices it
(`alpha + 2(n-1)/n * s / B`): the 8-byte latency is `alpha`, and the bus
bandwidth B of the large messages is the `bandwidth` a `CostModel` for this
machine takes; with them the model's price of the planned step's collectives
is set beside their measured time, and beside the same gradients'
Allreduces run back to back with no compute between. The ranks' new
parameters and loss must equal the single-process step's (|a - b| <= 1e-5
|b| + 1e-5 max|b|) and be the same on every rank; the hand-written step's
must equal them too. Timings on a shared 2-core machine are rough: the
step times are medians over `--steps` calls (spread in brackets).
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
    # value_and_grad in the step itself: the planner does not see through calls of other functions (func.call)
    loss, grads = msir.value_and_grad(W.w5_loss3, argnums=(0, 1, 2, 3, 4, 5))(w1, b1, w2, b2, w3, b3, x, onehot)
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


def _hand_step(grad_fn, params, x, onehot, comm, n):
    """The data-parallel step written by hand: this rank's gradient, an Allreduce per gradient, mean, update.
    Returns the new parameters, the loss and the seconds spent in the Allreduces."""
    from mpi4py import MPI

    loss, grads = grad_fn(*params, x, onehot)
    start = time.perf_counter()
    summed = [np.empty_like(p) for p in params]
    for g, s in zip(grads, summed):
        comm.Allreduce(np.ascontiguousarray(g), s, op=MPI.SUM)
    reduce_s = time.perf_counter() - start
    # every rank's loss and gradient are means over its 1/n of the batch: the global mean is their mean
    return [p - np.float32(LR) * (s / np.float32(n)) for p, s in zip(params, summed)], loss, reduce_s


def rank_main(steps: int, out: Path) -> None:
    from mpi4py import MPI

    from msir.parallel import last_profile

    comm = MPI.COMM_WORLD
    rank, n = get_rank(), get_group_size()
    args = inputs()  # every rank holds the global arguments, as the script does on one process
    *params, x, onehot = args
    rows = slice(rank * BATCH // n, (rank + 1) * BATCH // n)
    planned = msir.jit(step3)
    hand_grads = msir.jit(grads3)
    msir.set_auto_parallel_context(parallel_mode="data_parallel", device_num=n)
    first = planned(*args)  # plans and compiles; every step starts from the same parameters: the first is compared
    msir.reset_auto_parallel_context()
    hand_grads(*params, x[rows], onehot[rows])  # compile
    t: dict[str, list[float]] = {k: [] for k in ("step_s", "total_s", "segments_s", "collectives_s", "other_s",
                                                 "hand_step_s", "hand_allreduce_s")}
    for _ in range(steps):  # interleaved, so that the machine's load falls on both alike
        msir.set_auto_parallel_context(parallel_mode="data_parallel", device_num=n)
        comm.Barrier()
        start = time.perf_counter()
        planned(*args)
        t["step_s"].append(time.perf_counter() - start)
        profile = last_profile()
        for k in ("total_s", "segments_s", "collectives_s", "other_s"):
            t[k].append(getattr(profile, k))
        msir.reset_auto_parallel_context()
        comm.Barrier()
        start = time.perf_counter()
        new, loss, reduce_s = _hand_step(hand_grads, params, x[rows], onehot[rows], comm, n)
        t["hand_step_s"].append(time.perf_counter() - start)
        t["hand_allreduce_s"].append(reduce_s)
        if len(t["hand_step_s"]) == 1:  # the same step: the hand-written one's parameters equal the planned one's
            for g, w in zip(new, first):
                if not np.all(np.abs(g - w) <= 1e-5 * np.abs(w) + 1e-5 * np.abs(w).max()):
                    raise SystemExit(f"the hand-written step differs from the planned one: max |a - b| = "
                                     f"{np.abs(g - w).max():.3g}")
    same = comm.gather(all(np.array_equal(a, b) for a, b in zip(first, comm.bcast(first, root=0))), root=0)
    timings = comm.gather(t, root=0)
    sweep = {}
    for size in SWEEP_BYTES:
        a = np.ones(size // 4, np.float32)
        b = np.empty_like(a)
        repeats = 50 if size <= 1 << 20 else 5
        comm.Barrier()
        sweep[size] = _median_time(lambda: comm.Allreduce(a, b, op=MPI.SUM), repeats)
    # the step's gradient messages all-reduced back to back, with no compute between: the bandwidth they get alone
    grads = [np.ones_like(p) for p in params]
    sums = [np.empty_like(p) for p in params]

    def reduce_all():
        for g, s in zip(grads, sums):
            comm.Allreduce(g, s, op=MPI.SUM)

    comm.Barrier()
    alone = _median_time(reduce_all, 2 * steps)
    if rank == 0:
        np.savez(out / "step.npz", *first)
        (out / "timings.json").write_text(json.dumps({
            "ranks": n, "threads": msir.get_num_threads(), "same_on_every_rank": all(same),
            "collective_calls": profile.collective_calls, "collective_bytes": profile.collective_bytes,
            "per_rank": timings, "gradient_bytes": int(sum(p.nbytes for p in params)), "gradients_alone_s": alone,
            "sweep_s": sweep}))


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
    if not t["same_on_every_rank"]:
        raise SystemExit(f"the {options.ranks} ranks returned different results")
    n, per_rank = t["ranks"], t["per_rank"]
    sweep = {int(k): v for k, v in t["sweep_s"].items()}
    alpha = sweep[min(sweep)]
    bus = {s: 2 * (n - 1) / n * s / v for s, v in sweep.items()}
    med = {k: statistics.median(v) for k, v in per_rank[0].items()}  # rank 0's medians
    calls, nbytes = t["collective_calls"], t["collective_bytes"]
    priced = calls * alpha + 2 * (n - 1) / n * nbytes / bus[max(bus)]
    ratios = [a / b for a, b in zip(per_rank[0]["step_s"], per_rank[0]["hand_step_s"])]
    print(f"W5 SGD step, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32 (rough: a shared 2-core machine)")
    for threads, v in single.items():
        print(f"  one process, {threads} thread(s):  {v * 1e3:8.3f} ms")
    print(f"  {n} ranks, {t['threads']} thread(s) each, the planned data-parallel step "
          f"(set_auto_parallel_context + msir.jit): {_ms(per_rank[0]['step_s'])}, "
          f"{med['step_s'] / single[cores]:.2f}x the one-process step on {cores} thread(s); "
          f"results equal the one-process step's, the same on every rank")
    print(f"    the runtime's profile (medians per call): {calls} collectives, {nbytes / 2**20:.2f} MiB per rank")
    for r, times in enumerate(per_rank):
        m = {k: statistics.median(v) for k, v in times.items()}
        print(f"    rank {r}: run {m['total_s'] * 1e3:8.3f} ms = native segments {m['segments_s'] * 1e3:8.3f} + "
              f"collectives {m['collectives_s'] * 1e3:8.3f} ({100 * m['collectives_s'] / m['total_s']:.1f}%) + "
              f"rest {m['other_s'] * 1e3:.3f}")
    print(f"    collectives at {2 * (n - 1) / n * nbytes / med['collectives_s'] / 1e9:.2f} GB/s bus; the cost model "
          f"with the constants below prices them at {priced * 1e3:.3f} ms; the 6 gradients' Allreduces alone, "
          f"back to back: {t['gradients_alone_s'] * 1e3:.3f} ms")
    print(f"  the step written by hand around msir.jit: {_ms(per_rank[0]['hand_step_s'])}, its 6 Allreduces "
          f"{med['hand_allreduce_s'] * 1e3:.3f} ms ({100 * med['hand_allreduce_s'] / med['hand_step_s']:.1f}%); "
          f"planned / by hand {statistics.median(ratios):.2f}x median [{min(ratios):.2f}, {max(ratios):.2f}]")
    print(f"MPI all-reduce on {n} ranks (cost model: alpha + 2(n-1)/n * s / B):")
    for s, v in sweep.items():
        print(f"  {s:>10} B  {v * 1e6:10.1f} us   bus bandwidth {bus[s] / 1e9:7.2f} GB/s")
    print(f"  => CostModel(alpha=[{alpha:.3g}], bandwidth=[{bus[max(bus)]:.3g}]) for this machine")
    if options.json:
        Path(options.json).write_text(json.dumps({"single_step_s": single, **t, "alpha_s": alpha,
                                                  "bandwidth_Bps": bus[max(bus)],
                                                  "priced_collectives_s": priced}, indent=2))


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.3f} ms median [{min(xs) * 1e3:.3f}, {max(xs) * 1e3:.3f}]"


if __name__ == "__main__":
    main()
