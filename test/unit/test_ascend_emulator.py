"""The Ascend emulator (msir.ascend) on hand-written kernels: values against
NumPy on 910A and 910B, vector mask/repeat/stride semantics against a plain
reference, the cost model's bounds, and one hand-made kernel per error class,
each checked for its class, message (op, buffer, byte range) and location."""

import math
import pathlib
import time

import numpy as np
import pytest

from msir.ascend import cli, emulator
from msir.ascend import errors as E

KERNELS = pathlib.Path(__file__).parents[1] / "filecheck" / "dialects" / "ascend"
RNG = np.random.default_rng(0)


def parse(text: str, name: str = "k.mlir"):
    from xdsl.parser import Parser

    return Parser(cli.make_context(), text, name).parse_module()


def run_file(path: pathlib.Path, entry: str, inputs):
    return emulator.run(parse(path.read_text(), str(path)), entry, inputs)


def kernel(body: str, target: str = "910B", ins: str = "%x : !ascend.buf<gm, 256xf16>",
           outs: str = "%y : !ascend.buf<gm, 256xf16>", block_dim: int = 1) -> str:
    return (f'ascend.kernel @k #ascend.target<"{target}"> block_dim {block_dim} ins({ins}) outs({outs}) {{\n'
            '  %c0 = arith.constant 0 : index\n' + body + "}\n")


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def expect(error: type, text: str, inputs, match: str, at: str | int):
    """Running kernel `k` of `text` raises `error` matching `match`, located at
    line `at` (or the first line holding `at`)."""
    with pytest.raises(error, match=match) as info:
        emulator.run(parse(text), "k", inputs)
    line = at if isinstance(at, int) else line_of(text, at)
    assert info.value.loc is not None and info.value.loc.line == line, str(info.value)
    return info.value


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["matmul_910a", "matmul_910b"])
def test_matmul_kernel_matches_numpy(entry):
    a = RNG.uniform(-1, 1, (128, 128)).astype(np.float16)
    b = RNG.uniform(-1, 1, (128, 64)).astype(np.float16)
    result = run_file(KERNELS / "matmul.mlir", entry, [a, b])
    (c,) = result.outputs
    assert c.dtype == np.float32 and c.shape == (128, 64)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("entry", ["exp_add_910a", "exp_add_910b"])
def test_elementwise_kernel_with_masked_tail_matches_numpy(entry):
    x = RNG.uniform(-3, 3, 1000).astype(np.float16)
    y = RNG.uniform(-1, 1, 1000).astype(np.float16)
    (z,) = run_file(KERNELS / "elementwise.mlir", entry, [x, y]).outputs
    # the same f16 roundings NumPy makes: exp rounded to f16, then the sum
    np.testing.assert_array_equal(z, np.exp(x) + y)


def matmul_kernel(target: str, m: int, n: int, k: int, tm: int, tn: int, tk: int) -> str:
    """A hand-tiled c = a @ b: one (tm x tn) output tile per core, K in tk-deep
    tiles, single-buffered with the back-edge flags (as matmul.mlir)."""
    grid_n = n // tn
    out = (f"""  ascend.set_flag m to fix event 0
  ascend.wait_flag m to fix event 0
  ascend.copy fix %acc[%c0, %c0] to %c[%row, %col] sizes [{tm}, {tn}] : !ascend.buf<l0c, {tm}x{tn}xf32, zN> to !ascend.buf<gm, {m}x{n}xf32>
""" if target == "910B" else f"""  %c_ub = ascend.alloc at 0 : !ascend.buf<ub, {tm}x{tn}xf32, zN>
  ascend.set_flag m to v event 0
  ascend.wait_flag m to v event 0
  ascend.copy v %acc[%c0, %c0] to %c_ub[%c0, %c0] sizes [{tm}, {tn}] : !ascend.buf<l0c, {tm}x{tn}xf32, zN> to !ascend.buf<ub, {tm}x{tn}xf32, zN>
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %c_ub[%c0, %c0] to %c[%row, %col] sizes [{tm}, {tn}] : !ascend.buf<ub, {tm}x{tn}xf32, zN> to !ascend.buf<gm, {m}x{n}xf32>
""")
    a_l1, b_l1 = f"!ascend.buf<l1, {tm}x{tk}xf16, zN>", f"!ascend.buf<l1, {tk}x{tn}xf16, zN>"
    a_l0, b_l0 = f"!ascend.buf<l0a, {tm}x{tk}xf16, zZ>", f"!ascend.buf<l0b, {tk}x{tn}xf16, nZ>"
    acc = f"!ascend.buf<l0c, {tm}x{tn}xf32, zN>"
    return f"""ascend.kernel @mm #ascend.target<"{target}"> block_dim {(m // tm) * grid_n} ins(%a : !ascend.buf<gm, {m}x{k}xf16>, %b : !ascend.buf<gm, {k}x{n}xf16>) outs(%c : !ascend.buf<gm, {m}x{n}xf32>) {{
  %blk = ascend.block_idx : index
  %c0 = arith.constant 0 : index
  %gn = arith.constant {grid_n} : index
  %ctm = arith.constant {tm} : index
  %ctn = arith.constant {tn} : index
  %ctk = arith.constant {tk} : index
  %ck = arith.constant {k} : index
  %bi = arith.divui %blk, %gn : index
  %bj = arith.remui %blk, %gn : index
  %row = arith.muli %bi, %ctm : index
  %col = arith.muli %bj, %ctn : index
  %a_l1 = ascend.alloc at 0 : {a_l1}
  %b_l1 = ascend.alloc at {tm * tk * 2} : {b_l1}
  %a_l0 = ascend.alloc at 0 : {a_l0}
  %b_l0 = ascend.alloc at 0 : {b_l0}
  %acc = ascend.alloc at 0 : {acc}
  ascend.set_flag mte1 to mte2 event 0
  ascend.set_flag m to mte1 event 0
  scf.for %kk = %c0 to %ck step %ctk {{
    ascend.wait_flag mte1 to mte2 event 0
    ascend.copy mte2 %a[%row, %kk] to %a_l1[%c0, %c0] sizes [{tm}, {tk}] : !ascend.buf<gm, {m}x{k}xf16> to {a_l1}
    ascend.copy mte2 %b[%kk, %col] to %b_l1[%c0, %c0] sizes [{tk}, {tn}] : !ascend.buf<gm, {k}x{n}xf16> to {b_l1}
    ascend.set_flag mte2 to mte1 event 0
    ascend.wait_flag mte2 to mte1 event 0
    ascend.wait_flag m to mte1 event 0
    ascend.copy mte1 %a_l1[%c0, %c0] to %a_l0[%c0, %c0] sizes [{tm}, {tk}] : {a_l1} to {a_l0}
    ascend.copy mte1 %b_l1[%c0, %c0] to %b_l0[%c0, %c0] sizes [{tk}, {tn}] : {b_l1} to {b_l0}
    ascend.set_flag mte1 to mte2 event 0
    ascend.set_flag mte1 to m event 0
    ascend.wait_flag mte1 to m event 0
    %first = arith.cmpi eq, %kk, %c0 : index
    scf.if %first {{
      ascend.mmad %acc, %a_l0, %b_l0 m {tm} n {tn} k {tk} init : {acc}, {a_l0}, {b_l0}
    }} else {{
      ascend.mmad %acc, %a_l0, %b_l0 m {tm} n {tn} k {tk} : {acc}, {a_l0}, {b_l0}
    }}
    ascend.set_flag m to mte1 event 0
  }}
  ascend.wait_flag mte1 to mte2 event 0
  ascend.wait_flag m to mte1 event 0
{out}}}
"""


