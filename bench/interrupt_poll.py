"""What Ctrl-C polling costs compiled code (issue 16: W1 and W7 within 2% of
their time before the poll existed).

    python bench/interrupt_poll.py [--repeats 3] [--calls 40] [--threads 2]

Every lowered `while` polls `@__msir_interrupted` (`msir.lowering.interrupt`):
once per iteration when an iteration touches arrays, once per 1024 iterations
when it is scalar work. For each workload this script times the function as
msir compiles it ("poll") and as it compiled before polling existed
("no poll": the same pipeline with `to_loops._unless_interrupted` replaced by
the bare condition, which is all the poll added to the IR). Both variants are
compiled in one process (the compile cache off) and called alternately, so a
load that comes and goes on a shared machine falls on both alike; the table
gives the medians over `--repeats` such processes, the ratio poll / no poll
and each process's own ratio. Workloads:

* W1, the elementwise chain of `bench/run.py` (no `while`: no poll at all,
  so its ratio measures the noise of the method);
* W7, the Newton `while` of `bench/run.py` (2^22 f64, 12 iterations over arrays);
* a scalar `while` of 2^24 iterations (integer work, the poll's worst case).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def scalar_loop(n):
    i = 0
    s = 0
    while i < n:
        s = (s * 31 + i) % 1000003
        i = i + 1
    return s


def _workloads():
    import numpy as np
    from workloads import REGISTRY

    rng = np.random.default_rng(0)
    out = {}
    for name in ("W1", "W7"):
        w = REGISTRY[name]
        out[name] = (w.reference, w.make_inputs(False, rng))
    out["scalar while 2^24"] = (scalar_loop, (1 << 24,))
    return out


def _copy(fn):
    """A new function object with `fn`'s code: msir compiles it afresh."""
    import types

    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def worker(name: str, calls: int) -> None:
    os.environ["MSIR_CACHE"] = "0"
    import msir
    from msir.lowering import to_loops

    fn, args = _workloads()[name]
    variants = {"poll": msir.jit(_copy(fn))}
    variants["poll"](*args)  # compiled with the poll
    saved = to_loops._unless_interrupted, to_loops._poll_counter
    to_loops._unless_interrupted = lambda L, cond, counter: cond
    to_loops._poll_counter = lambda L: None
    try:
        variants["no poll"] = msir.jit(_copy(fn))
        variants["no poll"](*args)  # compiled as before the poll existed
    finally:
        to_loops._unless_interrupted, to_loops._poll_counter = saved
    times = {v: [] for v in variants}
    for i in range(calls):
        for v in (("poll", "no poll") if i % 2 == 0 else ("no poll", "poll")):
            t0 = time.perf_counter()
            variants[v](*args)
            times[v].append(time.perf_counter() - t0)
    print(json.dumps({v: t for v, t in times.items()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="processes per workload")
    ap.add_argument("--calls", type=int, default=40, help="calls of each variant per process, alternating")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--worker", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.calls)
        return
    env = dict(os.environ, MSIR_NUM_THREADS=str(args.threads))
    print("| workload | poll ms | no poll ms | poll / no poll | per-process ratios |")
    print("| --- | --- | --- | --- | --- |")
    for name in ("W1", "W7", "scalar while 2^24"):
        runs = {"poll": [], "no poll": []}
        ratios = []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, __file__, "--calls", str(args.calls), "--worker", name],
                                 env=env, capture_output=True, text=True, check=True)
            times = json.loads(out.stdout.strip().splitlines()[-1])
            for v in runs:
                runs[v] += times[v]
            ratios.append(statistics.median(times["poll"]) / statistics.median(times["no poll"]))
        a, b = statistics.median(runs["poll"]) * 1e3, statistics.median(runs["no poll"]) * 1e3
        spread = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.3f} | {spread} |", flush=True)


if __name__ == "__main__":
    main()
