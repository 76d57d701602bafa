"""`convert-msir-to-loops`: msir tensor code as scf loops over memrefs.

Contract
========

Expects
    A `builtin.module` of `func.func` ops whose bodies hold `msir` ops on ranked
    tensors (f16, bf16, f32, f64, i1, i32, i64; static shapes, `?` dims only where they come
    from function arguments), `func.call` between functions of the module and
    `func.return` of any number of values. Tuples only as
    `msir.get_tuple(msir.make_tuple(...))`, which folds to the element. Non-tensor
    values (scalars) may be passed to calls and returned; msir ops take tensors.

Guarantees
    Only the dialects func, scf, arith, math and memref remain (plus builtin).

    The buffers are those the bufferiser plans (`msir.lowering.bufferize`, whose
    docstring states each rule: destination-passing style, views, lifetimes,
    loop-carried buffers, tapes, row-group buffers, donation); this pass
    realises them:

    * Signature. A tensor argument becomes a memref argument of the same shape
      and element type (identity layout, rank 0 allowed). Every tensor result
      with a fully static shape becomes a trailing memref *output argument* that
      the caller allocates; the function carries `msir.num_outputs = N : i64`, N
      the number of those trailing arguments. The remaining results are
      returned by `func.return` in their original order: a tensor with a
      dynamic shape as a memref allocated inside the callee (`memref.alloc`;
      ownership passes to the caller), a scalar as itself. Calls inside the
      module follow the same convention (the caller allocates the static
      outputs, passes them, and deallocates them after their last use).
    * Buffers. Every intermediate is a `memref.alloc` (one index operand per
      dynamic dim) with a `memref.dealloc` where the plan frees it; nothing
      leaks. Input buffers are only read.
    * Loops (`msir.for`, `msir.while`) become `scf.for`/`scf.while`. A carried
      value with two buffers has both as loop-carried memrefs, with a parity
      flag (an odd count copies back once after the loop); a growing tape has
      its buffer and its dynamic sizes loop-carried. Allocations inside a loop
      body whose sizes do not depend on the iteration are made once before the
      outermost loop and freed after it, so a loop body allocates nothing.
    * Tapes. A tape's buffer's first dim is its capacity; its length is tracked
      beside it and carried through loops with the buffer. A push appending in
      place into a full buffer moves it into a new buffer of twice the capacity,
      at least 4 rows (amortised O(1)). `msir.tape_set` writes its row in place.
      A tape that crosses a function boundary is recast
      (`memref.reinterpret_cast`, same data) to its length; a row read through
      a view is a `memref.reinterpret_cast` of the tape's buffer too.
    * Row groups. A run of consecutive top-level fusions and reductions on static
      shapes that share a leading dim R > 1 and keep axis 0 (a row softmax or
      layernorm) is lowered inside one `scf.for` over R, each op looping over
      the other dims of its row. A one-row buffer (`memref<1x...>`) is indexed
      at row 0, and its `memref.alloc` carries `msir.row_local`: each
      iteration of the row loop writes every element it reads, so each thread
      running part of the loop may use its own copy (msir-lower-to-llvm).
    * Matmul updates. `r = c + alpha * (a @ b)` (a fusion computing `c - s * m`,
      `c + m * s`, `m + c`..., or a lone add/sub, with alpha from splat
      constants), where the 2-D float product m has no other use, is one call
      `__msir_gemm_update_<t>(..., r's buffer, c's buffer, alpha)` of
      `msir.lowering.blas`: it copies c into r's buffer unless that is c's own
      (a donated argument), then accumulates alpha * a @ b with the BLAS
      (beta = 1). The product gets no buffer, the update no loop: an SGD step
      `w - lr * (x.T @ g)` on donated weights is one gemm on the weights.
    * Matmul epilogues. A fusion reading a 2-D float product p that has no
      other use, one of whose results has p's type (`relu(x @ w + b)`, a
      residual add, ReLU's backward mask), and that is not a matmul update:
      `__msir_gemm_<t>` computes p straight into that result's buffer, and the
      fusion's loop nest follows the call at once, reading p there at the
      element it writes (in place), its outer `scf.for` over p's rows marked
      `{msir.gemm_epilogue}` (`loops_abi.GEMM_EPILOGUE_ATTR`): msir-lower-to-llvm
      may run it per chunk of rows right after that chunk's gemm. The product
      gets no buffer. Off with `MSIR_GEMM_EPILOGUE=0`.
    * Donation. An output argument the plan pairs with donated argument i gets
      `{msir.alias_of = i : i64}`: the function computes the same values
      whether the caller passes argument i's buffer there or a distinct one.
      Each donated argument that no output may reuse is named, with the
      reason, in the function's `msir.donation_refused` (an ArrayAttr of
      StringAttr).
    * Runtime errors. `func.func private @__msir_error(i32, i64)` is declared when
      used and called as `func.call @__msir_error(%code, %site)`: code 1 = index
      out of range (`msir.take`, `msir.scatter_add`), code 2 = integer division
      or modulo by zero (`msir.floordiv`, `msir.rem`), code 5 = a `msir.for`
      step of zero, code 7 = Ctrl-C: every `scf.while` lowered from a
      `msir.while` calls `func.func private @__msir_interrupted() -> i32`
      before each test of its condition (a loop of scalar work: every
      INTERRUPT_POLL_PERIOD tests, which a scalar `memref.alloca` counts)
      and ends when it is nonzero (`msir.lowering.interrupt`). A failed `msir.check` calls `func.call @__msir_raise(6, %site,
      %v0, ..., %v3) {msir.message = "<json>"}` with the 64 bits of its runtime
      values (floats as f64 bits, integers sign-extended; unused slots 0) and
      the JSON of its exception class, `str.format` template, value dtypes and
      which values are Python numbers.
      Execution then goes on safely (the index is clamped to 0,
      the update is dropped, the divisor is 1, or the loop runs no iteration), so memory is never accessed out of bounds. `%site` indexes the module
      attribute `msir.sites`, an ArrayAttr of StringAttr "file:line:col"
      ("unknown" when the op had no FileLineColLoc).
    * Locations. Every op generated for an msir op carries that op's location;
      every `memref.alloc` also carries `msir.site = <site> : i64`, so that a
      failed allocation can be reported at the user's line.

Semantics are NumPy's: floor division and remainder round toward -inf for ints
and floats (floats follow NumPy's `npy_divmod`, built on an exact `fmod` computed
by shift-and-subtract, since arith has no `remf` in xDSL); `maximum`/`minimum`,
reduce_max/min and argmax/argmin propagate NaN (a NaN is the extreme, first one
wins; the sign of a zero result of maximum(-0.0, 0.0) is LLVM's, as NumPy's own
differs between its code paths); `ne` is true for NaN; float to int truncates
(NaN or out-of-range floats give an unspecified integer, as in NumPy, which also
warns); anything to bool is `!= 0`.
Integer `pow` uses repeated squaring; a negative exponent (an error in NumPy)
yields the integer part of the real power: 1 for base 1, +-1 for base -1, else 0.

Half precision (f16, bf16) is computed in f32: the pass first rewrites the
module's half-precision arithmetic as f32 ops between casts
(`msir.lowering.widen_half`, which states the rounding), so a half value is
only loaded, stored, selected or converted (`arith.extf`/`arith.truncf`); the
adds of `scatter_add` and `tape_add` extend, add in f32 and truncate, and a
reduction over trailing axes, which widen_half leaves on half, extends each
element into an f32 accumulator and truncates the result once (a mean divides
first).

Per function, the pass first plans the buffers (`bufferize.FunctionPlanner`,
with this pass's schedule: its matmul updates, matmul epilogues and row groups), then walks the
function once and builds the output directly (a dispatch table keyed by op
class, one short emitter per op, a shared loop-nest helper); ops are created
with `Operation.create` and appended to their block, which is several times
cheaper than `Builder` or the IRDL constructors.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math as pymath
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, math, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from msir.dialects import msir, primitives
from msir.errors import CompileError
from msir.lowering import blas, bufferize
from msir.lowering.widen_half import widen_half
from msir.lowering.bufferize import DYN, FunctionPlan, LoopPlan, PushMode, SlotKind, source_loc
from msir.lowering.bufferize import is_static_tensor as _is_static_tensor
from msir.lowering.bufferize import memref_type as _memref_type
from msir.lowering.bufferize import type_shape as _shape
from msir.lowering.loops_abi import DONATE_ATTR as DONATE_ATTR  # re-exported: msir.api marks donated arguments
from msir.lowering.loops_abi import (
    ALIAS_OF_ATTR,
    DONATION_REFUSED_ATTR,
    ERR_INDEX,
    ERR_INTERRUPTED,
    ERR_RANGE_STEP,
    ERR_USER,
    ERR_ZERO_DIVISION,
    ERROR_FUNC,
    GEMM_EPILOGUE_ATTR,
    INTERRUPT_FUNC,
    MESSAGE_ATTR,
    RAISE_FUNC,
    RAISE_SLOTS,
    NUM_OUTPUTS_ATTR,
    ROW_LOCAL_ATTR,
    SITE_ATTR,
    SITES_ATTR,
    STACK_CHECK_ATTR,
)

PASS_NAME = "convert-msir-to-loops"

INDEX = IndexType()
Dim = int | SSAValue
"""A dimension size: a Python int when static, an `index` value when dynamic."""

_CMPF = {n: IntegerAttr(i, 64) for i, n in enumerate(arith.CMPF_COMPARISON_OPERATIONS)}
_CMPI = {n: IntegerAttr(i, 64) for i, n in enumerate(arith.CMPI_COMPARISON_OPERATIONS)}
_FLOAT_PRED = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_SINT_PRED = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UINT_PRED = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}


def _is_float(t: Attribute) -> bool:
    return isinstance(t, Float16Type | BFloat16Type | Float32Type | Float64Type)


def _is_half(t: Attribute) -> bool:
    return isinstance(t, Float16Type | BFloat16Type)


_F32 = Float32Type()


@functools.cache
def _alloc_segments(n_dynamic: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, [n_dynamic, 0])


def _fail(op: Operation, message: str) -> CompileError:
    return CompileError(f"{PASS_NAME}: '{op.name}' {message}", source_loc(op))


# ---------------------------------------------------------------------------
# The per-function lowering: emission primitives
# ---------------------------------------------------------------------------


class _Module:
    """Module-wide state: signatures, the site table, whether errors are reported."""

    def __init__(self, module: ModuleOp, plan: bufferize.ModulePlan):
        self.module = module
        self.sigs = plan.signatures
        self.sites: list[str] = []
        self.site_index: dict[str, int] = {}
        self.uses_error = False
        self.uses_interrupt = False
        self.uses_raise = False
        self.recursive = _recursive_functions(plan.calls)

    def site(self, op: Operation) -> int:
        loc = source_loc(op)
        text = str(loc) if loc is not None else "unknown"
        if text not in self.site_index:
            self.site_index[text] = len(self.sites)
            self.sites.append(text)
        return self.site_index[text]


@dataclass
class _Hoist:
    """Allocations of loop bodies moved out of the outermost loop being lowered:
    they go into `block` before `anchor` (the loop op) and are freed after it."""

    block: Block
    anchor: Operation
    bufs: list[SSAValue] = field(default_factory=list)


class _Lowering:
    """Lowers one function body into the buffers of its `plan`. `block` is
    where ops go, `loc` what they carry."""

    def __init__(self, mod: _Module, f: func.FuncOp, plan: FunctionPlan,
                 updates: dict[Operation, tuple[msir.MatmulOp, SSAValue, float]],
                 epilogues: dict[msir.FusionOp, tuple[msir.MatmulOp, int, int]] | None = None):
        self.mod = mod
        self.f = f
        self.plan = plan
        self.sig = plan.signature
        self.entry = Block(arg_types=self.sig.inputs)
        self.block = self.entry
        self.loc = f.location
        self.msir_op: Operation = f
        self.consts: dict[tuple[object, Attribute], SSAValue] = {}
        self.const_ops: list[Operation] = []
        self.buf: dict[SSAValue, SSAValue] = {}
        self.dims: dict[SSAValue, list[Dim]] = {}
        # Buffers chosen for values before their ops run: output arguments, the
        # buffers a region's op offers it, a row group's, a tape's next row.
        self.dest: dict[SSAValue, SSAValue] = {}
        # Row-group lowering (`_row_groups`): the iv of the enclosing row loop,
        # and the one-row buffers read and written at row 0 whatever the row.
        self.row: SSAValue | None = None
        self.row_local: set[SSAValue] = set()
        # Loop bodies (`_Carry`): where static allocations are hoisted to, and
        # the hoisted buffers (never freed inside the loop).
        self.frame: _Hoist | None = None
        self.hoisted: set[SSAValue] = set()
        # Fusions computing `c + alpha * (a @ b)` as one BLAS call (`_gemm_updates`).
        self.gemm_updates = updates
        # Fusions computed over the product of a matmul (`_gemm_epilogues`).
        self.gemm_epilogues = epilogues or {}
        # Reductions lowered with the fusion that makes their input (`_reduction_of`), whose
        # result is never stored.
        self.reduced_early: set[Operation] = set()
        self.unmade: set[SSAValue] = set()

    # -- op creation --------------------------------------------------------

    def emit(self, cls: type[Operation], operands: Sequence[SSAValue], types: Sequence[Attribute] = (),
             props: dict[str, Attribute] | None = None, regions: Sequence[Region] = ()) -> Operation:
        op = cls.create(operands=operands, result_types=types, properties=props or {}, regions=regions)
        op.location = self.loc
        self.block.add_op(op)
        return op

    def v(self, cls: type[Operation], *operands: SSAValue, type: Attribute | None = None) -> SSAValue:
        """One-result op whose result type is `type` or that of its first operand."""
        return self.emit(cls, operands, [type or operands[0].type]).results[0]

    def const(self, value: float | int | bool, type: Attribute) -> SSAValue:
        # repr keeps -0.0 apart from 0.0 and lets NaN hit the cache.
        key = (repr(float(value)) if _is_float(type) else int(value), type)
        if key not in self.consts:
            if _is_float(type):
                attr: Attribute = FloatAttr(float(value), type)
            else:
                attr = IntegerAttr(int(value), type)
            op = arith.ConstantOp.create(result_types=[type], properties={"value": attr})
            op.location = self.f.location
            self.const_ops.append(op)
            self.consts[key] = op.results[0]
        return self.consts[key]

    def index(self, d: Dim) -> SSAValue:
        return self.const(d, INDEX) if isinstance(d, int) else d

    # -- scalar arithmetic ----------------------------------------------------

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if _is_half(a.type):  # NumPy's half add: in float32, rounded once
            wide = self.v(arith.AddfOp, self.v(arith.ExtFOp, a, type=_F32), self.v(arith.ExtFOp, b, type=_F32))
            return self.v(arith.TruncFOp, wide, type=a.type)
        return self.v(arith.AddfOp if _is_float(a.type) else arith.AddiOp, a, b)

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.v(arith.SubfOp if _is_float(a.type) else arith.SubiOp, a, b)

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.v(arith.MulfOp if _is_float(a.type) else arith.MuliOp, a, b)

    def cmp(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """Compare by a NumPy predicate name (lt le gt ge eq ne); i1 compares unsigned."""
        if _is_float(a.type):
            return self.cmpf(_FLOAT_PRED[pred], a, b)
        return self.cmpi((_UINT_PRED if a.type == i1 else _SINT_PRED)[pred], a, b)

    def cmpf(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.CmpfOp, [a, b], [i1], {"predicate": _CMPF[pred]}).results[0]

    def cmpi(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.CmpiOp, [a, b], [i1], {"predicate": _CMPI[pred]}).results[0]

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(arith.SelectOp, [c, a, b], [a.type]).results[0]

    def index_add(self, a: Dim, b: Dim) -> Dim:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        return self.v(arith.AddiOp, self.index(a), self.index(b))

    def index_mul(self, a: Dim, b: Dim) -> Dim:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        return self.v(arith.MuliOp, self.index(a), self.index(b))

    def to_index(self, x: SSAValue) -> SSAValue:
        return self.v(arith.IndexCastOp, x, type=INDEX)

    # -- memory ---------------------------------------------------------------

    def load(self, buf: SSAValue, idx: Sequence[SSAValue]) -> SSAValue:
        if buf in self.row_local:
            idx = [self.index(0), *idx[1:]]
        return self.emit(memref.LoadOp, [buf, *idx], [buf.type.element_type]).results[0]  # type: ignore[attr-defined]

    def store(self, value: SSAValue, buf: SSAValue, idx: Sequence[SSAValue]) -> None:
        if buf in self.row_local:
            idx = [self.index(0), *idx[1:]]
        self.emit(memref.StoreOp, [value, buf, *idx])

    def alloc(self, type_: MemRefType, dims: Sequence[Dim], hoist: bool = True) -> SSAValue:
        """A fresh buffer. Inside a loop body (`hoisting`), one whose sizes do not
        change between iterations is allocated once before the outermost loop
        instead, and freed after it (`free` leaves it alone inside the loop)."""
        dyn = [self.index(d) for d, s in zip(dims, _shape(type_)) if s == DYN]
        props = {"operandSegmentSizes": _alloc_segments(len(dyn))}
        frame = self.frame
        if hoist and frame is not None and all(self._invariant(d, frame) for d in dyn):
            op = memref.AllocOp.create(operands=dyn, result_types=[type_], properties=props)
            op.location = self.loc
            frame.block.insert_op_before(op, frame.anchor)
            frame.bufs.append(op.results[0])
            self.hoisted.add(op.results[0])
        else:
            op = self.emit(memref.AllocOp, dyn, [type_], props)
        op.attributes[SITE_ATTR] = IntegerAttr(self.mod.site(self.msir_op), i64)
        return op.results[0]

    def _invariant(self, d: SSAValue, frame: _Hoist) -> bool:
        """Whether `d` is available before the loop `frame.anchor`: a constant
        (placed in the entry block at the end), a function argument or a value
        of the block holding the loop."""
        owner = d.owner
        if isinstance(owner, Block):
            return owner is self.entry
        block = owner.parent_block()
        return block is None or block is frame.block

    def free(self, buf: SSAValue) -> None:
        if buf not in self.hoisted:
            self.emit(memref.DeallocOp, [buf])

    @contextlib.contextmanager
    def hoisting(self, loop: Operation) -> Iterator[None]:
        """While lowering the regions of `loop` (just emitted): hoist static
        allocations to before the outermost such loop, free them after it."""
        if self.frame is not None:
            yield
            return
        frame = self.frame = _Hoist(self.block, loop)
        try:
            yield
        finally:
            self.frame = None
        for buf in frame.bufs:
            self.hoisted.discard(buf)
            self.emit(memref.DeallocOp, [buf])

    def dims_of(self, v: SSAValue) -> list[Dim]:
        return self.dims[self.canon(v)]

    def define(self, v: SSAValue, buf: SSAValue) -> None:
        """Record `buf` as the buffer of `v`, reading its dynamic dims right away
        (at the top level, so that they dominate every later use)."""
        self.buf[v] = buf
        if isinstance(v.type, TensorType):
            self.dims[v] = [
                s if s != DYN else self.emit(memref.DimOp, [buf, self.index(i)], [INDEX]).results[0]
                for i, s in enumerate(_shape(v.type))
            ]

    def result(self, res: SSAValue, dims: Sequence[Dim]) -> SSAValue:
        """The buffer an op writes its result `res` (of sizes `dims`) into: its
        destination, else a new one."""
        shape = _shape(res.type)
        dims = [s if s != DYN else d for s, d in zip(shape, dims)]
        if res in self.dest:
            buf = self.dest[res]
        else:
            buf = self.alloc(_memref_type(res.type), dims)  # type: ignore[arg-type]
        self.buf[res] = buf
        self.dims[res] = dims
        return buf

    def exact(self, v: SSAValue) -> SSAValue:
        """The buffer of `v` with the sizes of `v`, as it crosses a function
        boundary: a tape's buffer, whose first dim is its capacity, is recast
        (same data, row-major) to the tape's length."""
        v = self.canon(v)
        buf = self.buf[v]
        if v not in self.plan.resized:
            return buf
        dims = self.dims[v]
        strides: list[Dim] = []
        stride: Dim = 1
        for d in reversed(dims):
            strides.insert(0, stride)
            stride = self.index_mul(stride, d)
        op = memref.ReinterpretCastOp.from_dynamic(buf, [0], dims, strides, buf.type)
        op.location = self.loc
        self.block.add_op(op)
        return op.result

    def canon(self, v: SSAValue) -> SSAValue:
        return self.plan.canon(v)

    def get(self, v: SSAValue) -> SSAValue:
        return self.buf[self.canon(v)]

    # -- control flow ---------------------------------------------------------

    def loops(self, dims: Sequence[Dim], body: Callable[[list[SSAValue], list[SSAValue]], Sequence[SSAValue] | None],
              inits: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """A row-major `scf.for` nest over `dims` (last innermost). `body(ivs, iters)`
        emits the innermost body and returns the next values of the loop-carried
        `iters` (started at `inits`); the nest's results are returned."""
        if not dims:
            return list(body([], list(inits)) or [])
        return self._nest(list(dims), [], body, list(inits))

    def row_loops(self, dims: Sequence[Dim], body: Callable[[list[SSAValue], list[SSAValue]], Sequence[SSAValue] | None],
                  inits: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """`loops`, except inside a row group (`_lower_row_group`), where the
        first dim is the group's row and only the others are looped over."""
        row = self.row
        if row is None:
            return self.loops(dims, body, inits)
        return self.loops(list(dims)[1:], lambda ivs, it: body([row, *ivs], it), inits)

    def _nest(self, dims, ivs, body, iters):
        types = [x.type for x in iters]
        blk = Block(arg_types=[INDEX, *types])
        ub = self.index(dims[len(ivs)])
        op = self.emit(scf.ForOp, [self.index(0), ub, self.index(1), *iters], types, regions=[Region(blk)])
        outer, self.block = self.block, blk
        iv, *carried = blk.args
        if len(ivs) + 1 == len(dims):
            res = body([*ivs, iv], list(carried))
        else:
            res = self._nest(dims, [*ivs, iv], body, list(carried))
        self.emit(scf.YieldOp, list(res or []))
        self.block = outer
        return list(op.results)

    def if_(self, cond: SSAValue, then: Callable[[], Sequence[SSAValue] | None],
            otherwise: Callable[[], Sequence[SSAValue]] | None = None, types: Sequence[Attribute] = ()) -> list[SSAValue]:
        then_blk = Block()
        regions = [Region(then_blk), Region(Block()) if otherwise else Region()]
        op = self.emit(scf.IfOp, [cond], types, regions=regions)
        outer = self.block
        for blk, fn in ((then_blk, then), (regions[1].block if otherwise else None, otherwise)):
            if blk is not None and fn is not None:
                self.block = blk
                self.emit(scf.YieldOp, list(fn() or []))
        self.block = outer
        return list(op.results)

    def while_(self, inits: Sequence[SSAValue], cond: Callable[[list[SSAValue]], SSAValue],
               body: Callable[[list[SSAValue]], Sequence[SSAValue]]) -> list[SSAValue]:
        """`scf.while` that loops on `body` while `cond(values)` holds."""
        types = [x.type for x in inits]
        before, after = Block(arg_types=types), Block(arg_types=types)
        op = self.emit(scf.WhileOp, list(inits), types, regions=[Region(before), Region(after)])
        outer = self.block
        self.block = before
        self.emit(scf.ConditionOp, [cond(list(before.args)), *before.args])
        self.block = after
        self.emit(scf.YieldOp, list(body(list(after.args))))
        self.block = outer
        return list(op.results)

    def report(self, code: int, cond: SSAValue) -> None:
        """Call `@__msir_error(code, site)` when `cond` holds."""
        self.mod.uses_error = True
        site = self.mod.site(self.msir_op)
        args = [self.const(code, i32), self.const(site, i64)]

        def call() -> None:
            self.emit(func.CallOp, args, [], {"callee": SymbolRefAttr(ERROR_FUNC)})

        self.if_(cond, call)

    def copy(self, src: SSAValue, dst: SSAValue, dims: Sequence[Dim]) -> None:
        self.loops(dims, lambda ivs, _: self.store(self.load(src, ivs), dst, ivs))

    def linearize(self, ivs: Sequence[SSAValue], dims: Sequence[Dim]) -> SSAValue:
        lin: SSAValue = self.index(0)
        for k, (iv, d) in enumerate(zip(ivs, dims)):
            lin = iv if k == 0 else self.v(arith.AddiOp, self.v(arith.MuliOp, lin, self.index(d)), iv)
        return lin

    def delinearize(self, lin: SSAValue, dims: Sequence[Dim]) -> list[SSAValue]:
        out: list[SSAValue] = []
        for k in range(len(dims) - 1, 0, -1):
            d = self.index(dims[k])
            out.append(self.v(arith.RemSIOp, lin, d))
            lin = self.v(arith.DivSIOp, lin, d)
        if dims:
            out.append(lin)
        return out[::-1]

    # -- the walk -------------------------------------------------------------

    def run(self) -> func.FuncOp:
        f = self.f
        plan = self.plan
        body = f.body.block
        n_in = len(f.function_type.inputs)
        for old, new in zip(body.args, self.entry.args[:n_in]):
            self.define(old, new)
        out_args = self.entry.args[n_in:]
        for v, k in plan.outputs.items():
            self.dest[v] = out_args[k]
        grouped = {o for g in plan.row_groups.values() for o in g.ops}
        for op in body.ops:
            if op in plan.folded:
                continue
            if op in grouped:
                if op in plan.row_groups:
                    self._lower_row_group(plan.row_groups[op])
                continue
            self.lower_op(op)
        if self.entry.first_op is None:
            self.entry.add_ops(self.const_ops)
        else:
            self.entry.insert_ops_before(self.const_ops, self.entry.first_op)
        new = func.FuncOp(
            f.sym_name.data, (self.sig.inputs, self.sig.results), Region(self.entry), f.sym_visibility
        )
        new.attributes.update(f.attributes)
        new.attributes[NUM_OUTPUTS_ATTR] = IntegerAttr(len(self.sig.out_positions), i64)
        aliases, refused = plan.donation.pairs, plan.donation.refused
        if f.arg_attrs is not None or aliases:
            ins = list(f.arg_attrs.data) if f.arg_attrs is not None else [DictionaryAttr({})] * n_in
            outs = [
                DictionaryAttr({ALIAS_OF_ATTR: IntegerAttr(aliases[k], i64)} if k in aliases else {})
                for k in range(len(self.sig.out_positions))
            ]
            new.arg_attrs = ArrayAttr(ins + outs)
        if refused:
            new.attributes[DONATION_REFUSED_ATTR] = ArrayAttr([StringAttr(r) for r in refused])
        new.location = f.location
        return new

    def _lower_row_group(self, group: bufferize.RowGroupPlan) -> None:
        """Lower consecutive row-separable ops (`_row_groups`) inside one loop
        over their common leading dim: each row goes through every op while it
        is in cache. The group's buffers are allocated before the loop (a
        one-row buffer indexed at row 0) and released after it."""
        ops = group.ops
        local: list[SSAValue] = []
        for op in ops:
            self.loc, self.msir_op = op.location, op
            for r in op.results:
                if r not in group.one_row:
                    continue
                shape = _shape(r.type)
                if group.one_row[r]:
                    mt = MemRefType(r.type.element_type, [1, *shape[1:]])  # type: ignore[attr-defined]
                    buf = self.alloc(mt, [1, *shape[1:]])
                    buf.owner.attributes[ROW_LOCAL_ATTR] = UnitAttr()
                    self.row_local.add(buf)
                    local.append(buf)
                else:
                    buf = self.alloc(_memref_type(r.type), list(shape))  # type: ignore[arg-type]
                self.dest[r] = buf
        self.loc, self.msir_op = ops[0].location, ops[0]

        def row(ivs, _):
            self.row = ivs[0]
            try:
                for op in ops:
                    self.loc, self.msir_op = op.location, op
                    EMITTERS[type(op)](self, op)
            finally:
                self.row = None

        self.loops([_shape(ops[0].results[0].type)[0]], row)
        for r in group.one_row:
            del self.dest[r]
        for op in ops:
            self.loc, self.msir_op = op.location, op
            self._release(op)
        for buf in local:
            self.row_local.discard(buf)
            self.free(buf)

    def lower_op(self, op: Operation) -> None:
        """Emit `op` with its emitter, then free what the plan frees there."""
        if op in self.reduced_early:
            return
        emitter = EMITTERS.get(type(op))
        if emitter is None:
            raise _fail(op, "is not supported by the lowering to loops")
        self.loc, self.msir_op = op.location, op
        for push in self.plan.reserves.get(op, ()):
            _reserve_row(self, push)
        update = self.gemm_updates.get(op)
        epilogue = self.gemm_epilogues.get(op)  # type: ignore[call-overload]
        reduction = _reduction_of(self, op)
        if update is not None:
            _gemm_update(self, op, *update)
        elif epilogue is not None:
            _gemm_epilogue(self, op, *epilogue)
        elif reduction is not None:
            _reduce(self, reduction, producer=op)  # type: ignore[arg-type]
            self.reduced_early.add(reduction)
            self.unmade.add(reduction.input)
            self._release(op)
            self.loc, self.msir_op = reduction.location, reduction
            op = reduction  # its frees follow
        else:
            emitter(self, op)
        self._release(op)

    def lower_region(self, block: Block, arg_bufs: Sequence[SSAValue],
                     arg_dims: Sequence[Sequence[Dim] | None] = (),
                     dests: Sequence[SSAValue | None] = ()) -> tuple[list[SSAValue], set[SSAValue]]:
        """Lower a region's ops into `self.block` with its arguments bound to
        `arg_bufs` (with sizes `arg_dims[i]` where given, else the buffer's).
        Returns the buffers of the terminator's operands and the buffers the
        region allocated that are still alive (the caller copies what it needs
        out of them, then frees them). The plan's terminator operands computed
        in place are written into `dests[i]`."""
        for i, (arg, buf) in enumerate(zip(block.args, arg_bufs)):
            dims = arg_dims[i] if i < len(arg_dims) else None
            if dims is None:
                self.define(arg, buf)
            else:
                self.buf[arg], self.dims[arg] = buf, list(dims)
        rp = self.plan.regions[block]
        for v, dest in zip(rp.dests, dests):
            if v is not None:
                self.dest[v] = dest  # type: ignore[assignment]
        ops = list(block.ops)
        saved = self.loc, self.msir_op
        try:
            for op in ops[:-1]:
                if op not in self.plan.folded:
                    self.lower_op(op)
            return [self.get(v) for v in ops[-1].operands], {self.buf[v] for v in rp.live_out}
        finally:
            self.loc, self.msir_op = saved

    def copy_out(self, srcs: Sequence[SSAValue], dsts: Sequence[SSAValue], values: Sequence[SSAValue],
                 local: set[SSAValue]) -> None:
        """Copy yielded buffers into the op's buffers (through temporaries when a
        source is another destination, e.g. `a, b = b, a`), then free `local`."""
        dst_set = set(dsts)
        staged = []
        for src, dst, v in zip(srcs, dsts, values):
            dims = self.dims_of(v)
            if src in dst_set and src is not dst:
                tmp = self.alloc(_memref_type(v.type), dims)  # type: ignore[arg-type]
                self.copy(src, tmp, dims)
                staged.append((tmp, dst, dims, True))
            else:
                staged.append((src, dst, dims, False))
        for src, dst, dims, temporary in staged:
            if src is not dst:
                self.copy(src, dst, dims)
            if temporary:
                self.free(src)
        for buf in local:
            self.free(buf)

    def _release(self, op: Operation) -> None:
        for v in self.plan.frees.get(op, ()):
            if v not in self.unmade:
                self.free(self.buf[v])


# ---------------------------------------------------------------------------
# Elementwise scalar semantics (NumPy's)
# ---------------------------------------------------------------------------


def _fmod(L: _Lowering, a: SSAValue, b: SSAValue) -> SSAValue:
    """C `fmod`, exact: shift-and-subtract, each subtraction exact (Sterbenz)."""
    t = a.type
    inf, zero = L.const(pymath.inf, t), L.const(0.0, t)
    ax, bx = L.v(math.AbsFOp, a), L.v(math.AbsFOp, b)
    finite_a = L.cmpf("olt", ax, inf)
    valid = L.v(arith.AndIOp, L.v(arith.AndIOp, finite_a, L.cmpf("ogt", bx, zero)), L.cmpf("olt", bx, inf))
    r0 = L.select(valid, ax, zero)
    d = L.select(valid, bx, L.const(1.0, t))
    two, half = L.const(2.0, t), L.const(0.5, t)
    (top,) = L.while_([d], lambda s: L.cmpf("ole", L.mul(s[0], two), r0), lambda s: [L.mul(s[0], two)])

    def step(s):
        r, m = s
        r = L.select(L.cmpf("oge", r, m), L.sub(r, m), r)
        return [r, L.mul(m, half)]

    r, _ = L.while_([r0, top], lambda s: L.cmpf("oge", s[1], d), step)
    inf_divisor = L.v(arith.AndIOp, finite_a, L.cmpf("oeq", bx, inf))
    special = L.select(inf_divisor, a, L.const(pymath.nan, t))
    return L.select(valid, L.v(math.CopySignOp, r, a), special)


def _float_divmod(L: _Lowering, a: SSAValue, b: SSAValue) -> tuple[SSAValue, SSAValue]:
    """NumPy's `npy_divmod`: (floor quotient, remainder with the sign of b)."""
    t = a.type
    zero, one = L.const(0.0, t), L.const(1.0, t)
    mod0 = _fmod(L, a, b)
    quotient = L.v(arith.DivfOp, a, b)
    div0 = L.v(arith.DivfOp, L.sub(a, mod0), b)
    mod_nz = L.cmpf("une", mod0, zero)
    fix = L.v(arith.AndIOp, mod_nz, L.v(arith.XOrIOp, L.cmpf("olt", b, zero), L.cmpf("olt", mod0, zero)))
    mod = L.select(fix, L.add(mod0, b), mod0)
    div = L.select(fix, L.sub(div0, one), div0)
    mod = L.select(mod_nz, mod, L.v(math.CopySignOp, zero, b))
    fl = L.v(math.FloorOp, div)
    fl = L.select(L.cmpf("ogt", L.sub(div, fl), L.const(0.5, t)), L.add(fl, one), fl)
    floordiv = L.select(L.cmpf("une", div, zero), fl, L.v(math.CopySignOp, zero, quotient))
    b_zero = L.cmpf("oeq", b, zero)
    return L.select(b_zero, quotient, floordiv), L.select(b_zero, mod0, mod)


def _int_divisor(L: _Lowering, b: SSAValue) -> tuple[SSAValue, SSAValue]:
    """Report a zero divisor; return (safe divisor, b == -1). The divisor is 1
    for 0 (after the report) and for -1 (whose quotient is computed as a negation,
    since MIN // -1 overflows the hardware division)."""
    zero = L.cmpi("eq", b, L.const(0, b.type))
    L.report(ERR_ZERO_DIVISION, zero)
    minus1 = L.cmpi("eq", b, L.const(-1, b.type))
    safe = L.select(L.v(arith.OrIOp, zero, minus1), L.const(1, b.type), b)
    return safe, minus1


def _floordiv(L: _Lowering, a: SSAValue, b: SSAValue) -> SSAValue:
    if _is_float(a.type):
        return _float_divmod(L, a, b)[0]
    safe, minus1 = _int_divisor(L, b)
    q = L.v(arith.FloorDivSIOp, a, safe)
    return L.select(minus1, L.sub(L.const(0, a.type), a), q)


def _rem(L: _Lowering, a: SSAValue, b: SSAValue) -> SSAValue:
    if _is_float(a.type):
        return _float_divmod(L, a, b)[1]
    safe, _ = _int_divisor(L, b)
    r = L.v(arith.RemSIOp, a, safe)
    zero = L.const(0, a.type)
    wrong_sign = L.v(arith.XOrIOp, L.cmpi("slt", r, zero), L.cmpi("slt", safe, zero))
    fix = L.v(arith.AndIOp, L.cmpi("ne", r, zero), wrong_sign)
    return L.select(fix, L.add(r, safe), r)


def _pow(L: _Lowering, a: SSAValue, b: SSAValue) -> SSAValue:
    if _is_float(a.type):
        return L.v(math.PowFOp, a, b)
    t = a.type
    zero, one = L.const(0, t), L.const(1, t)
    e0 = L.v(arith.MaxSIOp, b, zero)

    def square(s):
        acc, base, e = s
        odd = L.cmpi("ne", L.v(arith.AndIOp, e, one), zero)
        return [L.select(odd, L.mul(acc, base), acc), L.mul(base, base), L.v(arith.DivSIOp, e, L.const(2, t))]

    acc, _, _ = L.while_([one, a, e0], lambda s: L.cmpi("sgt", s[2], zero), square)
    # a ** -n: 1 for a == 1, (-1) ** n for a == -1, else 0 (NumPy raises instead).
    odd_b = L.cmpi("ne", L.v(arith.AndIOp, b, one), zero)
    minus_one = L.const(-1, t)
    neg = L.select(L.cmpi("eq", a, one), one,
                   L.select(L.cmpi("eq", a, minus_one), L.select(odd_b, minus_one, one), zero))
    return L.select(L.cmpi("slt", b, zero), neg, acc)


def _sign(L: _Lowering, x: SSAValue) -> SSAValue:
    t = x.type
    zero, one, m1 = L.const(0.0 if _is_float(t) else 0, t), L.const(1, t), L.const(-1, t)
    # NumPy: x > 0 ? 1 : x < 0 ? -1 : x == 0 ? 0 : x (the last keeps NaN).
    rest = L.select(L.cmp("eq", x, zero), zero, x) if _is_float(t) else zero
    return L.select(L.cmp("gt", x, zero), one, L.select(L.cmp("lt", x, zero), m1, rest))


def _neg(L: _Lowering, x: SSAValue) -> SSAValue:
    if _is_float(x.type):
        return L.v(arith.NegfOp, x)
    return L.v(arith.SubiOp, L.const(0, x.type), x)


def _fi(float_op: type[Operation], int_op: type[Operation]) -> Callable[..., SSAValue]:
    return lambda L, *xs: L.v(float_op if _is_float(xs[0].type) else int_op, *xs)


def _op(cls: type[Operation]) -> Callable[..., SSAValue]:
    return lambda L, *xs: L.v(cls, *xs)


def _cast(L: _Lowering, x: SSAValue, to: Attribute) -> SSAValue:
    """NumPy's astype between f32, f64, i1, i32, i64, and between f16/bf16 and
    f32 or f64 -> f16 (`widen_half` routes the other half casts through f32)."""
    src = x.type
    if src == to:
        return x
    if to == i1:
        return L.cmp("ne", x, L.const(0.0 if _is_float(src) else 0, src))
    if _is_float(src) and _is_float(to):
        wider = to.bitwidth > src.bitwidth  # type: ignore[attr-defined]
        return L.v(arith.ExtFOp if wider else arith.TruncFOp, x, type=to)
    if _is_float(src):
        return L.v(arith.FPToSIOp, x, type=to)
    if _is_float(to):
        return L.v(arith.UIToFPOp if src == i1 else arith.SIToFPOp, x, type=to)
    assert isinstance(src, IntegerType) and isinstance(to, IntegerType)
    if src.width.data < to.width.data:
        return L.v(arith.ExtUIOp if src == i1 else arith.ExtSIOp, x, type=to)
    return L.v(arith.TruncIOp, x, type=to)


_COMPOUND: dict[str, Callable[..., SSAValue]] = {
    "floordiv": _floordiv,
    "rem": _rem,
    "pow": _pow,
    "neg": _neg,
    "sign": _sign,
    "not": lambda L, x: L.v(arith.XOrIOp, x, L.const(1, i1)),
}
"""The scalar code of the primitives that are no single `arith`/`math` op, by name."""


_ARITH_MATH_OPS = {op.name: op for d in (arith.Arith, math.Math) for op in d.operations}


def _scalar_of(row: primitives.Elementwise) -> Callable[..., SSAValue]:
    """One element of primitive `row`: its `arith`/`math` op for the operands' kind, or its compound code."""
    if row.name in _COMPOUND:
        return _COMPOUND[row.name]
    float_op = _ARITH_MATH_OPS[row.float_op] if row.float_op else None
    int_op = _ARITH_MATH_OPS[row.int_op] if row.int_op else None
    return _fi(float_op or int_op, int_op or float_op)


SCALAR: dict[type[Operation], Callable[..., SSAValue]] = {
    **{msir.ELEMENTWISE_OPS[row.name]: _scalar_of(row) for row in primitives.ELEMENTWISE},
    msir.SelectOp: lambda L, c, a, b: L.select(c, a, b),
}
"""Scalar semantics of each elementwise op, applied element by element."""


# ---------------------------------------------------------------------------
# Emitters: one per op
# ---------------------------------------------------------------------------


def _map(L: _Lowering, op: Operation, fn: Callable[..., SSAValue]) -> None:
    """Elementwise op: out[i] = fn(in0[i], in1[i], ...)."""
    ins = [L.get(v) for v in op.operands]
    dims = L.dims_of(op.operands[-1])
    out = L.result(op.results[0], dims)
    L.loops(dims, lambda ivs, _: L.store(fn(*(L.load(b, ivs) for b in ins)), out, ivs))


def _elementwise(scalar: Callable[..., SSAValue]) -> Callable[[_Lowering, Operation], None]:
    return lambda L, op: _map(L, op, lambda *xs: scalar(L, *xs))


def _compare(L: _Lowering, op: msir.CompareOp) -> None:
    _map(L, op, lambda a, b: L.cmp(op.predicate_name, a, b))


def _cast_op(L: _Lowering, op: msir.CastOp) -> None:
    to = op.result.type.element_type  # type: ignore[attr-defined]
    _map(L, op, lambda x: _cast(L, x, to))


def _constant(L: _Lowering, op: msir.ConstantOp) -> None:
    shape = list(_shape(op.result.type))
    out = L.result(op.result, shape)
    et = op.result.type.element_type  # type: ignore[attr-defined]
    values = op.values()
    if op.is_splat() or len(values) <= 1:
        if values:
            value = L.const(values[0], et)
            L.loops(shape, lambda ivs, _: L.store(value, out, ivs))
        return
    for flat, value in enumerate(values):
        idx = [L.index(i) for i in _unravel(flat, shape)]
        L.store(L.const(value, et), out, idx)


def _unravel(flat: int, shape: Sequence[int]) -> list[int]:
    idx = []
    for d in reversed(shape):
        idx.append(flat % d)
        flat //= d
    return idx[::-1]


def _iota(L: _Lowering, op: msir.IotaOp) -> None:
    shape = list(_shape(op.result.type))
    out = L.result(op.result, shape)
    et = op.result.type.element_type  # type: ignore[attr-defined]
    dim = op.dim.value.data

    def body(ivs, _):
        count = L.v(arith.IndexCastOp, ivs[dim], type=i64 if _is_float(et) else et)
        L.store(L.v(arith.SIToFPOp, count, type=et) if _is_float(et) else count, out, ivs)

    L.loops(shape, body)


def _ramp(L: _Lowering, op: msir.RampOp) -> None:
    """max(count, 0) rows, row i `start + i * step` (a step of zero, as a
    runtime-length broadcast builds it, copies start with no product)."""
    start, step = L.get(op.start), L.get(op.step)
    rows = L.v(arith.MaxSIOp, L.to_index(_scalar(L, op.count)), L.index(0))
    row_dims = L.dims_of(op.start)
    out = L.result(op.result, [rows, *row_dims])
    et = op.result.type.element_type  # type: ignore[attr-defined]
    zero_step = isinstance(op.step.owner, msir.ConstantOp) and not any(op.step.owner.values())

    half = _is_half(et)  # as NumPy's half fill: in float32, rounded once
    ct = _F32 if half else et

    def body(ivs, _):
        first = L.load(start, ivs[1:])
        if zero_step:
            L.store(first, out, ivs)
            return
        d = L.load(step, ivs[1:])
        if half:
            first, d = L.v(arith.ExtFOp, first, type=_F32), L.v(arith.ExtFOp, d, type=_F32)
        i = L.v(arith.IndexCastOp, ivs[0], type=i64 if _is_float(ct) else ct)
        i = L.v(arith.SIToFPOp, i, type=ct) if _is_float(ct) else i
        y = L.add(first, L.mul(i, d))
        L.store(L.v(arith.TruncFOp, y, type=et) if half else y, out, ivs)

    L.loops([rows, *row_dims], body)


def _broadcast_to(L: _Lowering, op: msir.BroadcastToOp) -> None:
    src = L.get(op.input)
    in_shape, out_shape = _shape(op.input.type), _shape(op.result.type)
    in_dims = L.dims_of(op.input)
    lead = len(out_shape) - len(in_shape)
    dims: list[Dim] = list(out_shape)
    for i, s in enumerate(out_shape):
        if s == DYN:
            if i < lead or in_shape[i - lead] != DYN:
                raise _fail(op, f"cannot size dynamic dim {i} of {op.result.type}")
            dims[i] = in_dims[i - lead]
    out = L.result(op.result, dims)

    def body(ivs, _):
        idx = [L.index(0) if s == 1 and out_shape[j + lead] != 1 else ivs[j + lead] for j, s in enumerate(in_shape)]
        L.store(L.load(src, idx), out, ivs)

    L.loops(dims, body)


def _reshape_groups(a: Sequence[int], b: Sequence[int]) -> list[tuple[list[int], list[int]]] | None:
    """Split two static shapes of equal size into runs of axes of equal product."""
    if DYN in a or DYN in b or 0 in a or 0 in b:
        return None
    groups, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        ga, gb, pa, pb = [], [], 1, 1
        if i < len(a):
            ga.append(i)
            pa *= a[i]
            i += 1
        if j < len(b):
            gb.append(j)
            pb *= b[j]
            j += 1
        while pa != pb:
            if pa < pb and i < len(a):
                ga.append(i)
                pa *= a[i]
                i += 1
            elif pb < pa and j < len(b):
                gb.append(j)
                pb *= b[j]
                j += 1
            else:
                return None
        groups.append((ga, gb))
    return groups


def _reshape(L: _Lowering, op: msir.ReshapeOp) -> None:
    """A copy in row-major order. The loop runs over the side of higher rank; each
    group of axes with equal size is linearised there and delinearised (divisions
    by constants) on the other side only when that side has several axes."""
    src = L.get(op.input)
    in_shape, out_shape = _shape(op.input.type), _shape(op.result.type)
    in_dims = L.dims_of(op.input)
    out_dims: list[Dim] = list(out_shape)
    if DYN in out_shape:
        if out_shape.count(DYN) > 1:
            raise _fail(op, f"cannot size more than one dynamic dim of {op.result.type}")
        total: Dim = 1
        for d in in_dims:
            total = L.index_mul(total, d)
        known = pymath.prod(s for s in out_shape if s != DYN)
        out_dims[out_shape.index(DYN)] = L.v(arith.DivSIOp, L.index(total), L.index(known)) if known else 0
    out = L.result(op.result, out_dims)
    groups = _reshape_groups(in_shape, out_shape) or [(list(range(len(in_shape))), list(range(len(out_shape))))]
    loop_over_out = len(out_shape) >= len(in_shape)
    loop_dims = out_dims if loop_over_out else in_dims

    def body(ivs, _):
        other: list[SSAValue] = []
        for g_in, g_out in groups:
            g_loop, g_other = (g_out, g_in) if loop_over_out else (g_in, g_out)
            other_dims = in_dims if loop_over_out else out_dims
            lin = L.linearize([ivs[k] for k in g_loop], [loop_dims[k] for k in g_loop])
            other += [lin] if len(g_other) == 1 else L.delinearize(lin, [other_dims[k] for k in g_other])
        in_idx, out_idx = (other, ivs) if loop_over_out else (ivs, other)
        L.store(L.load(src, in_idx), out, out_idx)

    L.loops(loop_dims, body)


def _transpose(L: _Lowering, op: msir.TransposeOp) -> None:
    src = L.get(op.input)
    perm = msir._ints(op.permutation)
    in_dims = L.dims_of(op.input)
    out = L.result(op.result, [in_dims[p] for p in perm])

    def body(ivs, _):
        idx: list[SSAValue] = [ivs[0]] * len(perm)
        for i, p in enumerate(perm):
            idx[p] = ivs[i]
        L.store(L.load(src, idx), out, ivs)

    L.loops(L.dims[op.result], body)


def _slice(L: _Lowering, op: msir.SliceOp) -> None:
    src = L.get(op.input)
    shape = _shape(op.result.type)
    if DYN in shape:
        raise _fail(op, f"needs a static result type, got {op.result.type}")
    starts, steps = msir._ints(op.starts), msir._ints(op.steps)
    out = L.result(op.result, list(shape))

    def body(ivs, _):
        idx = []
        for iv, start, step in zip(ivs, starts, steps):
            x = iv if step == 1 else L.v(arith.MuliOp, iv, L.index(step))
            idx.append(x if start == 0 else L.v(arith.AddiOp, x, L.index(start)))
        L.store(L.load(src, idx), out, ivs)

    L.loops(list(shape), body)


def _take(L: _Lowering, op: msir.TakeOp) -> None:
    """Gather; an index outside [-n, n) is reported (code 1) and read as element 0,
    or as zero when the axis may be empty."""
    src, ind = L.get(op.input), L.get(op.indices)
    axis = op.axis.value.data
    in_dims, ind_dims = L.dims_of(op.input), L.dims_of(op.indices)
    out = L.result(op.result, [*in_dims[:axis], *ind_dims, *in_dims[axis + 1:]])
    n_ind = len(ind_dims)
    size = in_dims[axis]
    et = op.result.type.element_type  # type: ignore[attr-defined]

    def body(ivs, _):
        raw = L.load(ind, ivs[axis:axis + n_ind])
        if raw.type != i64:
            raw = L.v(arith.ExtSIOp, raw, type=i64)
        n = L.const(size, i64) if isinstance(size, int) else L.v(arith.IndexCastOp, size, type=i64)
        zero = L.const(0, i64)
        wrapped = L.select(L.cmpi("slt", raw, zero), L.add(raw, n), raw)
        bad = L.cmpi("uge", wrapped, n)
        L.report(ERR_INDEX, bad)
        rest = [*ivs[:axis], None, *ivs[axis + n_ind:]]
        if isinstance(size, int) and size > 0:
            rest[axis] = L.to_index(L.select(bad, zero, wrapped))
            value = L.load(src, rest)
        else:
            def read():
                rest[axis] = L.to_index(wrapped)
                return [L.load(src, rest)]
            (value,) = L.if_(bad, lambda: [L.const(0.0 if _is_float(et) else 0, et)], read, [et])
        L.store(value, out, ivs)

    L.loops(L.dims[op.result], body)


def _zero_fill(L: _Lowering, out: SSAValue, dims: Sequence[Dim], et: Attribute) -> None:
    zero = L.const(0.0 if _is_float(et) else 0, et)
    L.loops(dims, lambda ivs, _: L.store(zero, out, ivs))


def _scatter_slice(L: _Lowering, op: msir.ScatterSliceOp) -> None:
    """Zeros, then the input written at `start + k*step` (the transpose of `_slice`)."""
    src = L.get(op.input)
    shape = _shape(op.result.type)
    if DYN in shape:
        raise _fail(op, f"needs a static result type, got {op.result.type}")
    starts, steps = msir._ints(op.starts), msir._ints(op.steps)
    out = L.result(op.result, list(shape))
    _zero_fill(L, out, shape, op.result.type.element_type)  # type: ignore[attr-defined]

    def body(ivs, _):
        idx = []
        for iv, start, step in zip(ivs, starts, steps):
            x = iv if step == 1 else L.v(arith.MuliOp, iv, L.index(step))
            idx.append(x if start == 0 else L.v(arith.AddiOp, x, L.index(start)))
        L.store(L.load(src, ivs), out, idx)

    L.loops(L.dims_of(op.input), body)


def _count_true(L: _Lowering, mask: SSAValue, dims: Sequence[Dim]) -> SSAValue:
    """The number of true elements of the i1 buffer `mask` (of sizes `dims`), as an index."""
    one = L.index(1)
    (count,) = L.loops(dims, lambda ivs, it: [L.select(L.load(mask, ivs), L.v(arith.AddiOp, it[0], one), it[0])],
                       [L.index(0)])
    return count


def _compress(L: _Lowering, op: msir.CompressOp) -> None:
    """Two passes over the mask: the count of true elements sizes the result,
    then the selected rows are copied to consecutive rows of it."""
    src, mask = L.get(op.input), L.get(op.mask)
    mask_dims = L.dims_of(op.mask)
    row_dims = L.dims_of(op.input)[len(mask_dims):]
    out = L.result(op.result, [_count_true(L, mask, mask_dims), *row_dims])
    one = L.index(1)

    def at(ivs, it):
        def copy_row():
            L.loops(row_dims, lambda jvs, _: L.store(L.load(src, [*ivs, *jvs]), out, [it[0], *jvs]))
            return [L.v(arith.AddiOp, it[0], one)]

        return L.if_(L.load(mask, ivs), copy_row, lambda: [it[0]], [INDEX])

    L.loops(mask_dims, at, [L.index(0)])


def _expand(L: _Lowering, op: msir.ExpandOp) -> None:
    """Zeros, then the rows of the updates written in order where the mask is
    true (the transpose of `_compress`). A true element past the last row of
    the updates is reported (code 1) and skipped, so no memory outside the
    updates is read."""
    upd, mask = L.get(op.updates), L.get(op.mask)
    mask_dims = L.dims_of(op.mask)
    upd_dims = L.dims_of(op.updates)
    row_dims = upd_dims[1:]
    shape = _shape(op.result.type)
    given = [*mask_dims, *row_dims]
    dims: list[Dim] = [s if s != DYN else given[i] for i, s in enumerate(shape)]
    et = op.result.type.element_type  # type: ignore[attr-defined]
    out = L.result(op.result, dims)
    _zero_fill(L, out, dims, et)
    one, rows = L.index(1), L.index(upd_dims[0])

    def at(ivs, it):
        def write_row():
            def copy_row():
                L.loops(row_dims, lambda jvs, _: L.store(L.load(upd, [it[0], *jvs]), out, [*ivs, *jvs]))

            L.report(ERR_INDEX, L.cmpi("uge", it[0], rows))
            L.if_(L.cmpi("ult", it[0], rows), copy_row)
            return [L.v(arith.AddiOp, it[0], one)]

        return L.if_(L.load(mask, ivs), write_row, lambda: [it[0]], [INDEX])

    L.loops(mask_dims, at, [L.index(0)])


def _scatter_add(L: _Lowering, op: msir.ScatterAddOp) -> None:
    """Zeros, then every update added at its index along `axis` (the transpose of
    `_take`). An index outside [-n, n) is reported (code 1) and its update dropped,
    so no memory outside the result is touched."""
    upd, ind = L.get(op.updates), L.get(op.indices)
    axis = op.axis.value.data
    upd_dims, ind_dims = L.dims_of(op.updates), L.dims_of(op.indices)
    n_ind = len(ind_dims)
    shape = _shape(op.result.type)
    if shape[axis] == DYN:
        raise _fail(op, f"needs a static size along axis {axis}, got {op.result.type}")
    # The other dims of the result are those of the updates around the index dims.
    around = [*upd_dims[:axis], None, *upd_dims[axis + n_ind:]]
    dims: list[Dim] = [s if s != DYN else around[i] for i, s in enumerate(shape)]
    et = op.result.type.element_type  # type: ignore[attr-defined]
    out = L.result(op.result, dims)
    _zero_fill(L, out, dims, et)
    size = shape[axis]

    def body(ivs, _):
        raw = L.load(ind, ivs[axis:axis + n_ind])
        if raw.type != i64:
            raw = L.v(arith.ExtSIOp, raw, type=i64)
        n, zero = L.const(size, i64), L.const(0, i64)
        wrapped = L.select(L.cmpi("slt", raw, zero), L.add(raw, n), raw)
        L.report(ERR_INDEX, L.cmpi("uge", wrapped, n))

        def accumulate():
            idx = [*ivs[:axis], L.to_index(wrapped), *ivs[axis + n_ind:]]
            L.store(L.add(L.load(out, idx), L.load(upd, ivs)), out, idx)

        L.if_(L.cmpi("ult", wrapped, n), accumulate)

    L.loops(upd_dims, body)


def _check(L: _Lowering, op: msir.CheckOp) -> None:
    """When the condition is false, `@__msir_raise` records the check with its values' bits."""
    failed = L.v(arith.XOrIOp, L.load(L.get(op.cond), []), L.const(True, i1))
    values = [L.load(L.get(v), []) for v in op.values]
    message = json.dumps({"error": op.error.data, "message": op.message.data,
                          "dtypes": [msir.dtype_of(v.type) for v in op.values],
                          "python_numbers": list(op.python_numbers.get_values()) if op.python_numbers else []})

    def call() -> None:
        L.mod.uses_raise = True
        bits = [_slot_bits(L, v) for v in values] + [L.const(0, i64)] * (RAISE_SLOTS - len(values))
        args = [L.const(ERR_USER, i32), L.const(L.mod.site(L.msir_op), i64), *bits]
        call_op = L.emit(func.CallOp, args, [], {"callee": SymbolRefAttr(RAISE_FUNC)})
        call_op.attributes[MESSAGE_ATTR] = StringAttr(message)

    L.if_(failed, call)


def _slot_bits(L: _Lowering, v: SSAValue) -> SSAValue:
    """A scalar as the i64 `@__msir_raise` records: floats widened to f64 and bitcast, integers extended."""
    if _is_float(v.type):
        wide = v if isinstance(v.type, Float64Type) else L.v(arith.ExtFOp, v, type=Float64Type())
        return L.v(arith.BitcastOp, wide, type=i64)
    if v.type == i64:
        return v
    return L.v(arith.ExtUIOp if v.type == i1 else arith.ExtSIOp, v, type=i64)


def _stop_gradient(L: _Lowering, op: msir.StopGradientOp) -> None:
    """The identity: a copy (the derivative is what differs, not the value)."""
    dims = L.dims_of(op.input)
    L.copy(L.get(op.input), L.result(op.result, dims), dims)


def _concatenate(L: _Lowering, op: msir.ConcatenateOp) -> None:
    axis = op.axis.value.data
    all_dims = [L.dims_of(v) for v in op.inputs]
    total: Dim = 0
    for d in all_dims:
        total = L.index_add(total, d[axis])
    out = L.result(op.result, [*all_dims[0][:axis], total, *all_dims[0][axis + 1:]])
    offset: Dim = 0
    for v, dims in zip(op.inputs, all_dims):
        src, off = L.get(v), offset

        def body(ivs, _, src=src, off=off):
            idx = list(ivs)
            if off != 0:
                idx[axis] = L.v(arith.AddiOp, ivs[axis], L.index(off))
            L.store(L.load(src, ivs), out, idx)

        L.loops(dims, body)
        offset = L.index_add(offset, dims[axis])


def _stack(L: _Lowering, op: msir.StackOp) -> None:
    axis = op.axis.value.data
    dims = L.dims_of(op.inputs[0])
    out = L.result(op.result, [*dims[:axis], len(op.inputs), *dims[axis:]])
    for k, v in enumerate(op.inputs):
        src = L.get(v)
        L.loops(dims, lambda ivs, _, src=src, k=k: L.store(
            L.load(src, ivs), out, [*ivs[:axis], L.index(k), *ivs[axis:]]))


def _identity(kind: str, t: Attribute) -> float | int:
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    big = kind == "min"
    if _is_float(t):
        return pymath.inf if big else -pymath.inf
    if t == i1:
        return 1 if big else 0
    width = t.width.data  # type: ignore[attr-defined]
    return (1 << (width - 1)) - 1 if big else -(1 << (width - 1))


def _combine(L: _Lowering, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
    t = a.type
    if kind == "sum":
        return L.add(a, b)
    if kind == "prod":
        return L.mul(a, b)
    if t == i1:
        return L.v(arith.OrIOp if kind == "max" else arith.AndIOp, a, b)
    if kind == "max":
        return L.v(arith.MaximumfOp if _is_float(t) else arith.MaxSIOp, a, b)
    return L.v(arith.MinimumfOp if _is_float(t) else arith.MinSIOp, a, b)


_REDUCE_KIND = {
    msir.ReduceSumOp: "sum",
    msir.ReduceProdOp: "prod",
    msir.ReduceMaxOp: "max",
    msir.ReduceMinOp: "min",
    msir.ReduceMeanOp: "sum",
}


def _reduction_of(L: _Lowering, op: Operation) -> msir.ReduceOp | None:
    """The reduction that `op` feeds when they are lowered as one loop nest: `op`
    a fusion of one result whose only use is the next op, a reduction. Its loop
    computes the fusion's body per element instead of reading it from a buffer
    (W7's condition `max(abs(x * x - a))`: one pass over x and a, no temporary);
    the same values in the same order, so the same bits. Not when the fusion's
    result has a buffer chosen for it (a destination)."""
    if not isinstance(op, msir.FusionOp) or len(op.outputs) != 1:
        return None
    res = op.outputs[0]
    user = op.next_op
    if (not isinstance(user, msir.ReduceOp) or type(user) not in _REDUCE_KIND or user.input is not res
            or not res.has_one_use() or res in L.dest or L.plan.reserves.get(user)
            or user in L.plan.folded or not _is_static_tensor(res.type)):
        return None
    return user


def _reduce(L: _Lowering, op: msir.ReduceOp, producer: msir.FusionOp | None = None) -> None:
    """When the reduced axes come last, accumulate in registers (loop-carried);
    otherwise initialise the output and update it in the input's row-major order,
    which keeps the innermost accesses contiguous. With `producer` (`_reduction_of`),
    the input's elements are the producer's, computed where they are read."""
    kind = _REDUCE_KIND[type(op)]
    if producer is None:
        src = L.get(op.input)
        in_dims = L.dims_of(op.input)

        def load(ivs: Sequence[SSAValue]) -> SSAValue:
            return L.load(src, ivs)
    else:
        ins = _fusion_inputs(L, producer)
        in_dims = _fusion_dims(L, producer)

        def load(ivs: Sequence[SSAValue]) -> SSAValue:
            (value,) = _fusion_elements(L, producer, ins, ivs)
            L.loc, L.msir_op = op.location, op
            return value
    axes = set(op.axes_list)
    keep = op.keepdims
    rank = len(in_dims)
    kept = [a for a in range(rank) if a not in axes]
    out_dims = [1 if a in axes else d for a, d in enumerate(in_dims)] if keep else [in_dims[a] for a in kept]
    out = L.result(op.result, out_dims)
    et = op.result.type.element_type  # type: ignore[attr-defined]
    # A half reduction (only over trailing axes: widen_half.reduces_natively) accumulates in f32.
    acc_t = _F32 if _is_half(et) else et
    init = L.const(_identity(kind, acc_t), acc_t)
    mean = isinstance(op, msir.ReduceMeanOp)

    def out_index(ivs: Sequence[SSAValue]) -> list[SSAValue]:
        return [L.index(0) if a in axes else ivs[a] for a in range(rank)] if keep else [ivs[a] for a in kept]

    def element(v: SSAValue) -> SSAValue:
        return L.v(arith.ExtFOp, v, type=acc_t) if acc_t != et else v

    def count() -> SSAValue:
        n: Dim = 1
        for a in axes:
            n = L.index_mul(n, in_dims[a])
        if isinstance(n, int):
            return L.const(float(n), acc_t)
        return L.v(arith.SIToFPOp, L.v(arith.IndexCastOp, n, type=i64), type=acc_t)

    if kept == list(range(len(kept))):
        red = [in_dims[a] for a in sorted(axes)]
        n = count() if mean and acc_t != et else None

        def outer(ovs, _):
            (acc,) = L.loops(red, lambda rvs, it: [_combine(L, kind, it[0], element(load([*ovs, *rvs])))],
                             [init])
            if n is not None:  # NumPy's half mean divides in f32, then rounds once
                acc = L.v(arith.DivfOp, acc, n)
            if acc_t != et:
                acc = L.v(arith.TruncFOp, acc, type=et)
            L.store(acc, out, out_index([*ovs, *([None] * len(red))]))

        L.row_loops([in_dims[a] for a in kept], outer)
        if n is not None:
            return
    else:
        L.row_loops(out_dims, lambda ivs, _: L.store(init, out, ivs))

        def update(ivs, _):
            oi = out_index(ivs)
            L.store(_combine(L, kind, L.load(out, oi), load(ivs)), out, oi)

        L.row_loops(in_dims, update)
    if mean:
        n = count()
        L.row_loops(out_dims, lambda ivs, _: L.store(L.v(arith.DivfOp, L.load(out, ivs), n), out, ivs))


def _row_groups(ops: Sequence[Operation], folded: set[Operation]) -> dict[Operation, list[Operation]]:
    """Runs of consecutive ops that can share one loop over rows (first op of
    each run -> the run): fusions and reductions on static shapes whose results
    all have the same leading dim R > 1, where row r of every result depends
    only on row r of the operands made in the run (a reduction keeps axis 0; a
    fusion reads a value of the run only at its own rank, so the leading axes
    line up) and on values made before the run. A run holds at least one
    reduction and two ops: a row softmax or layernorm becomes one pass over
    rows that stay in cache, with one-row temporaries."""
    groups: dict[Operation, list[Operation]] = {}
    run: list[Operation] = []
    made: set[SSAValue] = set()
    rows = 0

    def close() -> None:
        if len(run) >= 2 and any(isinstance(o, msir.ReduceOp) for o in run):
            groups[run[0]] = list(run)
        run.clear()
        made.clear()

    def leading(op: Operation) -> int | None:
        if op in folded or not op.results:
            return None
        if not all(_is_static_tensor(v.type) for v in (*op.operands, *op.results)):
            return None
        shapes = [_shape(r.type) for r in op.results]
        if not shapes[0] or any(not s or s[0] != shapes[0][0] for s in shapes):
            return None
        if isinstance(op, msir.ReduceOp):
            if type(op) not in _REDUCE_KIND or 0 in op.axes_list or len(_shape(op.input.type)) < 2:
                return None
        elif isinstance(op, msir.FusionOp):
            rank = len(shapes[0])
            if any(v in made and len(_shape(v.type)) != rank for v in op.inputs):
                return None
        else:
            return None
        return shapes[0][0] if shapes[0][0] > 1 else None

    for op in ops:
        r = leading(op)
        if r is None or (run and r != rows):
            close()
            if r is None:
                continue
        rows = r
        run.append(op)
        made.update(op.results)
    close()
    return groups


def _argreduce(L: _Lowering, op: msir.ArgReduceOp) -> None:
    """First index of the extreme; a NaN beats everything and the first NaN wins."""
    is_max = isinstance(op, msir.ArgmaxOp)
    src = L.get(op.input)
    in_dims = L.dims_of(op.input)
    rank = len(in_dims)
    axis = op.axis_value
    out_shape = _shape(op.result.type)
    keep = len(out_shape) == rank and rank > 0
    et = op.input.type.element_type  # type: ignore[attr-defined]

    def better(v: SSAValue, best: SSAValue) -> SSAValue:
        c = L.cmp("gt" if is_max else "lt", v, best)
        if _is_float(et):
            nan_first = L.v(arith.AndIOp, L.cmpf("uno", v, v), L.cmpf("ord", best, best))
            c = L.v(arith.OrIOp, c, nan_first)
        return c

    def step(v: SSAValue, pos: SSAValue, it: list[SSAValue]) -> list[SSAValue]:
        c = better(v, it[0])
        return [L.select(c, v, it[0]), L.select(c, pos, it[1])]

    if axis is None:
        out = L.result(op.result, [1] * len(out_shape))
        first = L.load(src, [L.index(0)] * rank)
        best = L.loops(in_dims, lambda ivs, it: step(L.load(src, ivs), L.linearize(ivs, in_dims), it),
                       [first, L.index(0)])
        L.store(L.v(arith.IndexCastOp, best[1], type=i64), out, [L.index(0)] * len(out_shape))
        return
    out_dims = [1 if a == axis else d for a, d in enumerate(in_dims)] if keep else \
        [d for a, d in enumerate(in_dims) if a != axis]
    out = L.result(op.result, out_dims)
    outer = [d for a, d in enumerate(in_dims) if a != axis]

    def body(ovs, _):
        def at(k: SSAValue) -> list[SSAValue]:
            return [*ovs[:axis], k, *ovs[axis:]]

        first = L.load(src, at(L.index(0)))
        best = L.loops([in_dims[axis]], lambda ivs, it: step(L.load(src, at(ivs[0])), ivs[0], it),
                       [first, L.index(0)])
        oi = at(L.index(0)) if keep else list(ovs)
        L.store(L.v(arith.IndexCastOp, best[1], type=i64), out, oi)

    L.loops(outer, body)


_BLAS_MIN_MNK = 32 * 32 * 32
"""Static products with m*n*k below this stay on the loop kernel: a BLAS call
costs about a microsecond of fixed overhead (argument checks, dispatch), which the
inlined, vectorised loops beat on small operands. Dynamic sizes always call."""


def _matmul_operand(L: _Lowering, v: SSAValue) -> tuple[SSAValue, list[Dim], bool]:
    """The buffer holding matmul operand `v`, that buffer's dims, and whether `v`
    is the (absorbed) transpose of it over the last two axes."""
    owner = v.owner
    trans = isinstance(owner, msir.TransposeOp) and owner in L.plan.folded and list(
        msir._ints(owner.permutation)) != sorted(msir._ints(owner.permutation))
    return L.get(v), L.dims_of(v), trans


def _matmul(L: _Lowering, op: msir.MatmulOp) -> None:
    """np.matmul. 1-D operands drop their promoted axis; batch axes broadcast; an
    operand produced by a transpose of its last two axes is read in place (see
    the bufferiser's views). float32/float64 call the BLAS (`msir.lowering.blas`) when
    it is loaded and the product is not tiny; otherwise (ints, no BLAS) loops
    batch..., i, k, j (j innermost and contiguous) accumulate into the zeroed output."""
    a, a_buf_dims, a_tr = _matmul_operand(L, op.lhs)
    b, b_buf_dims, b_tr = _matmul_operand(L, op.rhs)

    def logical(dims: list[Dim], tr: bool) -> list[Dim]:
        return [*dims[:-2], dims[-1], dims[-2]] if tr else list(dims)

    ad, bd = logical(a_buf_dims, a_tr), logical(b_buf_dims, b_tr)
    a_shape, b_shape = _shape(op.lhs.type), _shape(op.rhs.type)
    a_vec, b_vec = len(ad) == 1, len(bd) == 1
    a_batch, b_batch = ([] if a_vec else ad[:-2]), ([] if b_vec else bd[:-2])
    nb = max(len(a_batch), len(b_batch))
    batch: list[Dim] = []
    for i in range(nb):
        x = a_batch[i - nb + len(a_batch)] if i >= nb - len(a_batch) else 1
        y = b_batch[i - nb + len(b_batch)] if i >= nb - len(b_batch) else 1
        batch.append(y if x == 1 else x)
    m, k_dim = (None if a_vec else ad[-2]), ad[-1]
    n = None if b_vec else bd[-1]
    out_dims = [*batch, *([m] if m is not None else []), *([n] if n is not None else [])]
    out = L.result(op.result, out_dims)
    et = op.result.type.element_type  # type: ignore[attr-defined]

    def batch_index(ivs, shape, nbatch):
        off = nb - nbatch
        return [L.index(0) if shape[j] == 1 and batch[j + off] != 1 else ivs[j + off] for j in range(nbatch)]

    sizes = [m if m is not None else 1, n if n is not None else 1, k_dim]
    small = all(isinstance(s, int) for s in sizes) and pymath.prod(sizes) < _BLAS_MIN_MNK  # type: ignore[arg-type]
    if isinstance(et, Float32Type | Float64Type) and not small and blas.available():
        _matmul_blas(L, et, (a, a_buf_dims, a_tr, a_vec, a_shape, len(a_batch)),
                     (b, b_buf_dims, b_tr, b_vec, b_shape, len(b_batch)), out, batch, sizes, batch_index)
        return

    zero = L.const(0.0 if _is_float(et) else 0, et)
    L.loops(out_dims, lambda ivs, _: L.store(zero, out, ivs))

    def outer(ovs, _):
        bvs, i = ovs[:nb], (ovs[nb] if m is not None else None)
        ab = batch_index(bvs, a_shape, len(a_batch))
        bb = batch_index(bvs, b_shape, len(b_batch))
        o_prefix = [*bvs, *([i] if i is not None else [])]

        def kloop(kvs, _):
            k = kvs[0]
            x = L.load(a, ([*ab, k, i] if a_tr else [*ab, i, k]) if i is not None else [k])
            if n is None:
                acc = L.load(out, o_prefix)
                L.store(L.add(acc, L.mul(x, L.load(b, [*bb, k]))), out, o_prefix)
                return

            def jloop(jvs, _):
                oi = [*o_prefix, jvs[0]]
                acc = L.load(out, oi)
                L.store(L.add(acc, L.mul(x, L.load(b, [*bb, jvs[0], k] if b_tr else [*bb, k, jvs[0]]))), out, oi)

            L.loops([n], jloop)

        L.loops([k_dim], kloop)

    L.loops([*batch, *([m] if m is not None else [])], outer)


def _matmul_blas(L: _Lowering, et: Attribute, a_info, b_info, out: SSAValue, batch: list[Dim],
                 sizes: list[Dim], batch_index, update: tuple[SSAValue, float] | None = None) -> None:
    """One `__msir_gemm_<t>(ta, tb, m, n, k, a, a_off, lda, b, b_off, ldb, c, c_off, ldc)`
    call per batch element (row-major, offsets in elements; ABI in
    `msir.lowering.blas`). A vector is a 1 x k row (lhs) or a k x 1 column (rhs).
    Without batch axes on the rhs the lhs batch folds into the rows of one call."""
    kind = "f32" if isinstance(et, Float32Type) else "f64"
    name = (blas.GEMM_UPDATE_SYMBOLS if update else blas.GEMM_SYMBOLS)[kind]
    ptr_t = MemRefType(et, [])
    block = L.mod.module.body.block
    extra_types = [ptr_t, et] if update else []
    if not any(isinstance(o, func.FuncOp) and o.sym_name.data == name for o in block.ops):
        block.add_op(func.FuncOp(name, ([i64] * 5 + [ptr_t, i64, i64] * 3 + extra_types, []), Region(), "private"))
    extra = [L.v(memref.CastOp, update[0], type=ptr_t), L.const(update[1], et)] if update else []
    (a, a_dims, a_tr, a_vec, a_shape, na), (b, b_dims, b_tr, b_vec, b_shape, nbb) = a_info, b_info
    m, n, k = sizes
    nb = len(batch)

    def i64v(d: Dim) -> SSAValue:
        return L.const(d, i64) if isinstance(d, int) else L.v(arith.IndexCastOp, d, type=i64)

    def prod(ds: Sequence[Dim]) -> Dim:
        p: Dim = 1
        for d in ds:
            p = L.index_mul(p, d)
        return p

    ptrs = [L.v(memref.CastOp, x, type=ptr_t) for x in (a, b, out)]
    lda, ldb, ldc = a_dims[-1], (1 if b_vec else b_dims[-1]), n
    flags = [L.const(int(a_tr), i64), L.const(int(b_tr), i64)]

    def call(rows: Dim, offs: Sequence[Dim]) -> None:
        args = [*flags, i64v(rows), i64v(n), i64v(k)]
        for p, off, ld in zip(ptrs, offs, (lda, ldb, ldc)):
            args += [p, i64v(off), i64v(ld)]
        L.emit(func.CallOp, args + extra, [], {"callee": SymbolRefAttr(name)})

    if nb == 0:
        call(m, (0, 0, 0))
        return
    if nbb == 0 and not a_tr and not a_vec:
        call(L.index_mul(prod(batch), m), (0, 0, 0))
        return
    a_mat, b_mat, c_mat = prod(a_dims[-2:] if not a_vec else []), prod(b_dims[-2:] if not b_vec else []), L.index_mul(m, n)

    def body(bvs, _):
        ab, bb = batch_index(bvs, a_shape, na), batch_index(bvs, b_shape, nbb)
        offs = [L.index_mul(L.linearize(ivs, dims), size) if ivs else 0
                for ivs, dims, size in ((ab, a_dims[:na], a_mat), (bb, b_dims[:nbb], b_mat), (bvs, batch, c_mat))]
        call(m, offs)

    L.loops(batch, body)


def _update_form(block: Block) -> tuple[int, int, float] | None:
    """(c, m, alpha) when the fusion body `block` computes `c + alpha * m` of
    two of its arguments (also written `c - s * m`, `m * s + c`, `c + m`...),
    alpha from splat constants; else None."""
    ops = list(block.ops)
    term = ops[-1]
    if not isinstance(term, msir.YieldOp) or len(term.operands) != 1:
        return None
    consts: dict[SSAValue, float] = {}
    computed = []
    for o in ops[:-1]:
        if isinstance(o, msir.ConstantOp) and o.is_splat():
            consts[o.result] = float(o.values()[0])
        elif isinstance(o, msir.BroadcastToOp) and o.input in consts:
            consts[o.result] = consts[o.input]
        else:
            computed.append(o)
    args = set(block.args)

    def scaled(v: SSAValue) -> tuple[int, float] | None:
        if v in args:
            return v.index, 1.0  # type: ignore[attr-defined]
        o = v.owner
        if isinstance(o, msir.MulOp) and o in computed:
            for x, y in ((o.lhs, o.rhs), (o.rhs, o.lhs)):
                if x in args and y in consts:
                    return x.index, consts[y]  # type: ignore[attr-defined]
        return None

    top = term.operands[0].owner
    forms = []
    if isinstance(top, msir.SubOp):
        forms = [(top.lhs, top.rhs, -1.0)]
    elif isinstance(top, msir.AddOp):
        forms = [(top.lhs, top.rhs, 1.0), (top.rhs, top.lhs, 1.0)]
    for c, t, sign in forms:
        s = scaled(t)
        if c in args and s is not None and s[0] != c.index and len(computed) == (1 if t in args else 2):  # type: ignore[attr-defined]
            return c.index, s[0], sign * s[1]  # type: ignore[attr-defined]
    return None


def _gemm_updates(ops: list[Operation], folded: set[Operation]) -> dict[Operation, tuple[msir.MatmulOp, SSAValue, float]]:
    """Fusions `r = c + alpha * (a @ b)` (an SGD update `w - lr * g`, a residual
    add) whose matmul (2-D, float, large enough for the BLAS, in this block)
    has no other use: lowered as one BLAS call that starts from c (copied into
    r's buffer unless it is that buffer, a donated argument) and accumulates
    alpha * a @ b into it (`_gemm_update`), so the product gets no buffer and
    the update no pass of its own."""
    found: dict[Operation, tuple[msir.MatmulOp, SSAValue, float]] = {}
    if not any(isinstance(o, msir.MatmulOp) for o in ops) or not blas.available():
        return found  # (loading the BLAS costs ~0.1 s in a process that has no matmul)
    block_ops = set(ops)
    for f in ops:
        if f in folded or len(f.results) != 1 or not isinstance(f, msir.FusionOp | msir.AddOp | msir.SubOp):
            continue
        r = f.results[0]
        shape = _shape(r.type)
        if len(shape) != 2 or not _is_static_tensor(r.type) or \
                not isinstance(r.type.element_type, Float32Type | Float64Type):  # type: ignore[attr-defined]
            continue
        if isinstance(f, msir.FusionOp):
            form = _update_form(f.body.block)
            if form is None:
                continue
            c, m, alpha = f.inputs[form[0]], f.inputs[form[1]], form[2]
        else:  # an unfused c + m, m + c or c - m
            c, m, alpha = f.lhs, f.rhs, (1.0 if isinstance(f, msir.AddOp) else -1.0)
            if isinstance(f, msir.AddOp) and isinstance(c.owner, msir.MatmulOp) and not isinstance(m.owner, msir.MatmulOp):
                c, m = m, c
        mm = m.owner
        if not (isinstance(mm, msir.MatmulOp) and mm in block_ops and mm not in folded and m.has_one_use()
                and m.type == r.type and _shape(c.type) == shape and c.type == r.type
                and len(_shape(mm.lhs.type)) == 2 and len(_shape(mm.rhs.type)) == 2):
            continue
        k = _shape(mm.lhs.type)[1]
        if shape[0] * shape[1] * k < _BLAS_MIN_MNK:
            continue
        found[f] = (mm, c, alpha)
    return found


def _gemm_update(L: _Lowering, op: Operation, mm: msir.MatmulOp, c: SSAValue, alpha: float) -> None:
    """`r = c + alpha * (a @ b)` as `__msir_gemm_update_<t>` (see `_gemm_updates`)."""
    a, a_dims, a_tr = _matmul_operand(L, mm.lhs)
    b, b_dims, b_tr = _matmul_operand(L, mm.rhs)
    m, k = (a_dims[1], a_dims[0]) if a_tr else (a_dims[0], a_dims[1])
    n = b_dims[0] if b_tr else b_dims[1]
    out = L.result(op.results[0], [m, n])
    et = op.results[0].type.element_type  # type: ignore[attr-defined]
    _matmul_blas(L, et, (a, a_dims, a_tr, False, _shape(mm.lhs.type), 0),
                 (b, b_dims, b_tr, False, _shape(mm.rhs.type), 0), out, [], [m, n, k], None,
                 update=(L.get(c), alpha))


def _gemm_epilogues(ops: list[Operation], taken: set[Operation]) -> dict[msir.FusionOp, tuple[msir.MatmulOp, int, int]]:
    """Fusions that are the elementwise epilogue of a matmul: fusion -> (the
    matmul, the fusion input its product is, the result computed in its place).

    The product p = a @ b (2-D, f32/f64, static, large enough for the BLAS, in
    this block) has the fusion as its only use, and one of the fusion's results
    has p's type (the fusion iterates over p's shape and reads p only at the
    element it writes). `_gemm_epilogue` then computes p straight into that
    result's buffer with the BLAS and runs the fusion's loops over it: the
    product gets no buffer, and its epilogue loop is marked for
    msir-lower-to-llvm, which runs it per chunk of the product's rows right
    after the chunk's gemm (`msir.lowering.blas`, "Epilogues") while those rows
    are in cache. A bias add and ReLU (`relu(x @ w + b)`), GELU, a residual add,
    ReLU's backward mask: any fusion. Off with `MSIR_GEMM_EPILOGUE=0` (or
    `blas.fuse_epilogues = False`)."""
    found: dict[msir.FusionOp, tuple[msir.MatmulOp, int, int]] = {}
    if not blas.fuse_epilogues or not any(isinstance(o, msir.MatmulOp) for o in ops) or not blas.available():
        return found
    block_ops = set(ops)
    used: set[Operation] = set()
    for f in ops:
        if not isinstance(f, msir.FusionOp) or f in taken:
            continue
        for i, p in enumerate(f.inputs):
            mm = p.owner
            if not (isinstance(mm, msir.MatmulOp) and mm in block_ops and mm not in taken and mm not in used
                    and p.has_one_use() and _is_static_tensor(p.type)
                    and isinstance(p.type.element_type, Float32Type | Float64Type)  # type: ignore[attr-defined]
                    and len(_shape(mm.lhs.type)) == 2 and len(_shape(mm.rhs.type)) == 2
                    and _shape(f.outputs[0].type) == _shape(p.type)):
                continue
            host = next((j for j, r in enumerate(f.outputs) if r.type == p.type), None)
            m, n = _shape(p.type)
            if host is None or m * n * _shape(mm.lhs.type)[1] < _BLAS_MIN_MNK:
                continue
            found[f] = (mm, i, host)
            used.add(mm)
            break
    return found


def _gemm_epilogue(L: _Lowering, op: msir.FusionOp, mm: msir.MatmulOp, product: int, host: int) -> None:
    """Matmul `mm` into result `host` of fusion `op`, then the fusion's loops
    over it, marked `msir.gemm_epilogue` (see `_gemm_epilogues`)."""
    a, a_dims, a_tr = _matmul_operand(L, mm.lhs)
    b, b_dims, b_tr = _matmul_operand(L, mm.rhs)
    m, k = (a_dims[1], a_dims[0]) if a_tr else (a_dims[0], a_dims[1])
    n = b_dims[0] if b_tr else b_dims[1]
    outs = [L.result(r, [m, n]) for r in op.outputs]  # allocated before the call: the loop must follow it
    et = mm.result.type.element_type  # type: ignore[attr-defined]
    _matmul_blas(L, et, (a, a_dims, a_tr, False, _shape(mm.lhs.type), 0),
                 (b, b_dims, b_tr, False, _shape(mm.rhs.type), 0), outs[host], [], [m, n, k], None)
    _fusion_loops(L, op, [m, n], outs, given={product: outs[host]})
    loop = L.block.last_op
    assert isinstance(loop, scf.ForOp)
    loop.attributes[GEMM_EPILOGUE_ATTR] = UnitAttr()


def _call(L: _Lowering, op: func.CallOp) -> None:
    name = op.callee.root_reference.data
    sig = L.mod.sigs.get(name)
    if sig is None:
        raise _fail(op, f"calls @{name}, which is not a function of the module")
    outs = []
    for pos in sig.out_positions:
        res = op.results[pos]
        outs.append(L.result(res, list(_shape(res.type))))  # type: ignore[attr-defined]
    args = [L.exact(v) for v in op.operands]
    call = L.emit(func.CallOp, [*args, *outs], sig.results, {"callee": op.callee})
    if name in L.mod.recursive:
        call.attributes[SITE_ATTR] = IntegerAttr(L.mod.site(op), i64)
        call.attributes[STACK_CHECK_ATTR] = UnitAttr()
    for pos, new in zip(sig.ret_positions, call.results):
        L.define(op.results[pos], new)


def _return(L: _Lowering, op: func.ReturnOp) -> None:
    out_args = L.entry.args[len(L.f.function_type.inputs):]
    for k, pos in enumerate(L.sig.out_positions):
        v = L.canon(op.operands[pos])
        if L.buf[v] is not out_args[k]:
            L.copy(L.buf[v], out_args[k], L.dims[v])
    plan = L.plan.returns[op]
    rets = []
    for pos, fresh in zip(L.sig.ret_positions, plan.fresh):
        v = L.canon(op.operands[pos])
        if fresh:
            buf = L.alloc(_memref_type(v.type), L.dims[v])  # type: ignore[arg-type]
            L.copy(L.buf[v], buf, L.dims[v])
            rets.append(buf)
        else:
            rets.append(L.exact(v))
    for v in plan.frees:
        L.emit(memref.DeallocOp, [L.buf[v]])
    L.emit(func.ReturnOp, rets)


def _fusion(L: _Lowering, op: msir.FusionOp) -> None:
    """One loop nest over the iteration shape (`_fusion_loops`)."""
    dims = _fusion_dims(L, op)
    _fusion_loops(L, op, dims, [L.result(r, dims) for r in op.outputs])


def _fusion_dims(L: _Lowering, op: msir.FusionOp) -> list[Dim]:
    """The sizes of fusion `op`'s iteration shape: those of an input of that shape, else its static shape."""
    shape = _shape(op.outputs[0].type)
    full = next((v for v in op.inputs if _shape(v.type) == shape), None)
    return L.dims_of(full) if full is not None else list(shape)


def _fusion_loops(L: _Lowering, op: msir.FusionOp, dims: list[Dim], outs: list[SSAValue],
                  given: dict[int, SSAValue] | None = None) -> None:
    """The loop nest of fusion `op` over `dims`, storing its results into `outs`;
    the body's ops become scalar code on registers, inputs are loaded (broadcast
    ones through their index map; input i from `given[i]` where given, else
    from its own buffer) and only the fusion's results are stored, each element
    after everything it needs is loaded (so a result may share the buffer of an
    input of the iteration shape)."""
    ins = _fusion_inputs(L, op, given)

    def inner(ivs, _):
        for v, out in zip(_fusion_elements(L, op, ins, ivs), outs):
            L.store(v, out, ivs)

    L.row_loops(dims, inner)
    L.loc, L.msir_op = op.location, op


def _fusion_inputs(L: _Lowering, op: msir.FusionOp,
                   given: dict[int, SSAValue] | None = None) -> dict[SSAValue, tuple[SSAValue, tuple[int, ...]]]:
    """Per block argument of fusion `op`'s body: the buffer it is read from (input i from `given[i]` where given)
    and the input's shape."""
    given = given or {}
    return {arg: (given[i] if i in given else L.get(v), _shape(v.type))
            for i, (arg, v) in enumerate(zip(op.body.block.args, op.inputs))}


def _fusion_elements(L: _Lowering, op: msir.FusionOp, ins: dict[SSAValue, tuple[SSAValue, tuple[int, ...]]],
                     ivs: Sequence[SSAValue]) -> list[SSAValue]:
    """The elements of fusion `op`'s results at index `ivs` of its iteration
    shape, as scalar code in the current block, every input loaded before they
    are returned (`ins`: `_fusion_inputs`)."""
    shape = _shape(op.outputs[0].type)
    env: dict[SSAValue, SSAValue] = {}

    def value(v: SSAValue) -> SSAValue:
        if v not in env:  # an input of the iteration shape, loaded on first use
            buf, _ = ins[v]
            env[v] = L.load(buf, ivs)
        return env[v]

    results: list[SSAValue] = []
    for o in op.body.block.ops:
        L.loc, L.msir_op = o.location, o  # errors point at the fused op's own source
        if isinstance(o, msir.YieldOp):
            results = [value(v) for v in o.values]
        elif isinstance(o, msir.ConstantOp):
            env[o.result] = L.const(o.values()[0], o.result.type.element_type)  # type: ignore[attr-defined]
        elif isinstance(o, msir.BroadcastToOp):
            src = o.input
            if src in env:  # a broadcast constant
                env[o.result] = env[src]
                continue
            buf, in_shape = ins[src]
            lead = len(shape) - len(in_shape)
            idx = [L.index(0) if s == 1 and shape[j + lead] != 1 else ivs[j + lead] for j, s in enumerate(in_shape)]
            env[o.result] = L.load(buf, idx)
        elif isinstance(o, msir.CompareOp):
            env[o.result] = L.cmp(o.predicate_name, value(o.lhs), value(o.rhs))
        elif isinstance(o, msir.CastOp):
            env[o.result] = _cast(L, value(o.input), o.result.type.element_type)  # type: ignore[attr-defined]
        else:
            env[o.results[0]] = SCALAR[type(o)](L, *[value(v) for v in o.operands])
    L.loc, L.msir_op = op.location, op
    return results


def _scalar(L: _Lowering, v: SSAValue) -> SSAValue:
    """The element of a rank-0 tensor value."""
    return L.load(L.get(v), [])


def _if(L: _Lowering, op: msir.IfOp) -> None:
    outs = [L.result(r, list(_shape(r.type))) for r in op.res]

    def branch(region: Region):
        def emit():
            bufs, local = L.lower_region(region.block, [], dests=outs)
            L.copy_out(bufs, outs, [L.canon(v) for v in region.block.last_op.operands], local)
        return emit

    L.if_(_scalar(L, op.cond), branch(op.then_region), branch(op.else_region))


@dataclass
class _Slot:
    """The buffers of one carried value of a loop (`bufferize.SlotPlan`): the
    loop's result lives in `first`; a value whose two buffers swap roles each
    iteration also has `spare` (both loop-carried memrefs)."""

    kind: SlotKind
    first: SSAValue
    dims: list[Dim]
    spare: SSAValue | None = None


class _Carry:
    """The buffers of the carried values of an `msir.for`/`msir.while`, as
    planned (`bufferize.LoopPlan`)."""

    def __init__(self, L: _Lowering, op: Operation, inits: Sequence[SSAValue], body: Block):
        self.L, self.op, self.body = L, op, body
        self.plan: LoopPlan = L.plan.loops[op]
        self.slots: list[_Slot] = []
        for r, init, sp in zip(op.results, inits, self.plan.slots):
            dims = list(L.dims_of(init))
            if sp.movable:
                first = L.get(init)
                L.buf[r], L.dims[r] = first, dims
            elif _is_static_tensor(r.type):
                first = L.result(r, dims)
            else:
                first = L.alloc(_memref_type(r.type), dims, hoist=False)  # type: ignore[arg-type]
            if first is not L.get(init):
                L.copy(L.get(init), first, dims)
            spare = L.alloc(_memref_type(r.type), dims) if sp.swaps else None  # type: ignore[arg-type]
            self.slots.append(_Slot(sp.kind, first, dims, spare))
        self.flag = any(s.spare is not None for s in self.slots)
        self.inits: list[SSAValue] = []
        for s in self.slots:
            if s.spare is not None:
                self.inits += [s.first, s.spare]
            elif s.kind == SlotKind.MOVE:
                self.inits += [s.first, *[L.index(d) for d, n in zip(s.dims, _shape(s.first.type)) if n == DYN]]
        if self.flag:
            self.inits.append(L.const(False, i1))

    def bind(self, iters: Sequence[SSAValue]) -> tuple[list[SSAValue], list[list[Dim] | None], list[SSAValue]]:
        """The buffers (and sizes) of the carried values in an iteration whose
        loop-carried values are `iters`; also the spare buffers (or None)."""
        it = iter(iters)
        bufs: list[SSAValue] = []
        dims: list[list[Dim] | None] = []
        spares: list[SSAValue] = []
        for s in self.slots:
            if s.spare is not None:
                bufs.append(next(it))
                spares.append(next(it))
                dims.append(None)
            elif s.kind == SlotKind.MOVE:
                bufs.append(next(it))
                dims.append([next(it) if n == DYN else d for d, n in zip(s.dims, _shape(s.first.type))])
            else:
                bufs.append(s.first)
                dims.append(s.dims)
        return bufs, dims, spares

    def iteration(self, iters: Sequence[SSAValue], lead_bufs: Sequence[SSAValue]) -> list[SSAValue]:
        """Lower the body for one iteration; returns the next loop-carried values."""
        L = self.L
        bufs, dims, spares = self.bind(iters)
        spare_of = iter(spares)
        dests: list[SSAValue | None] = []
        spare: list[SSAValue | None] = []
        for s, buf in zip(self.slots, bufs):
            sp = next(spare_of) if s.spare is not None else None
            spare.append(sp)
            dests.append(buf if s.kind == SlotKind.INPLACE else sp if s.kind == SlotKind.PINGPONG else None)
        yielded, local = L.lower_region(self.body, [*lead_bufs, *bufs], [None] * len(lead_bufs) + dims, dests)
        values = [L.canon(v) for v in self.body.last_op.operands]  # type: ignore[union-attr]
        nxt: list[SSAValue] = []
        adopted: set[SSAValue] = set()
        for s, buf, sp, src, v, adopt in zip(self.slots, bufs, spare, yielded, values, self.plan.adopt):
            if s.kind in (SlotKind.SAME, SlotKind.INPLACE):
                if src is not buf:
                    L.copy(src, buf, L.dims_of(v))
            elif sp is not None:
                if src is not sp:
                    L.copy(src, sp, L.dims_of(v))
                nxt += [sp, buf]
            else:
                if adopt:
                    adopted.add(src)
                else:
                    fresh = L.alloc(_memref_type(v.type), L.dims_of(v), hoist=False)  # type: ignore[arg-type]
                    L.copy(src, fresh, L.dims_of(v))
                    src = fresh
                nxt += [src, *[L.index(d) for d, n in zip(L.dims_of(v), _shape(v.type)) if n == DYN]]
        for buf in local - adopted:
            L.free(buf)
        for s, buf, consumed in zip(self.slots, bufs, self.plan.consumed):
            if s.kind == SlotKind.MOVE and not consumed:
                L.free(buf)
        if self.flag:
            nxt.append(L.v(arith.XOrIOp, iters[-1], L.const(True, i1)))
        return nxt

    def finish(self, results: Sequence[SSAValue]) -> None:
        """After the loop: the op's results are in the first buffers (copied
        back from the spare ones when they swapped an odd number of times)."""
        L = self.L
        bufs, dims, _ = self.bind(results)
        swapped = [s for s in self.slots if s.spare is not None]
        if swapped:
            def back() -> None:
                for s in swapped:
                    L.copy(s.spare, s.first, s.dims)  # type: ignore[arg-type]

            L.if_(results[-1], back)
            for s in swapped:
                L.free(s.spare)  # type: ignore[arg-type]
        for r, s, buf, d in zip(self.op.results, self.slots, bufs, dims):
            if s.kind == SlotKind.MOVE:
                L.buf[r], L.dims[r] = buf, list(d)  # type: ignore[arg-type]
            else:
                L.buf[r] = s.first


def _for(L: _Lowering, op: msir.ForOp) -> None:
    lb, ub, step = (_scalar(L, v) for v in (op.lower, op.upper, op.step))
    carry = _Carry(L, op, op.inits, op.body.block)
    counter = L.alloc(MemRefType(i64, []), [])
    # trip count = max(0, ceil((ub - lb) / step)), for either sign of step; a
    # zero step is reported (Python's range raises ValueError) and runs no
    # iteration instead of dividing by zero
    zero_step = L.cmpi("eq", step, L.const(0, i64))
    L.report(ERR_RANGE_STEP, zero_step)
    divisor = L.select(zero_step, L.const(1, i64), step)
    span = L.v(arith.SubiOp, ub, lb)
    adjust = L.select(L.cmpi("sgt", step, L.const(0, i64)), L.const(-1, i64), L.const(1, i64))
    trips = L.v(arith.DivSIOp, L.v(arith.AddiOp, span, L.v(arith.AddiOp, step, adjust)), divisor)
    trips = L.select(zero_step, L.const(0, i64), L.v(arith.MaxSIOp, trips, L.const(0, i64)))
    types = [x.type for x in carry.inits]
    blk = Block(arg_types=[INDEX, *types])
    loop = L.emit(scf.ForOp, [L.index(0), L.to_index(trips), L.index(1), *carry.inits], types, regions=[Region(blk)])
    outer = L.block
    with L.hoisting(loop):
        L.block = blk
        k = L.v(arith.IndexCastOp, blk.args[0], type=i64)
        L.store(L.v(arith.AddiOp, lb, L.v(arith.MuliOp, k, step)), counter, [])
        L.emit(scf.YieldOp, carry.iteration(list(blk.args[1:]), [counter]))
        L.block = outer
    carry.finish(list(loop.results))
    L.free(counter)


def _while(L: _Lowering, op: msir.WhileOp) -> None:
    carry = _Carry(L, op, op.inits, op.body.block)
    types = [x.type for x in carry.inits]
    before, after = Block(arg_types=types), Block(arg_types=types)
    counter = _poll_counter(L) if _is_scalar_work(op) else None
    loop = L.emit(scf.WhileOp, carry.inits, types, regions=[Region(before), Region(after)])
    outer = L.block
    with L.hoisting(loop):
        L.block = before
        bufs, dims, _ = carry.bind(list(before.args))
        (cond_buf,), local = L.lower_region(op.cond_region.block, bufs, dims)
        cond = L.load(cond_buf, [])
        for buf in local:
            L.free(buf)
        cond = _unless_interrupted(L, cond, counter)
        L.emit(scf.ConditionOp, [cond, *before.args])
        L.block = after
        L.emit(scf.YieldOp, carry.iteration(list(after.args), []))
        L.block = outer
    carry.finish(list(loop.results))


INTERRUPT_POLL_PERIOD = 1024
"""A `while` whose iterations are scalar work polls for Ctrl-C once every this
many iterations (a power of two): a call per iteration made such a loop up to
four times slower. One whose iterations touch arrays or call functions polls
at every iteration (the call is noise beside its work, and a long iteration
must not delay Ctrl-C by a thousand more)."""


def _is_scalar_work(op: msir.WhileOp) -> bool:
    """Whether each iteration of `op` is a few scalar operations: no array
    value and no call in its condition or body."""
    for inner in (*op.cond_region.walk(), *op.body.walk()):
        if isinstance(inner, func.CallOp) or inner.name in ("msir.call", "msir.apply"):
            return False
        if any(isinstance(r.type, TensorType) and r.type.get_shape() for r in inner.results):
            return False
    return True


def _poll_counter(L: _Lowering) -> SSAValue:
    """The iterations of one `while` since its last poll: a scalar `memref.alloca`
    (in the function's entry, so LLVM keeps it in a register), zeroed before the loop."""
    op = memref.AllocaOp.create(operands=[], result_types=[MemRefType(i32, [])],
                                properties={"operandSegmentSizes": _alloc_segments(0)})
    op.location = L.loc
    L.block.add_op(op)
    counter = op.results[0]
    L.store(L.const(0, i32), counter, [])
    return counter


def _unless_interrupted(L: _Lowering, cond: SSAValue, counter: SSAValue | None) -> SSAValue:
    """`cond` and not Ctrl-C: at every test of its condition (with a `counter`:
    every INTERRUPT_POLL_PERIOD tests) a `while` calls `@__msir_interrupted`
    and, once SIGINT arrived, reports ERR_INTERRUPTED at its line and ends
    (`msir.lowering.interrupt`)."""
    L.mod.uses_interrupt = True

    def poll() -> list[SSAValue]:
        return [L.emit(func.CallOp, [], [i32], {"callee": SymbolRefAttr(INTERRUPT_FUNC)}).results[0]]

    if counter is None:
        (flag,) = poll()
    else:
        count = L.v(arith.AddiOp, L.load(counter, []), L.const(1, i32))
        L.store(count, counter, [])
        due = L.cmpi("eq", L.v(arith.AndIOp, count, L.const(INTERRUPT_POLL_PERIOD - 1, i32)), L.const(0, i32))
        (flag,) = L.if_(due, poll, lambda: [L.const(0, i32)], types=[i32])
    interrupted = L.cmpi("ne", flag, L.const(0, i32))
    L.report(ERR_INTERRUPTED, interrupted)
    return L.v(arith.AndIOp, cond, L.v(arith.XOrIOp, interrupted, L.const(1, i1)))


TAPE_MIN_ROWS = 4
"""The capacity a tape grows to from 0 rows; it doubles whenever a push finds it full."""


def _tape_alloc(L: _Lowering, op: msir.TapeAllocOp) -> None:
    rows = L.to_index(_scalar(L, op.rows))
    dims: list[Dim] = [rows, *_shape(op.result.type)[1:]]
    L.buf[op.result] = L.alloc(_memref_type(op.result.type), dims, hoist=False)  # type: ignore[arg-type]
    L.dims[op.result] = dims


def _tape_set(L: _Lowering, op: msir.TapeSetOp) -> None:
    tape, value = L.get(op.tape), L.get(op.value)
    k = L.to_index(_scalar(L, op.index))
    L.loops(L.dims_of(op.value), lambda ivs, _: L.store(L.load(value, ivs), tape, [k, *ivs]))


def _grow(L: _Lowering, buf: SSAValue, length: SSAValue, rest: Sequence[Dim], capacity: SSAValue,
          free_old: bool) -> list[SSAValue]:
    """A buffer of max(2 * capacity, TAPE_MIN_ROWS) rows holding the first
    `length` rows of `buf` (freed when `free_old`)."""
    rows = L.v(arith.MaxSIOp, L.v(arith.MuliOp, capacity, L.index(2)), L.index(TAPE_MIN_ROWS))
    new = L.alloc(MemRefType(buf.type.element_type, [DYN, *buf.type.get_shape()[1:]]), [rows, *rest], hoist=False)  # type: ignore[attr-defined]
    L.copy(buf, new, [length, *rest])
    if free_old:
        L.free(buf)
    return [new]


def _room(L: _Lowering, buf: SSAValue, length: SSAValue, rest: Sequence[Dim]) -> SSAValue:
    """`buf` when it has a row past `length`, else `_grow(buf)` (amortised O(1))."""
    capacity = L.emit(memref.DimOp, [buf, L.index(0)], [INDEX]).results[0]
    full = L.cmpi("uge", length, capacity)
    return L.if_(full, lambda: _grow(L, buf, length, rest, capacity, True), lambda: [buf], [buf.type])[0]


def _row_view(L: _Lowering, buf: SSAValue, k: SSAValue, dims: Sequence[Dim], type_: Attribute) -> SSAValue:
    """Row `k` of a tape's buffer as a buffer of its own (same data)."""
    strides: list[Dim] = []
    row: Dim = 1
    for d in reversed(dims):
        strides.insert(0, row)
        row = L.index_mul(row, d)
    offset = L.v(arith.MuliOp, k, L.index(row))
    view = memref.ReinterpretCastOp.from_dynamic(buf, [offset], list(dims), strides, _memref_type(type_))
    view.location = L.loc
    L.block.add_op(view)
    return view.result


def _tape_push(L: _Lowering, op: msir.TapePushOp) -> None:
    """Row `length` of the tape's buffer, whose first dim is its capacity (rows
    past the length are unused), as the plan says (`bufferize.PushMode`):
    appended in place, through a buffer of twice the capacity when it is full;
    or into a copy; or, when the producer of the row already wrote it there
    (`_reserve_row`), nothing is left to do."""
    buf, dims = L.get(op.tape), L.dims_of(op.tape)
    length, rest = L.index(dims[0]), dims[1:]
    mode = L.plan.pushes[op]
    if mode == PushMode.WRITTEN:
        new = buf
    elif mode == PushMode.IN_PLACE:
        new = _room(L, buf, length, rest)
    else:
        (new,) = _grow(L, buf, length, rest, length, False)
    if mode != PushMode.WRITTEN:
        value = L.get(op.value)
        L.loops(rest, lambda ivs, _: L.store(L.load(value, ivs), new, [length, *ivs]))
    L.buf[op.result], L.dims[op.result] = new, [L.index_add(length, 1), *rest]


def _reserve_row(L: _Lowering, push: msir.TapePushOp) -> None:
    """Before the op computing `push`'s row: make room in the tape (which dies at
    the push and is the function's or the loop's) and let the op write the row
    there, so the push copies nothing."""
    tape = L.canon(push.tape)
    dims = L.dims[tape]
    length, rest = L.index(dims[0]), dims[1:]
    new = _room(L, L.buf[tape], length, rest)
    L.buf[tape] = new
    L.dest[push.value] = _row_view(L, new, length, rest, push.value.type)


def _tape_add(L: _Lowering, op: msir.TapeAddOp) -> None:
    tape, value = L.get(op.tape), L.get(op.value)
    k = L.to_index(_scalar(L, op.index))
    L.loops(L.dims_of(op.value), lambda ivs, _: L.store(
        L.add(L.load(tape, [k, *ivs]), L.load(value, ivs)), tape, [k, *ivs]))


def _tape_zeros(L: _Lowering, op: msir.TapeZerosOp) -> None:
    dims = L.dims_of(op.like)
    _zero_fill(L, L.result(op.result, dims), dims, op.result.type.element_type)  # type: ignore[attr-defined]


def _tape_get(L: _Lowering, op: msir.TapeGetOp) -> None:
    """Row `%k`: a view of the tape's buffer (no copy) when the tape is an
    argument of a function that writes no tape (an adjoint reading the tapes of
    its forward), which outlives every use of the row; else a copy."""
    tape = L.get(op.tape)
    k = L.to_index(_scalar(L, op.index))
    dims = L.dims_of(op.tape)[1:]
    if op in L.plan.views:
        L.buf[op.result], L.dims[op.result] = _row_view(L, tape, k, dims, op.result.type), list(dims)
        return
    out = L.result(op.result, dims)
    L.loops(dims, lambda ivs, _: L.store(L.load(tape, [k, *ivs]), out, ivs))


EMITTERS: dict[type[Operation], Callable[[_Lowering, Operation], None]] = {
    **{cls: _elementwise(fn) for cls, fn in SCALAR.items()},
    msir.CompareOp: _compare,
    msir.CastOp: _cast_op,
    msir.ConstantOp: _constant,
    msir.IotaOp: _iota,
    msir.BroadcastToOp: _broadcast_to,
    msir.ReshapeOp: _reshape,
    msir.TransposeOp: _transpose,
    msir.SliceOp: _slice,
    msir.TakeOp: _take,
    msir.ScatterSliceOp: _scatter_slice,
    msir.ScatterAddOp: _scatter_add,
    msir.CompressOp: _compress,
    msir.RampOp: _ramp,
    msir.ExpandOp: _expand,
    msir.StopGradientOp: _stop_gradient,
    msir.CheckOp: _check,
    msir.ConcatenateOp: _concatenate,
    msir.StackOp: _stack,
    msir.ReduceSumOp: _reduce,
    msir.ReduceProdOp: _reduce,
    msir.ReduceMaxOp: _reduce,
    msir.ReduceMinOp: _reduce,
    msir.ReduceMeanOp: _reduce,
    msir.ArgmaxOp: _argreduce,
    msir.ArgminOp: _argreduce,
    msir.MatmulOp: _matmul,
    msir.FusionOp: _fusion,
    msir.IfOp: _if,
    msir.ForOp: _for,
    msir.WhileOp: _while,
    msir.TapeAllocOp: _tape_alloc,
    msir.TapeSetOp: _tape_set,
    msir.TapePushOp: _tape_push,
    msir.TapeGetOp: _tape_get,
    msir.TapeAddOp: _tape_add,
    msir.TapeZerosOp: _tape_zeros,
    func.CallOp: _call,
    func.ReturnOp: _return,
}
"""The lowering of every supported op, by op class."""


# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------


def _schedule(ops: list[Operation], folded: set[Operation]) -> tuple[
        bufferize.Schedule, dict[Operation, tuple[msir.MatmulOp, SSAValue, float]],
        dict[msir.FusionOp, tuple[msir.MatmulOp, int, int]]]:
    """This pass's choices for a function body, which its buffers follow: the
    matmul updates (their product computed by the update's BLAS call), the
    matmul epilogues (their product computed into the fusion's result) and the
    row groups."""
    updates = _gemm_updates(ops, folded)
    products: dict[Operation, Operation] = {op: mm for op, (mm, _, _) in updates.items()}
    epilogues = _gemm_epilogues(ops, folded | set(products.values()) | set(products))
    products.update((op, mm) for op, (mm, _, _) in epilogues.items())
    groups = _row_groups(ops, folded | set(products.values()) | set(products))
    written_first = {op: host for op, (_, _, host) in epilogues.items()}
    return bufferize.Schedule(products, groups, written_first), updates, epilogues


def lower_module(module: ModuleOp) -> None:
    """Rewrite `module` in place to the loops level (see the module docstring)."""
    widen_half(module)
    plan = bufferize.ModulePlan(module, PASS_NAME)
    mod = _Module(module, plan)
    funcs = [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == ERROR_FUNC:
            continue
        if not f.body.blocks:
            sig = mod.sigs[f.sym_name.data]
            f.function_type = FunctionType.from_lists(sig.inputs, sig.results)
            f.attributes[NUM_OUTPUTS_ATTR] = IntegerAttr(len(sig.out_positions), i64)
            continue
        planner = bufferize.FunctionPlanner(plan, f)
        schedule, updates, epilogues = _schedule(planner.body_ops, planner.folded)
        new = _Lowering(mod, f, planner.plan(schedule), updates, epilogues).run()
        module.body.block.insert_op_before(new, f)
        module.body.block.detach_op(f)
    if mod.uses_error and not any(f.sym_name.data == ERROR_FUNC for f in funcs):
        decl = func.FuncOp(ERROR_FUNC, ([i32, i64], []), Region(), "private")
        module.body.block.add_op(decl)
    if mod.uses_interrupt and not any(f.sym_name.data == INTERRUPT_FUNC for f in funcs):
        module.body.block.add_op(func.FuncOp(INTERRUPT_FUNC, ([], [i32]), Region(), "private"))
    if mod.uses_raise and not any(f.sym_name.data == RAISE_FUNC for f in funcs):
        module.body.block.add_op(func.FuncOp(RAISE_FUNC, ([i32, i64, *[i64] * RAISE_SLOTS], []), Region(), "private"))
    module.attributes[SITES_ATTR] = ArrayAttr([StringAttr(s) for s in mod.sites])


def _recursive_functions(calls: dict[str, set[str]]) -> set[str]:
    """The functions on a cycle of the call graph `calls` (function -> callees)."""
    found = set()
    for name in calls:
        seen, stack = set(), list(calls[name])
        while stack:
            callee = stack.pop()
            if callee == name:
                found.add(name)
                break
            if callee not in seen:
                seen.add(callee)
                stack.extend(calls.get(callee, ()))
    return found


@dataclass(frozen=True)
class ConvertMsirToLoops(ModulePass):
    """Bufferise msir tensor code into scf loops over memrefs (see the module docstring)."""

    name = PASS_NAME

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_module(op)
