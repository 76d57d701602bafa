"""Emulated cycles of the kernels convert-msir-to-ascend lowers, against their
roofline, on the 910A and the 910B.

The roofline of a kernel is the largest per-pipe lower bound for the
`block_dim` it runs on (issue 13): the cube's fractal steps on the busiest
core; the bytes MTE2 reads from GM (as the kernel's tiling moves them)
over the GM bandwidth the cores share, or over their own MTE2 bandwidth if
that is less; the same for the bytes written back (FixPipe or MTE3); for
an elementwise chain or a row reduction, the vector unit's repeats on the
busiest core. Only
the timing model's constants enter (`msir.dialects.ascend.TargetSpec`):
the ratios say how close the lowering comes to what the model allows, not
what a chip would do.

    python bench/ascend.py [--timeline] [--json out.json]

Each kernel's result is checked against NumPy's at f16 first.

Targets (issue 13): matmul 512^3 f16 within 1.25x of its bound; an
elementwise chain and softmax 128x1024 within 1.5x (row reductions,
layer norm and the streamed long-row kernels are reported against theirs
too: a row that does not fit UB is read twice, which its bound counts);
double buffering <= 0.6x the single-buffered cycles of a balanced
elementwise kernel (exp of f32 on one core: MTE2, V and MTE3 equally
busy), and the matmul's (<= 0.75x). Emulation takes seconds per kernel on
a loaded 2-core machine; the times printed are rough.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import time

import numpy as np

CHIPS = ("910A", "910B")


def lower(text: str, chip: str, **options):
    """The msir module `text` through convert-msir-to-ascend (a module of kernels)."""
    from xdsl.parser import Parser

    from msir.ascend.convert_msir_to_ascend import ConvertMsirToAscend
    from msir.compiler import make_context

    ctx = make_context()
    module = Parser(ctx, text, "bench.mlir").parse_module()
    ConvertMsirToAscend(chip=chip, **options).apply(ctx, module)
    out = io.StringIO()
    from xdsl.printer import Printer

    Printer(stream=out).print_op(module)
    from msir.ascend.cli import make_context as kernel_context

    return Parser(kernel_context(), out.getvalue(), "kernel.mlir").parse_module()


def matmul_ir(M: int, K: int, N: int) -> str:
    t = f"tensor<{M}x{K}xf16>, tensor<{K}x{N}xf16>"
    return f"""
func.func @mm(%a: tensor<{M}x{K}xf16>, %b: tensor<{K}x{N}xf16>) -> tensor<{M}x{N}xf16> {{
  %0 = msir.matmul %a, %b : {t} to tensor<{M}x{N}xf16>
  func.return %0 : tensor<{M}x{N}xf16>
}}"""


def chain_ir(n: int) -> str:
    t = f"tensor<{n}xf16>"
    return f"""
func.func @chain(%x: {t}, %y: {t}) -> {t} {{
  %0 = msir.mul %x, %y : {t}
  %1 = msir.add %0, %x : {t}
  %2 = msir.maximum %1, %y : {t}
  func.return %2 : {t}
}}"""


def exp_ir(n: int) -> str:
    t = f"tensor<{n}xf32>"
    return f"""
func.func @e(%x: {t}) -> {t} {{
  %0 = msir.exp %x : {t}
  func.return %0 : {t}
}}"""


def row_reduction_ir(op: str, M: int, N: int, dtype: str) -> str:
    t = f"tensor<{M}x{N}x{dtype}>"
    return f"""
func.func @rows(%x: {t}) -> tensor<{M}x{dtype}> {{
  %0 = msir.{op} %x axes array<i64: 1> : {t} to tensor<{M}x{dtype}>
  func.return %0 : tensor<{M}x{dtype}>
}}"""


def _shared(spec, cores: int, per_core: int) -> float:
    """Bytes per cycle `cores` reach together on a GM path."""
    return min(spec.gm_bytes_per_cycle, cores * per_core)


def matmul_bound(spec, kernel, M: int, K: int, N: int) -> dict[str, float]:
    from msir.ascend.lower_matmul import _tile_classes, tile_matmul

    tiling = tile_matmul(spec, M, N, K, 2, 2)
    cores = kernel.block_dim.value.data
    classes = _tile_classes(M, tiling.m, N, tiling.n)
    cube = sum(math.ceil(count / cores) * math.ceil(mt / 16) * math.ceil(nt / 16) * (K // 16)
               for count, mt, nt in classes)
    read = sum(count * (mt + nt) * K * 2 for count, mt, nt in classes)
    out_pipe = "mte3" if spec.coupled else "fix"
    return {"m": cube, "mte2": read / _shared(spec, cores, spec.pipes["mte2"].bytes_per_cycle),
            out_pipe: M * N * 2 / _shared(spec, cores, spec.pipes[out_pipe].bytes_per_cycle)}


def chain_bound(spec, kernel, n: int, ops: int) -> dict[str, float]:
    from msir.dialects.ascend import REPEAT_BYTES

    cores = kernel.block_dim.value.data
    repeats = math.ceil(n * 2 / REPEAT_BYTES)
    return {"v": ops * math.ceil(repeats / cores),
            "mte2": 2 * n * 2 / _shared(spec, cores, spec.pipes["mte2"].bytes_per_cycle),
            "mte3": n * 2 / _shared(spec, cores, spec.pipes["mte3"].bytes_per_cycle)}


def softmax_ir(M: int, N: int) -> str:
    t, k = f"tensor<{M}x{N}xf32>", f"tensor<{M}x1xf32>"
    return f"""