@pytest.mark.parametrize("target", ["910A", "910B"])
def test_hand_tiled_512_cube_matmul_matches_numpy_within_cost_bounds(target):
    a = RNG.uniform(-1, 1, (512, 512)).astype(np.float16)
    b = RNG.uniform(-1, 1, (512, 512)).astype(np.float16)
    module = parse(matmul_kernel(target, 512, 512, 512, 128, 128, 128))
    start = time.perf_counter()
    result = emulator.run(module, "mm", [a, b])
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(result.outputs[0], a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)
    profile = result.profile
    # each of the 16 cores runs 4 steps of 128^3 / 4096 cube cycles
    assert profile.busy["m"] == 4 * 128 ** 3 // 4096
    assert profile.cycles >= profile.busy["m"]
    print(f"512^3 on {target}: {seconds:.2f} s emulated, {profile.cycles} cycles")


def test_one_fractal_mmad_costs_one_cube_step_plus_latency():
    text = kernel("""  %a = ascend.alloc at 0 : !ascend.buf<l0a, 16x16xf16, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 16x16xf16, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 16x16xf32, zN>
  ascend.mmad %c, %a, %b m 16 n 16 k 16 init : !ascend.buf<l0c, 16x16xf32, zN>, !ascend.buf<l0a, 16x16xf16, zZ>, !ascend.buf<l0b, 16x16xf16, nZ>
""")
    result = emulator.run(parse(text), "k", [np.zeros(256, np.float16)])
    assert result.profile.busy == {"m": 1}
    # issued after the constant and the three allocations: cycle 5, one step, latency 10
    assert result.profile.cycles == 5 + 1 + 10


# ---------------------------------------------------------------------------
# Vector semantics against a plain reference
# ---------------------------------------------------------------------------


def vector_kernel(instruction: str, dtype: str = "f16", n: int = 512) -> str:
    t = f"!ascend.buf<ub, {n}x{dtype}>"
    g = f"!ascend.buf<gm, {n}x{dtype}>"
    return kernel(f"""  %s = arith.constant 7.0 : {dtype}
  %u = ascend.alloc at 0 : {t}
  ascend.copy mte2 %x[%c0] to %u[%c0] sizes [{n}] : {g} to {t}
  ascend.set_flag mte2 to v event 0
  ascend.wait_flag mte2 to v event 0
  {instruction.format(t=t, dtype=dtype)}
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %u[%c0] to %y[%c0] sizes [{n}] : {t} to {g}
""", ins=f"%x : {g}", outs=f"%y : {g}")


def updated(instruction: str, dtype: str = "f16") -> np.ndarray:
    np_dtype = {"f16": np.float16, "f32": np.float32}[dtype]
    (y,) = emulator.run(parse(vector_kernel(instruction, dtype)), "k", [np.zeros(512, np_dtype)]).outputs
    return np.flatnonzero(y == 7)


def test_mask_64_repeat_2_updates_the_first_64_lanes_of_each_repeat():
    expected = np.r_[0:64, 128:192]
    np.testing.assert_array_equal(updated("ascend.vdup %u[%c0], %s mask 64 repeat 2 : {t}, {dtype}"), expected)


def test_rep_stride_9_leaves_a_one_block_gap():
    expected = np.r_[0:128, 144:272]
    got = updated("ascend.vdup %u[%c0], %s repeat 2 rep_stride [9] : {t}, {dtype}")
    np.testing.assert_array_equal(got, expected)


def test_blk_stride_2_takes_every_other_block():
    expected = np.concatenate([np.arange(32 * b, 32 * b + 16) for b in range(8)])
    got = updated("ascend.vdup %u[%c0], %s blk_stride [2] : {t}, {dtype}")
    np.testing.assert_array_equal(got, expected)


