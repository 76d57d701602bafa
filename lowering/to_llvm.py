"""Pass `msir-lower-to-llvm`: loops-level IR to the `llvm` dialect in one walk.

Contract
--------
Input: a `builtin.module` of `func.func` ops (as produced by
`convert-msir-to-loops`) whose bodies use only `func` (return, call), `scf`
(for, if, while, condition, yield), `arith` (scalar ops), `math` and `memref`
(alloc, alloca, dealloc, load, store, dim, cast, and reinterpret_cast with
row-major strides: a view from an element offset with other sizes) on
identity-layout memrefs of
f16, bf16, f32, f64, i1, i32, i64 or index, of any rank (0 included), with static or
dynamic dims. Errors are reported by calls to the private declaration
`@__msir_error(i32 code, i64 site)`.

Output: a module of `llvm.mlir.global`, `llvm.func` and nothing else, ready for
`msir.lowering.llvm_text` (and xDSL's `convert_module`, which drops the
function attributes and loop hints):

* Functions, their arguments and results follow the host ABI of
  `msir.lowering.llvm_abi` (memrefs flattened into a pointer and their dynamic
  dims, several results packed in a struct, `noalias` pointers), and every
  public function `@f` has an entry wrapper `i32 @f__entry(ptr args, ptr dims,
  ptr results)` for the JIT. The module defines the runtime globals
  `@__msir_status`, `@__msir_site` and `@__msir_error` (first error only).
* Half precision: f16 is LLVM's `half`, bf16 an `i16`; convert-msir-to-loops
  leaves them only loads, stores, selects, constants and `arith.extf` /
  `arith.truncf` to and from f32 (and f64 -> f16), which become F16C
  instructions or the integer code of `msir.lowering.llvm_half`.
* Addresses are `llvm.getelementptr inbounds` on a row-major linearised index
  (never ptrtoint/inttoptr), so LLVM's loop vectoriser sees affine accesses.
* Math ops become `llvm.call_intrinsic` with fully type-suffixed names
  (`llvm.exp.f32`); functions without an intrinsic call libm (`tanhf`, `tanh`).
  Inline vector math: exp, tanh and log (f32, f64) are emitted as branch-free
  range-reduced polynomials (`msir.lowering.vector_math`, which states their
  accuracy) where pass option `math_impl` (default `auto`: per function, as
  measured on this project's machine, within a per-function compile-time
  budget) chooses them; the loop vectoriser vectorises them inline.
  Otherwise, where glibc's libmvec has vector variants for the target ISA
  (pass option `vector_abi`, default `host`), every transcendental math op
  becomes a libm call (`expf`) whose declaration maps it to its vector
  variants for the loop vectoriser (`msir.lowering.vector_abi`); without
  variants, ops with an LLVM intrinsic use it. Every libm declaration is
  `memory(none)`: msir never reads errno.
* Reductions: an `arith.addf`/`arith.mulf` that updates a loop-carried `scf.for`
  value (`yield addf(acc, x)`) gets the `reassoc` fast-math flag, and only that
  op: LLVM vectorises (and reorders) the accumulation. Every other float op
  keeps strict IEEE semantics.
* Parallel loops (pass option `parallel`, default on): a large `scf.for` whose
  iterations are independent is outlined, outermost first, into a function
  run in chunks by msir's thread pool through `__msir_parallel_for`, its
  reductions combined in chunk order (`msir.lowering.parallel_outline` states
  which loops and how). Loops inside an outlined body stay inline. A product
  followed by its epilogue loop (`msir.gemm_epilogue`) may become one call
  that runs the outlined epilogue on each chunk of rows after its gemm
  (`parallel_outline.epilogue_plan`).
* Loop hints: the latch of an innermost `scf.for` without carried values
  whose iteration costs at least `FOLD_TAIL_MIN_COST` work units is marked
  `msir.fold_tail` (`llvm_abi`, "Loop hints"): LLVM masks its last partial
  vector instead of compiling a scalar copy of the body.
* `memref.alloc` calls `__msir_alloc(max(64, round_up(bytes, 64)))` and
  `memref.dealloc` `__msir_free` (msir's caching allocator,
  `lowering.allocator`; 64-byte aligned); a null result (or a byte count that
  overflows) records error 3 at the op's `msir.site` (-1 without one) and
  returns from the function at once with zero results. After a call to a
  function that can do that, the caller checks the status and returns too, so
  no code runs on a null buffer.
* Recursion: before a call marked `msir.stack_check` (convert-msir-to-loops marks
  calls that may recurse), the native stack used since the entry wrapper (which
  records its frame address in `@__msir_stack_base`, a global the module has
  only then) is compared with `llvm_abi.STACK_LIMIT`; beyond it, error 4 is
  recorded at the call's `msir.site` and the function returns at once, as on a
  failed allocation, so a recursion too deep for the stack raises instead of
  crashing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, math, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    FileLineColLoc,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from msir.errors import CompileError, SourceLoc
from msir.lowering import allocator, llvm_half, parallel_outline, vector_math
from msir.lowering import vector_abi as vector_abi_module
from msir.lowering.llvm_abi import (
    ALLOC_ALIGN,
    ALLOC_ATTRS,
    ERR_MEMORY,
    ERR_RECURSION,
    FOLD_TAIL_ATTR,
    FREE_ATTRS,
    STACK_BASE,
    STACK_LIMIT,
    STATUS,
    Mem,
    Signature,
    bfloat16_bits,
    byte_size,
    entry_wrapper,
    flat_types,
    is_public,
    memory_type,
    runtime_globals,
    scalar_type,
    shared_params,
    signature,
    stack_address,
)
from msir.lowering.llvm_ops import (
    I1,
    I8,
    I32,
    I64,
    NO_FASTMATH,
    NSW,
    PTR,
    REASSOC,
    icmp,
    intrinsic_suffix,
    llvm_gep,
    llvm_load,
    llvm_store,
)
from msir.lowering.loops_abi import ERROR_FUNC, INTERRUPT_FUNC, MESSAGE_ATTR, RAISE_FUNC, SITE_ATTR, STACK_CHECK_ATTR

# Byte counts above this are treated as failed allocations; it also keeps the
# round-up to 64 bytes from overflowing.
MAX_ALLOC_BYTES = 1 << 48
IMPOSSIBLE_ALLOC = 1 << 62

INTERRUPT_POLL_ATTRS = ArrayAttr(
    [StringAttr("nounwind"), StringAttr("willreturn"),
     ArrayAttr([StringAttr("memory"), StringAttr("inaccessiblemem: readwrite")])]
)
"""`@__msir_interrupted` touches only memory the module cannot see: a loop that
polls it still keeps its values in registers (an opaque call would make LLVM
reload and store them around it), and, having effects, it is not hoisted."""

Value = SSAValue | Mem
"""A lowered value: an LLVM scalar, or a memref's pointer and sizes."""


def _loc_of(op: Operation) -> SourceLoc | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


# ---------------------------------------------------------------------------
# The module-level lowering
# ---------------------------------------------------------------------------


