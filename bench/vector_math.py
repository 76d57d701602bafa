"""Inline polynomial vector math vs libm/libmvec calls, per function and dtype.

    python bench/vector_math.py [--n 65536] [--seconds 2] [--functions exp,tanh,log]

For each (function, dtype) it compiles the same loop `out[i] = f(in[i])` twice
through `msir-lower-to-llvm` (`math_impl=inline`: msir.lowering.vector_math's
polynomials; `math_impl=libm`: libm calls, which LLVM's loop vectoriser maps to
glibc's libmvec variants where they exist) and times both in one process,
alternating, on inputs spread over the function's useful range. The table gives
ns per element (minimum and median of the alternated runs) and the ratio
libm/inline (> 1: the polynomial is faster). The choice recorded in
`vector_math.INLINE_BY_DEFAULT` follows this ratio on this project's machine.

The arrays (n = 65536 by default, 256 KiB or 512 KiB) stay in L2, so the loop
measures the math, not memory bandwidth. Run it on an otherwise idle core
(`taskset -c 1`) for stable numbers.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MSIR_CACHE", "0")

import numpy as np  # noqa: E402

INPUTS = {  # (low, high) of the inputs: where the function is not saturated
    "exp": (-80.0, 80.0),
    "tanh": (-10.0, 10.0),
    "log": (1e-3, 1e6),
}

SOURCE = """
func.func @f(%a: memref<{n}x{t}>, %o: memref<{n}x{t}>) attributes {{msir.num_outputs = 1 : i64}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {n} : index
  scf.for %i = %c0 to %n step %c1 {{
    %x = memref.load %a[%i] : memref<{n}x{t}>
    %y = math.{fn} %x : {t}
    memref.store %y, %o[%i] : memref<{n}x{t}>
  }}
  func.return
}}
"""


def compile_loop(fn: str, t: str, n: int, math_impl: str):
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, math, memref, scf
    from xdsl.parser import Parser

    from msir.lowering.jit import compile_llvm_module
    from msir.lowering.to_llvm import MsirLowerToLlvm

    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, memref.MemRef, scf.Scf):
        ctx.load_dialect(d)
    module = Parser(ctx, SOURCE.format(n=n, t=t, fn=fn)).parse_module()
    MsirLowerToLlvm(math_impl=math_impl).apply(ctx, module)
    return compile_llvm_module(module).function("f")


def measure(fn: str, dtype, n: int, seconds: float) -> dict:
    t = "f32" if dtype == np.float32 else "f64"
    lo, hi = INPUTS[fn]
    rng = np.random.default_rng(0)
    if lo > 0:
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(dtype)
    else:
        x = rng.uniform(lo, hi, n).astype(dtype)
    routes = {impl: compile_loop(fn, t, n, impl) for impl in ("inline", "libm")}
    out = {impl: np.empty_like(x) for impl in routes}
    for impl, f in routes.items():
        f(x, out=[out[impl]])
    reps = max(1, (1 << 22) // n)
    times: dict[str, list[float]] = {impl: [] for impl in routes}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for impl, f in routes.items():
            o = [out[impl]]
            start = time.perf_counter()
            for _ in range(reps):
                f(x, out=o)
            times[impl].append((time.perf_counter() - start) / reps / n * 1e9)
    row = {"function": fn, "dtype": t}
    for impl, ts in times.items():
        row[f"{impl}_min"] = min(ts)
        row[f"{impl}_median"] = float(np.median(ts))
    row["ratio"] = row["libm_min"] / row["inline_min"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--seconds", type=float, default=2.0, help="per (function, dtype)")
    ap.add_argument("--functions", default="exp,tanh,log")
    args = ap.parse_args()
    from msir.lowering.vector_math import INLINE_BY_DEFAULT

    print(f"n = {args.n}; ns per element, min / median of alternated runs; ratio = libm min / inline min")
    print(f"{'function':9s} {'dtype':5s} {'inline ns':>16s} {'libm ns':>16s} {'ratio':>6s}  default")
    for fn in args.functions.split(","):
        for dtype in (np.float32, np.float64):
            r = measure(fn, dtype, args.n, args.seconds)
            default = "inline" if INLINE_BY_DEFAULT.get((fn, r["dtype"])) else "libm"
            print(
                f"{fn:9s} {r['dtype']:5s} {r['inline_min']:7.3f} / {r['inline_median']:6.3f} "
                f"{r['libm_min']:7.3f} / {r['libm_median']:6.3f} {r['ratio']:6.2f}  {default}"
            )


if __name__ == "__main__":
    main()