def test_bitwise_mask_touches_only_the_lanes_set():
    np.testing.assert_array_equal(updated("ascend.vdup %u[%c0], %s mask_bits [0, 8] : {t}, {dtype}"), [3])
    np.testing.assert_array_equal(updated("ascend.vdup %u[%c0], %s mask_bits [1, 0] : {t}, {dtype}"), [64])


def test_a_32_bit_repeat_has_64_lanes():
    np.testing.assert_array_equal(updated("ascend.vdup %u[%c0], %s repeat 2 : {t}, {dtype}", "f32"), np.r_[0:128])


# ---------------------------------------------------------------------------
# One kernel per error class
# ---------------------------------------------------------------------------

X = [np.zeros(256, np.float16)]
UB = "!ascend.buf<ub, 256xf16>"
GM = "!ascend.buf<gm, 256xf16>"


def test_capacity_overflow():
    text = kernel("  %a = ascend.alloc at 0 : !ascend.buf<l0a, 256x256xf16, zZ>\n")
    expect(E.CapacityError, text, X, r"l0a overflow: %a \(!ascend.buf<l0a, 256x256xf16, zZ>\) requires 131072 bytes at offset 0, 65536 "
           "available on 910B",
           "ascend.alloc")


def test_overlapping_buffers():
    text = kernel(f"  %a = ascend.alloc at 0 : {UB}\n  %b = ascend.alloc at 256 : {UB}\n")
    expect(E.CapacityError, text, X, r"ub buffer %b at \[256, 768\) overlaps ub buffer %a at \[0, 512\)", "at 256")


def test_misaligned_allocation():
    text = kernel(f"  %a = ascend.alloc at 16 : {UB}\n")
    expect(E.AlignmentError, text, X, "ub offset 16 of %a is not a multiple of 32 bytes", "ascend.alloc")
    text = kernel("  %a = ascend.alloc at 256 : !ascend.buf<l0a, 16x16xf16, zZ>\n")
    expect(E.AlignmentError, text, X, "l0a offset 256 of %a is not a multiple of 512 bytes", "ascend.alloc")


def test_misaligned_vector_operand_at_run_time():
    text = kernel(f"""  %c8 = arith.constant 8 : index
  %a = ascend.alloc at 0 : {UB}
  ascend.vabs %a[%c8], %a[%c0] mask 8 : {UB}, {UB}
""")
    expect(E.AlignmentError, text, X, r"operand dst starts at byte 16 of ub buffer %a \(ub\[16\]\), not 32-byte",
           "ascend.vabs")


def test_illegal_paths():
    text = kernel(f"""  %u = ascend.alloc at 0 : !ascend.buf<ub, 16x16xf16>
  %a = ascend.alloc at 0 : !ascend.buf<l0a, 16x16xf16, zZ>
  ascend.copy mte1 %u[%c0, %c0] to %a[%c0, %c0] sizes [16, 16] : !ascend.buf<ub, 16x16xf16> to !ascend.buf<l0a, 16x16xf16, zZ>
""", target="910A")
    expect(E.PathError, text, X, r"ub -> l0a \(%u to %a\) is not a data path of 910A", "ascend.copy")
    text = kernel("""  %c = ascend.alloc at 0 : !ascend.buf<l0c, 16x16xf32, zN>
  ascend.copy mte2 %x[%c0, %c0] to %c[%c0, %c0] sizes [16, 16] : !ascend.buf<gm, 16x16xf32> to !ascend.buf<l0c, 16x16xf32, zN>
""", ins="%x : !ascend.buf<gm, 16x16xf32>", outs="%y : !ascend.buf<gm, 16x16xf32>")
    expect(E.PathError, text, [np.zeros((16, 16), np.float32)], r"gm -> l0c \(%x to %c\) is not a data path of 910B", "ascend.copy")


def test_l0c_to_ub_exists_only_on_910a():
    body = """  %c = ascend.alloc at 0 : !ascend.buf<l0c, 16x16xf32, zN>
  %u = ascend.alloc at 0 : !ascend.buf<ub, 16x16xf32, zN>
  ascend.copy v %c[%c0, %c0] to %u[%c0, %c0] sizes [16, 16] : !ascend.buf<l0c, 16x16xf32, zN> to !ascend.buf<ub, 16x16xf32, zN>
"""
    expect(E.PathError, kernel(body, target="910B"), X, r"l0c -> ub \(%c to %u\) is not a data path of 910B", "ascend.copy")
    emulator.run(parse(kernel(body, target="910A")), "k", X)


def test_wrong_pipe_for_a_path():
    text = kernel(f"""  %u = ascend.alloc at 0 : {UB}
  ascend.copy mte3 %x[%c0] to %u[%c0] sizes [256] : {GM} to {UB}
""")
    expect(E.PathError, text, X, "gm -> ub runs on pipe mte2 on 910B, not mte3", "ascend.copy")


ELEMENTWISE = f"""  %u = ascend.alloc at 0 : {UB}
  %v = ascend.alloc at 512 : {UB}
  ascend.copy mte2 %x[%c0] to %u[%c0] sizes [256] : {GM} to {UB}
  ascend.set_flag mte2 to v event 0
  ascend.wait_flag mte2 to v event 0
  ascend.vexp %v[%c0], %u[%c0] repeat 2 : {UB}, {UB}
  ascend.pipe_barrier v
  ascend.vadd %v[%c0], %v[%c0], %u[%c0] repeat 2 : {UB}, {UB}, {UB}
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %v[%c0] to %y[%c0] sizes [256] : {UB} to {GM}
"""