class ModuleLowering:
    """State shared by the functions of one module: signatures, declarations."""

    def __init__(self, module: ModuleOp, vector_abi: str = "host", math_impl: str = "auto",
                 parallel: bool = True):
        self.module = module
        self.parallel = parallel
        self.outlined: list[llvm.FuncOp] = []  # parallel loop bodies and tasks
        vector_abi_module.vector_isas(vector_abi)  # validates
        if math_impl not in vector_math.MATH_IMPLS:
            raise CompileError(
                f"msir-lower-to-llvm: unknown math_impl '{math_impl}' "
                f"(expected one of {', '.join(vector_math.MATH_IMPLS)})"
            )
        self.vector_abi = vector_abi
        self.math_impl = math_impl
        self.passthrough: dict[str, ArrayAttr] = {INTERRUPT_FUNC: INTERRUPT_POLL_ATTRS}
        self.funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
        self.sigs = {f.sym_name.data: signature(f) for f in self.funcs}
        self.callees = {
            op.callee.string_value()
            for f in self.funcs
            for op in f.walk()
            if isinstance(op, func.CallOp)
        }
        self.checks_stack = any(
            STACK_CHECK_ATTR in op.attributes for f in self.funcs for op in f.walk() if isinstance(op, func.CallOp)
        )
        self.may_fail = self._functions_that_may_fail()
        self.externals: dict[str, llvm.LLVMFunctionType] = {}
        self.messages: dict[str, str] = {}  # a failed check's message text -> its constant global
        self.call_prototypes: dict[tuple, tuple[type[Operation], dict[str, Attribute], list[Attribute]]] = {}

    def call(self, callee: str, args: Sequence[SSAValue], ret: Attribute | None, intrinsic: bool = False) -> Operation:
        """`llvm.CallOp(callee, *args, return_type=ret)`, or with `intrinsic`
        `llvm.CallIntrinsicOp(callee, args, [ret])`: built by its constructor
        the first time per callee and types, then by `create` with that op's
        properties. The constructors' generic argument lists cost ~60 us a
        call, ~3 ms of lowering a 200-op elementwise function (W8)."""
        key = (intrinsic, callee, tuple(a.type for a in args), ret)
        prototype = self.call_prototypes.get(key)
        if prototype is not None:
            cls, properties, result_types = prototype
            return cls.create(operands=args, result_types=result_types, properties=properties)
        op = llvm.CallIntrinsicOp(callee, args, [ret]) if intrinsic else llvm.CallOp(callee, *args, return_type=ret)
        self.call_prototypes[key] = (type(op), dict(op.properties), [r.type for r in op.results])
        return op

    def message_global(self, text: str) -> str:
        """The name of the constant global holding `text`, NUL-terminated (one per distinct text)."""
        return self.messages.setdefault(text, f"__msir_message_text{len(self.messages)}")

    def _functions_that_may_fail(self) -> set[str]:
        """Functions that can return early because an allocation failed."""
        direct: dict[str, set[str]] = {}
        failing: set[str] = set()
        for f in self.funcs:
            name = f.sym_name.data
            direct[name] = set()
            for op in f.walk():
                if isinstance(op, memref.AllocOp):
                    failing.add(name)
                elif isinstance(op, func.CallOp):
                    direct[name].add(op.callee.string_value())
                    if STACK_CHECK_ATTR in op.attributes:
                        failing.add(name)
        changed = True
        while changed:
            changed = False
            for name, called in direct.items():
                if name not in failing and called & failing:
                    failing.add(name)
                    changed = True
        return failing

    def declare(self, name: str, args: Sequence[Attribute], ret: Attribute) -> None:
        if name not in self.externals:
            self.externals[name] = llvm.LLVMFunctionType(args, ret)

    def declare_math(self, symbol: str, n_args: int, t: Attribute) -> None:
        """Declare libm's `symbol` (pure) with its vector variants (`vector_abi`)."""
        if symbol in self.passthrough:
            return
        self.declare(symbol, [t] * n_args, t)
        attrs, variants = vector_abi_module.libm_function(symbol, n_args, t, self.vector_abi)
        for vector_name, vt in variants:
            self.declare(vector_name, [vt] * n_args, vt)
            self.passthrough[vector_name] = vector_abi_module.PURE
        self.passthrough[symbol] = attrs

    def run(self) -> None:
        raises = RAISE_FUNC in self.callees
        new_ops = runtime_globals(self.checks_stack, raises)
        for f in self.funcs:
            name = f.sym_name.data
            if name in (ERROR_FUNC, RAISE_FUNC):
                continue
            sig = self.sigs[name]
            if not f.body.blocks:
                self.declare(name, sig.flat_args, sig.ret_type)
                continue
            new_ops.append(FunctionLowering(self, f, sig).run())
            new_ops += self.outlined
            self.outlined.clear()
            if is_public(f):
                new_ops.append(entry_wrapper(f, sig, self.checks_stack))
        for text, name in self.messages.items():
            data = text + "\0"
            new_ops.append(llvm.GlobalOp(llvm.LLVMArrayType(len(data.encode()), I8), name,
                                         "internal", constant=True, value=StringAttr(data)))
        for name, ftype in self.externals.items():
            props = {"passthrough": self.passthrough[name]} if name in self.passthrough else None
            new_ops.append(
                llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external"), other_props=props)
            )
        # The old ops are only detached: no new op refers to their values, and
        # erasing would walk every op again to drop uses.
        for op in list(self.module.ops):
            op.detach()
        self.module.body.block.add_ops(new_ops)


# ---------------------------------------------------------------------------
# One function
# ---------------------------------------------------------------------------


