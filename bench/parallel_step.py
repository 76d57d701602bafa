"""The emulated data-parallel training step of the W5 MLP (784-256-10,
batch 128, one SGD step of softmax cross-entropy) on 2 devices against the
single-device step, as a ratio (issue 12 target: <= 1.3x), and what the
emulated step's time goes to: the devices' native segments, the collectives,
and the rest (splitting the arguments by their layouts, assembling results).

    python bench/parallel_step.py [--reps 50] [--repeats 9] [--devices 2] [--threads 1]

Both run in this process; the emulated devices run one after another, so the
ideal ratio is ~1.0 (the same FLOPs, cut in two) plus the collectives and the
runtime's own work. The two are timed in interleaved blocks (`--repeats`
blocks each of `--reps` calls, the median call of each block), so a change in
the machine's load falls on both; the ratio printed is the median of the
blocks' ratios with their spread. The split of the emulated step is measured
in a separate block (each part's median over its calls), as its wrappers
cost time too. `--threads 1` (the
default) keeps msir's kernels on one thread, as a loaded machine makes
threaded kernels wait on each other far longer than they compute.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import msir  # noqa: E402
from workloads import W5_LR, w5_loss2  # noqa: E402


def step(w1, b1, w2, b2, x, onehot):
    loss, (g1, gb1, g2, gb2) = msir.value_and_grad(w5_loss2, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, onehot)
    return w1 - W5_LR * g1, b1 - W5_LR * gb1, w2 - W5_LR * g2, b2 - W5_LR * gb2, loss


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    sizes, batch = (784, 256, 10), 128
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32))
        params.append((0.01 * rng.standard_normal(n_out)).astype(np.float32))
    x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
    onehot = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    return (*params, x, onehot)


def _median_call(fn, reps: int) -> float:
    """The median time of `reps` calls of `fn` (after one untimed call)."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _instrument(program):
    """Accumulate the time of the program's native segments and collectives (the rest is the runtime's):
    wraps them in place; returns the running totals and a function undoing it."""
    spent = {"segments": 0.0, "collectives": 0.0}

    def timed(fn, key):
        def call(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key] += time.perf_counter() - start
        return call

    native, collective = program.native, program.collective
    program.native = {name: timed(fn, "segments") for name, fn in native.items()}
    program.collective = timed(collective, "collectives")

    def undo():
        program.native = native
        del program.collective  # the class's method again

    return spent, undo


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.3f} ms median [{min(xs) * 1e3:.3f}, {max(xs) * 1e3:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50, help="calls per timed block")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved single-device / emulated blocks")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    msir.set_num_threads(args.threads)
    inputs = _inputs()
    serial, sharded = msir.jit(step), msir.jit(step)
    want = serial(*inputs)

    def emulated():
        msir.set_auto_parallel_context(parallel_mode="data_parallel", device_num=args.devices)
        return sharded(*inputs)

    try:
        got = emulated()
        program = next(iter(sharded._plans.values()))._emulated()
        single_s, emulated_s = [], []
        for _ in range(args.repeats):  # interleaved, so that the machine's load falls on both alike
            msir.reset_auto_parallel_context()
            single_s.append(_median_call(lambda: serial(*inputs), args.reps))
            msir.set_auto_parallel_context(parallel_mode="data_parallel", device_num=args.devices)
            emulated_s.append(_median_call(lambda: sharded(*inputs), args.reps))
        # where the emulated step's time goes: a separate instrumented block (the wrappers cost time too),
        # the median of each part over its calls
        spent, undo = _instrument(program)
        split = {"total": [], "segments": [], "collectives": []}
        for _ in range(max(args.reps, 20)):
            spent["segments"] = spent["collectives"] = 0.0
            start = time.perf_counter()
            sharded(*inputs)
            split["total"].append(time.perf_counter() - start)
            split["segments"].append(spent["segments"])
            split["collectives"].append(spent["collectives"])
        undo()
    finally:
        msir.reset_auto_parallel_context()

    worst = max(float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) for a, b in zip(got, want))
    ratios = [e / s for e, s in zip(emulated_s, single_s)]
    total, seg, coll = (statistics.median(split[k]) for k in ("total", "segments", "collectives"))
    rest = statistics.median(t - a - b for t, a, b in zip(split["total"], split["segments"], split["collectives"]))
    n_segments = len([s for s in program.steps if hasattr(s, "ops")])
    print(f"W5 MLP (784-256-10, batch 128) SGD step, data parallel on {args.devices} emulated devices, "
          f"{args.threads} thread(s); {args.repeats} interleaved repeats of {args.reps} calls")
    print(f"  single device          {_ms(single_s)}")
    print(f"  emulated, {args.devices} devices    {_ms(emulated_s)}")
    print(f"  ratio                  {statistics.median(ratios):.3f}x median [{min(ratios):.3f}, {max(ratios):.3f}] "
          f"(target <= 1.3x)")
    print(f"  instrumented emulated step {total * 1e3:.3f} ms (medians per call):")
    print(f"    native segments      {seg * 1e3:8.3f} ms ({n_segments} per device)")
    print(f"    collectives          {coll * 1e3:8.3f} ms")
    print(f"    runtime (split, assemble, dispatch) {rest * 1e3:8.3f} ms")
    print(f"  max relative difference from the single-device step: {worst:.2e}")


if __name__ == "__main__":
    main()