def test_the_correct_elementwise_kernel_runs():
    x = RNG.uniform(-1, 1, 256).astype(np.float16)
    (y,) = emulator.run(parse(kernel(ELEMENTWISE)), "k", [x]).outputs
    np.testing.assert_array_equal(y, np.exp(x) + x)


def without(text: str, line: str) -> str:
    assert line in text
    return text.replace(line + "\n", "", 1)


def test_cross_pipe_raw_without_a_flag():
    text = kernel(without(ELEMENTWISE, "  ascend.wait_flag mte2 to v event 0"))
    text = without(text, "  ascend.set_flag mte2 to v event 0")
    e = expect(E.RaceError, text, X, r"RAW race: ascend.vexp \(pipe v\) reads bytes \[0, 512\) of ub buffer %u "
               r"\(ub\[0, 512\)\), written by ascend.copy at k.mlir:5:3 \(pipe mte2\) with no "
               "ascend.set_flag/wait_flag mte2 to v", "ascend.vexp")
    assert (e.kind, e.pipes, e.buffer, e.byte_range) == ("RAW", ("mte2", "v"), "%u", (0, 512))


def test_cross_pipe_raw_to_gm_without_a_flag():
    text = kernel(without(without(ELEMENTWISE, "  ascend.wait_flag v to mte3 event 0"),
                          "  ascend.set_flag v to mte3 event 0"))
    e = expect(E.RaceError, text, X, r"RAW race: ascend.copy \(pipe mte3\) reads bytes \[0, 512\) of ub buffer %v "
               r"\(ub\[512, 1024\)\), written by ascend.vadd at k.mlir:10:3 \(pipe v\) with no "
               "ascend.set_flag/wait_flag v to mte3", "ascend.copy mte3")
    assert e.pipes == ("v", "mte3")


def test_same_pipe_dependency_without_a_barrier():
    text = kernel(without(ELEMENTWISE, "  ascend.pipe_barrier v"))
    e = expect(E.RaceError, text, X, r"RAW race: ascend.vadd \(pipe v\) reads bytes \[0, 512\) of ub buffer %v .* "
               r"written by ascend.vexp at k.mlir:8:3 \(pipe v\) with no ascend.pipe_barrier v", "ascend.vadd")
    assert e.pipes == ("v", "v")


LOOP = f"""  %c256 = arith.constant 256 : index
  %c1024 = arith.constant 1024 : index
  %u = ascend.alloc at 0 : {UB}
  ascend.set_flag mte3 to mte2 event 0
  scf.for %i = %c0 to %c1024 step %c256 {{
    ascend.wait_flag mte3 to mte2 event 0
    ascend.copy mte2 %x[%i] to %u[%c0] sizes [256] : !ascend.buf<gm, 1024xf16> to {UB}
    ascend.set_flag mte2 to v event 0
    ascend.wait_flag mte2 to v event 0
    ascend.vmuls %u[%c0], %u[%c0], %s repeat 2 : {UB}, {UB}, f16
    ascend.set_flag v to mte3 event 0
    ascend.wait_flag v to mte3 event 0
    ascend.copy mte3 %u[%c0] to %y[%i] sizes [256] : {UB} to !ascend.buf<gm, 1024xf16>
    ascend.set_flag mte3 to mte2 event 0
  }}
  ascend.wait_flag mte3 to mte2 event 0
"""
LOOP_IO = dict(ins="%x : !ascend.buf<gm, 1024xf16>", outs="%y : !ascend.buf<gm, 1024xf16>")


def loop_kernel(body: str) -> str:
    return kernel("  %s = arith.constant 3.0 : f16\n" + body, **LOOP_IO)


def test_single_buffered_loop_with_its_back_edge_runs():
    x = RNG.uniform(-1, 1, 1024).astype(np.float16)
    (y,) = emulator.run(parse(loop_kernel(LOOP)), "k", [x]).outputs
    np.testing.assert_array_equal(y, x * np.float16(3))


def test_loop_without_its_back_edge_flag_races_in_iteration_1():
    # without mte3 -> mte2, nothing orders iteration 1's load into %u after
    # iteration 0's vmuls, which wrote %u in place
    body = LOOP
    for line in ("  ascend.set_flag mte3 to mte2 event 0", "    ascend.wait_flag mte3 to mte2 event 0",
                 "    ascend.set_flag mte3 to mte2 event 0", "  ascend.wait_flag mte3 to mte2 event 0"):
        body = without(body, line)
    text = loop_kernel(body)
    e = expect(E.RaceError, text, [np.zeros(1024, np.float16)], r"WAW race: ascend.copy \(pipe mte2\) writes bytes "
               r"\[0, 512\) of ub buffer %u .* written by ascend.vmuls at k.mlir:11:5 \(pipe v\) with no "
               "ascend.set_flag/wait_flag v to mte2 between them", "ascend.copy mte2")
    assert e.kind == "WAW"


def test_reusing_a_buffer_another_pipe_still_reads_is_a_war_race():
    # the first store on MTE3 reads %u; nothing orders the second vdup after it
    text = kernel(f"""  %s = arith.constant 3.0 : f16
  %c128 = arith.constant 128 : index
  %u = ascend.alloc at 0 : {UB}
  ascend.vdup %u[%c0], %s : {UB}, f16
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %u[%c0] to %y[%c0] sizes [128] : {UB} to {GM}
  ascend.vdup %u[%c0], %s : {UB}, f16
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %u[%c0] to %y[%c128] sizes [128] : {UB} to {GM}
""")
    e = expect(E.RaceError, text, X, r"WAR race: ascend.vdup \(pipe v\) writes bytes \[0, 256\) of ub buffer %u "
               r"\(ub\[0, 256\)\), read by ascend.copy at k.mlir:9:3 \(pipe mte3\) with no "
               "ascend.set_flag/wait_flag mte3 to v between them", 10)
    assert e.kind == "WAR"


