"""Run an `ascend.kernel` on NumPy: values, checks and cycles.

`run(module, entry, inputs)` verifies the module (a broken static rule is the
`AscendError` of its kind, at the op), then runs the kernel once per core
(`block_dim`, sequentially: cores share only GM, and `CoreOwnership` checks
they never share written bytes). For each core:

1. the scalar unit's part is interpreted in program order (`scf`, `arith`,
   `ascend.block_idx`), which resolves every offset and yields the core's
   trace of pipe instructions, each with the bytes it reads and writes and
   its functional effect; dynamic rules are checked here (tiles and vector
   footprints inside their buffers, alignment of what is addressed);
2. `timing.schedule` runs the trace through the pipe queues: cycles, the flag
   protocol, deadlocks;
3. the happens-before tracker (`hazards`) checks each instruction's accesses,
   then it executes on the core's memories (one byte array per on-chip
   memory and per GM argument), in program order (or, if a wait precedes
   the set it consumes, in the order the instructions start): without a
   race every order the flags allow gives the same values.

Numerics: copies move bytes (narrowing out of L0C rounds to nearest even),
mmad multiplies in f32 (f16/bf16 products are exact there) and accumulates
in f32 (i32 for i8), vector instructions compute in their element type as
NumPy does (float16 arithmetic is correctly rounded; `vcadd` sums in f32 and
rounds once). bf16 needs `ml_dtypes`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from msir.ascend import errors as E
from msir.ascend.hazards import Access, CoreOwnership, HappensBefore
from msir.ascend.layouts import tile_index
from msir.ascend.timing import Instruction, Profile, copy_cost, mmad_cost, schedule, vector_cost

GM_BURST_ALIGNMENT = 512
"""GM bursts reach full bandwidth from 512-byte boundaries (C11)."""


def numpy_dtype(name: str, op=None) -> np.dtype:
    if name == "bf16":
        try:
            import ml_dtypes
        except ImportError:
            raise E.KernelError("bf16 buffers need the ml_dtypes package (pip install ml_dtypes)",
                                E.source_loc(op) if op is not None else None) from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"f16": np.float16, "f32": np.float32, "i8": np.int8, "i32": np.int32}[name])


@dataclass
class Result:
    outputs: list[np.ndarray]
    profile: Profile


def find_kernel(module, entry: str):
    from msir.dialects.ascend import KernelOp

    kernels = [op for op in module.walk() if isinstance(op, KernelOp)]
    for k in kernels:
        if k.sym_name.data == entry:
            return k
    names = ", ".join(f"@{k.sym_name.data}" for k in kernels) or "none"
    raise E.KernelError(f"no ascend.kernel @{entry} in the module (kernels: {names})")


def verify(module) -> None:
    """The module's verifier, its failures as the `AscendError` of their kind."""
    from xdsl.utils.exceptions import VerifyException

    from msir.dialects.ascend import AscendVerifyException

    try:
        module.verify()
    except AscendVerifyException as e:
        raise E.BY_KIND[e.kind](str(e), E.source_loc(e.op)) from None
    except VerifyException as e:
        raise E.KernelError(f"the module does not verify: {str(e).splitlines()[0]}") from None


def run(module, entry: str, inputs: list[np.ndarray]) -> Result:
    """Run kernel `entry` of `module` on `inputs` (one array per `ins`
    argument, of its shape and dtype); returns the `outs` and the profile."""
    verify(module)
    kernel = find_kernel(module, entry)
    spec = kernel.target.spec
    gm = _gm_arrays(kernel, inputs)
    gm_sizes = {("gm", i): a.size for i, a in enumerate(gm)}
    ownership = CoreOwnership(gm_sizes)
    block_dim = kernel.block_dim.value.data
    byte_cache: dict = {}
    profiles = [_run_core(_Core(kernel, spec, gm, block, block_dim, byte_cache), gm_sizes, ownership)
                for block in range(block_dim)]
    slowest = max(profiles, key=lambda p: p.cycles)
    profile = dataclasses.replace(slowest, instructions=max(p.instructions for p in profiles))
    outs = []
    for arg, data in zip(kernel.outs, gm[len(kernel.ins):]):
        t = arg.type
        outs.append(data.view(numpy_dtype(t.dtype, kernel)).reshape(t.dims).copy())
    return Result(outs, profile)


