"""Matmul on the cube unit: the analytic tiler and the kernel (L1 / L0
tiles, ping-pong buffers, A's L1 tiles over several K steps, K padding,
the copy out of L0C); the contract is `convert_msir_to_ascend`'s docstring."""

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
    `buffers` L1 / L0 buffers per operand (2: ping-pong); A's L1 tiles are
    `ka` deep (a multiple of baseK: `ka // k` steps load A once, then copy
    their slices L1 -> L0A), so that its GM bursts can be 512 B."""

    m: int
    n: int
    k: int
    block_dim: int
    buffers: int = 1
    ka: int = 0

    @property
    def a_steps(self) -> int:
        """K steps per L1 tile of A."""
        return max(1, self.ka // self.k)


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


def _copy_out_cycles(spec: A.TargetSpec, cores: int, bm: int, bn: int, N: int, out_bytes: int) -> float:
    """The copy of the last output tile out of L0C, which follows the last
    mmad: FixPipe (the f32 tile at its rate, the result's bytes at the
    core's share of GM), or V into UB in bands (the first band's) and
    MTE3 to GM; rows are 512 B aligned GM bursts when N and bn are."""
    aligned = (N * out_bytes) % 512 == 0 and (bn * out_bytes) % 512 == 0
    pipe = spec.pipes["mte3" if spec.coupled else "fix"]
    # as `timing.copy_cost`: the slower of the pipe and the core's share of GM
    gm = min(pipe.bytes_per_cycle, spec.gm_bytes_per_cycle / cores) / (1 if aligned else spec.gm_unaligned_penalty)
    if not spec.coupled:
        return max(bm * bn * 4 / pipe.bytes_per_cycle, bm * bn * out_bytes / gm) + pipe.latency
    v = spec.pipes["v"]
    return _out_band(bm) * bn * 4 / v.bytes_per_cycle + v.latency + bm * bn * out_bytes / gm + pipe.latency


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
    aligned (a row of A is aligned when K and A's L1 depth `ka` are
    multiples of 256 f16, of B when N and baseN are) at the timing model's
    slower rate. A's L1 tile is one step deep, or the fewest steps that make
    its bursts aligned (its load is then issued with the first of them: the
    part of it beyond one step's share delays the first compute).
    The copy of the last tile out of L0C adds to the estimate
    (`_copy_out_cycles`). The `RESCORED` best tilings of this closed form
    are then scored again with a tile's K loop simulated step by step
    (`_simulate_tile`), which sees the hand-overs the closed form averages
    (a deep A tile's load stalling the copies behind it, a buffer's chain
    longer than two steps of MTE2). `block_dim` is what the largest class
    uses; `max_buffers` 1 asks for single buffering."""
    cap = spec.capacity
    candidates = []
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
            out = _copy_out_cycles(spec, cores, bm, bn, N, out_bytes)
            for bk in range(16, min(_up16(K), 4080) + 1, 16):
                steps = math.ceil(K / bk)
                deep = 256 // math.gcd(bk, 256)  # steps per A tile for 512 B bursts
                depths = {1} | ({deep} if K % 256 == 0 and 1 < deep < steps else set())
                b_load = _load_cycles(spec, cores, K, bn * 2, N % 256 == 0 and bn % 256 == 0)
                cube = (bm // 16) * (bn // 16) * math.ceil(K / 16)
                copy = (bm + bn) * K * 2 / mte1
                for a_steps in sorted(depths):
                    ka = a_steps * bk
                    a_load = _load_cycles(spec, cores, bm, K * 2, K % 256 == 0 and ka % 256 == 0)
                    load = b_load + a_load
                    fill = a_load * (a_steps - 1) / steps  # delays the cube, not MTE2
                    for buffers in range(1, (max_buffers if steps > 1 else 1) + 1):
                        if (buffers * bm * bk * 2 > cap["l0a"] or buffers * bk * bn * 2 > cap["l0b"]
                                or buffers * (bm * ka + bk * bn) * 2 > cap["l1"]):
                            continue
                        # a step's chain: its loads, their hand-over to MTE1, its
                        # L1 -> L0 copies, their hand-over back to MTE2 (the next
                        # loads into the buffer wait for them) or to the cube
                        chain = (load + copy) / steps + latency
                        if buffers == 1:
                            tile = steps * chain + cube / steps + fill
                        else:  # the chains of the two buffers overlap
                            tile = max(cube + fill, load, steps / 2 * chain) + chain + cube / steps
                        cost = (rounds * tile + out, -bk, buffers, a_steps)
                        candidates.append((cost, rounds, out, MatmulTiling(bm, bn, bk, cores, buffers,
                                                                           ka if a_steps > 1 else 0)))
    assert candidates, "a 16x16x16 tile fits every target"
    # the best few, scored again step by step
    candidates.sort(key=lambda c: c[0])
    rescored = [((rounds * _simulate_tile(spec, M, N, K, t) + out, *cost[1:]), t)
                for cost, rounds, out, t in candidates[:RESCORED]]
    return min(rescored, key=lambda c: c[0])[1]


RESCORED = 12
"""How many of the closed-form estimate's best tilings `_simulate_tile` scores again."""


def _simulate_tile(spec: A.TargetSpec, M: int, N: int, K: int, t: MatmulTiling) -> float:
    """The cycles of one full output tile's K loop, step by step as the
    timing model runs it: a step's loads (B's, and A's L1 tile at its first
    step) wait for MTE2 and for the L1 -> L0 copies that last read their
    buffers; its copies for the loads (MTE2's latency), for MTE1 and for
    the mmad that last read their L0 buffers; its mmad for the copies and
    the cube. Ends when the last mmad's result is in L0C."""
    cores = t.block_dim
    mte2, mte1 = spec.pipes["mte2"], spec.pipes["mte1"]
    steps = math.ceil(K / t.k)
    s = t.a_steps
    lead = 1 if s > 1 and t.buffers == 2 else 0
    a_aligned = K % 256 == 0 and (t.ka if s > 1 else t.k) % 256 == 0
    b_aligned = N % 256 == 0 and t.n % 256 == 0
    load_free = copy_free = cube_free = 0.0
    copied: list[float] = []
    cubed: list[float] = []
    for g in range(steps):
        ks = min(t.k, K - g * t.k)
        load = _load_cycles(spec, cores, ks, t.n * 2, b_aligned)
        start = load_free
        if g >= t.buffers:
            start = max(start, copied[g - t.buffers])
        chunk, within = divmod(g + lead, s)
        if g == 0 or (within == 0 and 0 < chunk * s * t.k < K):  # as `_matmul_tile` loads A's tiles
            chunk = 0 if g == 0 else chunk
            width = min(s * t.k, K - chunk * s * t.k)
            load += _load_cycles(spec, cores, t.m, width * 2, a_aligned)
            if chunk >= t.buffers:  # A's buffer, last read by the copies of its tile before
                start = max(start, copied[(chunk - t.buffers + 1) * s - 1])
        load_free = start + load
        start = max(copy_free, load_free + mte2.latency, cubed[g - t.buffers] if g >= t.buffers else 0)
        copy_free = start + (t.m + t.n) * _up16(ks) * 2 / mte1.bytes_per_cycle
        copied.append(copy_free + mte1.latency)
        start = max(cube_free, copied[-1])
        cube_free = start + (t.m // 16) * (t.n // 16) * math.ceil(ks / 16)
        cubed.append(cube_free + spec.cube_latency)
    return cubed[-1]



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
    a_l1 = [k.alloc("l1", (bm, bk * tiling.a_steps), "f16", "zN", "a_l1" + s) for s in pingpong]
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
                         K, bk, tiling.a_steps)
    attributes = {"msir.host_casts": ArrayAttr([StringAttr(dtype), StringAttr(dtype)])} if dtype != "f16" else {}
    # a software-pipelined K loop overlaps only if each load waits for the
    # compute that read its buffer, not for the work issued after it
    return k.finish(tiling.block_dim, attributes, early_sets=tiling.buffers == 2)


def _matmul_tile(k: Kernel, into: list, gm, bufs, row, col, mt: int, nt: int, K: int, bk: int,
                 a_steps: int = 1) -> None:
    """One mt x nt output tile at (row, col): K in bk steps (the first
    initialises L0C), then L0C out to GM. A step is its loads (GM -> L1,
    MTE2) and its compute (L1 -> L0, MTE1; mmad); A's L1 tile holds
    `a_steps` steps (loaded with the first of them, each step copying its
    slice to L0A). Single-buffered, the steps follow each other;
    double-buffered, step s uses B buffer s % 2 and A buffer (s // a_steps)
    % 2, and the loads of step s + 1 come before the compute of step s in
    program order, so the sync inserter orders each load only after the
    compute that last read its buffer (a flag set right after it) and MTE2
    streams while the cube works. Full steps run in an `scf.for` (over
    2 x a_steps steps when double-buffered, as the buffers are static);
    the rest is peeled."""
    a_gm, b_gm, c_gm = gm
    a_l1, b_l1, a_l0, b_l0, acc, c_ub = bufs
    c0 = k.index(0)
    buffers = len(a_l1)
    steps = -(-K // bk)
    last = K - (steps - 1) * bk
    ka = a_steps * bk
    # a deep tile of A is loaded a step before its first step is: the copies
    # of that step then need not wait for the whole tile behind MTE2's queue
    lead = 1 if a_steps > 1 and buffers == 2 else 0

    def size(step: int) -> int:
        return last if step == steps - 1 else bk

    def a_width(chunk: int) -> int:
        """The K extent of A's L1 tile `chunk`."""
        return min(ka, K - chunk * ka)

    def zero_fractal(body: list, tile, at: tuple[int, int], sizes: tuple[int, int]) -> None:
        """Zero one fractal column (or row) of an L1 tile before its load
        fills the valid part: the cube multiplies whole fractals."""
        fill = A.InitConstOp.build(operands=[tile, [k.index(x) for x in at], k.scalar(0.0, "f16")],
                                   properties={"sizes": DenseArrayBase.from_list(i64, sizes)})
        body.append(Instr(fill, "mte2", [], [tile_access(tile, at, sizes)]))

    def a_chunk(step: int) -> int | None:
        """The L1 tile of A whose load comes with step `step`'s: the first
        with step 0, each later one `lead` steps before its first step."""
        chunk, within = divmod(step + lead, a_steps)
        if step == 0:
            return 0
        return chunk if within == 0 and 0 < chunk * ka < K else None

    def load(body: list, kk, step: int) -> None:
        chunk = a_chunk(step)
        if chunk is not None:
            a_tile, width = a_l1[chunk % buffers], a_width(chunk)
            if width % 16:
                zero_fractal(body, a_tile, (0, _up16(width) - 16), (_up16(mt), 16))
            at = kk if step == chunk * a_steps else k.arith(body, arith.AddiOp, kk, k.index(lead * bk))
            copy(k, body, "mte2", a_gm, [row, at], a_tile, [c0, c0], (mt, width))
        b_tile, ks = b_l1[step % buffers], _up16(size(step))
        if size(step) % 16:
            zero_fractal(body, b_tile, (ks - 16, 0), (16, _up16(nt)))
        copy(k, body, "mte2", b_gm, [kk, col], b_tile, [c0, c0], (size(step), nt))

    def compute(body: list, step: int) -> None:
        buf, ks = step % buffers, _up16(size(step))
        chunk, within = divmod(step, a_steps)
        copy(k, body, "mte1", a_l1[chunk % buffers], [c0, k.index(within * bk)], a_l0[buf], [c0, c0],
             (_up16(mt), ks), src_at=(0, within * bk))
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

    def full(g: int) -> bool:
        """Group g loads full steps (and a full tile of A, if any)."""
        chunk = a_chunk(g)
        return size(g) == bk and (chunk is None or a_width(chunk) == ka)

    first = 1 + lag  # the groups before it are peeled: step 0 initialises L0C
    for g in range(first):
        group(into, k.index(g * bk), g)
    period = buffers * a_steps  # the buffers' pattern repeats after it
    count = 0
    while first + count < steps and full(first + count):
        count += 1
    trips = count // period
    if trips < 2:  # unrolled: the early sets of one trip reach back only within its block
        trips = 0
    if trips:
        loop, kk = k.counted(into, first * bk, (first + trips * period) * bk, period * bk)
        for b in range(period):
            at = kk if b == 0 else k.arith(loop.body, arith.AddiOp, kk, k.index(b * bk))
            group(loop.body, at, first + b)
    for g in range(first + trips * period, steps):
        group(into, k.index(g * bk), g)
    if lag:
        compute(into, steps - 1)
    if c_ub is None:
        copy(k, into, "fix", acc, [c0, c0], c_gm, [row, col], (mt, nt))
        return
    # coupled: L0C -> UB (V) -> GM (MTE3); double-buffered, in bands of
    # rows, so that MTE3 starts on the first band while V copies the next
    # (each band's flag pair takes the next event id: V may set the next
    # before MTE3 has waited for the last)
    band = _out_band(mt) if buffers == 2 else _up16(mt)
    for r in range(0, mt, band):
        rows = min(band, mt - r)
        at = k.index(r)
        copy(k, into, "v", acc, [at, c0], c_ub, [at, c0], (_up16(rows), _up16(nt)), src_at=(r, 0), dst_at=(r, 0))
        gm_row = row if r == 0 else k.arith(into, arith.AddiOp, row, at)
        copy(k, into, "mte3", c_ub, [at, c0], c_gm, [gm_row, col], (rows, nt), src_at=(r, 0))


def _out_band(mt: int) -> int:
    """Rows per band of the copy out of L0C through UB: a quarter of the
    tile, in whole fractals."""
    return _up16(-(-mt // 4))