def test_flag_set_twice():
    text = kernel("  ascend.set_flag mte2 to v event 1\n  ascend.set_flag mte2 to v event 1\n"
                  "  ascend.wait_flag mte2 to v event 1\n")
    with pytest.raises(E.SyncError, match=r"sets a flag that is still set \(by ascend.set_flag at k.mlir:3:3\)") as e:
        emulator.run(parse(text), "k", X)
    assert e.value.loc.line == 4


def test_flag_never_waited():
    text = kernel("  ascend.set_flag v to mte3 event 2\n")
    expect(E.SyncError, text, X, "ascend.set_flag v to mte3 event 2 is never waited", "ascend.set_flag")


def test_wait_that_can_never_fire_is_a_deadlock():
    text = kernel("  ascend.wait_flag mte2 to v event 0\n")
    expect(E.DeadlockError, text, X, "deadlock: ascend.wait_flag mte2 to v event 0 can never fire", "ascend.wait_flag")


def test_circular_waits_are_a_deadlock():
    text = kernel("  ascend.wait_flag v to mte2 event 0\n  ascend.set_flag mte2 to v event 0\n"
                  "  ascend.wait_flag mte2 to v event 0\n  ascend.set_flag v to mte2 event 0\n")
    expect(E.DeadlockError, text, X, r"deadlock: ascend.wait_flag v to mte2 event 0 .*also blocked: pipe v waits at ascend.wait_flag at k.mlir:5:3",
           "ascend.wait_flag v to mte2")


@pytest.mark.parametrize("target, event", [("910A", 4), ("910B", 8)])
def test_event_id_out_of_range(target, event):
    text = kernel(f"  ascend.set_flag mte2 to v event {event}\n  ascend.wait_flag mte2 to v event {event}\n",
                  target=target)
    expect(E.SyncError, text, X, rf"event {event} is outside \[0, {event - 1}\], the event ids of {target}",
           "ascend.set_flag")


CUBE = """  %a = ascend.alloc at 0 : !ascend.buf<l0a, 32x32x{a}, zZ>
  %b = ascend.alloc at 0 : !ascend.buf<l0b, 32x32x{b}, nZ>
  %c = ascend.alloc at 0 : !ascend.buf<l0c, 32x32x{c}, zN>
  ascend.mmad %c, %a, %b m {m} n 32 k {k} init : !ascend.buf<l0c, 32x32x{c}, zN>, !ascend.buf<l0a, 32x32x{a}, zZ>, !ascend.buf<l0b, 32x32x{b}, nZ>
"""


@pytest.mark.parametrize("a, b, c, m, k, message", [
    ("f32", "f16", "f32", 32, 32, r"takes \(f16, f16\) -> f32, \(bf16, bf16\) -> f32, \(i8, i8\) -> i32 on 910B, "
                                  r"not \(f32, f16\) -> f32"),
    ("f16", "f16", "f16", 32, 32, r"not \(f16, f16\) -> f16"),
    ("f16", "f16", "f32", 32, 17, "k = 17 is not a multiple of the fractal depth 16: pad K with zeros to 32"),
    ("f16", "f16", "f32", 4096, 32, r"m = 4096 is outside \[1, 4095\]"),
    ("f16", "f16", "f32", 48, 32, r"m = 48, n = 32, k = 32 \(fractals 48x32x32\) do not fit a 32x32"),
])
def test_bad_cube_shapes_and_dtypes(a, b, c, m, k, message):
    text = kernel(CUBE.format(a=a, b=b, c=c, m=m, k=k))
    expect(E.CubeError, text, X, message, "ascend.mmad")


def test_bf16_cube_only_on_910b():
    text = kernel(CUBE.format(a="bf16", b="bf16", c="f32", m=32, k=32), target="910A")
    expect(E.CubeError, text, X, r"on 910A, not \(bf16, bf16\) -> f32", "ascend.mmad")


def test_vector_footprint_outside_its_buffer():
    text = kernel(f"  %u = ascend.alloc at 0 : {UB}\n  ascend.vabs %u[%c0], %u[%c0] repeat 3 : {UB}, {UB}\n")
    expect(E.BoundsError, text, X, r"the footprint of operand dst, bytes \[0, 768\) of ub buffer %u, is outside its "
           "512 bytes", "ascend.vabs")


def test_tile_outside_its_buffer():
    text = kernel(f"""  %c128 = arith.constant 128 : index
  %u = ascend.alloc at 0 : {UB}
  ascend.copy mte2 %x[%c128] to %u[%c0] sizes [256] : {GM} to {UB}
""")
    expect(E.BoundsError, text, X, r"tile \[256\] at \[128\] is outside %x", "ascend.copy")


L1_TILE = "!ascend.buf<l1, 32x32xf16, zN>"


