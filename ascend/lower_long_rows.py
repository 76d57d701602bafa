"""Softmax and layer norm of rows that do not fit UB: each row streamed
twice through UB in chunks; the contract is `convert_msir_to_ascend`'s
docstring.

Pass 1 streams a row's chunks and keeps the row's statistics as single f32
elements in UB (each in a 32-byte slot of `state`); pass 2 streams them
again and writes the result.

* softmax (online, Milakov & Gimelshein 2018): per chunk its maximum c,
  the running maximum m' = max(m, c), the running sum s = s exp(m - m')
  + sum(exp(x - m')); then each chunk's exp(x - m) / s.
* layer norm (Chan et al.'s pairwise combination of Welford's sums): per
  chunk of w elements its mean and its sum of squared deviations M2_c
  (centred in the chunk, so a large mean costs no precision); combined with
  the n earlier elements' by d = mean_c - mean, mean += d w / (n + w),
  M2 += M2_c + d^2 n w / (n + w), the weights static; then each chunk's
  (x - mean) / sqrt(M2 / N + eps) (times gamma, plus beta: their chunks
  streamed with it).

Rows go one per tile, round-robin over the vector cores; chunks are whole
repeats of f32 and of f16 (the last chunk padded: -inf for the maxima and
sums of softmax, 0 for layer norm's sum, its centred padding zeroed)."""

from __future__ import annotations

import math

from xdsl.dialects import func
from xdsl.ir import SSAValue

from msir.ascend.kernel_builder import (
    REDUCE_REPEATS,
    VECTOR_CLASSES,
    Kernel,
    copy,
    dtype_of,
    repeated,
)
from msir.ascend.lower_layernorm import LayerNorm, kernel_for
from msir.ascend.lower_rows import (
    F32_REPEAT,
    on_row_scalars,
    partial_levels,
    reduce_chunk,
    reduce_partials,
    round_up,
    row_tiles_over_cores,
    strided,
    with_row_operand,
    zero_padding,
)
from msir.dialects import ascend as A
from msir.errors import CompileError

CHUNK_UNIT = 16 * F32_REPEAT
"""Chunks are multiples of 16 f32 repeats, so that every reduction level's
partials start 32-byte aligned."""

LANE0 = [0, 1]
"""The bit mask of a repeat's first lane: an op on one element."""