class FunctionLowering:
    """Builds the body of one `llvm.func` from one `func.func`.

    The entry block is a prologue holding constants and static allocas (so they
    dominate every use and allocas do not grow the stack in loops); it branches
    to the block where the function body starts.
    """

    outlined = False
    """True for the body of a parallel loop (never parallel inside again)."""

    def __init__(self, m: ModuleLowering, f: func.FuncOp, sig: Signature):
        self.m = m
        self.f = f
        self.sig = sig
        self.shared_params = shared_params(f, sig) if sig.arg_types else set()
        """Flat parameters (pointers) that may be one buffer: an output and the
        donated input it may alias (`msir.alias_of`), never `noalias`."""
        self.vals: dict[SSAValue, Value] = {}
        self.ints: dict[SSAValue, int] = {}
        self.epilogues: dict[scf.ForOp, tuple] = {}
        """Epilogue loops whose product's call is deferred to them (`_call`)."""
        self.consts: dict[tuple, SSAValue] = {}
        self.prologue = Block(arg_types=sig.flat_args)
        self.region = Region([self.prologue])
        self.block = Block()
        self.bail_block: Block | None = None
        # float accumulations of scf.for reductions: lowered with `reassoc`
        self.reductions: set[Operation] = set()
        self.inline_math_candidates = vector_math.inline_candidates(f)

    # -- building ----------------------------------------------------------

    def run(self) -> llvm.FuncOp:
        f = self.f
        start = self.block
        self.region.add_block(start)
        args = iter(self.prologue.args)
        entry = f.body.blocks.first
        assert entry is not None
        for arg, t in zip(entry.args, self.sig.arg_types):
            self.vals[arg] = self.unflatten(t, args)
        self.lower_ops(entry)
        self.prologue.add_op(llvm.BrOp(start))
        name = f.sym_name.data
        public = is_public(f)
        props: dict[str, Attribute | None] = {}
        if public and name not in self.m.callees:
            no_alias = DictionaryAttr({"llvm.noalias": UnitAttr()})
            props["arg_attrs"] = ArrayAttr(
                [no_alias if t == PTR and k not in self.shared_params else DictionaryAttr({})
                 for k, t in enumerate(self.sig.flat_args)]
            )
        return llvm.FuncOp(
            name,
            llvm.LLVMFunctionType(self.sig.flat_args, self.sig.ret_type),
            linkage=llvm.LinkageAttr("external" if public else "internal"),
            body=self.region,
            other_props=props,
        )

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def emit(self, op: Operation) -> None:
        self.block.add_op(op)

    def start_block(self, block: Block) -> None:
        self.region.add_block(block)
        self.block = block

    def const(self, value: int | float, t: Attribute) -> SSAValue:
        """A constant of LLVM type `t`, created once in the prologue."""
        if isinstance(t, IntegerType):
            width = t.width.data
            value = int(value) & ((1 << width) - 1)
            if width > 1 and value >> (width - 1):
                value -= 1 << width
            key = (t, value)
        else:
            key = (t, float(value).hex())
        found = self.consts.get(key)
        if found is not None:
            return found
        attr = IntegerAttr(value, t) if isinstance(t, IntegerType) else FloatAttr(value, t)
        op = llvm.ConstantOp(attr, t)
        self.prologue.add_op(op)
        result = op.results[0]
        self.consts[key] = result
        if isinstance(t, IntegerType):
            self.ints[result] = value
        return result

    def index(self, v: int | SSAValue) -> SSAValue:
        return self.const(v, I64) if isinstance(v, int) else v

    def known(self, v: int | SSAValue) -> int | None:
        return v if isinstance(v, int) else self.ints.get(v)

    def intrinsic(self, name: str, args: Sequence[SSAValue], ret: Attribute) -> SSAValue:
        return self.add(self.m.call(name, args, ret, intrinsic=True))

    def call_external(self, name: str, args: Sequence[SSAValue], ret: Attribute | None):
        self.m.declare(name, [a.type for a in args], ret or llvm.LLVMVoidType())
        return self.add_call(self.m.call(name, args, ret))

    def add_call(self, op: llvm.CallOp) -> SSAValue | None:
        self.block.add_op(op)
        return op.results[0] if op.results else None

    # -- values ------------------------------------------------------------

    def get(self, v: SSAValue) -> SSAValue:
        value = self.vals[v]
        assert isinstance(value, SSAValue)
        return value

    def mem(self, v: SSAValue) -> Mem:
        value = self.vals[v]
        assert isinstance(value, Mem)
        return value

    def flatten(self, value: Value, t: Attribute) -> list[SSAValue]:
        if isinstance(t, MemRefType):
            assert isinstance(value, Mem)
            dyn = [self.index(s) for s, d in zip(value.sizes, t.get_shape()) if d < 0]
            return [value.ptr, *dyn]
        assert isinstance(value, SSAValue)
        return [value]

    def flatten_all(self, values: Sequence[SSAValue]) -> list[SSAValue]:
        return [x for v in values for x in self.flatten(self.vals[v], v.type)]

    @staticmethod
    def unflatten(t: Attribute, it) -> Value:
        if isinstance(t, MemRefType):
            ptr = next(it)
            sizes = tuple(next(it) if d < 0 else d for d in t.get_shape())
            return Mem(ptr, sizes)
        return next(it)

    def bind(self, results: Sequence[SSAValue], flat: Sequence[SSAValue]) -> None:
        it = iter(flat)
        for r in results:
            self.vals[r] = self.unflatten(r.type, it)

    def flat_block(self, types: Sequence[Attribute]) -> Block:
        return Block(arg_types=[x for t in types for x in flat_types(t)])

    def outlined_child(self, sig: Signature) -> FunctionLowering:
        """The lowering of a parallel loop body of this function into a function
        of its own with signature `sig` (`parallel_outline`)."""
        child = FunctionLowering(self.m, self.f, sig)
        child.outlined = True
        return child

    # -- walking -----------------------------------------------------------

    def lower_ops(self, block: Block) -> Operation | None:
        """Lower `block`'s ops into the current block; return an scf terminator."""
        for op in block.ops:
            if isinstance(op, (scf.YieldOp, scf.ConditionOp)):
                return op
            lower = LOWERINGS.get(type(op))
            if lower is None:
                raise CompileError(
                    f"msir-lower-to-llvm: unsupported op '{op.name}'", _loc_of(op)
                )
            if type(op) in _HALF_ARITHMETIC and _half_type(op) is not None:
                raise CompileError(
                    f"msir-lower-to-llvm: '{op.name}' on {_half_type(op)} is not supported: half precision "
                    "computes in f32 (arith.extf, the op, arith.truncf), as convert-msir-to-loops emits it",
                    _loc_of(op),
                )
            try:
                lower(self, op)
            except CompileError:
                raise
            except Exception as e:
                raise CompileError(
                    f"msir-lower-to-llvm: failed to lower '{op.name}': {e}", _loc_of(op)
                ) from e
        return None

    def bail(self) -> Block:
        """A block returning zero values at once (after an allocation failure)."""
        if self.bail_block is None:
            block = Block()
            ret_t = self.sig.ret_type
            if isinstance(ret_t, llvm.LLVMVoidType):
                block.add_op(llvm.ReturnOp())
            elif isinstance(ret_t, (llvm.LLVMStructType, llvm.LLVMPointerType)):
                zero = llvm.ZeroOp.create(result_types=[ret_t])
                block.add_ops([zero, llvm.ReturnOp(zero.results[0])])
            else:
                zero = llvm.ConstantOp(_zero_attr(ret_t), ret_t)
                block.add_ops([zero, llvm.ReturnOp(zero.results[0])])
            self.region.add_block(block)
            self.bail_block = block
        return self.bail_block

    def branch_unless(self, failed: SSAValue, target: Block) -> None:
        cont = Block()
        self.emit(llvm.CondBrOp(failed, target, [], cont, []))
        self.start_block(cont)

    # -- addresses ---------------------------------------------------------

    def imul(self, a: int | SSAValue, b: int | SSAValue) -> int | SSAValue:
        ka, kb = self.known(a), self.known(b)
        if ka is not None and kb is not None:
            return ka * kb
        if ka == 0 or kb == 0:
            return 0
        if ka == 1:
            return b
        if kb == 1:
            return a
        return self.add(llvm.MulOp(self.index(a), self.index(b), overflow=NSW))

    def iadd(self, a: int | SSAValue, b: int | SSAValue) -> int | SSAValue:
        ka, kb = self.known(a), self.known(b)
        if ka is not None and kb is not None:
            return ka + kb
        if ka == 0:
            return b
        if kb == 0:
            return a
        return self.add(llvm.AddOp(self.index(a), self.index(b), overflow=NSW))

    def address(self, m: Mem, indices: Sequence[SSAValue], elem: Attribute) -> SSAValue:
        linear: int | SSAValue = 0
        for size, i in zip(m.sizes, indices):
            linear = self.iadd(self.imul(linear, size), self.get(i))
        if self.known(linear) == 0:
            return m.ptr
        return self.add(llvm_gep(m.ptr, self.index(linear), elem))

    def element_count(self, sizes: Sequence[int | SSAValue]) -> int | SSAValue:
        n: int | SSAValue = 1
        for s in sizes:
            n = self.imul(n, s)
        return n

    def loop(self, op: scf.ForOp, lb: SSAValue, ub: SSAValue, step: SSAValue,
             inits: Sequence[SSAValue]) -> list[SSAValue]:
        """The loop of `op` from `lb` to `ub` with the flattened `inits`; returns
        the flattened values carried out of it."""
        header = Block(arg_types=[I64, *(v.type for v in inits)])
        body, exit_block = Block(), Block()
        self.emit(llvm.BrOp(header, lb, *inits))
        self.start_block(header)
        iv, *carried = header.args
        self.emit(llvm.CondBrOp(self.add(icmp("slt", iv, ub)), body, [], exit_block, []))
        self.start_block(body)
        region_block = op.body.block
        _mark_reductions(self, region_block)
        self.vals[region_block.args[0]] = iv
        self.bind(region_block.args[1:], carried)
        yield_op = self.lower_ops(region_block)
        assert yield_op is not None
        next_iv = self.add(llvm.AddOp(iv, step))
        latch = llvm.BrOp(header, next_iv, *self.flatten_all(yield_op.operands))
        if not carried and _fold_tail(region_block):
            bits = _element_bits(region_block)
            latch.attributes[FOLD_TAIL_ATTR] = IntegerAttr(bits, i64) if bits else UnitAttr()
        self.emit(latch)
        self.start_block(exit_block)
        return carried