def test_init_const_zero_fills_the_k_tail_and_a_race_on_it_is_caught():
    # zero the last 16 columns of an L1 tile, load 20 of its 32 columns over
    # the first fractals (MTE2 keeps its order: no flag between them), copy
    # the tile to L0A after a flag; without it, MTE1 reads bytes the fill
    # and the load write (the lowering's values: test_convert_msir_to_ascend)
    body = f"""  %zero = arith.constant 0.0 : f16
  %c16 = arith.constant 16 : index
  %a = ascend.alloc at 0 : {L1_TILE}
  %a0 = ascend.alloc at 0 : !ascend.buf<l0a, 32x32xf16, zZ>
  %u = ascend.alloc at 0 : !ascend.buf<ub, 32x32xf32, zN>
  ascend.init_const %a[%c0, %c16] sizes [32, 16], %zero : {L1_TILE}, f16
  ascend.copy mte2 %x[%c0, %c0] to %a[%c0, %c0] sizes [32, 20] : !ascend.buf<gm, 32x20xf16> to {L1_TILE}
  ascend.set_flag mte2 to mte1 event 0
  ascend.wait_flag mte2 to mte1 event 0
  ascend.copy mte1 %a[%c0, %c0] to %a0[%c0, %c0] sizes [32, 32] : {L1_TILE} to !ascend.buf<l0a, 32x32xf16, zZ>
"""
    ins, outs = "%x : !ascend.buf<gm, 32x20xf16>", "%y : !ascend.buf<gm, 256xf16>"
    x = [np.ones((32, 20), np.float16)]
    emulator.run(parse(kernel(body, "910A", ins, outs)), "k", x)
    racy = body.replace("  ascend.set_flag mte2 to mte1 event 0\n  ascend.wait_flag mte2 to mte1 event 0\n", "")
    expect(E.RaceError, kernel(racy, "910A", ins, outs), x, r"RAW race: ascend.copy \(pipe mte1\) reads", "copy mte1")


def test_init_const_outside_its_buffer_or_off_the_fractal_grid():
    body = f"""  %zero = arith.constant 0.0 : f16
  %c{{at}} = arith.constant {{at}} : index
  %a = ascend.alloc at 0 : {L1_TILE}
  ascend.init_const %a[%c0, %c{{at}}] sizes [32, 16], %zero : {L1_TILE}, f16
"""
    expect(E.BoundsError, kernel(body.format(at=32)), X, r"ascend.init_const: tile \[32, 16\] at \[0, 32\] is "
           "outside %a", "ascend.init_const")
    expect(E.AlignmentError, kernel(body.format(at=8)), X, r"ascend.init_const: tile at \[0, 8\] of %a .* does "
           "not start on a 16x16 fractal", "ascend.init_const")


def test_bad_vector_mask():
    text = kernel(f"  %u = ascend.alloc at 0 : {UB}\n  ascend.vabs %u[%c0], %u[%c0] mask 129 : {UB}, {UB}\n")
    expect(E.VectorError, text, X, r"mask 129 is outside \[1, 128\]", "ascend.vabs")


def test_cores_writing_the_same_gm_bytes_race():
    text = kernel(f"""  %u = ascend.alloc at 0 : {UB}
  ascend.vdup %u[%c0], %s repeat 2 : {UB}, f16
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %u[%c0] to %y[%c0] sizes [256] : {UB} to {GM}
""".replace("  %u", "  %s = arith.constant 1.0 : f16\n  %u", 1), block_dim=2)
    e = expect(E.RaceError, text, X, r"WAW race between cores: ascend.copy on core 1 writes bytes \[0, 512\) of gm "
               "buffer %y, written by core 0", "ascend.copy")
    assert e.kind == "WAW"


def test_inputs_must_match_the_kernel():
    with pytest.raises(E.KernelError, match=r"input 0 of @k \(%x\) must be a \(256,\) array of float16, got \(256,\) "
                       "float32"):
        emulator.run(parse(kernel("")), "k", [np.zeros(256, np.float32)])


# ---------------------------------------------------------------------------
# Other dtypes, and the cost model of data movement
# ---------------------------------------------------------------------------


def one_shot_matmul(dtype: str, acc: str, m: int, k: int, n: int, target: str = "910B") -> str:
    """c = a @ b through L1 and L0 in one step per operand (flags in order)."""
    a_gm, b_gm, c_gm = (f"!ascend.buf<gm, {m}x{k}x{dtype}>", f"!ascend.buf<gm, {k}x{n}x{dtype}>",
                        f"!ascend.buf<gm, {m}x{n}x{acc}>")
    a1, b1 = f"!ascend.buf<l1, {m}x{k}x{dtype}, zN>", f"!ascend.buf<l1, {k}x{n}x{dtype}, zN>"
    a0, b0, c0 = (f"!ascend.buf<l0a, {m}x{k}x{dtype}, zZ>", f"!ascend.buf<l0b, {k}x{n}x{dtype}, nZ>",
                  f"!ascend.buf<l0c, {m}x{n}x{acc}, zN>")
    return f"""ascend.kernel @mm #ascend.target<"{target}"> block_dim 1 ins(%a : {a_gm}, %b : {b_gm}) outs(%c : {c_gm}) {{
  %c0 = arith.constant 0 : index
  %a1 = ascend.alloc at 0 : {a1}
  %b1 = ascend.alloc at 65536 : {b1}
  %a0 = ascend.alloc at 0 : {a0}
  %b0 = ascend.alloc at 0 : {b0}
  %acc = ascend.alloc at 0 : {c0}
  ascend.copy mte2 %a[%c0, %c0] to %a1[%c0, %c0] sizes [{m}, {k}] : {a_gm} to {a1}
  ascend.copy mte2 %b[%c0, %c0] to %b1[%c0, %c0] sizes [{k}, {n}] : {b_gm} to {b1}
  ascend.set_flag mte2 to mte1 event 0
  ascend.wait_flag mte2 to mte1 event 0
  ascend.copy mte1 %a1[%c0, %c0] to %a0[%c0, %c0] sizes [{m}, {k}] : {a1} to {a0}
  ascend.copy mte1 %b1[%c0, %c0] to %b0[%c0, %c0] sizes [{k}, {n}] : {b1} to {b0}
  ascend.set_flag mte1 to m event 0
  ascend.wait_flag mte1 to m event 0
  ascend.mmad %acc, %a0, %b0 m {m} n {n} k {k} init : {c0}, {a0}, {b0}
  ascend.set_flag m to fix event 0
  ascend.wait_flag m to fix event 0
  ascend.copy fix %acc[%c0, %c0] to %c[%c0, %c0] sizes [{m}, {n}] : {c0} to {c_gm}
}}
"""


