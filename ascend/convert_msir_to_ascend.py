"""`convert-msir-to-ascend`: msir functions to `ascend.kernel`s, synchronised.

Contract
========
Input: an msir module as the frontend prints it (differentiation ops,
calls and fusions allowed). The pass first runs msir's preparation (the CPU
pipeline's passes up to fusion: `msir-grad-jvp`, `msir-symbol-dce`,
`msir-forward-arguments`, `msir-inline`, `msir-lower-einsum`, `dce`), then
turns every public function into one `ascend.kernel` of the same name, for
the chip `chip` (910A or 910B); the module then holds only kernels.

A function lowers when its body is one of:

* **a matmul** `msir.matmul` of two rank-2 f16 or f32 operands. f32 operands are cast to f16 before the kernel (MindSpore's
  `allow_fp32_to_fp16`): the kernel's GM inputs are f16 and the attribute
  `msir.host_casts` lists the dtypes the caller's arrays have; the result
  keeps the function's dtype (f32 straight from the f32 accumulator, f16
  narrowed on the way out of L0C). Output tiles of baseM x baseN (the
  analytic tiler `tile_matmul`) are spread round-robin over `block_dim`
  cube cores; each loops over K in baseK steps: GM -> L1 (nd2nz, MTE2),
  L1 -> L0A / L0B (MTE1), mmad (the first step initialises L0C), then L0C ->
  GM (FixPipe, 910B) or L0C -> UB (V) -> GM (MTE3, 910A). Edge tiles (M or N
  not a multiple of the tile) and the last K step have their own static
  sizes; the cube computes whole 16 x 16 fractals, of which only the valid
  part is copied out. A last K step that is not a multiple of 16 first zeroes
  the last fractal of K of its L1 tiles (`ascend.init_const`, MTE2), which
  its load then partly overwrites: the padding multiplies as zeros. When the tiler chooses it (`matmul_buffers` 2, the
  default), L1 and L0 hold ping-pong buffers: the loads of step s + 1 are
  issued before the compute of step s, and the sync inserter's early sets
  let each wait only for the compute that last read its buffer, so MTE2
  streams while the cube works.
* **an elementwise chain**: f16 or f32 elementwise ops (`add sub mul div
  maximum minimum neg abs exp log sqrt`, inside `msir.fusion` bodies or not)
  on tensors of one shape, with splat constants (`broadcast_to` of a
  constant) as scalar operands. The tensors are flattened and cut in tiles
  that fit UB (one buffer per input and per intermediate), spread
  round-robin over the vector cores; each tile: GM -> UB (MTE2), the vector
  instructions (<= 255 repeats each, the tail repeat masked), UB -> GM (MTE3).

* **a row reduction**: `msir.reduce_sum` or `msir.reduce_max` over the last
  axis of a rank-2 f16 or f32 argument (keepdims or not). Tiles of rows
  (`plan_row_reduction`: as many as UB holds, and `rows_per_tile`: the
  least time on the busiest core) go GM -> UB (MTE2); the padding of a row to whole repeats
  holds the reduction's identity (`vdup`); f16 sums are converted to f32
  first (`vconv`), as the vector unit accumulates in f32, and back at the
  end (a maximum is exact in f16). `vcadd` / `vcmax` reduce each repeat to
  one partial, level after level, until the last level's masked, strided
  repeat per row gives the row's result; UB -> GM (MTE3). A row longer than
  a tile's UB share (or 240 repeats) goes one row per tile in chunks whose
  partials the next levels combine.

* **a softmax** over the last axis of a rank-2 f16 or f32 argument, as
  `msir.ops.softmax` writes it (reduce_max, stop_gradient, broadcast_to,
  sub, exp, reduce_sum, broadcast_to, div): one kernel, one pass over UB
  per tile of rows, in f32 (f16 converted in and out). The rows' maxima
  and sums are the row reduction's levels; `vbrcb` turns each row's
  scalar into a block that `vsub` / `vmul` read with strides 0; rows are
  padded with -inf, which exp turns into zeros for the sum; the division
  is a multiplication by `vrec` of the sum. A row must fit UB (online
  softmax is not lowered yet).

Anything else (another op, a broadcast of a tensor, an integer dtype) is a
`CompileError` naming the op and its source location.

Synchronisation is inserted by `msir.ascend.sync` from the data dependencies
only. Output: a module of kernels that verify; running each on the emulator
raises no race and gives the function's values at the target's precision.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    Float16Type,
    Float32Type,
    IndexType,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from msir.ascend.errors import source_loc
from msir.ascend.layouts import tile_index
from msir.ascend.sync import Access, Instr, Loop, Scalar, emit, insert_sync
from msir.dialects import ascend as A
from msir.errors import CompileError

PREPARATION = ("msir-grad-jvp", "msir-symbol-dce", "msir-forward-arguments", "msir-inline", "msir-lower-einsum",
               "dce")
"""msir's passes run first (as the CPU pipeline runs them before fusion)."""

_TENSOR_BINARY = {"msir.add": "vadd", "msir.sub": "vsub", "msir.mul": "vmul", "msir.div": "vdiv",
                  "msir.maximum": "vmax", "msir.minimum": "vmin"}
_COMMUTATIVE_SCALAR = {"msir.add": "vadds", "msir.mul": "vmuls", "msir.maximum": "vmaxs", "msir.minimum": "vmins"}
_UNARY = {"msir.exp": "vexp", "msir.log": "vln", "msir.abs": "vabs", "msir.sqrt": "vsqrt"}
_FOLD = {"msir.add": np.add, "msir.sub": np.subtract, "msir.mul": np.multiply, "msir.div": np.divide,
         "msir.maximum": np.maximum, "msir.minimum": np.minimum, "msir.neg": np.negative, "msir.abs": np.abs,
         "msir.exp": np.exp, "msir.log": np.log, "msir.sqrt": np.sqrt}
