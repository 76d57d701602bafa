"""Matmul on the cube unit: the analytic tiler and the kernel (L1 / L0
tiles, ping-pong buffers, K padding); the contract is
`convert_msir_to_ascend`'s docstring."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    Float16Type,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)

from msir.ascend.kernel_builder import Kernel, copy, dtype_of, refuse, tile_access
from msir.ascend.sync import Instr
from msir.dialects import ascend as A

# ---------------------------------------------------------------------------
# The analytic matmul tiler
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MatmulTiling:
    """baseM x baseN output tiles, baseK deep steps; `block_dim` cores;
    `buffers` L1 / L0 buffers per operand (2: ping-pong)."""

    m: int
    n: int
    k: int
    block_dim: int
    buffers: int = 1


def _up16(x: int) -> int:
    return -(-x // 16) * 16


def _tile_classes(M: int, bm: int, N: int, bn: int) -> list[tuple[int, int, int]]:
    """The output tiles with one static shape each: (count, rows, cols) of
    the full tiles, the last column's, the last row's and the corner's."""
    rows = [(M // bm, bm)] + ([(1, M % bm)] if M % bm else [])
    cols = [(N // bn, bn)] + ([(1, N % bn)] if N % bn else [])
    return [(r * c, mt, nt) for r, mt in rows for c, nt in cols if r * c]


def _load_cycles(spec: A.TargetSpec, cores: int, rows: int, row_bytes: int, aligned: bool) -> float:
    """MTE2's cycles for `rows` GM bursts of `row_bytes` (the timing model's
    `copy_cost`: the core's share of GM, slower for bursts not 512 B aligned)."""
    bandwidth = min(spec.pipes["mte2"].bytes_per_cycle, spec.gm_bytes_per_cycle / cores)
    return rows * row_bytes / (bandwidth if aligned else bandwidth / spec.gm_unaligned_penalty)


def tile_matmul(spec: A.TargetSpec, M: int, N: int, K: int, out_bytes: int, max_buffers: int = 2) -> MatmulTiling:
    """The tile sizes and buffering that fit the target's memories and
    minimise the cost model's estimate. L0C holds the f32 accumulator and,
    on coupled chips, UB the output tile; L1 holds `buffers` A and B tiles,
    L0A / L0B `buffers` each. The estimate is the tiles core 0 runs (it
    starts every class of tiles) x the time of one tile: single-buffered,
    each K step's loads wait for the last step's L1 -> L0 copies (with both
    hand-overs' latencies), the cube overlapping the next loads;
    double-buffered, MTE2 streams while the cube works on the other buffer,
    limited by the cube, by MTE2, or by the chain of one buffer every two
    steps, plus one step to fill and drain the pipeline. MTE2's cycles count GM bursts that are not 512 B
    aligned (a row of A is aligned when K and baseK are multiples of 256
    f16, of B when N and baseN are) at the timing model's slower rate.
    `block_dim` is what the largest class uses; `max_buffers` 1 asks for
    single buffering."""
    cap = spec.capacity
    best = None
    latency = spec.pipes["mte2"].latency + spec.pipes["mte1"].latency
    mte1 = spec.pipes["mte1"].bytes_per_cycle
    for bm in range(16, min(_up16(M), 256) + 1, 16):
        for bn in range(16, min(_up16(N), 256) + 1, 16):
            if bm * bn * 4 > cap["l0c"] or (spec.coupled and bm * bn * max(out_bytes, 4) > cap["ub"]):
                continue
            classes = _tile_classes(M, bm, N, bn)
            cores = min(spec.cube_cores, max(count for count, _, _ in classes))
            # each class of tiles starts its round-robin at core 0
            rounds = sum(-(-count // cores) for count, _, _ in classes)
            for bk in range(16, min(_up16(K), 4080) + 1, 16):
                steps = math.ceil(K / bk)
                b_load = _load_cycles(spec, cores, K, bn * 2, N % 256 == 0 and bn % 256 == 0)
                load = b_load + _load_cycles(spec, cores, bm, K * 2, K % 256 == 0 and bk % 256 == 0)
                cube = (bm // 16) * (bn // 16) * math.ceil(K / 16)
                copy = (bm + bn) * K * 2 / mte1
                for buffers in range(1, (max_buffers if steps > 1 else 1) + 1):
                    if (buffers * bm * bk * 2 > cap["l0a"] or buffers * bk * bn * 2 > cap["l0b"]
                            or buffers * (bm + bn) * bk * 2 > cap["l1"]):
                        continue
                    # a step's chain: its loads, their hand-over to MTE1, its
                    # L1 -> L0 copies, their hand-over back to MTE2 (the next
                    # loads into the buffer wait for them) or to the cube
                    chain = (load + copy) / steps + latency
                    if buffers == 1:
                        tile = steps * chain + cube / steps
                    else:  # the chains of the two buffers overlap
                        tile = max(cube, load, steps / 2 * chain) + chain + cube / steps
                    cost = (rounds * tile, -bk, buffers)
                    if best is None or cost < best[0]:
                        best = (cost, MatmulTiling(bm, bn, bk, cores, buffers))
    assert best is not None, "a 16x16x16 tile fits every target"
    return best[1]



# ---------------------------------------------------------------------------
# Matmul
# ---------------------------------------------------------------------------


def lower_matmul(name: str, spec: A.TargetSpec, fn: func.FuncOp, op, max_buffers: int) -> A.KernelOp:
    a_t, b_t, c_t = op.lhs.type, op.rhs.type, op.result.type
    if len(a_t.get_shape()) != 2 or len(b_t.get_shape()) != 2:
        raise refuse(op, f"the Ascend target multiplies rank-2 matrices, not {a_t} and {b_t}")
    dtype = dtype_of(op, a_t)
    (M, K), (_, N) = a_t.get_shape(), b_t.get_shape()
    out = A.BufferType("gm", (M, N), c_t.element_type)
    operands = [A.BufferType("gm", (M, K), Float16Type()), A.BufferType("gm", (K, N), Float16Type())]
    names = [arg.name_hint or f"arg{i}" for i, arg in enumerate(fn.body.block.args)]
    if [op.lhs, op.rhs] != list(fn.body.block.args):
        raise refuse(op, "the Ascend target multiplies the function's two arguments (lhs, rhs)")
    k = Kernel(name, spec, operands, [out], [*names, "result"])
    tiling = tile_matmul(spec, M, N, K, out.element_bytes, max_buffers)
    bm, bn, bk = tiling.m, tiling.n, tiling.k
    a_gm, b_gm = k.block.args[0], k.block.args[1]
    c_gm = k.block.args[2]
    # with ping-pong buffers, MTE2 and MTE1 fill one while the cube reads the other
    pingpong = ("", "_pong")[: tiling.buffers]
    a_l1 = [k.alloc("l1", (bm, bk), "f16", "zN", "a_l1" + s) for s in pingpong]
    b_l1 = [k.alloc("l1", (bk, bn), "f16", "zN", "b_l1" + s) for s in pingpong]
    a_l0 = [k.alloc("l0a", (bm, bk), "f16", "zZ", "a_l0" + s) for s in pingpong]
    b_l0 = [k.alloc("l0b", (bk, bn), "f16", "nZ", "b_l0" + s) for s in pingpong]
    acc = k.alloc("l0c", (bm, bn), "f32", "zN", "acc")
    out_dtype = A.DTYPE_NAMES[c_t.element_type]
    c_ub = None if not spec.coupled else k.alloc("ub", (bm, bn), out_dtype, "zN", "c_ub")
    full_m, full_n = M // bm, N // bn
    row_classes = [(0, full_m, bm), (full_m, 1, M % bm)] if M % bm else [(0, full_m, bm)]
    col_classes = [(0, full_n, bn), (full_n, 1, N % bn)] if N % bn else [(0, full_n, bn)]
    for row0, rows, mt in row_classes:
        for col0, cols, nt in col_classes:
            if rows == 0 or cols == 0:
                continue
            loop, t = k.round_robin(k.body, rows * cols, tiling.block_dim)
            i = k.arith(loop.body, arith.DivUIOp, t, k.index(cols))
            j = k.arith(loop.body, arith.RemUIOp, t, k.index(cols))
            row = k.arith(loop.body, arith.MuliOp, k.arith(loop.body, arith.AddiOp, i, k.index(row0)), k.index(bm))
            col = k.arith(loop.body, arith.MuliOp, k.arith(loop.body, arith.AddiOp, j, k.index(col0)), k.index(bn))
            _matmul_tile(k, loop.body, (a_gm, b_gm, c_gm), (a_l1, b_l1, a_l0, b_l0, acc, c_ub), row, col, mt, nt,
                         K, bk)
    attributes = {"msir.host_casts": ArrayAttr([StringAttr(dtype), StringAttr(dtype)])} if dtype != "f16" else {}
    # a software-pipelined K loop overlaps only if each load waits for the
    # compute that read its buffer, not for the work issued after it
    return k.finish(tiling.block_dim, attributes, early_sets=tiling.buffers == 2)


def _matmul_tile(k: Kernel, into: list, gm, bufs, row, col, mt: int, nt: int, K: int, bk: int) -> None:
    """One mt x nt output tile at (row, col): K in bk steps (the first
    initialises L0C), then L0C out to GM. A step is its loads (GM -> L1,
    MTE2) and its compute (L1 -> L0, MTE1; mmad). Single-buffered, the steps
    follow each other; double-buffered, step s uses buffer s % 2 and the
    loads of step s + 1 come before the compute of step s in program order,
    so the sync inserter orders each load only after the compute that last
    read its buffer (a flag set right after it) and MTE2 streams while the
    cube works. Full steps run in an `scf.for` (over two steps when
    double-buffered, as the buffers are static); the rest is peeled."""
    a_gm, b_gm, c_gm = gm
    a_l1, b_l1, a_l0, b_l0, acc, c_ub = bufs
    c0 = k.index(0)
    buffers = len(a_l1)
    steps = -(-K // bk)
    last = K - (steps - 1) * bk

    def size(step: int) -> int:
        return last if step == steps - 1 else bk

    def load(body: list, kk, step: int) -> None:
        buf = step % buffers
        if size(step) % 16:
            zero_tail(body, step)
        copy(k, body, "mte2", a_gm, [row, kk], a_l1[buf], [c0, c0], (mt, size(step)))
        copy(k, body, "mte2", b_gm, [kk, col], b_l1[buf], [c0, c0], (size(step), nt))

    def zero_tail(body: list, step: int) -> None:
        """Zero the last fractal of K of the step's L1 tiles before its loads
        fill the valid part: the cube multiplies whole fractals."""
        buf, ks = step % buffers, _up16(size(step))
        zero = k.scalar(0.0, "f16")
        for tile, at, sizes in ((a_l1[buf], (0, ks - 16), (_up16(mt), 16)), (b_l1[buf], (ks - 16, 0), (16, _up16(nt)))):
            fill = A.InitConstOp.build(operands=[tile, [k.index(x) for x in at], zero],
                                       properties={"sizes": DenseArrayBase.from_list(i64, sizes)})
            body.append(Instr(fill, "mte2", [], [tile_access(tile, at, sizes)]))

    def compute(body: list, step: int) -> None:
        buf, ks = step % buffers, _up16(size(step))
        copy(k, body, "mte1", a_l1[buf], [c0, c0], a_l0[buf], [c0, c0], (_up16(mt), ks))
        copy(k, body, "mte1", b_l1[buf], [c0, c0], b_l0[buf], [c0, c0], (ks, _up16(nt)))
        props = {"m": IntegerAttr(mt, i64), "n": IntegerAttr(nt, i64), "k": IntegerAttr(ks, i64)}
        if step == 0:
            props["init"] = UnitAttr()
        mmad = A.MmadOp.build(operands=[acc, a_l0[buf], b_l0[buf]], properties=props)
        reads = [tile_access(a_l0[buf], (0, 0), (_up16(mt), ks)), tile_access(b_l0[buf], (0, 0), (ks, _up16(nt)))]
        c_tile = tile_access(acc, (0, 0), (_up16(mt), _up16(nt)))
        body.append(Instr(mmad, "m", reads if step == 0 else [*reads, c_tile], [c_tile], mmad=True))

    # group g: the loads of step g, then (double-buffered) the compute of
    # step g - 1, or (single-buffered) of step g; group 0 of a
    # double-buffered tile is the loads alone, and its last compute follows
    lag = buffers - 1

    def group(body: list, kk, g: int) -> None:
        load(body, kk, g)
        if g - lag >= 0:
            compute(body, g - lag)

    first = 1 + lag  # the groups before it are peeled: step 0 initialises L0C
    for g in range(first):
        group(into, k.index(g * bk), g)
    full_end = steps - 1 if last != bk else steps  # groups whose loads are full steps
    trips = max(0, full_end - first) // buffers
    if trips:
        loop, kk = k.counted(into, first * bk, (first + trips * buffers) * bk, buffers * bk)
        for b in range(buffers):
            at = kk if b == 0 else k.arith(loop.body, arith.AddiOp, kk, k.index(b * bk))
            group(loop.body, at, first + b)
    for g in range(first + trips * buffers, steps):
        group(into, k.index(g * bk), g)
    if lag:
        compute(into, steps - 1)
    if c_ub is None:
        copy(k, into, "fix", acc, [c0, c0], c_gm, [row, col], (mt, nt))
    else:
        copy(k, into, "v", acc, [c0, c0], c_ub, [c0, c0], (_up16(mt), _up16(nt)))
        copy(k, into, "mte3", c_ub, [c0, c0], c_gm, [row, col], (mt, nt))


