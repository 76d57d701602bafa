"""The emulated data-parallel training step of the W5 MLP (784-256-10,
batch 128, one SGD step of softmax cross-entropy) on 2 devices against the
single-device step, as a ratio (issue 12 target: <= 1.3x), and what the
emulated step's time goes to: the devices' native segments, the collectives,
and the rest (splitting the arguments by their layouts, assembling results).

    python bench/parallel_step.py [--reps 50] [--devices 2] [--threads 1]

Both run in this process; the emulated devices run one after another, so the
ideal ratio is ~1.0 (the same FLOPs, cut in two) plus the collectives and the
runtime's own work. Timings on a shared machine are rough; `--threads 1`
(the default) keeps msir's kernels on one thread, as a loaded machine makes
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


def _times(fn, reps: int) -> tuple[float, float]:
    """The median and the minimum of `reps` calls (the minimum is the steadier figure on a shared machine)."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def _instrument(program):
    """Accumulate the time of the program's native segments and collectives (the rest is the runtime's)."""
    spent = {"segments": 0.0, "collectives": 0.0}

    def timed(fn, key):
        def call(*a):
            start = time.perf_counter()
            try:
                return fn(*a)
            finally:
                spent[key] += time.perf_counter() - start
        return call

    program.native = {name: timed(fn, "segments") for name, fn in program.native.items()}
    program._collective = timed(program._collective, "collectives")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    msir.set_num_threads(args.threads)
    inputs = _inputs()
    serial = msir.jit(step)
    serial_s, serial_min = _times(lambda: serial(*inputs), args.reps)
    want = serial(*inputs)

    msir.set_auto_parallel_context(parallel_mode="data_parallel", device_num=args.devices)
    sharded = msir.jit(step)
    got = sharded(*inputs)
    worst = max(float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) for a, b in zip(got, want))
    program = next(iter(sharded._plans.values()))._emulated()
    spent = _instrument(program)
    start = time.perf_counter()
    sharded_s, sharded_min = _times(lambda: sharded(*inputs), args.reps)
    total = time.perf_counter() - start
    msir.reset_auto_parallel_context()

    calls = args.reps + 1
    seg, coll = spent["segments"] / calls, spent["collectives"] / calls
    print(f"W5 MLP (784-256-10, batch 128) SGD step, data parallel on {args.devices} emulated devices, "
          f"{args.threads} thread(s)")
    print(f"  single device          {serial_s * 1e3:8.3f} ms median, {serial_min * 1e3:.3f} ms min")
    print(f"  emulated, {args.devices} devices    {sharded_s * 1e3:8.3f} ms median, {sharded_min * 1e3:.3f} ms min; "
          f"ratio {sharded_s / serial_s:.2f}x median, {sharded_min / serial_min:.2f}x min (target <= 1.3x)")
    print(f"    native segments      {seg * 1e3:8.3f} ms per step ({len([s for s in program.steps if hasattr(s, 'ops')])}"
          f" per device)")
    print(f"    collectives          {coll * 1e3:8.3f} ms")
    print(f"    runtime (split, assemble, dispatch) {total / calls * 1e3 - seg * 1e3 - coll * 1e3:8.3f} ms")
    print(f"  max relative difference from the single-device step: {worst:.2e}")


if __name__ == "__main__":
    main()