_VECTOR_CLASSES = {cls.name.removeprefix("ascend."): cls
                   for cls in (*A.VECTOR_OPS, *A.VECTOR_REDUCE_OPS, A.VdupOp, A.VconvOp, A.VbrcbOp)}
_DTYPES = {"f16": np.float16, "f32": np.float32}


def refuse(op, message: str) -> CompileError:
    return CompileError(f"{op.name}: {message}", source_loc(op))


def _dtype(op, t) -> str:
    if not isinstance(t, TensorType):  # a scalar (f32, index) argument or result
        raise refuse(op, f"the Ascend target computes f16 and f32 tensors, not {t}")
    name = A.DTYPE_NAMES.get(t.element_type)
    if name not in _DTYPES:
        raise refuse(op, f"the Ascend target computes f16 and f32 tensors, not {t.element_type}")
    return name


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
# Building a kernel
# ---------------------------------------------------------------------------


class _Kernel:
    """A kernel under construction: its arguments, buffers, constants and
    the structured body that `msir.ascend.sync` synchronises."""

    def __init__(self, name: str, spec: A.TargetSpec, ins: list, outs: list, arg_names: list[str]):
        self.spec = spec
        self.name = name
        self.block = Block(arg_types=[*ins, *outs])
        for arg, hint in zip(self.block.args, arg_names):
            arg.name_hint = hint
        self.num_ins = len(ins)
        self.prologue: list = []
        self.body: list = []
        self.constants: dict = {}
        self.next_offset = dict.fromkeys(A.SPACES, 0)
        self.block_idx = self._scalar(A.BlockIdxOp.create(result_types=[IndexType()])).result

    def _scalar(self, op, into: list | None = None):
        (self.prologue if into is None else into).append(Scalar(op))
        return op

    def index(self, value: int) -> SSAValue:
        if ("index", value) not in self.constants:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            self.constants[("index", value)] = self._scalar(op).result
        return self.constants[("index", value)]

    def scalar(self, value: float, dtype: str) -> SSAValue:
        key = (dtype, float(value))
        if key not in self.constants:
            t = Float16Type() if dtype == "f16" else Float32Type()
            self.constants[key] = self._scalar(arith.ConstantOp(FloatAttr(float(value), t))).result
        return self.constants[key]

    def arith(self, into: list, cls, *operands) -> SSAValue:
        return self._scalar(cls(*operands), into).result

    def alloc(self, space: str, shape: tuple[int, ...], dtype: str, layout: str, hint: str) -> SSAValue:
        t = A.BufferType(space, shape, Float16Type() if dtype == "f16" else Float32Type(), layout)
        align = self.spec.alignment[space]
        offset = -(-self.next_offset[space] // align) * align
        if offset + t.size_bytes > self.spec.capacity[space]:
            raise CompileError(f"@{self.name}: {space} overflow: the tiles need {offset + t.size_bytes} bytes, "
                               f"{self.spec.capacity[space]} available on {self.spec.name}")
        self.next_offset[space] = offset + t.size_bytes
        op = A.AllocOp.create(properties={"offset": IntegerAttr(offset, i64)}, result_types=[t])
        op.buffer.name_hint = hint
        self.prologue.append(Scalar(op))
        return op.buffer

    def round_robin(self, into: list, count: int, block_dim: int) -> tuple[Loop, SSAValue]:
        """A loop over tiles [0, count) of which this core takes t with
        t % block_dim == block_idx. Every such loop starts at core 0, so core
        0 runs each loop the most times: the sync analysis follows core 0,
        and every sync it inserts is needed there (a tail given to another
        core would make the syncs after a loop it skips superfluous)."""
        body = Block(arg_types=[IndexType()])
        op = scf.ForOp(self.block_idx, self.index(count), self.index(block_dim), [], body)
        loop = Loop(op, body, [], max_trips=-(-count // block_dim))
        into.append(loop)
        return loop, body.args[0]

    def counted(self, into: list, lb: int, ub: int, step: int) -> tuple[Loop, SSAValue]:
        body = Block(arg_types=[IndexType()])
        op = scf.ForOp(self.index(lb), self.index(ub), self.index(step), [], body)
        loop = Loop(op, body, [], max_trips=-(-(ub - lb) // step))
        into.append(loop)
        return loop, body.args[0]

    def finish(self, block_dim: int, attributes: dict, early_sets: bool = False) -> A.KernelOp:
        emit([*self.prologue, *insert_sync(self.body, early_sets)], self.block, self.spec.events, rotate=early_sets)
        return A.KernelOp.create(
            properties={"sym_name": StringAttr(self.name), "target": A.TargetAttr(self.spec.name),
                        "block_dim": IntegerAttr(block_dim, i64), "num_ins": IntegerAttr(self.num_ins, i64)},
            attributes=attributes, regions=[Region(self.block)])


def _bytes(t: A.BufferType, elements: np.ndarray) -> np.ndarray:
    """The byte offsets of storage `elements` of a buffer of type `t`."""
    size = t.element_bytes
    indices = (np.asarray(elements, dtype=np.int64).reshape(-1, 1) * size + np.arange(size)).reshape(-1)
    return indices


def _tile_access(buffer: SSAValue, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> Access:
    t = buffer.type
    return Access(buffer, _bytes(t, tile_index(t, offsets, sizes)), t.size_bytes, t.space.data == "l0c")


def _range_access(buffer: SSAValue, start: int, count: int) -> Access:
    t = buffer.type
    return Access(buffer, _bytes(t, np.arange(start, start + count)), t.size_bytes)


def _copy(k: _Kernel, into: list, pipe: str, src: SSAValue, src_offsets: list, dst: SSAValue, dst_offsets: list,
          sizes: tuple[int, ...]) -> None:
    op = A.CopyOp.build(operands=[src, src_offsets, dst, dst_offsets],
                        properties={"pipe": A.PipeAttr(A.Pipe(pipe)), "sizes": DenseArrayBase.from_list(i64, sizes)})
    reads, writes = [], []
    for buffer, offsets, tile, accesses in ((src, src_offsets, sizes, reads), (dst, dst_offsets, sizes, writes)):
        if buffer.type.space.data != "gm":  # on-chip tiles of the lowering start at static offset 0
            accesses.append(_tile_access(buffer, (0,) * len(tile), tile))
    into.append(Instr(op, pipe, reads, writes))


# ---------------------------------------------------------------------------
# Matmul
# ---------------------------------------------------------------------------


def _lower_matmul(name: str, spec: A.TargetSpec, fn: func.FuncOp, op, max_buffers: int) -> A.KernelOp:
    a_t, b_t, c_t = op.lhs.type, op.rhs.type, op.result.type
    if len(a_t.get_shape()) != 2 or len(b_t.get_shape()) != 2:
        raise refuse(op, f"the Ascend target multiplies rank-2 matrices, not {a_t} and {b_t}")
    dtype = _dtype(op, a_t)
    (M, K), (_, N) = a_t.get_shape(), b_t.get_shape()
    out = A.BufferType("gm", (M, N), c_t.element_type)
    operands = [A.BufferType("gm", (M, K), Float16Type()), A.BufferType("gm", (K, N), Float16Type())]
    names = [arg.name_hint or f"arg{i}" for i, arg in enumerate(fn.body.block.args)]
    if [op.lhs, op.rhs] != list(fn.body.block.args):
        raise refuse(op, "the Ascend target multiplies the function's two arguments (lhs, rhs)")
    k = _Kernel(name, spec, operands, [out], [*names, "result"])
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


def _matmul_tile(k: _Kernel, into: list, gm, bufs, row, col, mt: int, nt: int, K: int, bk: int) -> None:
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
        _copy(k, body, "mte2", a_gm, [row, kk], a_l1[buf], [c0, c0], (mt, size(step)))
        _copy(k, body, "mte2", b_gm, [kk, col], b_l1[buf], [c0, c0], (size(step), nt))

    def zero_tail(body: list, step: int) -> None:
        """Zero the last fractal of K of the step's L1 tiles before its loads
        fill the valid part: the cube multiplies whole fractals."""
        buf, ks = step % buffers, _up16(size(step))
        zero = k.scalar(0.0, "f16")
        for tile, at, sizes in ((a_l1[buf], (0, ks - 16), (_up16(mt), 16)), (b_l1[buf], (ks - 16, 0), (16, _up16(nt)))):
            fill = A.InitConstOp.build(operands=[tile, [k.index(x) for x in at], zero],
                                       properties={"sizes": DenseArrayBase.from_list(i64, sizes)})
            body.append(Instr(fill, "mte2", [], [_tile_access(tile, at, sizes)]))

    def compute(body: list, step: int) -> None:
        buf, ks = step % buffers, _up16(size(step))
        _copy(k, body, "mte1", a_l1[buf], [c0, c0], a_l0[buf], [c0, c0], (_up16(mt), ks))
        _copy(k, body, "mte1", b_l1[buf], [c0, c0], b_l0[buf], [c0, c0], (ks, _up16(nt)))
        props = {"m": IntegerAttr(mt, i64), "n": IntegerAttr(nt, i64), "k": IntegerAttr(ks, i64)}
        if step == 0:
            props["init"] = UnitAttr()
        mmad = A.MmadOp.build(operands=[acc, a_l0[buf], b_l0[buf]], properties=props)
        reads = [_tile_access(a_l0[buf], (0, 0), (_up16(mt), ks)), _tile_access(b_l0[buf], (0, 0), (ks, _up16(nt)))]
        c_tile = _tile_access(acc, (0, 0), (_up16(mt), _up16(nt)))
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
        _copy(k, into, "fix", acc, [c0, c0], c_gm, [row, col], (mt, nt))
    else:
        _copy(k, into, "v", acc, [c0, c0], c_ub, [c0, c0], (_up16(mt), _up16(nt)))
        _copy(k, into, "mte3", c_ub, [c0, c0], c_gm, [row, col], (mt, nt))


# ---------------------------------------------------------------------------
# Elementwise chains
# ---------------------------------------------------------------------------


@dataclass
class _Step:
    """dst = vector op `name` of `sources` (value keys) and `scalar`."""

    name: str
    dst: object
    sources: list
    scalar: float | None = None


class _Chain:
    """An elementwise function as vector steps over flattened values: a
    value is ("in", k), ("tmp", i) or a Python float (a splat constant)."""

    def __init__(self, fn: func.FuncOp):
        self.fn = fn
        self.steps: list[_Step] = []
        self.shape: tuple[int, ...] | None = None
        self.dtype: str | None = None
        env = {arg: ("in", i) for i, arg in enumerate(fn.body.block.args)}
        for arg in fn.body.block.args:
            _dtype(fn, arg.type)
        self.outputs = self._run(fn.body.block, env)
        # elementwise ops take operands of their result's type: the inputs
        # they read, and the results, have the chain's type
        for t in fn.function_type.outputs.data:
            self._check_tensor(fn, t)

    def _check_tensor(self, op, t) -> None:
        dtype, shape = _dtype(op, t), tuple(t.get_shape())
        if self.dtype is None:
            self.dtype, self.shape = dtype, shape
        elif (dtype, shape) != (self.dtype, self.shape):
            raise refuse(op, f"an elementwise kernel computes tensors of one type, tensor<"
                         f"{'x'.join(map(str, self.shape))}x{self.dtype}>, not {t}")

    def _tmp(self):
        return ("tmp", len(self.steps))

    def _emit(self, name: str, sources: list, scalar: float | None = None):
        dst = self._tmp()
        self.steps.append(_Step(name, dst, sources, scalar))
        return dst

    def _run(self, block: Block, env: dict) -> list:
        for op in block.ops:
            if op.name in ("func.return", "msir.yield"):
                return [env[v] for v in op.operands]
            if op.name == "msir.constant":
                env[op.results[0]] = self._splat(op)
            elif op.name == "msir.broadcast_to":
                source = env[op.operands[0]]
                if not isinstance(source, float):
                    raise refuse(op, "broadcasting a tensor has no Ascend lowering yet (splat constants only)")
                env[op.results[0]] = source
            elif op.name == "msir.fusion":
                inner = dict(zip(op.body.block.args, (env[v] for v in op.operands)))
                for r, v in zip(op.results, self._run(op.body.block, inner)):
                    env[r] = v
            else:
                env[op.results[0]] = self._elementwise(op, [env[v] for v in op.operands])
        raise AssertionError("a block ends with its terminator")

    def _splat(self, op) -> float:
        value = op.value
        values = set(value.get_values()) if isinstance(value, DenseIntOrFPElementsAttr) else set()
        if len(values) != 1:
            raise refuse(op, "the Ascend target takes splat constants only")
        return float(values.pop())

    def _elementwise(self, op, args: list):
        if op.name not in _FOLD:
            raise refuse(op, "has no Ascend lowering (the target lowers matmul and the elementwise ops "
                         f"{', '.join(sorted(n.removeprefix('msir.') for n in _FOLD))})")
        scalars = [isinstance(a, float) for a in args]
        if all(scalars):  # folded in the result's precision
            dtype = _DTYPES[_dtype(op, op.results[0].type)]
            return float(_FOLD[op.name](*(dtype(a) for a in args)))
        self._check_tensor(op, op.results[0].type)
        if len(args) == 1:
            if op.name == "msir.neg":
                return self._emit("vmuls", args, -1.0)
            return self._emit(_UNARY[op.name], args)
        (a, b), name = args, op.name
        if not any(scalars):
            return self._emit(_TENSOR_BINARY[name], args)
        if name in _COMMUTATIVE_SCALAR:
            tensor, c = (b, a) if scalars[0] else (a, b)
            return self._emit(_COMMUTATIVE_SCALAR[name], [tensor], c)
        if name == "msir.sub":
            if scalars[1]:
                return self._emit("vadds", [a], -b)
            return self._emit("vadds", [self._emit("vmuls", [b], -1.0)], a)
        if scalars[1]:  # x / c as x * (1 / c), as the vector unit has no scalar division
            return self._emit("vmuls", [a], 1.0 / b)
        return self._emit("vmuls", [self._emit("vrec", [b])], a)


def _lower_elementwise(name: str, spec: A.TargetSpec, fn: func.FuncOp, tile_elements: int) -> A.KernelOp:
    chain = _Chain(fn)
    for i, out in enumerate(chain.outputs):
        if isinstance(out, float):
            raise refuse(fn, f"result {i} of @{name} is a constant: nothing for the vector unit to compute")
    if chain.shape is None:  # no result, no tensor op: no kernel to make
        raise refuse(fn, f"@{name} computes no tensor: nothing for the vector unit to compute")
    dtype = chain.dtype
    element_type = Float16Type() if dtype == "f16" else Float32Type()
    n = math.prod(chain.shape)
    args = fn.body.block.args
    k = _Kernel(name, spec, [A.BufferType("gm", (math.prod(a.type.get_shape()),), a.type.element_type)
                             for a in args],
                [A.BufferType("gm", (n,), element_type)] * len(chain.outputs),
                [a.name_hint or f"arg{i}" for i, a in enumerate(args)] +
                [f"result{i}" if len(chain.outputs) > 1 else "result" for i in range(len(chain.outputs))])
    eb = A.DTYPE_BYTES[dtype]
    per_repeat = A.REPEAT_BYTES // eb
    used_inputs = sorted({s[1] for step in chain.steps for s in step.sources if isinstance(s, tuple) and
                          s[0] == "in"} | {o[1] for o in chain.outputs if o[0] == "in"})
    buffers = len(used_inputs) + len(chain.steps)
    tile = spec.capacity["ub"] // (buffers * eb) // per_repeat * per_repeat
    if tile_elements:
        tile = min(tile, -(-tile_elements // per_repeat) * per_repeat)
    tile = min(tile, -(-n // per_repeat) * per_repeat)
    ub = {("in", i): k.alloc("ub", (tile,), dtype, "nd", f"{args[i].name_hint or f'arg{i}'}_ub")
          for i in used_inputs}
    for step in chain.steps:
        ub[step.dst] = k.alloc("ub", (tile,), dtype, "nd", f"t{step.dst[1]}_ub")
    full, tail = divmod(n, tile)
    block_dim = min(spec.vector_cores, max(full, 1))  # the tail goes to core 0, as the loops start there
    gm_in, gm_out = k.block.args[: len(args)], k.block.args[len(args):]

    def tile_body(body: list, offset, size: int) -> None:
        c0 = k.index(0)
        for i in used_inputs:
            _copy(k, body, "mte2", gm_in[i], [offset], ub[("in", i)], [c0], (size,))
        for step in chain.steps:
            _vector_step(k, body, step, ub, size, per_repeat, dtype)
        for out, gm in zip(chain.outputs, gm_out):
            _copy(k, body, "mte3", ub[out], [c0], gm, [offset], (size,))

    if full:
        loop, t = k.round_robin(k.body, full, block_dim)
        tile_body(loop.body, k.arith(loop.body, arith.MuliOp, t, k.index(tile)), tile)
    if tail:
        loop, _ = k.round_robin(k.body, 1, block_dim)
        tile_body(loop.body, k.index(full * tile), tail)
    return k.finish(block_dim, {})


def _vector_step(k: _Kernel, into: list, step: _Step, ub: dict, size: int, per_repeat: int, dtype: str) -> None:
    """`step` over `size` elements: instructions of at most 255 full repeats,
    then one masked repeat for the rest."""
    cls = _VECTOR_CLASSES[step.name]
    buffers = [ub[step.dst], *(ub[s] for s in step.sources)]
    full, rest = divmod(size, per_repeat)
    chunks = [(r0 * per_repeat, min(A.MAX_REPEAT, full - r0), None) for r0 in range(0, full, A.MAX_REPEAT)]
    if rest:
        chunks.append((full * per_repeat, 1, rest))
    for start, repeats, mask in chunks:
        offset = k.index(start)
        operands = [x for b in buffers for x in (b, offset)]
        if step.scalar is not None:
            operands.append(k.scalar(step.scalar, dtype))
        props = {}
        if repeats > 1:
            props["repeat"] = IntegerAttr(repeats, i64)
        if mask is not None:
            props["mask"] = IntegerAttr(mask, i64)
        op = cls.build(operands=operands, properties=props)
        count = mask if mask is not None else repeats * per_repeat
        into.append(Instr(op, "v", [_range_access(b, start, count) for b in buffers[1:]],
                          [_range_access(buffers[0], start, count)]))


# ---------------------------------------------------------------------------
# Row reductions
# ---------------------------------------------------------------------------

_ROW_REDUCTIONS = {"msir.reduce_sum": ("vcadd", 0.0), "msir.reduce_max": ("vcmax", -math.inf)}
"""msir's reductions over the last axis: the vector op reducing a repeat, and its identity."""

_REDUCE_REPEATS = 240
"""Repeats per reduction instruction: <= 255, and a multiple of 16 so that
the next instruction's destination (one element per repeat) stays 32-byte
aligned for every element type."""


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


def _up(x: int, m: int) -> int:
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


def _partial_levels(valid: int, per_repeat: int, align: int) -> list[tuple[int, int]]:
    """The partial buffers after the first level gives `valid` elements per
    row: a buffer whose row is reduced by full repeats again has a row stride
    of whole repeats (padded with the identity), the last one of 32 bytes."""
    levels = []
    while True:
        stride = _up(valid, per_repeat) if valid > per_repeat else _up(valid, align)
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
        levels = _partial_levels(chunks * chunk // per_repeat, per_repeat, align)
        return chunk * column_bytes + sum(stride for _, stride in levels) * wb + wb + A.DTYPE_BYTES[dtype]

    whole = _up(N, max(per_repeat, A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]))  # whole repeats of both types
    if whole // per_repeat <= _REDUCE_REPEATS and row_bytes(whole, 1) <= ub and (
            not tile_elements or whole <= tile_elements):
        rows = rows_per_tile(spec, M, N * A.DTYPE_BYTES[dtype], min(M, ub // row_bytes(whole, 1),
                                                                   max(1, tile_elements // whole) if tile_elements
                                                                   else M))
        chunk, chunks = whole, 1
    else:
        unit = 16 * per_repeat  # a chunk's partials start 32-byte aligned
        chunk = min(_REDUCE_REPEATS * per_repeat, (ub // 2) // column_bytes // unit * unit,
                    max(unit, tile_elements // unit * unit) if tile_elements else math.inf)
        rows, chunks = 1, -(-N // chunk)
        if chunk < unit or row_bytes(chunk, chunks) > ub:
            raise CompileError(f"a row of {N} elements needs more UB for its partial sums than "
                               f"{spec.name} has ({spec.capacity['ub']} bytes)")
    return RowPlan(rows, chunk, chunks, tuple(_partial_levels(chunks * chunk // per_repeat, per_repeat, align)))


def _lower_row_reduction(name: str, spec: A.TargetSpec, fn: func.FuncOp, op, tile_elements: int) -> A.KernelOp:
    t = op.input.type
    shape = tuple(t.get_shape())
    if len(shape) != 2 or op.axes_list not in ((1,), (-1,)):
        raise refuse(op, f"the Ascend target reduces the last axis of a rank-2 tensor, not axes "
                     f"{list(op.axes_list)} of {t}")
    returned = list(fn.body.block.last_op.operands)
    if list(fn.body.block.args) != [op.input] or returned != [op.result]:
        raise refuse(op, "the Ascend target lowers a row reduction of the function's argument as its result")
    dtype = _dtype(op, t)
    M, N = shape
    reducer, identity = _ROW_REDUCTIONS[op.name]
    work = "f32" if reducer == "vcadd" else dtype  # the vector unit sums f16 in f32; a maximum is exact
    plan = plan_row_reduction(spec, M, N, dtype, work, tile_elements)
    R, C = plan.rows, plan.chunk
    per_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[work]
    hint = fn.body.block.args[0].name_hint or "arg0"
    k = _Kernel(name, spec, [A.BufferType("gm", shape, t.element_type)],
                [A.BufferType("gm", (M,), op.result.type.element_type)], [hint, "result"])
    x_ub = k.alloc("ub", (R, C), dtype, "nd", f"{hint}_ub")
    x_work = k.alloc("ub", (R * C,), work, "nd", f"{hint}_{work}_ub") if work != dtype else x_ub
    partials = [k.alloc("ub", (R * stride,), work, "nd", f"partial{i}_ub") for i, (_, stride) in enumerate(plan.levels)]
    acc = k.alloc("ub", (_up(R, 16),), work, "nd", "acc_ub")
    out = k.alloc("ub", (_up(R, 16),), dtype, "nd", "out_ub") if work != dtype else acc
    vdup, vconv = _VECTOR_CLASSES["vdup"], _VECTOR_CLASSES["vconv"]
    reduce = _VECTOR_CLASSES[reducer]
    in_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]
    # f16 <-> f32 conversions take 64 elements a repeat: 4 blocks of the f16 side
    halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // A.DTYPE_BYTES[work]
    # the identity pads what full repeats read beyond a row's valid elements
    if plan.chunks == 1 and N < C:
        _repeated(k, k.body, vdup, [(x_ub, 0, in_repeat)], R * C // in_repeat, scalar=k.scalar(identity, dtype))
    for buffer, (valid, stride) in zip(partials, plan.levels):
        if valid > per_repeat and stride > valid:
            _repeated(k, k.body, vdup, [(buffer, 0, per_repeat)], R * stride // per_repeat,
                      scalar=k.scalar(identity, work))
    gm_in, gm_out = k.block.args
    c0 = k.index(0)

    def tile_body(body: list, row, rows: int) -> None:
        for j in range(plan.chunks):
            width = min(C, N - j * C)
            if plan.chunks > 1 and width < C:  # the last chunk's padding, which earlier chunks overwrote
                _repeated(k, body, vdup, [(x_ub, 0, in_repeat)], C // in_repeat, scalar=k.scalar(identity, dtype))
            _copy(k, body, "mte2", gm_in, [row, k.index(j * C)], x_ub, [c0, c0], (rows, width))
            if work != dtype:
                _repeated(k, body, vconv, [(x_work, 0, per_repeat), (x_ub, 0, per_repeat)], rows * C // per_repeat,
                          rep_stride=[A.BLOCKS_PER_REPEAT, halves])
            _reduce_chunk(k, body, reduce, x_work, partials[0], plan.levels[0][1], rows, C, j, plan.chunks,
                          per_repeat)
        _reduce_partials(k, body, reduce, partials, plan.levels, acc, rows, per_repeat, work)
        if out is not acc:
            full, rest = divmod(rows, per_repeat)
            if full:
                _repeated(k, body, vconv, [(out, 0, per_repeat), (acc, 0, per_repeat)], full,
                          rep_stride=[halves, A.BLOCKS_PER_REPEAT])
            if rest:
                _repeated(k, body, vconv, [(out, full * per_repeat, 0), (acc, full * per_repeat, 0)], 1, mask=rest,
                          extents=[rest, rest])
        _copy(k, body, "mte3", out, [c0], gm_out, [row], (rows,))

    return _row_tiles_over_cores(k, spec, M, R, tile_body)


def _row_tiles_over_cores(k: _Kernel, spec: A.TargetSpec, M: int, R: int, tile_body) -> A.KernelOp:
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


def _reduce_chunk(k: _Kernel, body: list, reduce, src: SSAValue, partial: SSAValue, stride: int, rows: int, C: int,
                  chunk: int, chunks: int, per_repeat: int) -> None:
    """The first level: each repeat of chunk `chunk` of `rows` rows of `src`
    (C columns a row) to one element of `partial` (rows `stride` apart)."""
    if stride == C // per_repeat and chunks == 1:  # the rows' partials are contiguous
        _repeated(k, body, reduce, [(partial, 0, 1), (src, 0, per_repeat)], rows * C // per_repeat)
        return
    for r in range(rows):
        _repeated(k, body, reduce, [(partial, r * stride + chunk * C // per_repeat, 1), (src, r * C, per_repeat)],
                  C // per_repeat)


def _reduce_partials(k: _Kernel, body: list, reduce, partials: list, levels: tuple, acc: SSAValue, rows: int,
                     per_repeat: int, work: str) -> None:
    """The later levels, down to one element per row in `acc`: a level whose
    rows hold at most a repeat is one masked repeat per row, strided by its
    row stride; a longer one is reduced repeat by repeat again."""
    for level, (valid, stride) in enumerate(levels):
        src = partials[level]
        if valid <= per_repeat:
            for r0 in range(0, rows, _REDUCE_REPEATS):
                count = min(_REDUCE_REPEATS, rows - r0)
                _repeated(k, body, reduce, [(acc, r0, 1), (src, r0 * stride, stride)], count,
                          mask=valid if valid < per_repeat else None,
                          rep_stride=[A.BLOCKS_PER_REPEAT, stride * A.DTYPE_BYTES[work] // 32],
                          extents=[count, (count - 1) * stride + valid])
            return
        next_stride = levels[level + 1][1]
        repeats = stride // per_repeat
        if next_stride == repeats:
            _repeated(k, body, reduce, [(partials[level + 1], 0, 1), (src, 0, per_repeat)], rows * repeats)
        else:
            for r in range(rows):
                _repeated(k, body, reduce, [(partials[level + 1], r * next_stride, 1), (src, r * stride, per_repeat)],
                          repeats)


def _repeated(k: _Kernel, into: list, cls, operands: list[tuple[SSAValue, int, int]], repeats: int,
              scalar: SSAValue | None = None, mask: int | None = None, rep_stride: list[int] | None = None,
              extents: list[int] | None = None, blk_stride: list[int] | None = None) -> None:
    """`repeats` repeats of vector op `cls` in instructions of at most 240:
    each operand (buffer, first element, elements per repeat) advances by
    its elements per repeat from one instruction to the next. `extents`
    (elements touched per operand) overrides repeats x elements per repeat,
    for strided or masked operands."""
    for r0 in range(0, repeats, _REDUCE_REPEATS):
        count = min(_REDUCE_REPEATS, repeats - r0)
        values = []
        for buffer, start, step in operands:
            values += [buffer, k.index(start + r0 * step)]
        if scalar is not None:
            values.append(scalar)
        props = {}
        if count > 1:
            props["repeat"] = IntegerAttr(count, i64)
        if mask is not None:
            props["mask"] = IntegerAttr(mask, i64)
        if rep_stride is not None:
            props["rep_stride"] = DenseArrayBase.from_list(i64, rep_stride)
        if blk_stride is not None:
            props["blk_stride"] = DenseArrayBase.from_list(i64, blk_stride)
        op = cls.build(operands=values, properties=props)
        accesses = [_range_access(buffer, start + r0 * step, extents[i] if extents else max(count * step, 1))
                    for i, (buffer, start, step) in enumerate(operands)]
        into.append(Instr(op, "v", accesses[1:], accesses[:1]))


# ---------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------

_SOFTMAX = ("msir.reduce_max", "msir.broadcast_to", "msir.sub", "msir.exp", "msir.reduce_sum", "msir.broadcast_to",
            "msir.div")
"""The ops of `msir.ops.softmax` over the last axis (`softmax_body`), in order."""


def _match_softmax(fn: func.FuncOp):
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


def _lower_softmax(name: str, spec: A.TargetSpec, fn: func.FuncOp, mx, tile_elements: int) -> A.KernelOp:
    """One kernel: per tile of rows, GM -> UB, (f16: to f32), the rows'
    maxima (vcmax levels), x - max (the maximum broadcast to a block by
    vbrcb, read with strides 0), exp, the rows' sums (vcadd levels), times
    the reciprocal of the sum (vrec, vbrcb), (f16: back to f16), UB -> GM.
    Rows are padded with -inf: exp makes the padding 0 for the sum."""
    x = fn.body.block.args[0]
    t = x.type
    M, N = t.get_shape()
    dtype = _dtype(mx, t)
    work, per_repeat = "f32", A.REPEAT_BYTES // 4
    C = _up(N, 128)  # whole repeats of f32 and of f16
    levels = tuple(_partial_levels(C // per_repeat, per_repeat, 8))
    convert = dtype != work
    column_bytes = A.DTYPE_BYTES[dtype] * (2 if convert else 1) + 4
    row_bytes = C * column_bytes + sum(stride for _, stride in levels) * 4 + 4 + 32
    ub = spec.capacity["ub"] - 32 * 8
    if C // per_repeat > _REDUCE_REPEATS or row_bytes > ub:
        raise refuse(mx, f"a softmax row of {N} elements does not fit UB on {spec.name} ({spec.capacity['ub']} "
                     "bytes); online softmax has no Ascend lowering yet")
    R = rows_per_tile(spec, M, N * A.DTYPE_BYTES[dtype], min(M, ub // row_bytes, max(1, tile_elements // C)
                                                             if tile_elements else M))
    hint = x.name_hint or "arg0"
    k = _Kernel(name, spec, [A.BufferType("gm", (M, N), t.element_type)],
                [A.BufferType("gm", (M, N), t.element_type)], [hint, "result"])
    x_ub = k.alloc("ub", (R, C), dtype, "nd", f"{hint}_ub")
    e_ub = k.alloc("ub", (R, C), work, "nd", "e_ub")  # x in f32, then exp(x - max), then the result
    out = k.alloc("ub", (R, C), dtype, "nd", "out_ub") if convert else e_ub
    partials = [k.alloc("ub", (R * stride,), work, "nd", f"partial{i}_ub") for i, (_, stride) in enumerate(levels)]
    acc = k.alloc("ub", (_up(R, 16),), work, "nd", "acc_ub")
    blocks = k.alloc("ub", (_up(R, 16) * 8,), work, "nd", "row_blocks_ub")  # a block per row: max, then 1 / sum
    cls = _VECTOR_CLASSES
    in_repeat = A.REPEAT_BYTES // A.DTYPE_BYTES[dtype]
    halves = A.BLOCKS_PER_REPEAT * A.DTYPE_BYTES[dtype] // 4
    if N < C:
        _repeated(k, k.body, cls["vdup"], [(x_ub, 0, in_repeat)], R * C // in_repeat,
                  scalar=k.scalar(-math.inf, dtype))
    gm_in, gm_out = k.block.args
    c0 = k.index(0)
    repeats_per_row = C // per_repeat

    def per_row(body: list, op: str, src: SSAValue, rows: int) -> None:
        """e[r] = src[r] (op) row r's block, for each row."""
        for r in range(rows):
            _repeated(k, body, cls[op], [(e_ub, r * C, per_repeat), (src, r * C, per_repeat), (blocks, r * 8, 0)],
                      repeats_per_row, blk_stride=[1, 1, 0], rep_stride=[8, 8, 0], extents=[C, C, 8])

    def row_blocks(body: list, rows: int) -> None:
        _repeated(k, body, cls["vbrcb"], [(blocks, 0, per_repeat), (acc, 0, 8)], -(-rows // 8))

    def tile_body(body: list, row, rows: int) -> None:
        _copy(k, body, "mte2", gm_in, [row, c0], x_ub, [c0, c0], (rows, N))
        src = x_ub
        if convert:
            _repeated(k, body, cls["vconv"], [(e_ub, 0, per_repeat), (x_ub, 0, per_repeat)], rows * repeats_per_row,
                      rep_stride=[A.BLOCKS_PER_REPEAT, halves])
            src = e_ub
        _reduce_chunk(k, body, cls["vcmax"], src, partials[0], levels[0][1], rows, C, 0, 1, per_repeat)
        _reduce_partials(k, body, cls["vcmax"], partials, levels, acc, rows, per_repeat, work)
        row_blocks(body, rows)
        per_row(body, "vsub", src, rows)
        _repeated(k, body, cls["vexp"], [(e_ub, 0, per_repeat), (e_ub, 0, per_repeat)], rows * repeats_per_row)
        _reduce_chunk(k, body, cls["vcadd"], e_ub, partials[0], levels[0][1], rows, C, 0, 1, per_repeat)
        _reduce_partials(k, body, cls["vcadd"], partials, levels, acc, rows, per_repeat, work)
        full, rest = divmod(rows, per_repeat)
        if full:
            _repeated(k, body, cls["vrec"], [(acc, 0, per_repeat), (acc, 0, per_repeat)], full)
        if rest:
            _repeated(k, body, cls["vrec"], [(acc, full * per_repeat, 0), (acc, full * per_repeat, 0)], 1, mask=rest,
                      extents=[rest, rest])
        row_blocks(body, rows)
        per_row(body, "vmul", e_ub, rows)
        if convert:
            _repeated(k, body, cls["vconv"], [(out, 0, per_repeat), (e_ub, 0, per_repeat)], rows * repeats_per_row,
                      rep_stride=[halves, A.BLOCKS_PER_REPEAT])
        _copy(k, body, "mte3", out, [c0, c0], gm_out, [row, c0], (rows, N))

    return _row_tiles_over_cores(k, spec, M, R, tile_body)


# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------


def _compute_ops(fn: func.FuncOp) -> list:
    return [op for op in fn.body.block.ops if op.name not in ("func.return", "msir.constant", "msir.broadcast_to")]


@dataclass(frozen=True)
class ConvertMsirToAscend(ModulePass):
    """msir functions to synchronised `ascend.kernel`s (see the module docstring)."""

    name = "convert-msir-to-ascend"

    chip: str = "910A"
    """The target chip: 910A (coupled) or 910B (separated cube and vector cores)."""
    tile_elements: int = 0
    """The largest UB tile of an elementwise kernel or of a row reduction's
    or softmax's input, in elements (0: as UB allows)."""
    max_block_dim: int = 0
    """The most cores a kernel runs on (0: every core of its kind on the chip)."""
    matmul_buffers: int = 2
    """The most L1 / L0 buffers per matmul operand: 2 lets the tiler choose
    ping-pong buffering, 1 keeps a matmul single-buffered."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from msir.pipeline import pass_class

        if self.matmul_buffers not in (1, 2):
            raise CompileError(f"convert-msir-to-ascend: matmul_buffers is 1 or 2, not {self.matmul_buffers}")
        if self.chip not in A.TARGETS:
            raise CompileError(f"unknown Ascend chip '{self.chip}' (known: {', '.join(A.TARGETS)})")
        spec = A.TARGETS[self.chip]
        if self.max_block_dim:
            spec = dataclasses.replace(spec, cube_cores=min(spec.cube_cores, self.max_block_dim),
                                       vector_cores=min(spec.vector_cores, self.max_block_dim))
        for name in PREPARATION:
            pass_class(name)().apply(ctx, op)
        kernels = []
        for fn in list(op.ops):
            if not isinstance(fn, func.FuncOp) or not fn.body.blocks:
                continue
            if fn.sym_visibility is not None and fn.sym_visibility.data == "private":
                continue
            kernel = self._lower(fn, spec)
            # the caller's view of the flat GM outputs (msir.ascend.target)
            kernel.attributes["msir.result_shapes"] = ArrayAttr(
                [ArrayAttr([IntAttr(d) for d in t.get_shape()]) for t in fn.function_type.outputs.data])
            kernels.append(kernel)
        for old in list(op.ops):
            old.detach()
            old.erase()
        for kernel in kernels:
            op.body.block.add_op(kernel)

    def _lower(self, fn: func.FuncOp, spec: A.TargetSpec) -> A.KernelOp:
        name = fn.sym_name.data
        for inner in fn.walk():
            if inner.name == "func.call":
                raise refuse(inner, "calls have no Ascend lowering: a kernel is one straight-line function")
        softmax = _match_softmax(fn)
        if softmax is not None:
            return _lower_softmax(name, spec, fn, softmax, self.tile_elements)
        ops = _compute_ops(fn)
        matmuls = [o for o in ops if o.name == "msir.matmul"]
        if matmuls:
            if len(ops) != 1:
                other = next(o for o in ops if o is not matmuls[0])
                raise refuse(other, "the Ascend target lowers a matmul as a kernel of its own; this op in the "
                             f"same function as the matmul at {source_loc(matmuls[0])} has no lowering there yet")
            return _lower_matmul(name, spec, fn, matmuls[0], self.matmul_buffers)
        reductions = [o for o in ops if o.name in _ROW_REDUCTIONS]
        if reductions:
            if len(ops) != 1:
                other = next(o for o in ops if o is not reductions[0])
                raise refuse(other, "the Ascend target lowers a row reduction as a kernel of its own; this op in "
                             f"the same function as the reduction at {source_loc(reductions[0])} has no lowering "
                             "there yet")
            return _lower_row_reduction(name, spec, fn, reductions[0], self.tile_elements)
        return _lower_elementwise(name, spec, fn, self.tile_elements)
