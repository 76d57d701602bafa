"""Row kernels on the vector unit: reductions over the last axis
(`vcadd` / `vcmax` levels) and softmax; the contract is
`convert_msir_to_ascend`'s docstring."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i64
from xdsl.ir import SSAValue

from msir.ascend.kernel_builder import (
    REDUCE_REPEATS,
    VECTOR_CLASSES,
    Kernel,
    byte_offsets,
    copy,
    dtype_of,
    refuse,
    repeated,
)
from msir.ascend.sync import Access, Instr
from msir.dialects import ascend as A
from msir.errors import CompileError

# ---------------------------------------------------------------------------
# Row reductions
# ---------------------------------------------------------------------------

ROW_REDUCTIONS = {"msir.reduce_sum": ("vcadd", 0.0), "msir.reduce_max": ("vcmax", -math.inf)}
"""msir's reductions over the last axis: the vector op reducing a repeat, and its identity."""



@dataclass(frozen=True)
class RowPlan:
    """How a row reduction goes through UB: `rows` rows per tile, each row
    in chunks of `chunk` columns (a multiple of the work type's repeat; the
    last chunk padded with the identity); `levels` the row strides of the
    partial-result buffers, each level reducing a row's repeats to one
    element each, the last one (at most a repeat) to the row's result."""

    rows: int
    chunk: int
    chunks: int
    levels: tuple[tuple[int, int], ...]
    """(valid elements, row stride) of each partial-result buffer."""