def chunk_columns(spec: A.TargetSpec, N: int, bytes_per_column: int, tile_elements: int) -> int:
    """The columns of a chunk: as many as UB holds at `bytes_per_column`
    (besides the partials and the state), at most 240 f32 repeats (one
    reduction instruction), at most `tile_elements` if given, and no more
    than the row needs."""
    ub = spec.capacity["ub"] - 4096  # the partials, the state, the blocks and their alignment
    chunk = min(REDUCE_REPEATS * F32_REPEAT, ub // bytes_per_column // CHUNK_UNIT * CHUNK_UNIT,
                max(CHUNK_UNIT, tile_elements // CHUNK_UNIT * CHUNK_UNIT) if tile_elements else math.inf,
                round_up(N, CHUNK_UNIT))
    if chunk < CHUNK_UNIT:
        raise CompileError(f"a chunk of {CHUNK_UNIT} columns needs {CHUNK_UNIT * bytes_per_column} bytes of UB, "
                           f"more than {spec.name} has ({spec.capacity['ub']} bytes)")
    return chunk


class _Streamer:
    """The buffers and steps both passes share: a chunk GM -> UB in f32,
    one-element ops on the state's slots, reductions of a chunk."""

    def __init__(self, k: Kernel, dtype: str, CH: int, hint: str, gm_in: SSAValue):
        self.k, self.dtype, self.CH, self.gm_in = k, dtype, CH, gm_in
        self.convert = dtype != "f32"
        self.x_ub = k.alloc("ub", (1, CH), dtype, "nd", f"{hint}_ub")
        self.e_ub = k.alloc("ub", (1, CH), "f32", "nd", "chunk_f32_ub") if self.convert else self.x_ub
        self.levels = partial_levels(CH // F32_REPEAT, F32_REPEAT, 8)
        self.partials = [k.alloc("ub", (stride,), "f32", "nd", f"partial{i}_ub")
                         for i, (_, stride) in enumerate(self.levels)]
        self.acc = k.alloc("ub", (16,), "f32", "nd", "acc_ub")
        self.state = k.alloc("ub", (64,), "f32", "nd", "state_ub")
        self.blocks = [k.alloc("ub", (F32_REPEAT,), "f32", "nd", f"blocks{i}_ub") for i in range(2)]
        self.halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // 4

    def load(self, body: list, row, j: int, width: int, padding: float | None) -> SSAValue:
        """Chunk j of the row into UB as f32 (its padding, if any, set to
        `padding` first, as earlier chunks overwrote it); the f32 buffer."""
        k, c0 = self.k, self.k.index(0)
        if padding is not None and width < self.CH:
            per = A.REPEAT_BYTES // A.DTYPE_BYTES[self.dtype]
            first = width // per * per
            repeated(k, body, VECTOR_CLASSES["vdup"], [(self.x_ub, first, per)], (self.CH - first) // per,
                     scalar=k.scalar(padding, self.dtype))
        copy(k, body, "mte2", self.gm_in, [row, k.index(j * self.CH)], self.x_ub, [c0, c0], (1, width))
        if self.convert:
            repeated(k, body, VECTOR_CLASSES["vconv"], [(self.e_ub, 0, F32_REPEAT), (self.x_ub, 0, F32_REPEAT)],
                     self.CH // F32_REPEAT, rep_stride=[A.BLOCKS_PER_REPEAT, self.halves])
        return self.e_ub

    def store(self, body: list, gm_out: SSAValue, row, j: int, width: int) -> None:
        k, c0 = self.k, self.k.index(0)
        if self.convert:  # back to the input's type, in the input's buffer
            repeated(k, body, VECTOR_CLASSES["vconv"], [(self.x_ub, 0, F32_REPEAT), (self.e_ub, 0, F32_REPEAT)],
                     self.CH // F32_REPEAT, rep_stride=[self.halves, A.BLOCKS_PER_REPEAT])
        copy(k, body, "mte3", self.x_ub, [c0, c0], gm_out, [row, k.index(j * self.CH)], (1, width))

    def reduce(self, body: list, reducer: str, src: SSAValue, acc: SSAValue | None = None) -> None:
        """The chunk's sum or maximum to element 0 of `acc`."""
        cls = VECTOR_CLASSES[reducer]
        reduce_chunk(self.k, body, cls, src, self.partials[0], self.levels[0][1], 1, self.CH, 0, 1, F32_REPEAT)
        reduce_partials(self.k, body, cls, self.partials, self.levels, acc or self.acc, 1, F32_REPEAT, "f32")

    def slot(self, i: int) -> tuple[SSAValue, int]:
        return self.state, 8 * i

    def one(self, body: list, op: str, dst: tuple, *srcs: tuple, scalar: float | None = None) -> None:
        """dst = op(srcs) (with `scalar`) on single f32 elements."""
        strided(self.k, body, VECTOR_CLASSES[op], [dst, *srcs], 1, mask_bits=LANE0,
                scalar=None if scalar is None else self.k.scalar(scalar, "f32"))

    def brcb(self, body: list, i: int, slot: tuple) -> SSAValue:
        """The element in `slot` as a block (the first of blocks buffer i)."""
        buffer, offset = slot
        repeated(self.k, body, VECTOR_CLASSES["vbrcb"], [(self.blocks[i], 0, F32_REPEAT), (buffer, offset, 8)], 1)
        return self.blocks[i]


def lower_long_softmax(name: str, spec: A.TargetSpec, fn: func.FuncOp, mx, tile_elements: int) -> A.KernelOp:
    """Online softmax of rows too long for UB (see the module docstring)."""
    x = fn.body.block.args[0]
    t = x.type
    M, N = t.get_shape()
    dtype = dtype_of(mx, t)
    CH = chunk_columns(spec, N, A.DTYPE_BYTES[dtype] + (4 if dtype != "f32" else 0), tile_elements)
    k = Kernel(name, spec, [A.BufferType("gm", (M, N), t.element_type)], [A.BufferType("gm", (M, N), t.element_type)],
               [x.name_hint or "arg0", "result"])
    s = _Streamer(k, dtype, CH, x.name_hint or "arg0", k.block.args[0])
    chunks = -(-N // CH)
    acc0 = (s.acc, 0)
    SUM = s.slot(2)

    def tile_body(body: list, row, rows: int) -> None:
        # the running maximum alternates between slots 0 and 1 (m, then m')
        s.one(body, "vdup", s.slot(0), scalar=-math.inf)
        s.one(body, "vdup", SUM, scalar=0.0)
        for j in range(chunks):
            width = min(CH, N - j * CH)
            old, new = s.slot(j % 2), s.slot(1 - j % 2)
            e = s.load(body, row, j, width, -math.inf)
            s.reduce(body, "vcmax", e)
            s.one(body, "vmax", new, old, acc0)
            s.one(body, "vsub", s.slot(3), old, new)
            s.one(body, "vexp", s.slot(3), s.slot(3))
            s.one(body, "vmul", SUM, SUM, s.slot(3))
            blocks = s.brcb(body, 0, new)
            with_row_operand(k, body, "vsub", e, e, blocks, "block", 1, CH)
            repeated(k, body, VECTOR_CLASSES["vexp"], [(e, 0, F32_REPEAT), (e, 0, F32_REPEAT)], CH // F32_REPEAT)
            s.reduce(body, "vcadd", e)
            s.one(body, "vadd", SUM, SUM, acc0)
        s.one(body, "vrec", SUM, SUM)
        m_blocks, r_blocks = s.brcb(body, 0, s.slot(chunks % 2)), s.brcb(body, 1, SUM)
        for j in range(chunks):
            width = min(CH, N - j * CH)
            e = s.load(body, row, j, width, None)
            with_row_operand(k, body, "vsub", e, e, m_blocks, "block", 1, CH)
            repeated(k, body, VECTOR_CLASSES["vexp"], [(e, 0, F32_REPEAT), (e, 0, F32_REPEAT)], CH // F32_REPEAT)
            with_row_operand(k, body, "vmul", e, e, r_blocks, "block", 1, CH)
            s.store(body, k.block.args[1], row, j, width)

    return row_tiles_over_cores(k, spec, M, 1, tile_body)


def lower_long_layer_norm(name: str, spec: A.TargetSpec, fn: func.FuncOp, ln: LayerNorm, tile_elements: int
                          ) -> A.KernelOp:
    """Layer norm of rows too long for UB, two passes (see the module docstring)."""
    t = ln.x.type
    M, N = t.get_shape()
    dtype = dtype_of(ln.anchor, t)
    convert = dtype != "f32"
    params = [p for p in ("gamma", "beta") if getattr(ln, p) is not None]
    per_column = A.DTYPE_BYTES[dtype] + (4 if convert else 0)
    CH = chunk_columns(spec, N, per_column * (1 + len(params)), tile_elements)
    k, args = kernel_for(name, spec, fn, ln)
    s = _Streamer(k, dtype, CH, ln.x.name_hint or "arg0", args[ln.x])
    rows_ub = {}
    for p in params:  # each chunk of gamma / beta, in f32 (f16 staged)
        rows_ub[p] = k.alloc("ub", (CH,), "f32", "nd", f"{p}_ub")
        if convert:
            rows_ub[p + "_staged"] = k.alloc("ub", (CH,), dtype, "nd", f"{p}_{dtype}_ub")
    squares_acc = k.alloc("ub", (16,), "f32", "nd", "squares_acc_ub")
    chunks = -(-N // CH)
    MEAN, M2, D, T = (s.slot(i) for i in range(4))
    acc0, sq0 = (s.acc, 0), (squares_acc, 0)
    c0 = k.index(0)

    def copy_param(body: list, p: str, j: int, width: int) -> None:
        copy(k, body, "mte2", args[getattr(ln, p)], [k.index(j * CH)], rows_ub[p + "_staged" if convert else p], [c0],
             (width,))

    def convert_param(body: list, p: str) -> None:
        """After the chunk's copies: MTE2 sets one flag for all of them (two
        pairs of one event with nothing between the sets on MTE2 would set
        the flag again before V waited)."""
        staged = rows_ub[p + "_staged"]
        repeated(k, body, VECTOR_CLASSES["vconv"], [(rows_ub[p], 0, F32_REPEAT), (staged, 0, F32_REPEAT)],
                 CH // F32_REPEAT, rep_stride=[A.BLOCKS_PER_REPEAT, s.halves])

    def tile_body(body: list, row, rows: int) -> None:
        for j in range(chunks):
            width, before = min(CH, N - j * CH), j * CH
            e = s.load(body, row, j, width, 0.0)
            s.reduce(body, "vcadd", e)
            on_row_scalars(k, body, "vmuls", s.acc, 1, k.scalar(1.0 / width, "f32"))
            blocks = s.brcb(body, 0, acc0)
            with_row_operand(k, body, "vsub", e, e, blocks, "block", 1, CH)
            if width < CH:
                zero_padding(k, body, e, 1, width, CH)
            repeated(k, body, VECTOR_CLASSES["vmul"], [(e, 0, F32_REPEAT), (e, 0, F32_REPEAT), (e, 0, F32_REPEAT)],
                     CH // F32_REPEAT)
            s.reduce(body, "vcadd", e, squares_acc)
            if j == 0:
                s.one(body, "vadds", MEAN, acc0, scalar=0.0)
                s.one(body, "vadds", M2, sq0, scalar=0.0)
                continue
            total = before + width
            s.one(body, "vsub", D, acc0, MEAN)
            s.one(body, "vmuls", T, D, scalar=width / total)
            s.one(body, "vadd", MEAN, MEAN, T)
            s.one(body, "vadd", M2, M2, sq0)
            s.one(body, "vmul", T, D, D)
            s.one(body, "vmuls", T, T, scalar=before * width / total)
            s.one(body, "vadd", M2, M2, T)
        s.one(body, "vmuls", M2, M2, scalar=1.0 / N)
        s.one(body, "vadds", M2, M2, scalar=ln.eps)
        s.one(body, "vsqrt", M2, M2)
        s.one(body, "vrec", M2, M2)
        m_blocks, r_blocks = s.brcb(body, 0, MEAN), s.brcb(body, 1, M2)
        for j in range(chunks):
            width = min(CH, N - j * CH)
            for p in params:
                copy_param(body, p, j, width)
            e = s.load(body, row, j, width, None)
            for p in params if convert else ():
                convert_param(body, p)
            loaded = {p: rows_ub[p] for p in params}
            with_row_operand(k, body, "vsub", e, e, m_blocks, "block", 1, CH)
            with_row_operand(k, body, "vmul", e, e, r_blocks, "block", 1, CH)
            if "gamma" in loaded:
                with_row_operand(k, body, "vmul", e, e, loaded["gamma"], "vector", 1, CH)
            if "beta" in loaded:
                with_row_operand(k, body, "vadd", e, e, loaded["beta"], "vector", 1, CH)
            s.store(body, k.block.args[-1], row, j, width)

    return row_tiles_over_cores(k, spec, M, 1, tile_body)