func.func @softmax(%x: {t}) -> {t} {{
  %0 = msir.reduce_max %x axes array<i64: 1> : {t} to {k}
  %1 = msir.broadcast_to %0 : {k} to {t}
  %2 = msir.sub %x, %1 : {t}
  %3 = msir.exp %2 : {t}
  %4 = msir.reduce_sum %3 axes array<i64: 1> : {t} to {k}
  %5 = msir.broadcast_to %4 : {k} to {t}
  %6 = msir.div %3, %5 : {t}
  func.return %6 : {t}
}}"""


def softmax_bound(spec, kernel, M: int, N: int) -> dict[str, float]:
    """MTE2 reads and MTE3 writes the rows once; the vector unit's passes
    over the busiest core's rows in f32: max, sub, exp (its cycles per
    repeat), sum, mul.

    For 128x1024 at block_dim 32 no schedule reaches 1.5x of this bound
    in the timing model: MTE3 must store 4 rows of 4 KiB at the core's GM
    share (437 cycles on the 910A, 524 on the 910B), its first store waits
    for a whole row to arrive (100 + 110 / 131 cycles) and pass the
    dependent chain max .. mul (about 120 cycles of vector work), and the
    last store's latency (100) ends the kernel: at least ~865 cycles
    (1.69x) on the 910A and ~973 (1.86x) on the 910B. Other block_dims
    give larger bounds but more cycles."""
    from msir.dialects.ascend import REPEAT_BYTES

    cores = kernel.block_dim.value.data
    repeats = math.ceil(M / cores) * math.ceil(N * 4 / REPEAT_BYTES)
    passes = 4 + spec.vector_cpi.get("vexp", 1)
    return {"v": repeats * passes,
            "mte2": M * N * 4 / _shared(spec, cores, spec.pipes["mte2"].bytes_per_cycle),
            "mte3": M * N * 4 / _shared(spec, cores, spec.pipes["mte3"].bytes_per_cycle)}


def layer_norm_ir(M: int, N: int) -> str:
    """ops.layer_norm with gamma and beta, as the frontend writes it."""
    t, k, r = f"tensor<{M}x{N}xf32>", f"tensor<{M}x1xf32>", f"tensor<{N}xf32>"
    return f"""
