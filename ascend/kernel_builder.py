"""Building an `ascend.kernel`: GM arguments, static buffers, scalar
constants, structured bodies of instructions with the bytes each reads and
writes, and the sync insertion that `msir.ascend.sync` derives from them.
Shared by every lowering of `convert-msir-to-ascend`."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Block, Region, SSAValue

from msir.ascend.errors import source_loc
from msir.ascend.layouts import tile_index
from msir.ascend.sync import Access, Instr, Loop, Scalar, emit, insert_sync
from msir.dialects import ascend as A
from msir.errors import CompileError

VECTOR_CLASSES = {cls.name.removeprefix("ascend."): cls
                   for cls in (*A.VECTOR_OPS, *A.VECTOR_REDUCE_OPS, A.VdupOp, A.VconvOp, A.VbrcbOp)}
DTYPES = {"f16": np.float16, "f32": np.float32}


REDUCE_REPEATS = 240
"""Repeats per reduction instruction: <= 255, and a multiple of 16 so that
the next instruction's destination (one element per repeat) stays 32-byte
aligned for every element type."""


def refuse(op, message: str) -> CompileError:
    return CompileError(f"{op.name}: {message}", source_loc(op))


def dtype_of(op, t) -> str:
    if not isinstance(t, TensorType):  # a scalar (f32, index) argument or result
        raise refuse(op, f"the Ascend target computes f16 and f32 tensors, not {t}")
    name = A.DTYPE_NAMES.get(t.element_type)
    if name not in DTYPES:
        raise refuse(op, f"the Ascend target computes f16 and f32 tensors, not {t.element_type}")
    return name



# ---------------------------------------------------------------------------
# Building a kernel
# ---------------------------------------------------------------------------


class Kernel:
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

    def finish(self, block_dim: int, attributes: dict, early_sets: bool = False, move_sets: bool = True
               ) -> A.KernelOp:
        emit([*self.prologue, *insert_sync(self.body, early_sets, move_sets)], self.block, self.spec.events,
             rotate=early_sets)
        return A.KernelOp.create(
            properties={"sym_name": StringAttr(self.name), "target": A.TargetAttr(self.spec.name),
                        "block_dim": IntegerAttr(block_dim, i64), "num_ins": IntegerAttr(self.num_ins, i64)},
            attributes=attributes, regions=[Region(self.block)])


def byte_offsets(t: A.BufferType, elements: np.ndarray) -> np.ndarray:
    """The byte offsets of storage `elements` of a buffer of type `t`."""
    size = t.element_bytes
    indices = (np.asarray(elements, dtype=np.int64).reshape(-1, 1) * size + np.arange(size)).reshape(-1)
    return indices


def tile_access(buffer: SSAValue, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> Access:
    t = buffer.type
    return Access(buffer, byte_offsets(t, tile_index(t, offsets, sizes)), t.size_bytes, t.space.data == "l0c")


def range_access(buffer: SSAValue, start: int, count: int) -> Access:
    t = buffer.type
    return Access(buffer, byte_offsets(t, np.arange(start, start + count)), t.size_bytes)


def copy(k: Kernel, into: list, pipe: str, src: SSAValue, src_offsets: list, dst: SSAValue, dst_offsets: list,
          sizes: tuple[int, ...]) -> None:
    op = A.CopyOp.build(operands=[src, src_offsets, dst, dst_offsets],
                        properties={"pipe": A.PipeAttr(A.Pipe(pipe)), "sizes": DenseArrayBase.from_list(i64, sizes)})
    reads, writes = [], []
    for buffer, offsets, tile, accesses in ((src, src_offsets, sizes, reads), (dst, dst_offsets, sizes, writes)):
        if buffer.type.space.data != "gm":  # on-chip tiles of the lowering start at static offset 0
            accesses.append(tile_access(buffer, (0,) * len(tile), tile))
    into.append(Instr(op, pipe, reads, writes))



def repeated(k: Kernel, into: list, cls, operands: list[tuple[SSAValue, int, int]], repeats: int,
              scalar: SSAValue | None = None, mask: int | None = None, rep_stride: list[int] | None = None,
              extents: list[int] | None = None, blk_stride: list[int] | None = None) -> None:
    """`repeats` repeats of vector op `cls` in instructions of at most 240:
    each operand (buffer, first element, elements per repeat) advances by
    its elements per repeat from one instruction to the next. `extents`
    (elements touched per operand) overrides repeats x elements per repeat,
    for strided or masked operands."""
    for r0 in range(0, repeats, REDUCE_REPEATS):
        count = min(REDUCE_REPEATS, repeats - r0)
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
        accesses = [range_access(buffer, start + r0 * step, extents[i] if extents else max(count * step, 1))
                    for i, (buffer, start, step) in enumerate(operands)]
        into.append(Instr(op, "v", accesses[1:], accesses[:1]))