def round_up(x: int, m: int) -> int:
    """x rounded up to a multiple of m."""
    return -(-x // m) * m


def rows_per_tile(spec: A.TargetSpec, M: int, row_bytes: int, most: int) -> int:
    """The rows per tile, at most `most`, that minimise the time of core 0,
    which runs every loop's first tile and the tail tile (full tiles go
    round-robin over the vector cores): per tile the latencies of a load
    and a store, per row its bytes at MTE2's rate."""
    cores = spec.vector_cores
    latency = spec.pipes["mte2"].latency + spec.pipes["mte3"].latency
    rate = spec.pipes["mte2"].bytes_per_cycle

    def core0_cycles(rows: int) -> float:
        full, tail = divmod(M, rows)
        tiles = -(-full // min(cores, max(full, 1))) if full else 0
        return (tiles + (tail > 0)) * latency + (tiles * rows + tail) * row_bytes / rate

    return min(range(1, max(1, most) + 1), key=lambda rows: (core0_cycles(rows), -rows))


def partial_levels(valid: int, per_repeat: int, align: int) -> list[tuple[int, int]]:
    """The partial buffers after the first level gives `valid` elements per
    row: a buffer whose row is reduced by full repeats again has a row stride
    of whole repeats (padded with the identity), the last one of 32 bytes."""
    levels = []
    while True:
        stride = round_up(valid, per_repeat) if valid > per_repeat else round_up(valid, align)
        levels.append((valid, stride))
        if valid <= per_repeat:
            return levels
        valid = stride // per_repeat


def plan_row_reduction(spec: A.TargetSpec, M: int, N: int, dtype: str, work: str, tile_elements: int) -> RowPlan:
    """Rows per tile and the chunking of a row so that the input tile, its
    conversion to `work` (when the types differ) and the partial buffers fit
    UB (and a tile holds at most `tile_elements` inputs, if given). A row
    whose repeats fit one instruction and whose buffers fit UB stays whole;
    a longer row goes one row per tile, in chunks of up to 240 repeats."""
    per_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[work]
    align, wb = 32 // A.DTYPE_BYTES[work], A.DTYPE_BYTES[work]
    column_bytes = A.DTYPE_BYTES[dtype] + (wb if work != dtype else 0)
    ub = spec.capacity["ub"] - 32 * 8  # slack for each buffer's 32-byte alignment

    def row_bytes(chunk: int, chunks: int) -> int:
        levels = partial_levels(chunks * chunk // per_repeat, per_repeat, align)
        return chunk * column_bytes + sum(stride for _, stride in levels) * wb + wb + A.DTYPE_BYTES[dtype]

    whole = round_up(N, max(per_repeat, A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]))  # whole repeats of both types
    if whole // per_repeat <= REDUCE_REPEATS and row_bytes(whole, 1) <= ub and (
            not tile_elements or whole <= tile_elements):
        rows = rows_per_tile(spec, M, N * A.DTYPE_BYTES[dtype], min(M, ub // row_bytes(whole, 1),
                                                                   max(1, tile_elements // whole) if tile_elements
                                                                   else M))
        chunk, chunks = whole, 1
    else:
        unit = 16 * per_repeat  # a chunk's partials start 32-byte aligned
        chunk = min(REDUCE_REPEATS * per_repeat, (ub // 2) // column_bytes // unit * unit,
                    max(unit, tile_elements // unit * unit) if tile_elements else math.inf)
        rows, chunks = 1, -(-N // chunk)
        if chunk < unit or row_bytes(chunk, chunks) > ub:
            raise CompileError(f"a row of {N} elements needs more UB for its partial sums than "
                               f"{spec.name} has ({spec.capacity['ub']} bytes)")
    return RowPlan(rows, chunk, chunks, tuple(partial_levels(chunks * chunk // per_repeat, per_repeat, align)))


def lower_row_reduction(name: str, spec: A.TargetSpec, fn: func.FuncOp, op, tile_elements: int, buffers: int = 2
                        ) -> A.KernelOp:
    """Per tile of rows: GM -> UB (padded with the identity), (f16 sums: to
    f32), the reduction levels, (back to f16), UB -> GM. When rows fit UB
    whole and each core gets several tiles (`plan_double_buffering`), the
    input and result buffers are ping-pong pairs and each tile's load is
    issued before the last one's vector work; rows streamed in chunks stay
    single-buffered."""
    t = op.input.type
    shape = tuple(t.get_shape())
    if len(shape) != 2 or op.axes_list not in ((1,), (-1,)):
        raise refuse(op, f"the Ascend target reduces the last axis of a rank-2 tensor, not axes "
                     f"{list(op.axes_list)} of {t}")
    returned = list(fn.body.block.last_op.operands)
    if list(fn.body.block.args) != [op.input] or returned != [op.result]:
        raise refuse(op, "the Ascend target lowers a row reduction of the function's argument as its result")
    dtype = dtype_of(op, t)
    M, N = shape
    reducer, identity = ROW_REDUCTIONS[op.name]
    work = "f32" if reducer == "vcadd" else dtype  # the vector unit sums f16 in f32; a maximum is exact
    plan = plan_row_reduction(spec, M, N, dtype, work, tile_elements)
    C = plan.chunk
    per_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[work]
    db = None
    if buffers == 2 and plan.chunks == 1:
        # a second set holds another input tile and result per row
        single_row = _reduction_row_bytes(plan, dtype, work)
        extra = C * A.DTYPE_BYTES[dtype] + A.DTYPE_BYTES[dtype]
        ub = spec.capacity["ub"] - 32 * 12
        most = max(1, min(plan.rows, ub // (single_row + extra)))
        # per tile: the first level's repeats (and the f16 -> f32 conversion's), one
        # instruction a level and the result's conversion back, each paying V's latency
        vector_passes = 1 + (1 if work != dtype else 0)
        instructions = len(plan.levels) + (2 if work != dtype else 0)
        db = plan_double_buffering(
            spec, M, N * A.DTYPE_BYTES[dtype], most,
            lambda rows: rows * (C // per_repeat) * vector_passes + instructions * spec.vector_latency,
            A.DTYPE_BYTES[dtype])
    R = db.rows if db else plan.rows
    hint = fn.body.block.args[0].name_hint or "arg0"
    k = Kernel(name, spec, [A.BufferType("gm", shape, t.element_type)],
                [A.BufferType("gm", (M,), op.result.type.element_type)], [hint, "result"])
    # set 0 as the single-buffered kernel lays it out; a second set holds
    # another input tile and result (which MTE3 reads; the sum's f32
    # accumulator, the f32 copy of the input and the partials are V's only)
    x_ub = k.alloc("ub", (R, C), dtype, "nd", f"{hint}_ub")
    x_work = k.alloc("ub", (R * C,), work, "nd", f"{hint}_{work}_ub") if work != dtype else x_ub
    partials = [k.alloc("ub", (R * stride,), work, "nd", f"partial{i}_ub") for i, (_, stride) in enumerate(plan.levels)]
    acc = k.alloc("ub", (round_up(R, 16),), work, "nd", "acc_ub")
    out = k.alloc("ub", (round_up(R, 16),), dtype, "nd", "out_ub") if work != dtype else acc
    sets = [(x_ub, x_work, acc, out)]
    if db:
        x_pong = k.alloc("ub", (R, C), dtype, "nd", f"{hint}_ub_pong")
        out_pong = k.alloc("ub", (round_up(R, 16),), dtype, "nd", "out_ub_pong" if work != dtype else "acc_ub_pong")
        sets.append((x_pong, x_work if work != dtype else x_pong, acc if work != dtype else out_pong, out_pong))
    vdup, vconv = VECTOR_CLASSES["vdup"], VECTOR_CLASSES["vconv"]
    reduce = VECTOR_CLASSES[reducer]
    in_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]
    # f16 <-> f32 conversions take 64 elements a repeat: 4 blocks of the f16 side
    halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // A.DTYPE_BYTES[work]
    # the identity pads what full repeats read beyond a row's valid elements
    if plan.chunks == 1 and N < C:
        for x_ub, *_ in sets:
            repeated(k, k.body, vdup, [(x_ub, 0, in_repeat)], R * C // in_repeat, scalar=k.scalar(identity, dtype))
    for buffer, (valid, stride) in zip(partials, plan.levels):
        if valid > per_repeat and stride > valid:
            repeated(k, k.body, vdup, [(buffer, 0, per_repeat)], R * stride // per_repeat,
                      scalar=k.scalar(identity, work))
    gm_in, gm_out = k.block.args
    c0 = k.index(0)

    def load(body: list, buffers: tuple, row, rows: int, j: int = 0) -> None:
        x_ub = buffers[0]
        width = min(C, N - j * C)
        if plan.chunks > 1 and width < C:  # the last chunk's padding, which earlier chunks overwrote
            repeated(k, body, vdup, [(x_ub, 0, in_repeat)], C // in_repeat, scalar=k.scalar(identity, dtype))
        copy(k, body, "mte2", gm_in, [row, k.index(j * C)], x_ub, [c0, c0], (rows, width))

    def reduce_tile(body: list, buffers: tuple, rows: int, j: int) -> None:
        x_ub, src, _, _ = buffers
        if work != dtype:
            repeated(k, body, vconv, [(src, 0, per_repeat), (x_ub, 0, per_repeat)], rows * C // per_repeat,
                      rep_stride=[A.BLOCKS_PER_REPEAT, halves])
        reduce_chunk(k, body, reduce, src, partials[0], plan.levels[0][1], rows, C, j, plan.chunks, per_repeat)

    def finish(body: list, buffers: tuple, row, rows: int) -> None:
        _, _, acc, out = buffers
        reduce_partials(k, body, reduce, partials, plan.levels, acc, rows, per_repeat, work)
        if out is not acc:
            full, rest = divmod(rows, per_repeat)
            if full:
                repeated(k, body, vconv, [(out, 0, per_repeat), (acc, 0, per_repeat)], full,
                          rep_stride=[halves, A.BLOCKS_PER_REPEAT])
            if rest:
                repeated(k, body, vconv, [(out, full * per_repeat, 0), (acc, full * per_repeat, 0)], 1, mask=rest,
                          extents=[rest, rest])
        copy(k, body, "mte3", out, [c0], gm_out, [row], (rows,))

    def compute(body: list, buffers: tuple, row, rows: int) -> None:
        reduce_tile(body, buffers, rows, 0)
        finish(body, buffers, row, rows)

    if db:
        return double_buffered_row_tiles(k, spec, M, db, sets, load, compute)

    def tile_body(body: list, row, rows: int) -> None:
        for j in range(plan.chunks):
            load(body, sets[0], row, rows, j)
            reduce_tile(body, sets[0], rows, j)
        finish(body, sets[0], row, rows)

    return row_tiles_over_cores(k, spec, M, R, tile_body)


def _reduction_row_bytes(plan: RowPlan, dtype: str, work: str) -> int:
    """The UB bytes per row of a single-buffered reduction tile whose rows fit UB whole."""
    wb = A.DTYPE_BYTES[work]
    return (plan.chunk * (A.DTYPE_BYTES[dtype] + (wb if work != dtype else 0))
            + sum(stride for _, stride in plan.levels) * wb + wb + A.DTYPE_BYTES[dtype])


def row_tiles_over_cores(k: Kernel, spec: A.TargetSpec, M: int, R: int, tile_body) -> A.KernelOp:
    """The kernel over M rows in tiles of R: the whole tiles dealt round-robin
    to the vector cores, then the tail tile of M mod R rows on one core;
    `tile_body(body, first_row, rows)` emits one tile."""
    full, tail = divmod(M, R)
    block_dim = min(spec.vector_cores, max(full, 1))
    if full:
        loop, t_idx = k.round_robin(k.body, full, block_dim)
        tile_body(loop.body, k.arith(loop.body, arith.MuliOp, t_idx, k.index(R)), R)
    if tail:
        loop, _ = k.round_robin(k.body, 1, block_dim)
        tile_body(loop.body, k.index(full * R), tail)
    return k.finish(block_dim, {})


def reduce_chunk(k: Kernel, body: list, reduce, src: SSAValue, partial: SSAValue, stride: int, rows: int, C: int,
                  chunk: int, chunks: int, per_repeat: int) -> None:
    """The first level: each repeat of chunk `chunk` of `rows` rows of `src`
    (C columns a row) to one element of `partial` (rows `stride` apart)."""
    if stride == C // per_repeat and chunks == 1:  # the rows' partials are contiguous
        repeated(k, body, reduce, [(partial, 0, 1), (src, 0, per_repeat)], rows * C // per_repeat)
        return
    for r in range(rows):
        repeated(k, body, reduce, [(partial, r * stride + chunk * C // per_repeat, 1), (src, r * C, per_repeat)],
                  C // per_repeat)


def reduce_partials(k: Kernel, body: list, reduce, partials: list, levels: tuple, acc: SSAValue, rows: int,
                     per_repeat: int, work: str) -> None:
    """The later levels, down to one element per row in `acc`: a level whose
    rows hold at most a repeat is one masked repeat per row, strided by its
    row stride; a longer one is reduced repeat by repeat again."""
    for level, (valid, stride) in enumerate(levels):
        src = partials[level]
        if valid <= per_repeat:
            for r0 in range(0, rows, REDUCE_REPEATS):
                count = min(REDUCE_REPEATS, rows - r0)
                repeated(k, body, reduce, [(acc, r0, 1), (src, r0 * stride, stride)], count,
                          mask=valid if valid < per_repeat else None,
                          rep_stride=[A.BLOCKS_PER_REPEAT, stride * A.DTYPE_BYTES[work] // 32],
                          extents=[count, (count - 1) * stride + valid])
            return
        next_stride = levels[level + 1][1]
        repeats = stride // per_repeat
        if next_stride == repeats:
            repeated(k, body, reduce, [(partials[level + 1], 0, 1), (src, 0, per_repeat)], rows * repeats)
        else:
            for r in range(rows):
                repeated(k, body, reduce, [(partials[level + 1], r * next_stride, 1), (src, r * stride, per_repeat)],
                          repeats)



# ---------------------------------------------------------------------------
# Per-row operands: a row's scalar as a block, a row vector, the padding
# ---------------------------------------------------------------------------

F32_REPEAT = A.REPEAT_BYTES // 4
"""f32 elements per repeat: the row kernels compute in f32."""


def strided(k: Kernel, into: list, cls, operands: list[tuple[SSAValue, int]], repeats: int, *,
            scalar: SSAValue | None = None, mask_bits: list[int] | None = None, blk_stride: list[int] | None = None,
            rep_stride: list[int] | None = None) -> None:
    """One vector instruction whose accesses are exactly the elements its
    lanes and strides address (as the emulator computes them), so that
    instructions on interleaved elements of one buffer (the columns of a
    tile, a row's padding) do not look dependent to the sync inserter."""
    values = [v for buffer, start in operands for v in (buffer, k.index(start))]
    props = {}
    if repeats > 1:
        props["repeat"] = IntegerAttr(repeats, i64)
    if mask_bits is not None:
        props["mask_bits"] = DenseArrayBase.from_list(i64, mask_bits)
    if blk_stride is not None:
        props["blk_stride"] = DenseArrayBase.from_list(i64, blk_stride)
    if rep_stride is not None:
        props["rep_stride"] = DenseArrayBase.from_list(i64, rep_stride)
    op = cls.build(operands=[*values, *([scalar] if scalar is not None else [])], properties=props)
    lanes = np.asarray(op.lanes(), dtype=np.int64)
    blk, rep = op.strides()
    accesses = []
    for (buffer, start), bs, rs in zip(operands, blk, rep):
        per_block = 32 // buffer.type.element_bytes
        elements = (start + np.arange(repeats)[:, None] * rs * per_block
                    + (lanes // per_block)[None, :] * bs * per_block + (lanes % per_block)[None, :])
        accesses.append(Access(buffer, byte_offsets(buffer.type, np.unique(elements)), buffer.type.size_bytes))
    into.append(Instr(op, "v", accesses[1:], accesses[:1]))


def _by_columns(rows: int, C: int) -> bool:
    """Whether an op over `rows` rows of C f32 goes one instruction per
    repeat column (a repeat per row, rows C / 8 blocks apart: at most 255)
    rather than one per row: the fewer instructions, columns on a tie."""
    repeats_per_row = C // F32_REPEAT
    by_columns = repeats_per_row * -(-rows // REDUCE_REPEATS)
    return C // 8 <= 255 and by_columns <= rows * -(-repeats_per_row // REDUCE_REPEATS)


def with_row_operand(k: Kernel, body: list, op: str, dst: SSAValue, src: SSAValue, other: SSAValue, kind: str,
                     rows: int, C: int, at: int = 0) -> None:
    """dst[r] = src[r] (op) other for the rows r < `rows` of C f32 elements
    (whole repeats, rows C apart from element `at`): `kind` "block", other
    holds row r's scalar as the block at 8 r (vbrcb), read with block stride
    0; "vector", other is one row of C (a scale or shift), read with repeat
    stride 0 when the instruction walks down a column."""
    cls = VECTOR_CLASSES[op]
    repeats_per_row, row_blocks = C // F32_REPEAT, C // 8
    if _by_columns(rows, C):
        for j in range(repeats_per_row):
            for r0 in range(0, rows, REDUCE_REPEATS):
                count = min(REDUCE_REPEATS, rows - r0)
                x = at + r0 * C + j * F32_REPEAT
                third, blk, rep = (((other, r0 * 8), 0, 1) if kind == "block"
                                   else ((other, j * F32_REPEAT), 1, 0))
                strided(k, body, cls, [(dst, x), (src, x), third], count, blk_stride=[1, 1, blk],
                        rep_stride=[row_blocks, row_blocks, rep])
        return
    for r in range(rows):
        for j0 in range(0, repeats_per_row, REDUCE_REPEATS):
            count = min(REDUCE_REPEATS, repeats_per_row - j0)
            x = at + r * C + j0 * F32_REPEAT
            third, blk, rep = (((other, r * 8), 0, 0) if kind == "block"
                               else ((other, j0 * F32_REPEAT), 1, 8))
            strided(k, body, cls, [(dst, x), (src, x), third], count, blk_stride=[1, 1, blk], rep_stride=[8, 8, rep])


def zero_padding(k: Kernel, body: list, buf: SSAValue, rows: int, N: int, C: int) -> None:
    """Zero columns [N, C) of the first `rows` rows of an f32 tile of rows
    of C: the first padding repeat through a bit mask of its padding lanes,
    the whole padding repeats after it; down the columns when the row stride
    fits a repeat stride, else row by row."""
    zero = k.scalar(0.0, "f32")
    vdup = VECTOR_CLASSES["vdup"]
    first, part = divmod(N, F32_REPEAT)
    bits = None
    if part:
        lo = ((1 << 64) - 1) ^ ((1 << part) - 1)
        bits = [0, lo - (1 << 64) if lo >= 1 << 63 else lo]
    repeats = range(first, C // F32_REPEAT)
    if C // 8 <= 255 and len(repeats) * -(-rows // REDUCE_REPEATS) <= rows:
        for j in repeats:
            for r0 in range(0, rows, REDUCE_REPEATS):
                strided(k, body, vdup, [(buf, r0 * C + j * F32_REPEAT)], min(REDUCE_REPEATS, rows - r0), scalar=zero,
                        mask_bits=bits if j == first else None, rep_stride=[C // 8])
        return
    for r in range(rows):
        whole = first + (1 if part else 0)
        if part:
            strided(k, body, vdup, [(buf, r * C + first * F32_REPEAT)], 1, scalar=zero, mask_bits=bits)
        for j0 in range(whole, C // F32_REPEAT, REDUCE_REPEATS):
            strided(k, body, vdup, [(buf, r * C + j0 * F32_REPEAT)], min(REDUCE_REPEATS, C // F32_REPEAT - j0),
                    scalar=zero)


def on_row_scalars(k: Kernel, body: list, op: str, acc: SSAValue, rows: int, scalar: SSAValue | None = None) -> None:
    """acc[r] = op(acc[r]) (with `scalar`) for the rows' f32 results, the
    last repeat masked."""
    cls = VECTOR_CLASSES[op]
    full, rest = divmod(rows, F32_REPEAT)
    if full:
        repeated(k, body, cls, [(acc, 0, F32_REPEAT), (acc, 0, F32_REPEAT)], full, scalar=scalar)
    if rest:
        repeated(k, body, cls, [(acc, full * F32_REPEAT, 0), (acc, full * F32_REPEAT, 0)], 1, scalar=scalar,
                 mask=rest, extents=[rest, rest])


def row_blocks(k: Kernel, body: list, blocks: SSAValue, acc: SSAValue, rows: int) -> None:
    """Each row's scalar in `acc` to the 32-byte block at 8 r of `blocks`."""
    repeated(k, body, VECTOR_CLASSES["vbrcb"], [(blocks, 0, F32_REPEAT), (acc, 0, 8)], -(-rows // 8))


# ---------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------

_SOFTMAX = ("msir.reduce_max", "msir.broadcast_to", "msir.sub", "msir.exp", "msir.reduce_sum", "msir.broadcast_to",
            "msir.div")
"""The ops of `msir.ops.softmax` over the last axis (`softmax_body`), in order."""


def match_softmax(fn: func.FuncOp):
    """The reduce_max of `fn` if its body is exactly a softmax of its one
    argument over the last axis (as `msir.ops.softmax` builds it, the
    maximum under `stop_gradient` or not), else None."""
    ops = [o for o in fn.body.block.ops if o.name not in ("func.return", "msir.stop_gradient")]
    if tuple(o.name for o in ops) != _SOFTMAX or len(fn.body.block.args) != 1:
        return None
    mx, b1, sub, exp, sm, b2, div = ops
    x = fn.body.block.args[0]

    def source(value):  # through stop_gradient
        owner = value.owner
        return owner.operands[0] if getattr(owner, "name", None) == "msir.stop_gradient" else value

    flows = (mx.input == x and source(b1.operands[0]) == mx.result and list(sub.operands) == [x, b1.results[0]]
             and exp.operands[0] == sub.results[0] and sm.input == exp.results[0]
             and b2.operands[0] == sm.result and list(div.operands) == [exp.results[0], b2.results[0]]
             and list(fn.body.block.last_op.operands) == [div.results[0]])
    rank2 = len(x.type.get_shape()) == 2
    if not (flows and rank2 and mx.axes_list in ((1,), (-1,)) and sm.axes_list in ((1,), (-1,))):
        return None
    return mx


def _softmax_row_bytes(N: int, dtype: str) -> int:
    """UB bytes per row of a one-pass softmax tile: the input, its f32 copy,
    an f16 output, the partials."""
    C = round_up(N, 128)
    column_bytes = A.DTYPE_BYTES[dtype] * (2 if dtype != "f32" else 1) + 4
    return C * column_bytes + sum(stride for _, stride in partial_levels(C // F32_REPEAT, F32_REPEAT, 8)) * 4 + 36


def softmax_fits_ub(spec: A.TargetSpec, N: int, dtype: str, tile_elements: int) -> bool:
    """Whether a row of N goes through UB in one pass, in one instruction's
    repeats and in a tile of `tile_elements` if given (else `lower_long_rows`)."""
    C = round_up(N, 128)
    return (C // F32_REPEAT <= REDUCE_REPEATS and _softmax_row_bytes(N, dtype) <= spec.capacity["ub"] - 256
            and (not tile_elements or C <= tile_elements))


def lower_softmax(name: str, spec: A.TargetSpec, fn: func.FuncOp, mx, tile_elements: int, buffers: int = 2
                  ) -> A.KernelOp:
    """One kernel: per tile of rows, GM -> UB, (f16: to f32), the rows'
    maxima (vcmax levels), x - max (the maximum broadcast to a block by
    vbrcb, read with strides 0), exp, the rows' sums (vcadd levels), times
    the reciprocal of the sum (vrec, vbrcb), (f16: back to f16), UB -> GM.
    Rows are padded with -inf: exp makes the padding 0 for the sum. A row
    must fit UB (`softmax_fits_ub`). When each core gets several tiles
    (`plan_double_buffering`), the tiles' UB buffers are ping-pong pairs
    and each tile's load is issued before the last one's vector work."""
    x = fn.body.block.args[0]
    t = x.type
    M, N = t.get_shape()
    dtype = dtype_of(mx, t)
    work, per_repeat = "f32", A.REPEAT_BYTES // 4
    C = round_up(N, 128)  # whole repeats of f32 and of f16
    levels = tuple(partial_levels(C // per_repeat, per_repeat, 8))
    convert = dtype != work
    row_bytes = _softmax_row_bytes(N, dtype)
    ub = spec.capacity["ub"] - 32 * 8
    most = min(M, ub // row_bytes, max(1, tile_elements // C) if tile_elements else M)
    repeats_per_row = C // per_repeat
    passes = 4 + spec.vector_cpi.get("vexp", 1) + (2 if convert else 0)
    plan = buffers == 2 and plan_double_buffering(
        spec, M, N * A.DTYPE_BYTES[dtype], min(M, ub // (2 * row_bytes), most),
        lambda rows: rows * repeats_per_row * passes + (12 + 2 * rows) * spec.vector_latency)
    R = plan.rows if plan else rows_per_tile(spec, M, N * A.DTYPE_BYTES[dtype], most)
    hint = x.name_hint or "arg0"
    k = Kernel(name, spec, [A.BufferType("gm", (M, N), t.element_type)],
                [A.BufferType("gm", (M, N), t.element_type)], [hint, "result"])
    sets = []
    for suffix in ("", "_pong")[: 2 if plan else 1]:
        x_ub = k.alloc("ub", (R, C), dtype, "nd", f"{hint}_ub{suffix}")
        e_ub = k.alloc("ub", (R, C), work, "nd", f"e_ub{suffix}")  # x in f32, then exp(x - max), then the result
        sets.append((x_ub, e_ub, k.alloc("ub", (R, C), dtype, "nd", f"out_ub{suffix}") if convert else e_ub))
    partials = [k.alloc("ub", (R * stride,), work, "nd", f"partial{i}_ub") for i, (_, stride) in enumerate(levels)]
    acc = k.alloc("ub", (round_up(R, 16),), work, "nd", "acc_ub")
    blocks = k.alloc("ub", (round_up(R, 16) * 8,), work, "nd", "row_blocks_ub")  # a block per row: max, then 1 / sum
    cls = VECTOR_CLASSES
    in_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]
    halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // 4
    if N < C:
        for x_ub, _, _ in sets:
            repeated(k, k.body, cls["vdup"], [(x_ub, 0, in_repeat)], R * C // in_repeat,
                     scalar=k.scalar(-math.inf, dtype))
    gm_in, gm_out = k.block.args
    c0 = k.index(0)

    def per_row(body: list, op: str, e_ub: SSAValue, src: SSAValue, rows: int) -> None:
        """e[r] = src[r] (op) row r's block, for each row."""
        for r in range(rows):
            repeated(k, body, cls[op], [(e_ub, r * C, per_repeat), (src, r * C, per_repeat), (blocks, r * 8, 0)],
                      repeats_per_row, blk_stride=[1, 1, 0], rep_stride=[8, 8, 0], extents=[C, C, 8])

    def row_blocks(body: list, rows: int) -> None:
        repeated(k, body, cls["vbrcb"], [(blocks, 0, per_repeat), (acc, 0, 8)], -(-rows // 8))

    def load(body: list, buffers: tuple, row, rows: int) -> None:
        copy(k, body, "mte2", gm_in, [row, c0], buffers[0], [c0, c0], (rows, N))

    def compute(body: list, buffers: tuple, row, rows: int) -> None:
        x_ub, e_ub, out = buffers
        src = x_ub
        if convert:
            repeated(k, body, cls["vconv"], [(e_ub, 0, per_repeat), (x_ub, 0, per_repeat)], rows * repeats_per_row,
                      rep_stride=[A.BLOCKS_PER_REPEAT, halves])
            src = e_ub
        reduce_chunk(k, body, cls["vcmax"], src, partials[0], levels[0][1], rows, C, 0, 1, per_repeat)
        reduce_partials(k, body, cls["vcmax"], partials, levels, acc, rows, per_repeat, work)
        row_blocks(body, rows)
        per_row(body, "vsub", e_ub, src, rows)
        repeated(k, body, cls["vexp"], [(e_ub, 0, per_repeat), (e_ub, 0, per_repeat)], rows * repeats_per_row)
        reduce_chunk(k, body, cls["vcadd"], e_ub, partials[0], levels[0][1], rows, C, 0, 1, per_repeat)
        reduce_partials(k, body, cls["vcadd"], partials, levels, acc, rows, per_repeat, work)
        on_row_scalars(k, body, "vrec", acc, rows)
        row_blocks(body, rows)
        per_row(body, "vmul", e_ub, e_ub, rows)
        if convert:
            repeated(k, body, cls["vconv"], [(out, 0, per_repeat), (e_ub, 0, per_repeat)], rows * repeats_per_row,
                      rep_stride=[halves, A.BLOCKS_PER_REPEAT])
        copy(k, body, "mte3", out, [c0, c0], gm_out, [row, c0], (rows, N))

    if plan:
        return double_buffered_row_tiles(k, spec, M, plan, sets, load, compute)
    return row_tiles_over_cores(k, spec, M, R, lambda body, row, rows: (load(body, sets[0], row, rows),
                                                                         compute(body, sets[0], row, rows)))


# ---------------------------------------------------------------------------
# Double-buffered row tiles
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DoubleBuffering:
    """Each of `block_dim` cores takes `tiles` consecutive tiles of `rows`
    rows; the rows left over go single-buffered after them."""

    rows: int
    tiles: int
    block_dim: int


def plan_double_buffering(spec: A.TargetSpec, M: int, row_bytes: int, most: int, vector_cycles,
                          out_row_bytes: int | None = None) -> DoubleBuffering | None:
    """The rows per tile (at most `most`) and cores for ping-pong tiles, if
    the timing model says they beat single-buffered tiles: a core's time is
    then its first load, per tile the slowest of its load, vector work
    (`vector_cycles(rows)`) and store, and its last store (each copy also
    waits its pipe's latency once); single-buffered, every tile pays all of
    them in turn. A row loads `row_bytes` and stores `out_row_bytes` (as
    many by default; a reduction stores one element a row)."""
    cores = spec.vector_cores
    out_row_bytes = row_bytes if out_row_bytes is None else out_row_bytes
    mte2, mte3 = spec.pipes["mte2"], spec.pipes["mte3"]

    def copies(rows: int, block_dim: int) -> tuple[float, float]:
        share = spec.gm_bytes_per_cycle / block_dim
        return (rows * row_bytes / min(mte2.bytes_per_cycle, share),
                rows * out_row_bytes / min(mte3.bytes_per_cycle, share))

    def single(rows: int, count: int, most_cores: int) -> float:
        """`count` rows in single-buffered tiles of `rows`."""
        tiles = -(-count // rows)
        block_dim = min(most_cores, tiles)
        load, store = copies(rows, block_dim)
        return -(-tiles // block_dim) * (mte2.latency + load + vector_cycles(rows) + store + mte3.latency)

    best, best_cycles = None, min(single(rows, M, cores) for rows in range(1, most + 1))
    for rows in range(1, most + 1):
        for block_dim in range(1, min(cores, M // (2 * rows)) + 1):
            tiles = M // (block_dim * rows)
            load, store = copies(rows, block_dim)
            left = M - block_dim * tiles * rows
            cycles = (mte2.latency + load + tiles * max(load, vector_cycles(rows), store) + store + mte3.latency
                      + (single(rows, left, block_dim) if left else 0))
            if cycles < best_cycles:
                best, best_cycles = DoubleBuffering(rows, tiles, block_dim), cycles
    return best


def double_buffered_row_tiles(k: Kernel, spec: A.TargetSpec, M: int, plan: DoubleBuffering, sets: list,
                              load, compute) -> A.KernelOp:
    """The kernel over M rows: core c takes rows [c T R, (c + 1) T R) (T
    tiles of R rows); tile i uses buffer set i % 2, and the load of tile
    i + 1 is issued before the vector work of tile i, so the sync inserter's
    early sets (a pair per load) let MTE2 fill one set
    while V works on the other and MTE3 drains it. Full pairs of tiles run in an `scf.for` (from two pairs on;
    else the tiles are unrolled); the rows left over
    (fewer than a tile per core) follow as single-buffered tiles dealt
    round-robin. `load(body, set, row, rows)` / `compute(...)` emit a tile's
    copy in and the rest of it."""
    R, T = plan.rows, plan.tiles
    base = k.arith(k.body, arith.MuliOp, k.block_idx, k.index(T * R))

    def row_of(body: list, offset, i: int):
        return k.arith(body, arith.AddiOp, offset, k.index(i * R)) if i else offset

    load(k.body, sets[0], base, R)
    trips = (T - 1) // 2
    if trips == 1:  # a loop run once would hide the producers of its first iteration from the early sets
        trips = 0
    if trips:
        loop, at = k.counted(k.body, 0, trips * 2 * R, 2 * R)
        first = k.arith(loop.body, arith.AddiOp, base, at)
        for i in range(2):
            load(loop.body, sets[(i + 1) % 2], row_of(loop.body, first, i + 1), R)
            compute(loop.body, sets[i % 2], row_of(loop.body, first, i), R)
    for i in range(2 * trips, T):
        if i + 1 < T:
            load(k.body, sets[(i + 1) % 2], row_of(k.body, base, i + 1), R)
        compute(k.body, sets[i % 2], row_of(k.body, base, i), R)
    done = plan.block_dim * T * R
    left = M - done
    if left:
        full, tail = divmod(left, R)
        if full:
            loop, t_idx = k.round_robin(k.body, full, plan.block_dim)
            row = k.arith(loop.body, arith.AddiOp, k.arith(loop.body, arith.MuliOp, t_idx, k.index(R)), k.index(done))
            load(loop.body, sets[0], row, R)
            compute(loop.body, sets[0], row, R)
        if tail:
            loop, _ = k.round_robin(k.body, 1, plan.block_dim)
            load(loop.body, sets[0], k.index(done + full * R), tail)
            compute(loop.body, sets[0], k.index(done + full * R), tail)
    return k.finish(plan.block_dim, {}, early_sets=True)