def _run_core(core: _Core, gm_sizes: dict, ownership: CoreOwnership) -> Profile:
    """One core: its trace, its schedule, then each instruction checked and
    executed (see the module docstring)."""
    trace = core.trace()
    hb = HappensBefore(len(trace), {**gm_sizes, **core.region_sizes})
    timed = schedule(trace, core.spec, core.block_dim)
    tokens: dict[int, np.ndarray] = {}
    for ins in _checking_order(trace, timed):
        if ins.kind == "set":
            tokens[ins.index] = hb.token(ins.pipe)
        elif ins.kind == "wait":
            hb.wait(ins.pipe, tokens[timed.consumed[ins.index].index])
        elif ins.kind == "barrier":
            hb.barrier(ins.pipe)
        else:
            hb.access(ins.index, ins.op, ins.pipe, ins.reads, ins.writes)
            gm_reads = [a for a in ins.reads if a.region[0] == "gm"]
            gm_writes = [a for a in ins.writes if a.region[0] == "gm"]
            if gm_reads or gm_writes:
                ownership.access(core.block, ins.op, gm_reads, gm_writes)
            ins.execute()
    return timed.profile


def _checking_order(trace: list[Instruction], timed) -> list[Instruction]:
    """Program order, in which a race is reported at the later of its two
    accesses as the kernel is written, when every wait comes after the set it
    consumes (then program order respects every happens-before edge); else
    the order the pipes start the instructions in."""
    if all(timed.consumed[i.index].index < i.index for i in trace if i.kind == "wait"):
        return trace
    return timed.order


def _gm_arrays(kernel, inputs: list[np.ndarray]) -> list[np.ndarray]:
    ins = kernel.ins
    name = f"@{kernel.sym_name.data}"
    if len(inputs) != len(ins):
        raise E.KernelError(f"{name} takes {len(ins)} inputs, {len(inputs)} given", E.source_loc(kernel))
    arrays = []
    for i, (arg, value) in enumerate(zip(ins, inputs)):
        t = arg.type
        dtype = numpy_dtype(t.dtype, kernel)
        value = np.asarray(value)
        if value.shape != t.dims or value.dtype != dtype:
            raise E.KernelError(f"input {i} of {name} (%{arg.name_hint}) must be a {t.dims} array of {dtype}, "
                                f"got {value.shape} {value.dtype}", E.source_loc(kernel))
        arrays.append(np.ascontiguousarray(value).view(np.uint8).ravel().copy())
    for arg in kernel.outs:
        arrays.append(np.zeros(arg.type.size_bytes, dtype=np.uint8))
    return arrays


@dataclass
class _Buffer:
    region: tuple
    base: int
    type: object
    name: str


def _byte_indices(base: int, elements: np.ndarray, element_bytes: int) -> np.ndarray | slice:
    """The bytes of `elements` (storage indices) of a buffer at `base`: a slice
    when they are one contiguous range (whole buffers, whole rows), which the
    shadow memory reads and writes much faster than an index array."""
    flat = elements.reshape(-1)
    first, last = int(flat.min()), int(flat.max())
    if last - first + 1 == flat.size:  # distinct indices filling their range
        return slice(base + first * element_bytes, base + (last + 1) * element_bytes)
    start = base + flat.astype(np.int64) * element_bytes
    if element_bytes == 1:
        return start
    return (start[:, None] + np.arange(element_bytes, dtype=np.int64)).reshape(-1)