FOLD_TAIL_MIN_COST = 128
"""Work units (`parallel_outline.block_cost`) of one iteration from which an
innermost loop without carried values has its vector remainder folded into
the vector body (`llvm_abi`, "Loop hints"): the scalar copy of a body this
large takes milliseconds of LLVM code generation (9 of a 200-op function's
~45 ms), while the masks add a few instructions per vector iteration next to
over a hundred (measured: the same time per element at 2^20 elements)."""


def _fold_tail(body: Block) -> bool:
    return parallel_outline.block_cost(body) >= FOLD_TAIL_MIN_COST and not any(
        isinstance(op, (scf.ForOp, scf.WhileOp)) for op in body.walk()
    )


def _element_bits(body: Block) -> int | None:
    """The width in bits of every element `body` loads or stores and of every float it computes, when they are all
    one width of 8 to 64 bits (`llvm_abi`, "Loop hints"); else None (a loop that converts, e.g. float16 computed
    in float32, is left to LLVM's choice)."""
    widths = set()
    for op in body.walk():
        if isinstance(op, memref.LoadOp):
            types = [op.res.type]
        elif isinstance(op, memref.StoreOp):
            types = [op.value.type]
        else:
            types = [r.type for r in op.results if isinstance(r.type, _FLOATS)]
        for t in types:
            if isinstance(t, IntegerType):
                widths.add(t.width.data)
            elif isinstance(t, _FLOATS):
                widths.add(t.bitwidth)
            else:
                return None
    if len(widths) != 1:
        return None
    (bits,) = widths
    return bits if bits in (8, 16, 32, 64) else None


_FLOATS = (BFloat16Type, Float16Type, Float32Type, Float64Type)


def _half_type(op: Operation) -> Attribute | None:
    """The first f16 or bf16 operand or result type of `op`, if any."""
    for v in (*op.operands, *op.results):
        if isinstance(v.type, Float16Type | BFloat16Type):
            return v.type
    return None


def _zero_attr(t: Attribute) -> Attribute:
    return IntegerAttr(0, t) if isinstance(t, IntegerType) else FloatAttr(0.0, t)


# ---------------------------------------------------------------------------
# Op lowerings: one function per op kind, registered in LOWERINGS below.
# ---------------------------------------------------------------------------

Lowering = Callable[[FunctionLowering, Operation], None]
LOWERINGS: dict[type[Operation], Lowering] = {}


def lowers(*op_types: type[Operation]):
    def register(fn: Lowering) -> Lowering:
        for t in op_types:
            LOWERINGS[t] = fn
        return fn

    return register


def _same_type_binary(llvm_op: type[Operation]) -> Lowering:
    is_float = issubclass(llvm_op, llvm.AbstractFloatArithOp)
    properties = NO_FASTMATH if is_float else {}

    def lower(fl: FunctionLowering, op: Operation) -> None:
        lhs, rhs = fl.get(op.operands[0]), fl.get(op.operands[1])
        props = REASSOC if is_float and op in fl.reductions else properties
        fl.vals[op.results[0]] = fl.add(
            llvm_op.create(operands=[lhs, rhs], result_types=[lhs.type], properties=props)
        )

    return lower


for _arith, _llvm in [
    (arith.AddfOp, llvm.FAddOp),
    (arith.SubfOp, llvm.FSubOp),
    (arith.MulfOp, llvm.FMulOp),
    (arith.DivfOp, llvm.FDivOp),
    (arith.AddiOp, llvm.AddOp),
    (arith.SubiOp, llvm.SubOp),
    (arith.MuliOp, llvm.MulOp),
    (arith.DivUIOp, llvm.UDivOp),
    (arith.RemUIOp, llvm.URemOp),
    (arith.AndIOp, llvm.AndOp),
    (arith.OrIOp, llvm.OrOp),
    (arith.XOrIOp, llvm.XOrOp),
    (arith.ShLIOp, llvm.ShlOp),
    (arith.ShRSIOp, llvm.AShrOp),
    (arith.ShRUIOp, llvm.LShrOp),
]:
    LOWERINGS[_arith] = _same_type_binary(_llvm)
if hasattr(arith, "RemFOp"):
    LOWERINGS[arith.RemFOp] = _same_type_binary(llvm.FRemOp)


def _intrinsic_op(base: str, n_args: int | None = None) -> Lowering:
    """An op that is the intrinsic `base.<suffix of the result type>`."""

    def lower(fl: FunctionLowering, op: Operation) -> None:
        t = scalar_type(op.results[0].type)
        args = [fl.get(v) for v in op.operands]
        fl.vals[op.results[0]] = fl.intrinsic(f"{base}.{intrinsic_suffix(t)}", args, t)

    return lower


for _op, _name in [
    (arith.MaximumfOp, "llvm.maximum"),
    (arith.MinimumfOp, "llvm.minimum"),
    (arith.MaxnumfOp, "llvm.maxnum"),
    (arith.MinnumfOp, "llvm.minnum"),
    (arith.MaxSIOp, "llvm.smax"),
    (arith.MinSIOp, "llvm.smin"),
    (arith.MaxUIOp, "llvm.umax"),
    (arith.MinUIOp, "llvm.umin"),
    (math.SqrtOp, "llvm.sqrt"),
    (math.AbsFOp, "llvm.fabs"),
    (math.FloorOp, "llvm.floor"),
    (math.CeilOp, "llvm.ceil"),
    (math.RoundOp, "llvm.round"),
    (math.RoundEvenOp, "llvm.roundeven"),
    (math.TruncOp, "llvm.trunc"),
    (math.CopySignOp, "llvm.copysign"),
    (math.FmaOp, "llvm.fma"),
]:
    LOWERINGS[_op] = _intrinsic_op(_name)


