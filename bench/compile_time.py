"""Compile time and call overhead of msir.jit.

* first-call compile time of a 200-op straight-line elementwise function (written
  to a module file, since msir compiles source), split by stage;
* the cost of a call with already-seen types (tiny arrays, so the native work is
  negligible), for 1 and 8 arguments.

    python bench/compile_time.py [--json out.json]

Targets (issue 2, this 2-core machine): compile <= 1.0 s; call <= 20 us + 1 us/arg.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_LINES = 50  # each line below is 4 msir ops (after constant folding): 200 ops


def write_module(path: Path) -> None:
    lines = ["import numpy as np", "", "", "def chain(x, y):"]
    ops = ["np.tanh(x) * y", "np.exp(-x) + y", "np.maximum(x, y) - 0.5", "np.sqrt(x * x + 1.0) / y"]
    for i in range(N_LINES):
        lines.append(f"    x = {ops[i % len(ops)]}")
        lines.append("    y = x * 0.5")
    lines.append("    return x + y")
    lines += ["", "", "def many(a, b, c, d, e, f, g, h):", "    return a + b + c + d + e + f + g + h"]
    lines += ["", "", "def one(a):", "    return a"]
    path.write_text("\n".join(lines) + "\n")


def load(path: Path):
    spec = importlib.util.spec_from_file_location("bench_chain", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_chain"] = mod
    spec.loader.exec_module(mod)
    return mod


def stage_times(fn, args) -> dict[str, float]:
    """Time each stage of the pipeline on a fresh trace."""
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    from msir.compiler import make_context
    from msir.frontend.driver import spec_of, trace
    from msir.lowering.jit import compile_llvm_module
    from msir.lowering.to_llvm import MsirLowerToLlvm
    from msir.lowering.to_loops import ConvertMsirToLoops
    from msir.passes.fuse import MsirFuse

    ctx = make_context()
    t = [time.perf_counter()]
    traced = trace(fn, [spec_of(a) for a in args])
    t.append(time.perf_counter())
    DeadCodeElimination().apply(ctx, traced.module)
    n_ops = sum(1 for op in traced.module.walk() if op.name.startswith("msir."))
    MsirFuse().apply(ctx, traced.module)
    t.append(time.perf_counter())
    ConvertMsirToLoops().apply(ctx, traced.module)
    t.append(time.perf_counter())
    MsirLowerToLlvm().apply(ctx, traced.module)
    t.append(time.perf_counter())
    compile_llvm_module(traced.module)
    t.append(time.perf_counter())
    names = ["frontend", "dce + msir-fuse", "convert-msir-to-loops", "msir-lower-to-llvm", "llvmlite (export+O3+codegen)"]
    out = {n: t[i + 1] - t[i] for i, n in enumerate(names)}
    out["msir ops"] = n_ops
    return out


def call_overhead(jf, args, repeats: int = 20000) -> float:
    jf(*args)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats):
            jf(*args)
        samples.append((time.perf_counter() - t0) / repeats)
    return statistics.median(samples)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()

    t0 = time.perf_counter()
    import msir
    import msir.compiler
    import msir.frontend.driver
    import msir.lowering.jit
    import msir.lowering.to_llvm
    import msir.lowering.to_loops
    import msir.passes.fuse  # noqa: F401

    import_time = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench_chain.py"
        write_module(path)
        mod = load(path)
        x = np.random.rand(1024).astype(np.float32) + 0.5
        y = np.random.rand(1024).astype(np.float32) + 0.5

        jf = msir.jit(mod.chain)
        t0 = time.perf_counter()
        out = jf(x, y)
        first_call = time.perf_counter() - t0
        np.testing.assert_allclose(out, mod.chain(x, y), rtol=1e-4)
        stages = stage_times(mod.chain, (x, y))

        tiny = [np.ones(4, np.float32) for _ in range(8)]
        one = call_overhead(msir.jit(mod.one), tiny[:1])
        many = call_overhead(msir.jit(mod.many), tiny)
        numpy_add = call_overhead(mod.many, tiny)

    results = {
        "import_s": import_time,
        "first_call_s": first_call,
        "stages_s": stages,
        "call_1_arg_us": one * 1e6,
        "call_8_args_us": many * 1e6,
        "numpy_8_args_us": numpy_add * 1e6,
    }
    print(f"200-op function: {stages['msir ops']} msir ops after dce")
    print(f"  import msir and its pipeline (once per process): {import_time:.3f} s")
    print(f"  first call (trace + compile + run, imports excluded): {first_call:.3f} s   (target <= 1.0 s)")
    for k, v in stages.items():
        if k != "msir ops":
            print(f"    {k:32s} {v * 1e3:8.1f} ms")
    print(f"call with seen types, 1 arg : {one * 1e6:6.1f} us   (target <= 21 us)")
    print(f"call with seen types, 8 args: {many * 1e6:6.1f} us   (target <= 28 us; NumPy itself: {numpy_add * 1e6:.1f} us)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