def test_int8_matmul_accumulates_in_int32():
    a = RNG.integers(-128, 128, (32, 64), dtype=np.int8)
    b = RNG.integers(-128, 128, (64, 32), dtype=np.int8)
    result = emulator.run(parse(one_shot_matmul("i8", "i32", 32, 64, 32)), "mm", [a, b])
    np.testing.assert_array_equal(result.outputs[0], a.astype(np.int32) @ b.astype(np.int32))
    # 2 x 2 output fractals x 2 steps of k0 = 32
    assert result.profile.busy["m"] == 8


def test_bf16_matmul_on_910b():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bf16 arrays need the optional ml_dtypes package")
    a = RNG.uniform(-1, 1, (32, 32)).astype(ml_dtypes.bfloat16)
    b = RNG.uniform(-1, 1, (32, 32)).astype(ml_dtypes.bfloat16)
    (c,) = emulator.run(parse(one_shot_matmul("bf16", "f32", 32, 32, 32)), "mm", [a, b]).outputs
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_bf16_without_ml_dtypes_is_a_clear_error():
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ml_dtypes is installed: bf16 runs")
    with pytest.raises(E.KernelError, match=r"bf16 buffers need the ml_dtypes package"):
        emulator.run(parse(one_shot_matmul("bf16", "f32", 32, 32, 32)), "mm", [np.zeros((32, 32))] * 2)


def copy_kernel(offset: int, target: str = "910B") -> str:
    return kernel(f"""  %o = arith.constant {offset} : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 4096xf16>
  ascend.copy mte2 %x[%o] to %u[%c0] sizes [4096] : !ascend.buf<gm, 8192xf16> to !ascend.buf<ub, 4096xf16>
  ascend.set_flag mte2 to mte3 event 0
  ascend.wait_flag mte2 to mte3 event 0
  ascend.copy mte3 %u[%c0] to %y[%c0] sizes [4096] : !ascend.buf<ub, 4096xf16> to !ascend.buf<gm, 4096xf16>
""", target=target, ins="%x : !ascend.buf<gm, 8192xf16>", outs="%y : !ascend.buf<gm, 4096xf16>")


@pytest.mark.parametrize("target", ["910A", "910B"])
def test_copy_costs_latency_plus_bytes_over_bandwidth(target):
    x = np.arange(8192).astype(np.float16)
    result = emulator.run(parse(copy_kernel(0, target)), "k", [x])
    np.testing.assert_array_equal(result.outputs[0], x[:4096])
    # 8 KiB at 64 B/cycle on each of MTE2 and MTE3, 100 cycles of latency each,
    # the second starting when the first has finished; issued at cycle 4
    assert result.profile.busy == {"mte2": 128, "mte3": 128}
    assert result.profile.cycles == 4 + 2 * (128 + 100)


def test_gm_bursts_off_512_bytes_run_at_70_percent():
    aligned = emulator.run(parse(copy_kernel(0)), "k", [np.zeros(8192, np.float16)]).profile
    shifted = emulator.run(parse(copy_kernel(16)), "k", [np.zeros(8192, np.float16)]).profile
    assert aligned.busy["mte2"] == 128 and shifted.busy["mte2"] == math.ceil(8192 / (64 * 0.7))


def test_cores_share_the_gm_bandwidth():
    text = kernel("""  %blk = ascend.block_idx : index
  %c4096 = arith.constant 4096 : index
  %o = arith.muli %blk, %c4096 : index
  %u = ascend.alloc at 0 : !ascend.buf<ub, 4096xf16>
  ascend.copy mte2 %x[%o] to %u[%c0] sizes [4096] : !ascend.buf<gm, 196608xf16> to !ascend.buf<ub, 4096xf16>
""", ins="%x : !ascend.buf<gm, 196608xf16>", outs="%y : !ascend.buf<gm, 16xf16>", block_dim=48)
    profile = emulator.run(parse(text), "k", [np.zeros(196608, np.float16)]).profile
    # 48 vector cores share 1000 B/cycle: 20.8 B/cycle each instead of 64
    assert profile.busy["mte2"] == math.ceil(8192 / (1000 / 48))


def test_vconv_widens_64_lanes_per_repeat_with_the_source_stride_halved():
    # f16 -> f32: a repeat converts 64 lanes, 4 source blocks; rep_stride 4
    # on the source makes its repeats contiguous
    text = kernel("""  %u = ascend.alloc at 0 : !ascend.buf<ub, 256xf16>
  %w = ascend.alloc at 512 : !ascend.buf<ub, 128xf32>
  ascend.copy mte2 %x[%c0] to %u[%c0] sizes [256] : !ascend.buf<gm, 256xf16> to !ascend.buf<ub, 256xf16>
  ascend.set_flag mte2 to v event 0
  ascend.wait_flag mte2 to v event 0
  ascend.vconv %w[%c0], %u[%c0] repeat 2 rep_stride [8, 4] : !ascend.buf<ub, 128xf32>, !ascend.buf<ub, 256xf16>
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %w[%c0] to %y[%c0] sizes [128] : !ascend.buf<ub, 128xf32> to !ascend.buf<gm, 128xf32>
""", outs="%y : !ascend.buf<gm, 128xf32>")
    x = RNG.uniform(-4, 4, 256).astype(np.float16)
    (y,) = emulator.run(parse(text), "k", [x]).outputs
    np.testing.assert_array_equal(y, x[:128].astype(np.float32))