def _libm_op(name: str, intrinsic: str | None = None) -> Lowering:
    """An op that is a libm call: `name` for f64, `name`+'f' for f32, declared
    with its libmvec vector variants. Where there is none and LLVM has the
    `intrinsic`, the intrinsic instead (constant folding, as before)."""

    def lower(fl: FunctionLowering, op: Operation) -> None:
        t = op.results[0].type
        symbol = name + "f" if isinstance(t, Float32Type) else name
        args = [fl.get(v) for v in op.operands]
        vectorised = bool(vector_abi_module.vector_variants(symbol, len(args), t, fl.m.vector_abi))
        if vector_math.choose(name, t, fl.m.math_impl, vectorised, fl.inline_math_candidates):
            fl.vals[op.results[0]] = vector_math.emit(fl, name, args, t)
            return
        if intrinsic is not None and not vectorised:
            fl.vals[op.results[0]] = fl.intrinsic(f"{intrinsic}.{intrinsic_suffix(t)}", args, t)
            return
        fl.m.declare_math(symbol, len(args), t)
        fl.vals[op.results[0]] = fl.add_call(fl.m.call(symbol, args, t))

    return lower


for _op, _name, _intrinsic in [
    (math.ExpOp, "exp", "llvm.exp"),
    (math.Exp2Op, "exp2", "llvm.exp2"),
    (math.LogOp, "log", "llvm.log"),
    (math.Log2Op, "log2", "llvm.log2"),
    (math.Log10Op, "log10", "llvm.log10"),
    (math.SinOp, "sin", "llvm.sin"),
    (math.CosOp, "cos", "llvm.cos"),
    (math.PowFOp, "pow", "llvm.pow"),
    (math.TanhOp, "tanh", None),
    (math.Log1pOp, "log1p", None),
    (math.ExpM1Op, "expm1", None),
    (math.ErfOp, "erf", None),
    (math.AtanOp, "atan", None),
    (math.TanOp, "tan", None),
    (math.SinhOp, "sinh", None),
    (math.CoshOp, "cosh", None),
    (math.AsinOp, "asin", None),
    (math.AcosOp, "acos", None),
    (math.AsinhOp, "asinh", None),
    (math.AcoshOp, "acosh", None),
    (math.AtanhOp, "atanh", None),
    (math.CbrtOp, "cbrt", None),
    (math.Atan2Op, "atan2", None),
]:
    LOWERINGS[_op] = _libm_op(_name, _intrinsic)


@lowers(arith.ConstantOp)
def _constant(fl: FunctionLowering, op: arith.ConstantOp) -> None:
    value = op.value
    t = scalar_type(op.result.type)
    if isinstance(value, IntegerAttr):
        fl.vals[op.result] = fl.const(value.value.data, t)
    elif isinstance(value, FloatAttr) and isinstance(op.result.type, BFloat16Type):
        fl.vals[op.result] = fl.const(bfloat16_bits(value.value.data), t)
    elif isinstance(value, FloatAttr):
        fl.vals[op.result] = fl.const(value.value.data, t)
    else:
        raise CompileError(f"msir-lower-to-llvm: unsupported constant {value}")


@lowers(arith.NegfOp)
def _negf(fl: FunctionLowering, op: arith.NegfOp) -> None:
    fl.vals[op.result] = fl.add(llvm.FNegOp(fl.get(op.operand)))


def _safe_divisor(fl: FunctionLowering, rhs: SSAValue) -> tuple[SSAValue, SSAValue]:
    """(rhs == -1, divisor with -1 replaced by 1): INT_MIN / -1 traps on x86."""
    t = rhs.type
    minus_one = fl.add(icmp("eq", rhs, fl.const(-1, t)))
    return minus_one, fl.add(llvm.SelectOp(minus_one, fl.const(1, t), rhs))