class _Core:
    """One AI core running the kernel: its memories, the scalar unit's
    interpretation, and the instructions it issues."""

    def __init__(self, kernel, spec, gm: list[np.ndarray], block: int, block_dim: int, byte_cache: dict):
        self.kernel, self.spec, self.block, self.block_dim = kernel, spec, block, block_dim
        self.byte_cache = byte_cache
        """Byte indices of the element indices a tile uses, shared by the cores
        (keyed by the identity of the memoised index array, kept alive with it)."""
        self.memory: dict[tuple, np.ndarray] = {("gm", i): a for i, a in enumerate(gm)}
        self.region_sizes: dict[tuple, int] = {}
        self.values: dict = {}
        self.buffers: dict = {}
        self.instructions: list[Instruction] = []
        self.clock = 0
        for i, arg in enumerate(kernel.body.block.args):
            self.buffers[arg] = _Buffer(("gm", i), 0, arg.type, f"%{arg.name_hint or i}")

    # -- scalar interpretation -------------------------------------------

    def trace(self) -> list[Instruction]:
        self._run_block(self.kernel.body.block, [])
        return self.instructions

    def _run_block(self, block, args: list) -> list:
        for arg, value in zip(block.args, args):
            self.values[arg] = value
        for op in block.ops:
            self.clock += 1
            name = op.name
            if name in ("scf.yield",):
                return [self.values[v] for v in op.operands]
            handler = _SCALAR.get(name)
            if handler is not None:
                results = handler(self, op)
                for r, v in zip(op.results, results):
                    self.values[r] = v
            else:
                method = getattr(self, "_" + name.replace(".", "_"), None)
                if method is None:
                    raise E.KernelError(f"the emulator does not run {name}: a kernel holds ascend ops and scalar "
                                        "scf/arith on index and integer values", E.source_loc(op))
                method(op)
        return []

    def _scf_for(self, op) -> None:
        lb, ub, step = (self.values[v] for v in (op.lb, op.ub, op.step))
        carried = [self.values[v] for v in op.iter_args]
        for i in range(lb, ub, step):
            carried = self._run_block(op.body.block, [i, *carried])
        for r, v in zip(op.results, carried):
            self.values[r] = v

    def _scf_if(self, op) -> None:
        region = op.true_region if self.values[op.cond] else op.false_region
        results = self._run_block(region.block, []) if region.blocks else []
        for r, v in zip(op.results, results):
            self.values[r] = v

    def _ascend_block_idx(self, op) -> None:
        self.values[op.result] = self.block

    def _ascend_alloc(self, op) -> None:
        t = op.buffer.type
        space = t.space.data
        region = (space,)
        if region not in self.memory:
            self.memory[region] = np.zeros(self.spec.capacity[space], dtype=np.uint8)
        # the shadow memory covers the bytes buffers use, not the whole memory
        self.region_sizes[region] = max(self.region_sizes.get(region, 0), op.end)
        self.buffers[op.buffer] = _Buffer(region, op.start, t, f"%{op.buffer.name_hint or 'buffer'}")

    def _issue(self, op, kind: str, pipe: str, **fields) -> None:
        self.instructions.append(Instruction(len(self.instructions), op, kind, pipe, self.clock, **fields))

    def _ascend_set_flag(self, op) -> None:
        self._issue(op, "set", op.src_pipe.data.value)

    def _ascend_wait_flag(self, op) -> None:
        self._issue(op, "wait", op.dst_pipe.data.value)

    def _ascend_pipe_barrier(self, op) -> None:
        self._issue(op, "barrier", op.pipe.data.value)

    # -- memory ---------------------------------------------------------

    def _view(self, buf: _Buffer, op) -> np.ndarray:
        data = self.memory[buf.region][buf.base: buf.base + buf.type.size_bytes]
        return data.view(numpy_dtype(buf.type.dtype, op))

    def _access(self, buf: _Buffer, elements: np.ndarray) -> Access:
        key = (buf.base, buf.type.element_bytes, id(elements))
        if key not in self.byte_cache or self.byte_cache[key][0] is not elements:
            self.byte_cache[key] = (elements, _byte_indices(buf.base, elements, buf.type.element_bytes))
        return Access(buf.region, self.byte_cache[key][1], buf.name, buf.base, buf.type.size_bytes)

    # -- data movement --------------------------------------------------

    def _ascend_copy(self, op) -> None:
        src, dst = self.buffers[op.src], self.buffers[op.dst]
        sizes = op.tile
        dst_sizes = sizes[::-1] if op.transpose is not None else sizes
        src_offsets = tuple(self.values[v] for v in op.src_offsets)
        dst_offsets = tuple(self.values[v] for v in op.dst_offsets)
        src_idx = self._tile(op, src, src_offsets, sizes)
        dst_idx = self._tile(op, dst, dst_offsets, dst_sizes)
        pipe = op.pipe.data.value
        gm = src if src.region[0] == "gm" else dst if dst.region[0] == "gm" else None
        gm_aligned = None
        if gm is not None:
            idx = src_idx if gm is src else dst_idx
            gm_aligned = bool(np.all((gm.base + _burst_starts(idx) * gm.type.element_bytes) % GM_BURST_ALIGNMENT == 0))
        nbytes = src_idx.size * src.type.element_bytes
        gm_bytes = None if gm is None else (src_idx if gm is src else dst_idx).size * gm.type.element_bytes
        occupancy, latency = copy_cost(self.spec, pipe, nbytes, gm_aligned, self.block_dim, gm_bytes)
        src_view, dst_view = self._view(src, op), self._view(dst, op)
        transpose, narrow = op.transpose is not None, src.type.dtype != dst.type.dtype

        def execute() -> None:
            values = src_view[src_idx]
            if transpose:
                values = values.T
            if narrow and np.issubdtype(dst_view.dtype, np.integer):
                info = np.iinfo(dst_view.dtype)
                values = np.clip(values, info.min, info.max)
            dst_view[dst_idx] = values.astype(dst_view.dtype)

        self._issue(op, "copy", pipe, occupancy=occupancy, latency=latency, reads=[self._access(src, src_idx)],
                    writes=[self._access(dst, dst_idx)], execute=execute)

    def _ascend_init_const(self, op) -> None:
        dst = self.buffers[op.dst]
        idx = self._tile(op, dst, tuple(self.values[v] for v in op.dst_offsets), op.tile)
        occupancy, latency = copy_cost(self.spec, "mte2", idx.size * dst.type.element_bytes, None, self.block_dim)
        view, value = self._view(dst, op), self.values[op.value]

        def execute() -> None:
            view[idx] = value

        self._issue(op, "copy", "mte2", occupancy=occupancy, latency=latency, writes=[self._access(dst, idx)],
                    execute=execute)

    def _tile(self, op, buf: _Buffer, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> np.ndarray:
        t = buf.type
        if any(o < 0 or o + n > d for o, n, d in zip(offsets, sizes, t.dims)):
            raise E.BoundsError(f"{op.name}: tile {list(sizes)} at {list(offsets)} is outside {buf.name} "
                                f"({t})", E.source_loc(op))
        layout, space = t.layout.data, buf.region[0]
        if layout in ("zN", "zZ", "nZ"):
            fr, fc = t.fractal
            if offsets[0] % fr or offsets[1] % fc:
                raise E.AlignmentError(f"{op.name}: tile at {list(offsets)} of {buf.name} ({t}) does not start on "
                                       f"a {fr}x{fc} fractal", E.source_loc(op))
        idx = _tile_index(t, offsets, sizes)
        align = self.spec.alignment[space]
        if space != "gm" and layout in ("nd", "nc1hwc0"):
            misaligned = (buf.base + _burst_starts(idx) * t.element_bytes) % align
            if misaligned.any():
                bad = int(_burst_starts(idx)[np.argmax(misaligned != 0)]) * t.element_bytes
                raise E.AlignmentError(f"{op.name}: a burst of the tile at {list(offsets)} starts at byte {bad} of "
                                       f"{space} buffer {buf.name} ({space}[{buf.base + bad}]), not {align}-byte "
                                       "aligned", E.source_loc(op))
        return idx

    # -- the cube -------------------------------------------------------

    def _ascend_mmad(self, op) -> None:
        c, a, b = self.buffers[op.c], self.buffers[op.a], self.buffers[op.b]
        m, n, k = op.mnk
        mp, np_ = -(-m // 16) * 16, -(-n // 16) * 16
        a_idx = _tile_index(a.type, (0, 0), (mp, k))
        b_idx = _tile_index(b.type, (0, 0), (k, np_))
        c_idx = _tile_index(c.type, (0, 0), (mp, np_))
        a_view, b_view, c_view = self._view(a, op), self._view(b, op), self._view(c, op)
        init = op.init is not None
        wide = np.int64 if c.type.dtype == "i32" else np.float32

        def execute() -> None:
            # einsum's own loop, not the BLAS: a threaded BLAS on a loaded
            # machine takes 20x longer for these small products
            product = np.einsum("mk,kn->mn", a_view[a_idx].astype(wide), b_view[b_idx].astype(wide))
            if not init:
                product = product + c_view[c_idx]
            c_view[c_idx] = product.astype(c_view.dtype)

        occupancy, latency = mmad_cost(self.spec, m, n, k, a.type.c0)
        reads = [self._access(a, a_idx), self._access(b, b_idx)]
        if not init:
            reads.append(self._access(c, c_idx))
        self._issue(op, "mmad", "m", occupancy=occupancy, latency=latency, reads=reads,
                    writes=[self._access(c, c_idx)], execute=execute)

    # -- vector ---------------------------------------------------------

    def _vector(self, op) -> None:
        lanes = np.asarray(op.lanes(), dtype=np.int64)
        repeats = op.repeats
        blk, rep = op.strides()
        operands = []
        for (value, offset), what, bs, rs in zip(op.operand_buffers(), op.OPERANDS, blk, rep):
            buf = self.buffers[value]
            if what == "dst" and op.name in _VECTOR_REDUCTIONS:  # one element per repeat
                operands.append(self._lanes(op, buf, what, self.values[offset], np.zeros(1, np.int64), repeats,
                                            1, 0, element_stride=1))
            elif what == "src" and op.name == "ascend.vbrcb":  # 8 consecutive elements per repeat
                operands.append(self._lanes(op, buf, what, self.values[offset], np.arange(8), repeats, 0, 0,
                                            element_stride=8))
            else:
                operands.append(self._lanes(op, buf, what, self.values[offset], lanes, repeats, bs, rs))
        views = [self._view(self.buffers[v], op) for v, _ in op.operand_buffers()]
        scalar = self.values[op.scalar] if hasattr(op, "scalar") else None
        compute = _VECTOR_FUNCTIONS[op.name]
        (dst_buf, dst_idx), sources = operands[0], operands[1:]
        dst_view, src_views = views[0], views[1:]

        def execute() -> None:
            args = [view[idx] for view, (_, idx) in zip(src_views, sources)]
            if op.name in _VECTOR_REDUCTIONS:
                args = [a.reshape(repeats, len(lanes)) for a in args]
            elif op.name == "ascend.vbrcb":  # element b of a repeat fills the repeat's block b
                args = [np.repeat(args[0].reshape(repeats, 8), 32 // dst_view.itemsize, axis=1).reshape(-1)]
            if scalar is not None:
                args.append(dst_view.dtype.type(scalar))
            with np.errstate(all="ignore"):
                dst_view[dst_idx] = np.asarray(compute(dst_view.dtype, *args)).astype(dst_view.dtype)

        occupancy, latency = vector_cost(self.spec, op.name.removeprefix("ascend."), repeats)
        self._issue(op, "vector", "v", occupancy=occupancy, latency=latency,
                    reads=[self._access(b, idx) for b, idx in sources], writes=[self._access(dst_buf, dst_idx)],
                    execute=execute)

    def _lanes(self, op, buf: _Buffer, what: str, offset: int, lanes: np.ndarray, repeats: int, blk: int,
               rep: int, element_stride: int = 0) -> tuple[_Buffer, np.ndarray]:
        """The elements of `buf` that operand `what` addresses: `lanes` of
        each repeat, placed by the block and repeat strides (in 32-byte
        blocks), plus `element_stride` elements per repeat."""
        t = buf.type
        size = t.element_bytes
        start = offset * size
        if (buf.base + start) % 32:
            raise E.AlignmentError(f"{op.name}: operand {what} starts at byte {start} of ub buffer {buf.name} "
                                   f"(ub[{buf.base + start}]), not 32-byte aligned", E.source_loc(op))
        per_block = 32 // size
        byte = (start + np.arange(repeats, dtype=np.int64)[:, None] * rep * 32
                + (lanes // per_block)[None, :] * blk * 32 + (lanes % per_block)[None, :] * size
                + np.arange(repeats, dtype=np.int64)[:, None] * element_stride * size)
        lo, hi = int(byte.min()), int(byte.max()) + size
        if lo < 0 or hi > t.size_bytes:
            raise E.BoundsError(f"{op.name}: the footprint of operand {what}, bytes [{lo}, {hi}) of ub buffer "
                                f"{buf.name}, is outside its {t.size_bytes} bytes ({t})", E.source_loc(op))
        return buf, (byte // size).reshape(-1)


@functools.lru_cache(maxsize=512)
def _tile_index(t, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> np.ndarray:
    """`layouts.tile_index`, memoised: the cores of a kernel and its loop
    iterations address the same tiles again and again."""
    return tile_index(t, offsets, sizes)


def _burst_starts(idx: np.ndarray) -> np.ndarray:
    """Storage indices where a contiguous run of a tile's rows begins."""
    rows = idx.reshape(-1, idx.shape[-1]) if idx.ndim else idx.reshape(1, 1)
    starts = rows[:, 0]
    if len(starts) < 2:
        return starts
    continues = starts[1:] == rows[:-1, -1] + 1
    return starts[np.concatenate(([True], ~continues))]


def _arith(fn):
    return lambda core, op: [fn(*(core.values[v] for v in op.operands))]


def _constant(core, op):
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr

    value = op.value
    if isinstance(value, IntegerAttr):
        return [value.value.data]
    if isinstance(value, FloatAttr):
        return [value.value.data]
    raise E.KernelError(f"the emulator runs scalar constants only, not {value}", E.source_loc(op))


_COMPARISONS = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
_PREDICATES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]


def _cmpi(core, op):
    # index values are Python ints: signed and unsigned orders agree on the
    # non-negative values a kernel's offsets take
    predicate = _PREDICATES[op.predicate.value.data]
    compare = _COMPARISONS[predicate if predicate in ("eq", "ne") else predicate[1:]]
    return [compare(core.values[op.lhs], core.values[op.rhs])]


_SCALAR = {
    "arith.constant": _constant,
    "arith.addi": _arith(lambda a, b: a + b),
    "arith.subi": _arith(lambda a, b: a - b),
    "arith.muli": _arith(lambda a, b: a * b),
    "arith.divui": _arith(lambda a, b: a // b),
    "arith.floordivsi": _arith(lambda a, b: a // b),
    "arith.divsi": _arith(lambda a, b: _truncated_div(a, b)),
    "arith.ceildivsi": _arith(lambda a, b: -(-a // b)),
    "arith.remui": _arith(lambda a, b: a % b),
    "arith.remsi": _arith(lambda a, b: a - b * _truncated_div(a, b)),
    "arith.minsi": _arith(min),
    "arith.maxsi": _arith(max),
    "arith.minui": _arith(min),
    "arith.maxui": _arith(max),
    "arith.index_cast": _arith(lambda a: a),
    "arith.select": _arith(lambda c, a, b: a if c else b),
    "arith.cmpi": _cmpi,
}


def _truncated_div(a: int, b: int) -> int:
    """Signed division rounding toward zero, as arith.divsi does."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _dtype_fn(fn):
    return lambda dtype, *args: fn(*args)


_VECTOR_FUNCTIONS = {
    "ascend.vadd": _dtype_fn(np.add), "ascend.vsub": _dtype_fn(np.subtract), "ascend.vmul": _dtype_fn(np.multiply),
    "ascend.vdiv": _dtype_fn(np.divide), "ascend.vmax": _dtype_fn(np.maximum), "ascend.vmin": _dtype_fn(np.minimum),
    "ascend.vexp": _dtype_fn(np.exp), "ascend.vln": _dtype_fn(np.log), "ascend.vabs": _dtype_fn(np.abs),
    "ascend.vrelu": _dtype_fn(lambda x: np.maximum(x, x.dtype.type(0))),
    "ascend.vrec": _dtype_fn(lambda x: x.dtype.type(1) / x), "ascend.vsqrt": _dtype_fn(np.sqrt),
    "ascend.vadds": _dtype_fn(np.add), "ascend.vmuls": _dtype_fn(np.multiply),
    "ascend.vmaxs": _dtype_fn(np.maximum), "ascend.vmins": _dtype_fn(np.minimum),
    "ascend.vdup": lambda dtype, s: s,
    "ascend.vcadd": lambda dtype, x: x.sum(axis=1, dtype=np.float32),
    "ascend.vcmax": lambda dtype, x: x.max(axis=1),
    "ascend.vbrcb": lambda dtype, x: x,
    "ascend.vconv": lambda dtype, x: np.rint(x) if np.issubdtype(dtype, np.integer) else x,
}

_VECTOR_REDUCTIONS = frozenset({"ascend.vcadd", "ascend.vcmax"})
"""The vector ops that reduce each repeat to one destination element."""

for _name in _VECTOR_FUNCTIONS:
    setattr(_Core, "_" + _name.replace(".", "_"), _Core._vector)
