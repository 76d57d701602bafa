"""Elementwise chains on the vector unit through UB tiles (masked tails,
splat constants as scalar operands); the contract is
`convert_msir_to_ascend`'s docstring."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    IntegerAttr,
    i64,
)
from xdsl.ir import Block

from msir.ascend.kernel_builder import (
    DTYPES,
    VECTOR_CLASSES,
    Kernel,
    copy,
    dtype_of,
    range_access,
    refuse,
)
from msir.ascend.sync import Instr
from msir.dialects import ascend as A

_TENSOR_BINARY = {"msir.add": "vadd", "msir.sub": "vsub", "msir.mul": "vmul", "msir.div": "vdiv",
                  "msir.maximum": "vmax", "msir.minimum": "vmin"}
_COMMUTATIVE_SCALAR = {"msir.add": "vadds", "msir.mul": "vmuls", "msir.maximum": "vmaxs", "msir.minimum": "vmins"}
_UNARY = {"msir.exp": "vexp", "msir.log": "vln", "msir.abs": "vabs", "msir.sqrt": "vsqrt"}
_FOLD = {"msir.add": np.add, "msir.sub": np.subtract, "msir.mul": np.multiply, "msir.div": np.divide,
         "msir.maximum": np.maximum, "msir.minimum": np.minimum, "msir.neg": np.negative, "msir.abs": np.abs,
         "msir.exp": np.exp, "msir.log": np.log, "msir.sqrt": np.sqrt}

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
            dtype_of(fn, arg.type)
        self.outputs = self._run(fn.body.block, env)
        # elementwise ops take operands of their result's type: the inputs
        # they read, and the results, have the chain's type
        for t in fn.function_type.outputs.data:
            self._check_tensor(fn, t)

    def _check_tensor(self, op, t) -> None:
        dtype, shape = dtype_of(op, t), tuple(t.get_shape())
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
            dtype = DTYPES[dtype_of(op, op.results[0].type)]
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


def lower_elementwise(name: str, spec: A.TargetSpec, fn: func.FuncOp, tile_elements: int) -> A.KernelOp:
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
    k = Kernel(name, spec, [A.BufferType("gm", (math.prod(a.type.get_shape()),), a.type.element_type)
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
            copy(k, body, "mte2", gm_in[i], [offset], ub[("in", i)], [c0], (size,))
        for step in chain.steps:
            _vector_step(k, body, step, ub, size, per_repeat, dtype)
        for out, gm in zip(chain.outputs, gm_out):
            copy(k, body, "mte3", ub[out], [c0], gm, [offset], (size,))

    if full:
        loop, t = k.round_robin(k.body, full, block_dim)
        tile_body(loop.body, k.arith(loop.body, arith.MuliOp, t, k.index(tile)), tile)
    if tail:
        loop, _ = k.round_robin(k.body, 1, block_dim)
        tile_body(loop.body, k.index(full * tile), tail)
    return k.finish(block_dim, {})


def _vector_step(k: Kernel, into: list, step: _Step, ub: dict, size: int, per_repeat: int, dtype: str) -> None:
    """`step` over `size` elements: instructions of at most 255 full repeats,
    then one masked repeat for the rest."""
    cls = VECTOR_CLASSES[step.name]
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
        into.append(Instr(op, "v", [range_access(b, start, count) for b in buffers[1:]],
                          [range_access(buffers[0], start, count)]))