@pytest.mark.parametrize("op, reference", [("vadds", np.add), ("vmuls", np.multiply), ("vmaxs", np.maximum),
                                           ("vmins", np.minimum)])
def test_vector_scalar_ops(op, reference):
    text = vector_kernel(f"ascend.{op} %u[%c0], %u[%c0], %s repeat 4 : {{t}}, {{t}}, {{dtype}}")
    x = RNG.uniform(-10, 10, 512).astype(np.float16)
    (y,) = emulator.run(parse(text), "k", [x]).outputs
    np.testing.assert_array_equal(y, reference(x, np.float16(7)))


# ---------------------------------------------------------------------------
# Reductions per repeat (vcadd, vcmax)
# ---------------------------------------------------------------------------


def reduce_kernel(instruction: str, dtype: str, n: int, out: int) -> str:
    t, g = f"!ascend.buf<ub, {n}x{dtype}>", f"!ascend.buf<gm, {n}x{dtype}>"
    r, h = f"!ascend.buf<ub, {out}x{dtype}>", f"!ascend.buf<gm, {out}x{dtype}>"
    return kernel(f"""  %u = ascend.alloc at 0 : {t}
  %r = ascend.alloc at {n * 4} : {r}
  ascend.copy mte2 %x[%c0] to %u[%c0] sizes [{n}] : {g} to {t}
  ascend.set_flag mte2 to v event 0
  ascend.wait_flag mte2 to v event 0
  {instruction.format(t=t, r=r)}
  ascend.set_flag v to mte3 event 0
  ascend.wait_flag v to mte3 event 0
  ascend.copy mte3 %r[%c0] to %y[%c0] sizes [{out}] : {r} to {h}
""", ins=f"%x : {g}", outs=f"%y : {h}")


def test_vcadd_sums_the_masked_lanes_of_each_strided_repeat_into_one_element_each():
    # rows of 16 f32 stored 16 apart: 4 repeats, mask 16, rep_stride 2 blocks
    x = np.arange(64, dtype=np.float32)
    text = reduce_kernel("ascend.vcadd %r[%c0], %u[%c0] mask 16 repeat 4 rep_stride [8, 2] : {r}, {t}", "f32", 64, 8)
    (y,) = emulator.run(parse(text), "k", [x]).outputs
    np.testing.assert_array_equal(y[:4], x.reshape(4, 16).sum(axis=1))


def test_vcmax_takes_the_maximum_of_each_repeat():
    x = np.random.default_rng(0).uniform(-1, 1, 256).astype(np.float16)
    text = reduce_kernel("ascend.vcmax %r[%c0], %u[%c0] repeat 2 : {r}, {t}", "f16", 256, 16)
    (y,) = emulator.run(parse(text), "k", [x]).outputs
    np.testing.assert_array_equal(y[:2], x.reshape(2, 128).max(axis=1))


def test_f16_vcadd_accumulates_in_f32_and_rounds_once():
    # 2048 then 127 ones: an f16 running sum stays at 2048 (2049 rounds to
    # even); in f32 the sum is 2175, which rounds once to 2176
    x = np.ones(128, np.float16)
    x[0] = 2048
    assert np.add.accumulate(x)[-1] == 2048
    text = reduce_kernel("ascend.vcadd %r[%c0], %u[%c0] : {r}, {t}", "f16", 128, 16)
    (y,) = emulator.run(parse(text), "k", [x]).outputs
    assert y[0] == 2176


def test_reduction_destination_outside_its_buffer():
    # 20 repeats write 20 elements; the destination holds 16
    text = reduce_kernel("ascend.vcadd %r[%c0], %u[%c0] repeat 20 rep_stride [8, 0] : {r}, {t}", "f32", 64, 16)
    expect(E.BoundsError, text, [np.zeros(64, np.float32)], r"the footprint of operand dst, bytes \[0, 80\) of ub "
           r"buffer %r, is outside its 64 bytes", "ascend.vcadd")


def test_reduction_destination_not_32_byte_aligned():
    text = reduce_kernel("ascend.vcmax %r[%c4], %u[%c0] : {r}, {t}", "f32", 64, 16).replace(
        "  %u = ", "  %c4 = arith.constant 4 : index\n  %u = ")
    expect(E.AlignmentError, text, [np.zeros(64, np.float32)], r"operand dst starts at byte 16 of ub buffer %r",
           "ascend.vcmax")


def test_vbrcb_fills_each_block_with_one_source_element():
    # 16 f32 row values -> 2 repeats of 8 blocks of 8 copies each
    x = np.zeros(128, np.float32)
    x[:16] = np.arange(1, 17)
    text = reduce_kernel("ascend.vbrcb %r[%c0], %u[%c0] repeat 2 : {r}, {t}", "f32", 128, 128)
    (y,) = emulator.run(parse(text), "k", [x]).outputs
    np.testing.assert_array_equal(y, np.repeat(np.arange(1, 17, dtype=np.float32), 8))


def test_vbrcb_source_outside_its_buffer():
    text = reduce_kernel("ascend.vbrcb %r[%c0], %u[%c0] repeat 2 : {r}, {t}", "f32", 8, 128)
    expect(E.BoundsError, text, [np.zeros(8, np.float32)], r"the footprint of operand src, bytes \[0, 64\) of ub "
           r"buffer %u, is outside its 32 bytes", "ascend.vbrcb")