def _sdiv(fl: FunctionLowering, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    minus_one, divisor = _safe_divisor(fl, rhs)
    quotient = fl.add(llvm.SDivOp(lhs, divisor))
    negated = fl.add(llvm.SubOp(fl.const(0, lhs.type), lhs))
    return fl.add(llvm.SelectOp(minus_one, negated, quotient))


@lowers(arith.DivSIOp)
def _divsi(fl: FunctionLowering, op: Operation) -> None:
    fl.vals[op.results[0]] = _sdiv(fl, fl.get(op.operands[0]), fl.get(op.operands[1]))


@lowers(arith.RemSIOp)
def _remsi(fl: FunctionLowering, op: Operation) -> None:
    lhs, rhs = fl.get(op.operands[0]), fl.get(op.operands[1])
    minus_one, divisor = _safe_divisor(fl, rhs)
    rem = fl.add(llvm.SRemOp(lhs, divisor))
    fl.vals[op.results[0]] = fl.add(llvm.SelectOp(minus_one, fl.const(0, lhs.type), rem))


def _rounded_division(toward_floor: bool) -> Lowering:
    """floordivsi / ceildivsi: adjust the truncated quotient when the remainder
    is non-zero and its sign differs from (floor) or equals (ceil) the divisor's."""

    def lower(fl: FunctionLowering, op: Operation) -> None:
        lhs, rhs = fl.get(op.operands[0]), fl.get(op.operands[1])
        t = lhs.type
        q = _sdiv(fl, lhs, rhs)
        r = fl.add(llvm.SubOp(lhs, fl.add(llvm.MulOp(q, rhs))))
        inexact = fl.add(icmp("ne", r, fl.const(0, t)))
        sign = fl.add(llvm.XOrOp(r, rhs))
        differ = fl.add(icmp("slt" if toward_floor else "sge", sign, fl.const(0, t)))
        adjust = fl.add(llvm.AndOp(inexact, differ))
        if t != I1:
            adjust = fl.add(llvm.ZExtOp(adjust, t))
        combine = llvm.SubOp if toward_floor else llvm.AddOp
        fl.vals[op.results[0]] = fl.add(combine(q, adjust))

    return lower


LOWERINGS[arith.FloorDivSIOp] = _rounded_division(True)
LOWERINGS[arith.CeilDivSIOp] = _rounded_division(False)


@lowers(arith.CmpiOp)
def _cmpi(fl: FunctionLowering, op: arith.CmpiOp) -> None:
    # arith and llvm list the integer predicates in the same order.
    pred = IntegerAttr(op.predicate.value.data, i64)
    fl.vals[op.result] = fl.add(llvm.ICmpOp(fl.get(op.lhs), fl.get(op.rhs), pred))


@lowers(arith.CmpfOp)
def _cmpf(fl: FunctionLowering, op: arith.CmpfOp) -> None:
    # arith and llvm list the float predicates in the same order; the
    # constant ones are folded because the llvmlite export cannot print them.
    index = op.predicate.value.data
    name = arith.CMPF_COMPARISON_OPERATIONS[index]
    if name in ("false", "true"):
        fl.vals[op.result] = fl.const(int(name == "true"), I1)
        return
    fl.vals[op.result] = fl.add(
        llvm.FCmpOp(fl.get(op.lhs), fl.get(op.rhs), IntegerAttr(index, i64))
    )


@lowers(arith.SelectOp)
def _select(fl: FunctionLowering, op: arith.SelectOp) -> None:
    cond = fl.get(op.cond)
    t = op.result.type
    lhs = fl.flatten(fl.vals[op.lhs], t)
    rhs = fl.flatten(fl.vals[op.rhs], t)
    chosen = [fl.add(llvm.SelectOp(cond, a, b)) for a, b in zip(lhs, rhs)]
    fl.bind([op.result], chosen)


def _cast(llvm_op: type[Operation]) -> Lowering:
    def lower(fl: FunctionLowering, op: Operation) -> None:
        t = scalar_type(op.results[0].type)
        fl.vals[op.results[0]] = fl.add(llvm_op(fl.get(op.operands[0]), t))

    return lower


@lowers(arith.ExtFOp)
def _extf(fl: FunctionLowering, op: arith.ExtFOp) -> None:
    value = fl.get(op.input)
    if isinstance(op.input.type, BFloat16Type):
        value = llvm_half.bf16_to_f32(fl.add, fl.const, value)
    t = scalar_type(op.result.type)
    fl.vals[op.result] = value if value.type == t else fl.add(llvm.FPExtOp(value, t))


@lowers(arith.TruncFOp)
def _truncf(fl: FunctionLowering, op: arith.TruncFOp) -> None:
    value, src, to = fl.get(op.input), op.input.type, op.result.type
    if isinstance(to, BFloat16Type):
        if not isinstance(src, Float32Type):
            raise CompileError(f"msir-lower-to-llvm: truncf {src} to bf16 is not supported (convert from f32)",
                               _loc_of(op))
        fl.vals[op.result] = llvm_half.f32_to_bf16(fl.add, fl.const, value)
    elif isinstance(to, Float16Type) and isinstance(src, Float64Type):
        def fabs(v: SSAValue) -> SSAValue:
            return fl.intrinsic("llvm.fabs.f64", [v], v.type)

        fl.vals[op.result] = llvm_half.f64_to_f16(fl.add, fl.const, fabs, value)
    else:
        fl.vals[op.result] = fl.add(llvm.FPTruncOp(value, scalar_type(to)))


for _op, _llvm in [
    (arith.SIToFPOp, llvm.SIToFPOp),
    (arith.ExtSIOp, llvm.SExtOp),
    (arith.ExtUIOp, llvm.ZExtOp),
    (arith.TruncIOp, llvm.TruncOp),
]:
    LOWERINGS[_op] = _cast(_llvm)


def _float_to_int(base: str) -> Lowering:
    """fptosi/fptoui as the saturating intrinsics: the llvm dialect export has
    no plain fptosi, and saturation refines arith's poison on overflow."""

    def lower(fl: FunctionLowering, op: Operation) -> None:
        src = fl.get(op.operands[0])
        t = scalar_type(op.results[0].type)
        name = f"{base}.{intrinsic_suffix(t)}.{intrinsic_suffix(src.type)}"
        fl.vals[op.results[0]] = fl.intrinsic(name, [src], t)

    return lower


LOWERINGS[arith.FPToSIOp] = _float_to_int("llvm.fptosi.sat")
LOWERINGS[arith.FPToUIOp] = _float_to_int("llvm.fptoui.sat")


@lowers(arith.UIToFPOp)
def _uitofp(fl: FunctionLowering, op: arith.UIToFPOp) -> None:
    # The export has no uitofp: widen narrower ints with zext; for i64 halve
    # negative (huge) values keeping the low bit for rounding, then double.
    src = fl.get(op.input)
    t = scalar_type(op.result.type)
    if src.type != I64:
        fl.vals[op.result] = fl.add(llvm.SIToFPOp(fl.add(llvm.ZExtOp(src, I64)), t))
        return
    direct = fl.add(llvm.SIToFPOp(src, t))
    halved = fl.add(
        llvm.OrOp(
            fl.add(llvm.LShrOp(src, fl.const(1, I64))),
            fl.add(llvm.AndOp(src, fl.const(1, I64))),
        )
    )
    doubled = fl.add(llvm.FMulOp(fl.add(llvm.SIToFPOp(halved, t)), fl.const(2.0, t)))
    negative = fl.add(icmp("slt", src, fl.const(0, I64)))
    fl.vals[op.result] = fl.add(llvm.SelectOp(negative, doubled, direct))


@lowers(arith.IndexCastOp)
def _index_cast(fl: FunctionLowering, op: arith.IndexCastOp) -> None:
    src = fl.get(op.input)
    t = scalar_type(op.result.type)
    from_w, to_w = src.type.width.data, t.width.data
    if from_w == to_w:
        fl.vals[op.result] = src
    elif from_w < to_w:
        fl.vals[op.result] = fl.add(llvm.SExtOp(src, t))
    else:
        fl.vals[op.result] = fl.add(llvm.TruncOp(src, t))


@lowers(arith.BitcastOp)
def _bitcast(fl: FunctionLowering, op: arith.BitcastOp) -> None:
    src = fl.get(op.input)
    t = scalar_type(op.result.type)
    fl.vals[op.result] = src if src.type == t else fl.add(llvm.BitcastOp(src, t))


@lowers(math.RsqrtOp)
def _rsqrt(fl: FunctionLowering, op: math.RsqrtOp) -> None:
    t = op.result.type
    root = fl.intrinsic(f"llvm.sqrt.{intrinsic_suffix(t)}", [fl.get(op.operand)], t)
    fl.vals[op.result] = fl.add(llvm.FDivOp(fl.const(1.0, t), root))


@lowers(math.AbsIOp)
def _absi(fl: FunctionLowering, op: math.AbsIOp) -> None:
    t = scalar_type(op.result.type)
    args = [fl.get(op.operand), fl.const(0, I1)]
    fl.vals[op.result] = fl.intrinsic(f"llvm.abs.{intrinsic_suffix(t)}", args, t)


@lowers(math.FPowIOp)
def _fpowi(fl: FunctionLowering, op: math.FPowIOp) -> None:
    t = op.result.type
    base, exponent = fl.get(op.lhs), fl.get(op.rhs)
    if exponent.type != I32:
        exponent = fl.add(llvm.TruncOp(exponent, I32))
    name = f"llvm.powi.{intrinsic_suffix(t)}.i32"
    fl.vals[op.result] = fl.intrinsic(name, [base, exponent], t)


# -- memref ------------------------------------------------------------------


def _site(op: Operation) -> int:
    site = op.attributes.get(SITE_ATTR)
    return site.value.data if isinstance(site, IntegerAttr) else -1


@lowers(memref.AllocOp)
def _alloc(fl: FunctionLowering, op: memref.AllocOp) -> None:
    t = op.memref.type
    dynamic = iter(op.dynamic_sizes)
    sizes = tuple(fl.get(next(dynamic)) if d < 0 else d for d in t.get_shape())
    elem_bytes = byte_size(memory_type(t.element_type))
    static_bytes = elem_bytes
    for s in sizes:
        if isinstance(s, int):
            static_bytes *= s
    dyn_sizes = [s for s in sizes if not isinstance(s, int)]
    if not dyn_sizes:
        rounded = max(ALLOC_ALIGN, -(-static_bytes // ALLOC_ALIGN) * ALLOC_ALIGN)
        nbytes = fl.const(rounded if static_bytes <= MAX_ALLOC_BYTES else IMPOSSIBLE_ALLOC, I64)
    else:
        nbytes = _checked_byte_count(fl, static_bytes, dyn_sizes)
    fl.m.passthrough[allocator.ALLOC] = ALLOC_ATTRS
    ptr = fl.call_external(allocator.ALLOC, [nbytes], PTR)
    # The xDSL llvm dialect has no icmp on pointers; the address as an integer
    # is only compared, never used to address memory.
    address = fl.add(llvm.PtrToIntOp(ptr, I64))
    failed = fl.add(icmp("eq", address, fl.const(0, I64)))
    report = Block()
    fl.branch_unless(failed, report)
    code, site = fl.const(ERR_MEMORY, I32), fl.const(_site(op), I64)
    report.add_ops([fl.m.call(ERROR_FUNC, [code, site], None), llvm.BrOp(fl.bail())])
    fl.region.add_block(report)
    fl.vals[op.memref] = Mem(ptr, sizes)


def _checked_byte_count(
    fl: FunctionLowering, static_bytes: int, dyn_sizes: Sequence[SSAValue]
) -> SSAValue:
    """max(64, round_up(bytes, 64)), or an impossible size if the product of
    the (unsigned) dims overflows or exceeds MAX_ALLOC_BYTES."""
    pair = llvm.LLVMStructType.from_type_list([I64, I1])
    total = fl.const(static_bytes, I64)
    overflow: SSAValue | None = None
    first = DenseArrayBase.from_list(i64, [0])
    second = DenseArrayBase.from_list(i64, [1])
    for s in dyn_sizes:
        r = fl.intrinsic("llvm.umul.with.overflow.i64", [total, s], pair)
        total = fl.add(llvm.ExtractValueOp(first, r, I64))
        bit = fl.add(llvm.ExtractValueOp(second, r, I1))
        overflow = bit if overflow is None else fl.add(llvm.OrOp(overflow, bit))
    assert overflow is not None
    too_big = fl.add(icmp("ugt", total, fl.const(MAX_ALLOC_BYTES, I64)))
    bad = fl.add(llvm.OrOp(overflow, too_big))
    rounded = fl.add(
        llvm.AndOp(
            fl.add(llvm.AddOp(total, fl.const(ALLOC_ALIGN - 1, I64))),
            fl.const(-ALLOC_ALIGN, I64),
        )
    )
    at_least = fl.intrinsic("llvm.umax.i64", [rounded, fl.const(ALLOC_ALIGN, I64)], I64)
    return fl.add(llvm.SelectOp(bad, fl.const(IMPOSSIBLE_ALLOC, I64), at_least))


@lowers(memref.AllocaOp)
def _alloca(fl: FunctionLowering, op: memref.AllocaOp) -> None:
    t = op.memref.type
    dynamic = iter(op.dynamic_sizes)
    sizes = tuple(fl.get(next(dynamic)) if d < 0 else d for d in t.get_shape())
    elem = memory_type(t.element_type)
    count = fl.element_count(sizes)
    alloca = llvm.AllocaOp(fl.index(count), elem, alignment=ALLOC_ALIGN)
    if isinstance(count, int):
        fl.prologue.add_op(alloca)
    else:
        fl.emit(alloca)
    fl.vals[op.memref] = Mem(alloca.results[0], sizes)


@lowers(memref.DeallocOp)
def _dealloc(fl: FunctionLowering, op: memref.DeallocOp) -> None:
    fl.m.passthrough[allocator.FREE] = FREE_ATTRS
    fl.call_external(allocator.FREE, [fl.mem(op.memref).ptr], None)


@lowers(memref.LoadOp)
def _load(fl: FunctionLowering, op: memref.LoadOp) -> None:
    elem_t = op.memref.type.element_type
    elem = memory_type(elem_t)
    ptr = fl.address(fl.mem(op.memref), op.indices, elem)
    value = fl.add(llvm_load(ptr, elem))
    if elem_t == I1:
        value = fl.add(llvm.TruncOp(value, I1))
    fl.vals[op.res] = value


@lowers(memref.StoreOp)
def _store(fl: FunctionLowering, op: memref.StoreOp) -> None:
    elem_t = op.memref.type.element_type
    elem = memory_type(elem_t)
    ptr = fl.address(fl.mem(op.memref), op.indices, elem)
    value = fl.get(op.value)
    if elem_t == I1:
        value = fl.add(llvm.ZExtOp(value, I8))
    fl.emit(llvm_store(value, ptr))


@lowers(memref.DimOp)
def _dim(fl: FunctionLowering, op: memref.DimOp) -> None:
    sizes = fl.mem(op.source).sizes
    index = fl.get(op.index)
    k = fl.known(index)
    if k is not None:
        fl.vals[op.result] = fl.index(sizes[k])
        return
    result = fl.index(sizes[0])
    for j in range(1, len(sizes)):
        is_j = fl.add(icmp("eq", index, fl.const(j, I64)))
        result = fl.add(llvm.SelectOp(is_j, fl.index(sizes[j]), result))
    fl.vals[op.result] = result


@lowers(memref.CastOp)
def _memref_cast(fl: FunctionLowering, op: memref.CastOp) -> None:
    m = fl.mem(op.source)
    shape = op.dest.type.get_shape()
    sizes = tuple(s if d < 0 else d for s, d in zip(m.sizes, shape))
    fl.vals[op.dest] = Mem(m.ptr, sizes)


@lowers(memref.ReinterpretCastOp)
def _reinterpret_cast(fl: FunctionLowering, op: memref.ReinterpretCastOp) -> None:
    """A row-major view of the source's data from an element offset: a tape's
    buffer (capacity rows) recast to the tape's length, or one row of a tape.
    The strides are not read: msir only produces the row-major ones."""
    dynamic = iter(op.sizes)
    sizes = tuple(fl.get(next(dynamic)) if s == memref.DYNAMIC_INDEX else s for s in op.static_sizes.get_values())
    (offset,) = op.static_offsets.get_values()
    ptr = fl.mem(op.source).ptr
    if offset == memref.DYNAMIC_INDEX:
        elem = memory_type(op.source.type.element_type)
        ptr = fl.add(llvm_gep(ptr, fl.get(op.offsets[0]), elem))
    elif offset != 0:
        elem = memory_type(op.source.type.element_type)
        ptr = fl.add(llvm_gep(ptr, fl.const(offset, I64), elem))
    fl.vals[op.result] = Mem(ptr, sizes)


# -- func --------------------------------------------------------------------

def _check_stack(fl: FunctionLowering, op: func.CallOp) -> None:
    """Before a call that may recurse: report error 4 at the call's site and
    return at once when the stack below the entry wrapper exceeds STACK_LIMIT."""
    base = fl.add(llvm.LoadOp(fl.add(llvm.AddressOfOp(STACK_BASE, PTR)), I64))
    used = fl.add(llvm.SubOp(base, stack_address(fl.add)))
    too_deep = fl.add(icmp("ugt", used, fl.const(STACK_LIMIT, I64)))
    report = Block()
    fl.branch_unless(too_deep, report)
    code, site = fl.const(ERR_RECURSION, I32), fl.const(_site(op), I64)
    report.add_ops([fl.m.call(ERROR_FUNC, [code, site], None), llvm.BrOp(fl.bail())])
    fl.region.add_block(report)


@lowers(func.CallOp)
def _call(fl: FunctionLowering, op: func.CallOp) -> None:
    name = op.callee.string_value()
    args = fl.flatten_all(op.arguments)
    if name == ERROR_FUNC:
        fl.add_call(fl.m.call(ERROR_FUNC, args, None))
        return
    if name == RAISE_FUNC:
        message = op.attributes[MESSAGE_ATTR]
        assert isinstance(message, StringAttr)
        text = fl.add(llvm.AddressOfOp(fl.m.message_global(message.data), PTR))
        code, site, *values = args
        fl.add_call(fl.m.call(RAISE_FUNC, [code, site, text, *values], None))
        return
    epilogue = parallel_outline.epilogue_plan(fl, op)
    if epilogue is not None:  # the epilogue loop, lowered next, makes the fused call
        loop, plan, symbol = epilogue
        fl.epilogues[loop] = (plan, symbol, args)
        return
    if STACK_CHECK_ATTR in op.attributes:
        _check_stack(fl, op)
    sig = fl.m.sigs[name]
    ret = None if not sig.flat_results else sig.ret_type
    result = fl.add_call(fl.m.call(name, args, ret))
    if len(sig.flat_results) == 1:
        flat = [result]
    else:
        flat = [
            fl.add(
                llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [k]), result, t)
            )
            for k, t in enumerate(sig.flat_results)
        ]
    fl.bind(op.res, flat)
    if name in fl.m.may_fail:
        status = fl.add(llvm.LoadOp(fl.add(llvm.AddressOfOp(STATUS, PTR)), I32))
        failed = fl.add(icmp("ne", status, fl.const(0, I32)))
        fl.branch_unless(failed, fl.bail())


@lowers(func.ReturnOp)
def _return(fl: FunctionLowering, op: func.ReturnOp) -> None:
    flat = fl.flatten_all(op.arguments)
    if not flat:
        fl.emit(llvm.ReturnOp())
        return
    if len(flat) == 1:
        fl.emit(llvm.ReturnOp(flat[0]))
        return
    packed = fl.add(llvm.UndefOp(fl.sig.ret_type))
    for k, v in enumerate(flat):
        pos = DenseArrayBase.from_list(i64, [k])
        packed = fl.add(llvm.InsertValueOp(pos, packed, v))
    fl.emit(llvm.ReturnOp(packed))


# -- scf ---------------------------------------------------------------------


@lowers(scf.ForOp)
def _for(fl: FunctionLowering, op: scf.ForOp) -> None:
    """A serial loop, or one split across threads (`parallel_outline`), or the
    epilogue of the product before it (`parallel_outline.epilogue_plan`)."""
    epilogue = fl.epilogues.pop(op, None)
    if epilogue is not None:
        plan, symbol, args = epilogue
        parallel_outline.outline(fl, op, plan, gemm=(symbol, args))
        return
    plan = parallel_outline.parallel_plan(fl, op) if fl.m.parallel and not fl.outlined else None
    if plan is not None:
        parallel_outline.outline(fl, op, plan)
        return
    lb, ub, step = fl.get(op.lb), fl.get(op.ub), fl.get(op.step)
    fl.bind(op.results, fl.loop(op, lb, ub, step, fl.flatten_all(op.iter_args)))


def _mark_reductions(fl: FunctionLowering, body: Block) -> None:
    """`yield addf(acc, x)` (or mulf) on the loop-carried `acc`: a reduction."""
    terminator = body.last_op
    if not isinstance(terminator, scf.YieldOp):
        return
    for carried, v in zip(body.args[1:], terminator.operands):
        owner = v.owner
        if (
            isinstance(owner, (arith.AddfOp, arith.MulfOp))
            and owner.parent_block() is body
            and carried in owner.operands
            and carried.has_one_use()
        ):
            fl.reductions.add(owner)


@lowers(scf.IfOp)
def _if(fl: FunctionLowering, op: scf.IfOp) -> None:
    merge = fl.flat_block([r.type for r in op.results])
    then_block, else_block = Block(), Block()
    has_else = bool(op.false_region.blocks)
    fl.emit(
        llvm.CondBrOp(
            fl.get(op.cond), then_block, [], else_block if has_else else merge, []
        )
    )
    branches = [(then_block, op.true_region)]
    if has_else:
        branches.append((else_block, op.false_region))
    for block, region in branches:
        fl.start_block(block)
        yield_op = fl.lower_ops(region.block)
        values = fl.flatten_all(yield_op.operands) if yield_op is not None else []
        fl.emit(llvm.BrOp(merge, *values))
    fl.start_block(merge)
    fl.bind(op.results, merge.args)


@lowers(scf.WhileOp)
def _while(fl: FunctionLowering, op: scf.WhileOp) -> None:
    before_region = op.before_region.block
    after_region = op.after_region.block
    before = fl.flat_block([a.type for a in before_region.args])
    after = fl.flat_block([a.type for a in after_region.args])
    exit_block = fl.flat_block([r.type for r in op.results])
    fl.emit(llvm.BrOp(before, *fl.flatten_all(op.arguments)))
    fl.start_block(before)
    fl.bind(before_region.args, before.args)
    condition = fl.lower_ops(before_region)
    assert isinstance(condition, scf.ConditionOp)
    forwarded = fl.flatten_all(condition.args)
    fl.emit(
        llvm.CondBrOp(fl.get(condition.condition), after, forwarded, exit_block, forwarded)
    )
    fl.start_block(after)
    fl.bind(after_region.args, after.args)
    yield_op = fl.lower_ops(after_region)
    assert yield_op is not None
    fl.emit(llvm.BrOp(before, *fl.flatten_all(yield_op.operands)))
    fl.start_block(exit_block)
    fl.bind(op.results, exit_block.args)


# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------


_HALF_ARITHMETIC = frozenset(
    t for t in LOWERINGS
    if t.name.startswith(("arith.", "math.")) and t not in (arith.ExtFOp, arith.TruncFOp, arith.ConstantOp, arith.SelectOp)
)
"""The arith and math ops that compute: never on f16 or bf16 (bf16 is an i16 in LLVM)."""


@dataclass(frozen=True)
class MsirLowerToLlvm(ModulePass):
    """Lower a loops-level module to the `llvm` dialect (see the module docstring)."""

    name = "msir-lower-to-llvm"

    vector_abi: str = "host"
    """libmvec variants to offer the loop vectoriser: host (this machine's
    widest, if libmvec is loadable), none, sse, avx, avx2 or avx512."""

    math_impl: str = "auto"
    """exp/tanh/log as inline polynomials (`inline`, see vector_math.py), as
    libm/libmvec calls (`libm`), or per function as measured (`auto`)."""

    parallel: bool = True
    """Outline large parallel loops for msir's thread pool (see "Parallel
    loops" in the module docstring); false keeps every loop inline."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ModuleLowering(op, self.vector_abi, self.math_impl, self.parallel).run()
