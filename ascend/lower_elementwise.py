"""Elementwise chains on the vector unit through UB tiles (masked tails,
splat constants as scalar operands), single- or double-buffered (the tiler
`plan_elementwise`); the contract is `convert_msir_to_ascend`'s docstring."""

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


@dataclass(frozen=True)
class ElementwisePlan:
    """How an elementwise kernel cuts its n elements: `tile`-element tiles;
    single-buffered (`buffers` 1), the `full` whole tiles go round-robin
    over `block_dim` cores; double-buffered (2), each core runs `per_core`
    of them software-pipelined on two UB buffer sets, then the
    `full - block_dim * per_core` left over go round-robin; the `tail`
    elements after the whole tiles are one last tile on core 0."""

    tile: int
    block_dim: int
    buffers: int
    full: int
    tail: int
    per_core: int = 0


def _tile_times(spec: A.TargetSpec, size: int, eb: int, inputs: int, outputs: int, cpis: list[int],
                cores: int, aligned: bool) -> tuple[int, int, int]:
    """The timing model's occupancy of one tile of `size` elements on MTE2
    (its loads), V (its steps, each after a barrier on the last) and MTE3
    (its stores), as `timing.copy_cost` / `vector_cost` count them."""
    def dma(pipe: str) -> int:
        bandwidth = min(float(spec.pipes[pipe].bytes_per_cycle), spec.gm_bytes_per_cycle / cores)
        return math.ceil(size * eb / (bandwidth if aligned else bandwidth / spec.gm_unaligned_penalty))

    repeats = math.ceil(size * eb / A.REPEAT_BYTES)
    compute = sum(repeats * cpi + spec.vector_latency for cpi in cpis)
    return inputs * dma("mte2"), compute, outputs * dma("mte3")


def _pipeline_cycles(spec: A.TargetSpec, tiles: list[tuple[int, int, int]], sets: int) -> float:
    """Core 0's cycles for `tiles` (load, compute, store occupancies) in
    order on `sets` UB buffer sets used in turn: a load waits for the
    compute that last read its set's inputs, a compute for its load and
    for the store that last read its set's results, a store for its
    compute; each pipe runs its instructions in order, latencies overlap."""
    lat2, lat3 = spec.pipes["mte2"].latency, spec.pipes["mte3"].latency
    free = [0.0, 0.0, 0.0]
    computed: list[float] = []
    stored: list[float] = []
    for i, (load, compute, store) in enumerate(tiles):
        j = i - sets
        start = max(free[0], computed[j] if j >= 0 else 0)
        free[0] = start + load
        start = max(free[1], start + load + lat2, stored[j] if j >= 0 else 0)
        free[1] = start + compute
        computed.append(free[1])
        start = max(free[2], free[1])
        free[2] = start + store
        stored.append(free[2] + lat3)
    return stored[-1] if stored else 0.0