func.func @ln(%x: {t}, %g: {r}, %b: {r}) -> {t} {{
  %eps = msir.constant dense<1.0e-05> : tensor<f32>
  %0 = msir.reduce_mean %x axes array<i64: 1> : {t} to {k}
  %1 = msir.broadcast_to %0 : {k} to {t}
  %2 = msir.sub %x, %1 : {t}
  %3 = msir.mul %2, %2 : {t}
  %4 = msir.reduce_mean %3 axes array<i64: 1> : {t} to {k}
  %5 = msir.broadcast_to %eps : tensor<f32> to {k}
  %6 = msir.add %4, %5 : {k}
  %7 = msir.sqrt %6 : {k}
  %8 = msir.constant dense<1.000000e+00> : {k}
  %9 = msir.div %8, %7 : {k}
  %10 = msir.broadcast_to %9 : {k} to {t}
  %11 = msir.mul %2, %10 : {t}
  %12 = msir.broadcast_to %g : {r} to {t}
  %13 = msir.mul %11, %12 : {t}
  %14 = msir.broadcast_to %b : {r} to {t}
  %15 = msir.add %13, %14 : {t}
  func.return %15 : {t}
}}"""


def layer_norm_ref(x, g, b):
    c = x.astype(np.float64) - x.mean(axis=1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5) * g + b


def layer_norm_bound(spec, kernel, M: int, N: int, reads: int = 1) -> dict[str, float]:
    """MTE2 reads the rows `reads` times (2: streamed) and each core gamma
    and beta (once, or per row when streamed); MTE3 writes the rows once;
    the vector unit's passes in f32 over the busiest core's rows: sum,
    sub, square, sum, times rstd, gamma, beta (streamed: sub and times rstd
    again)."""
    from msir.dialects.ascend import REPEAT_BYTES

    cores = kernel.block_dim.value.data
    repeats = math.ceil(M / cores) * math.ceil(N * 4 / REPEAT_BYTES)
    params = 2 * N * 4 * (cores if reads == 1 else M)
    return {"v": repeats * (7 if reads == 1 else 9),
            "mte2": (reads * M * N * 4 + params) / _shared(spec, cores, spec.pipes["mte2"].bytes_per_cycle),
            "mte3": M * N * 4 / _shared(spec, cores, spec.pipes["mte3"].bytes_per_cycle)}


def streamed_softmax_bound(spec, kernel, M: int, N: int) -> dict[str, float]:
    """Online softmax reads each row twice (it does not fit UB) and writes
    it once; the vector unit's passes in f32: max, sub, exp, sum, then sub,
    exp, mul."""
    from msir.dialects.ascend import REPEAT_BYTES

    cores = kernel.block_dim.value.data
    repeats = math.ceil(M / cores) * math.ceil(N * 4 / REPEAT_BYTES)
    return {"v": repeats * (5 + 2 * spec.vector_cpi.get("vexp", 1)),
            "mte2": 2 * M * N * 4 / _shared(spec, cores, spec.pipes["mte2"].bytes_per_cycle),
            "mte3": M * N * 4 / _shared(spec, cores, spec.pipes["mte3"].bytes_per_cycle)}


def row_reduction_bound(spec, kernel, M: int, N: int, element_bytes: int, convert: bool) -> dict[str, float]:
    """MTE2 reads the rows once; the vector unit makes at least one pass over
    the busiest core's rows in the work type (f32 for an f16 sum, whose
    conversion is a second pass)."""
    from msir.dialects.ascend import REPEAT_BYTES

    cores = kernel.block_dim.value.data
    work_bytes = 4 if convert else element_bytes
    repeats = math.ceil(M / cores) * math.ceil(N * work_bytes / REPEAT_BYTES)
    return {"v": repeats * (2 if convert else 1),
            "mte2": M * N * element_bytes / _shared(spec, cores, spec.pipes["mte2"].bytes_per_cycle)}


def measure(name: str, chip: str, module, entry: str, inputs: list, expected: np.ndarray, bound: dict,
            timeline: bool) -> dict:
    """Run the kernel, check its result against NumPy's at f16, print and
    return its cycles against `bound` (per pipe)."""
    from msir.ascend import emulator

    t0 = time.perf_counter()
    result = emulator.run(module, entry, inputs)
    seconds = time.perf_counter() - t0
    (out,) = result.outputs
    np.testing.assert_allclose(out.reshape(expected.shape).astype(np.float32), expected.astype(np.float32),
                               rtol=2e-3, atol=2e-3 * float(np.abs(expected).max()))
    profile = result.profile
    limit = max(bound, key=bound.get)
    ratio = profile.cycles / bound[limit]
    print(f"{name:<24} {chip}  block_dim {profile.block_dim:>2}  cycles {profile.cycles:>7}  bound "
          f"{bound[limit]:>7.0f} ({limit})  ratio {ratio:4.2f}x  critical {profile.critical_pipe:<4}  "
          f"emulated in {seconds:4.1f} s")
    if timeline:
        print(profile.timeline())
    return {"kernel": name, "chip": chip, "cycles": profile.cycles, "bound": bound, "ratio": ratio,
            "busy": profile.busy, "block_dim": profile.block_dim, "emulation_seconds": seconds}


def main() -> None:
    from msir.dialects.ascend import TARGETS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timeline", action="store_true", help="print each kernel's timeline")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    results = []
    rng = np.random.default_rng(0)
    for chip in CHIPS:
        spec = TARGETS[chip]
        M = K = N = 512
        a, b = rng.uniform(-1, 1, (M, K)).astype(np.float16), rng.uniform(-1, 1, (K, N)).astype(np.float16)
        module = lower(matmul_ir(M, K, N), chip)
        kernel = next(iter(module.ops))
        expected = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
        results.append(measure("matmul 512^3 f16", chip, module, "mm", [a, b], expected,
                               matmul_bound(spec, kernel, M, K, N), args.timeline))
        n = 1 << 18
        x, y = rng.uniform(-1, 1, n).astype(np.float16), rng.uniform(-1, 1, n).astype(np.float16)
        module = lower(chain_ir(n), chip)
        expected = np.maximum(x * y + x, y)
        results.append(measure("elementwise 2^18 f16", chip, module, "chain", [x, y], expected,
                               chain_bound(spec, next(iter(module.ops)), n, 3), args.timeline))
        for op, (M, N), dtype in (("reduce_sum", (128, 1024), np.float16), ("reduce_max", (64, 1000), np.float32)):
            x = rng.uniform(-1, 1, (M, N)).astype(dtype)
            name = "f16" if dtype == np.float16 else "f32"
            module = lower(row_reduction_ir(op, M, N, name), chip)
            expected = x.astype(np.float32).sum(axis=1) if op == "reduce_sum" else x.max(axis=1)
            bound = row_reduction_bound(spec, next(iter(module.ops)), M, N, x.itemsize,
                                        op == "reduce_sum" and dtype == np.float16)
            results.append(measure(f"row {op[7:]} {M}x{N} {name}", chip, module, "rows", [x], expected, bound,
                                   args.timeline))
        x = rng.uniform(-3, 3, (128, 1024)).astype(np.float32)
        module = lower(softmax_ir(128, 1024), chip)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        results.append(measure("softmax 128x1024 f32", chip, module, "softmax", [x], e / e.sum(axis=1, keepdims=True),
                               softmax_bound(spec, next(iter(module.ops)), 128, 1024), args.timeline))
        M, N = 128, 1024
        x, g, b = rng.uniform(-1, 1, (M, N)).astype(np.float32), rng.uniform(0.5, 1.5, N).astype(np.float32), \
            rng.uniform(-1, 1, N).astype(np.float32)
        module = lower(layer_norm_ir(M, N), chip)
        results.append(measure("layernorm 128x1024 f32", chip, module, "ln", [x, g, b], layer_norm_ref(x, g, b),
                               layer_norm_bound(spec, next(iter(module.ops)), M, N), args.timeline))
        M, N = 8, 40000  # rows too long for UB, two per core on 4 cores
        x = rng.uniform(-3, 3, (M, N)).astype(np.float32)
        module = lower(softmax_ir(M, N), chip, max_block_dim=4)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        results.append(measure(f"online softmax {M}x{N}", chip, module, "softmax", [x],
                               e / e.sum(axis=1, keepdims=True),
                               streamed_softmax_bound(spec, next(iter(module.ops)), M, N), args.timeline))
        x, g, b = rng.uniform(-1, 1, (M, N)).astype(np.float32), rng.uniform(0.5, 1.5, N).astype(np.float32), \
            rng.uniform(-1, 1, N).astype(np.float32)
        module = lower(layer_norm_ir(M, N), chip, max_block_dim=4)
        results.append(measure(f"streamed ln {M}x{N} f32", chip, module, "ln", [x, g, b], layer_norm_ref(x, g, b),
                               layer_norm_bound(spec, next(iter(module.ops)), M, N, reads=2), args.timeline))
        # double against single buffering of a balanced elementwise kernel, one core
        n = 1 << 18
        x = rng.uniform(-3, 3, n).astype(np.float32)
        from msir.ascend import emulator

        runs = [emulator.run(lower(exp_ir(n), chip, max_block_dim=1, elementwise_buffers=buffers), "e", [x])
                for buffers in (1, 2)]
        for r in runs:
            np.testing.assert_allclose(r.outputs[0], np.exp(x), rtol=1e-6)
        cycles = [r.profile.cycles for r in runs]
        busy = runs[1].profile.busy
        print(f"{'exp 2^18 f32 (balanced)':<24} {chip}  one core: single-buffered {cycles[0]}, double-buffered "
              f"{cycles[1]} cycles: {cycles[1] / cycles[0]:.2f}x  (busy mte2 {busy['mte2']}, v {busy['v']}, "
              f"mte3 {busy['mte3']})")
        results.append({"kernel": "double buffering exp 2^18 f32", "chip": chip, "single": cycles[0],
                        "double": cycles[1], "ratio": cycles[1] / cycles[0]})
        # double against single buffering, one core, K in many steps
        M, K, N = 128, 1024, 128
        a, b = rng.uniform(-1, 1, (M, K)).astype(np.float16), rng.uniform(-1, 1, (K, N)).astype(np.float16)
        from msir.ascend import emulator

        cycles = [emulator.run(lower(matmul_ir(M, K, N), chip, max_block_dim=1, matmul_buffers=buffers), "mm",
                               [a, b]).profile.cycles for buffers in (1, 2)]
        print(f"{'matmul 128x1024x128':<24} {chip}  one core: single-buffered {cycles[0]}, double-buffered "
              f"{cycles[1]} cycles: {cycles[1] / cycles[0]:.2f}x")
        results.append({"kernel": "double buffering 128x1024x128", "chip": chip, "single": cycles[0],
                        "double": cycles[1], "ratio": cycles[1] / cycles[0]})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
