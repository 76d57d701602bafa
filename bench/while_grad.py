"""Cost of the compiled gradient of a data-dependent `while` against its forward.

Newton's iteration for sqrt(a) until max|x^2 - a| < 1e-10 (x0 = a, a uniform in
[0.01, 100), float64), then loss = sum(x); `msir.jit` of the loss and of
`msir.grad(loss)`. The gradient records the residuals of every iteration on
tapes (`msir.tape_push`) while the loop runs once, then runs the adjoint loop
backwards, so it should cost a small multiple of the forward (reverse mode's
cheap-gradient bound is ~3x). Prints the median wall time and the median CPU
time of repeated calls of each, and their ratio; checks the gradient against
the analytic 1 / (2 sqrt(a)).

    python bench/while_grad.py [--log2n 20] [--repeat N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import msir


def newton_loss(a):
    x = a
    while np.max(np.abs(x * x - a)) >= 1e-10:
        x = 0.5 * (x + a / x)
    return np.sum(x)


def _measure(fn, a, repeat: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of `fn(a)` after one warm-up call."""
    fn(a)
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn(a)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return 1e3 * statistics.median(wall), 1e3 * statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log2n", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    a = np.random.default_rng(0).uniform(0.01, 100.0, 1 << args.log2n)
    forward = msir.jit(newton_loss)
    grad = msir.jit(msir.grad(newton_loss))
    g = grad(a)
    err = float(np.max(np.abs(g - 0.5 / np.sqrt(a)) * np.sqrt(a)))
    fw, fc = _measure(forward, a, args.repeat)
    gw, gc = _measure(grad, a, args.repeat)
    print(f"Newton sqrt while on 2^{args.log2n} float64 (gradient relative error {err:.1e})")
    print(f"{'':10} {'wall ms':>9} {'cpu ms':>9}")
    print(f"{'forward':10} {fw:9.2f} {fc:9.2f}")
    print(f"{'gradient':10} {gw:9.2f} {gc:9.2f}")
    print(f"{'ratio':10} {gw / fw:9.2f} {gc / fc:9.2f}   (gradient / forward)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"log2n": args.log2n, "forward_ms": fw, "grad_ms": gw, "forward_cpu_ms": fc,
                       "grad_cpu_ms": gc, "max_rel_err": err}, f, indent=1)


if __name__ == "__main__":
    main()