def plan_elementwise(spec: A.TargetSpec, n: int, eb: int, inputs: int, outputs: int, live: int, cpis: list[int],
                     tile_elements: int, max_buffers: int) -> ElementwisePlan:
    """The tiling of an elementwise kernel (`live` UB buffers per set: its
    inputs and steps' results; `cpis`: its steps' cycles per repeat) with
    the least estimated time on core 0 (`_pipeline_cycles`). Single
    buffering takes the largest tile UB holds, as many cores as there are
    whole tiles; double buffering tries every tile size a set of half of UB
    holds (and `tile_elements` allows) with at least two tiles per core.
    A tile is whole repeats; GM bursts of a tile of whole 512 B are
    aligned, others count at the unaligned rate."""
    per_repeat = A.REPEAT_BYTES // eb
    cores = spec.vector_cores
    limit = -(-tile_elements // per_repeat) * per_repeat if tile_elements else None

    def cap(sets: int) -> int:
        tile = spec.capacity["ub"] // (sets * live * eb) // per_repeat * per_repeat
        return min(tile, limit or tile, -(-n // per_repeat) * per_repeat)

    def times(size: int, block_dim: int, aligned: bool):
        return _tile_times(spec, size, eb, inputs, outputs, cpis, block_dim, aligned)

    tile = cap(1)
    full, tail = divmod(n, tile)
    block_dim = min(cores, max(full, 1))  # the tail goes to core 0, as the loops start there
    tiles = [times(tile, block_dim, tile * eb % 512 == 0)] * -(-full // block_dim)
    tiles += [times(tail, block_dim, True)] if tail else []
    best = ((_pipeline_cycles(spec, tiles, 1), 0), ElementwisePlan(tile, block_dim, 1, full, tail))
    if max_buffers < 2:
        return best[1]
    for tile in range(per_repeat, cap(2) + 1, per_repeat):
        full, tail = divmod(n, tile)
        for block_dim in sorted({min(cores, full // 2), *(d for d in range(max(1, cores // 2), cores + 1)
                                                              if full % d == 0 and full // d >= 2)}):
            per_core = full // block_dim if block_dim else 0
            if per_core < 2:
                continue
            one = times(tile, block_dim, tile * eb % 512 == 0)
            # the steady state repeats every two tiles (one per set): eight
            # tiles, then that period
            head = _pipeline_cycles(spec, [one] * min(per_core, 8), 2)
            period = (head - _pipeline_cycles(spec, [one] * 6, 2)) / 2 if per_core > 8 else 0
            extra = [one] * (full % block_dim > 0) + [times(tail, block_dim, True)] * (tail > 0)
            cycles = head + period * max(0, per_core - 8) + _pipeline_cycles(spec, extra, 1)
            cost = (cycles, -tile)
            if cost < best[0]:
                best = (cost, ElementwisePlan(tile, block_dim, 2, full, tail, per_core))
    return best[1]


def lower_elementwise(name: str, spec: A.TargetSpec, fn: func.FuncOp, tile_elements: int,
                      max_buffers: int = 2) -> A.KernelOp:
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
    cpis = [spec.vector_cpi.get(step.name, 1) for step in chain.steps]
    plan = plan_elementwise(spec, n, eb, len(used_inputs), len(chain.outputs), len(used_inputs) + len(chain.steps),
                            cpis, tile_elements, max_buffers)
    tile, block_dim = plan.tile, plan.block_dim
    sets = []
    for suffix in ("", "_pong")[: plan.buffers]:
        ub = {("in", i): k.alloc("ub", (tile,), dtype, "nd", f"{args[i].name_hint or f'arg{i}'}_ub{suffix}")
              for i in used_inputs}
        for step in chain.steps:
            ub[step.dst] = k.alloc("ub", (tile,), dtype, "nd", f"t{step.dst[1]}_ub{suffix}")
        sets.append(ub)
    gm_in, gm_out = k.block.args[: len(args)], k.block.args[len(args):]
    c0 = k.index(0)

    def load(body: list, offset, ub: dict, size: int) -> None:
        for i in used_inputs:
            copy(k, body, "mte2", gm_in[i], [offset], ub[("in", i)], [c0], (size,))

    def compute(body: list, ub: dict, size: int) -> None:
        for step in chain.steps:
            _vector_step(k, body, step, ub, size, per_repeat, dtype)

    def store(body: list, offset, ub: dict, size: int) -> None:
        for out, gm in zip(chain.outputs, gm_out):
            copy(k, body, "mte3", ub[out], [c0], gm, [offset], (size,))

    def tile_body(body: list, offset, ub: dict, size: int) -> None:
        load(body, offset, ub, size)
        compute(body, ub, size)
        store(body, offset, ub, size)

    first_extra = 0  # the tiles before the left-over and tail tiles
    if plan.buffers == 2:
        _pipelined_tiles(k, plan, sets, load, compute, store)
        first_extra = block_dim * plan.per_core
    elif plan.full:
        loop, t = k.round_robin(k.body, plan.full, block_dim)
        tile_body(loop.body, k.arith(loop.body, arith.MuliOp, t, k.index(tile)), sets[0], tile)
        first_extra = plan.full
    turn = plan.per_core  # the extra tiles take the buffer sets on in turn
    if plan.full > first_extra:
        loop, t = k.round_robin(k.body, plan.full - first_extra, block_dim)
        at = k.arith(loop.body, arith.AddiOp, k.arith(loop.body, arith.MuliOp, t, k.index(tile)),
                     k.index(first_extra * tile))
        tile_body(loop.body, at, sets[turn % len(sets)], tile)
        turn += 1
    if plan.tail:
        loop, _ = k.round_robin(k.body, 1, block_dim)
        tile_body(loop.body, k.index(plan.full * tile), sets[turn % len(sets)], plan.tail)
    # a set_flag right after its producer: a load waits only for the compute
    # that read its own buffer set, not for the other set's
    return k.finish(block_dim, {}, early_sets=plan.buffers == 2)


def _pipelined_tiles(k: Kernel, plan: ElementwisePlan, sets: list, load, compute, store) -> None:
    """Each core's `plan.per_core` tiles j (at GM element (j * block_dim +
    block_idx) * tile), tile j on buffer set j % 2, software-pipelined in
    groups: group g is the load of tile g, the compute of tile g - 1 and
    the store of tile g - 2 (those that exist). So in program order a load
    comes before the compute of the tile before it, and a buffer set's
    load after the compute that last read it, its compute after the store
    that last read it, each in the group before: every dependency but one
    per pair of pipes is in the same loop trip, and the sync inserter's
    early sets order each instruction only after what it depends on. The
    groups with all three run two per trip of an `scf.for` (the sets are
    static) when there are at least two trips; the first two and the last
    two (and an odd one) are peeled."""
    tile, T = plan.tile, plan.per_core
    stride = plan.block_dim * tile
    base = k.arith(k.prologue, arith.MuliOp, k.block_idx, k.index(tile))

    def group(body: list, g: int, offset) -> None:
        if g < T:
            load(body, offset(g), sets[g % 2], tile)
        if 0 <= g - 1 < T:
            compute(body, sets[(g - 1) % 2], tile)
        if 0 <= g - 2 < T:
            store(body, offset(g - 2), sets[g % 2], tile)

    def peeled(body: list):
        return lambda j: base if j == 0 else k.arith(body, arith.AddiOp, base, k.index(j * stride))

    for g in range(2):
        group(k.body, g, peeled(k.body))
    trips = max(0, T - 2) // 2
    if trips < 2:  # unrolled: the early sets of one trip reach back only within its block
        trips = 0
    if trips:
        # w: the offset of tile g - 2 of the trip's first group g, less base
        loop, w = k.counted(k.body, 0, trips * 2 * stride, 2 * stride)
        at = k.arith(loop.body, arith.AddiOp, w, base)
        offsets = {0: at}

        def in_loop(j_from_w: int):
            if j_from_w not in offsets:
                offsets[j_from_w] = k.arith(loop.body, arith.AddiOp, at, k.index(j_from_w * stride))
            return offsets[j_from_w]

        for b in range(2):
            group(loop.body, 2 + b, lambda j: in_loop(j))
    for g in range(2 + 2 * trips, T + 2):
        group(k.body, g, peeled(k.body))


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


