"""Pass `msir-lower-to-llvm`: loops-level IR to the `llvm` dialect in one walk.

Contract
--------
Input: a `builtin.module` of `func.func` ops (as produced by
`convert-msir-to-loops`) whose bodies use only `func` (return, call), `scf`
(for, if, while, condition, yield), `arith` (scalar ops), `math` and `memref`
(alloc, alloca, dealloc, load, store, dim, cast, and reinterpret_cast with
row-major strides: a view from an element offset with other sizes) on
identity-layout memrefs of
f32, f64, i1, i32, i64 or index, of any rank (0 included), with static or
dynamic dims. Errors are reported by calls to the private declaration
`@__msir_error(i32 code, i64 site)`.

Output: a module of `llvm.mlir.global`, `llvm.func` and nothing else, ready for
`xdsl.backend.llvm.convert.convert_module`:

* `index` becomes `i64`; an i1 memref element is one byte (i8, 0 or 1).
* A memref value is *flattened* wherever it crosses a boundary (function
  argument or result, block argument): into its data pointer followed by one
  i64 per dynamic dim, in dim order. A fully static memref is one `!llvm.ptr`.
  A function whose flattened results number more than one returns them packed
  in a literal `!llvm.struct<(...)>`.
* Addresses are `llvm.getelementptr inbounds` on a row-major linearised index
  (never ptrtoint/inttoptr), so LLVM's loop vectoriser sees affine accesses.
* Math ops become `llvm.call_intrinsic` with fully type-suffixed names
  (`llvm.exp.f32`); functions without an intrinsic call libm (`tanhf`, `tanh`).
  Inline vector math: exp, tanh and log (f32, f64) are emitted as branch-free
  range-reduced polynomials (`msir.lowering.vector_math`, which states their
  accuracy) where pass option `math_impl` (default `auto`: per function, as
  measured on this project's machine, within a per-function compile-time
  budget) chooses them; the loop vectoriser vectorises them inline.
  Otherwise, as follows.
  Vector math: where glibc's libmvec has vector variants for the target ISA
  (pass option `vector_abi`, default `host`: AVX-512 -> `e`, AVX2 -> `d`, also
  the narrower `b`/SSE ones), every transcendental math op (exp, log, sin, cos,
  pow, tanh, log1p, expm1, ...) becomes a libm call (`expf`) instead, and the
  libm declaration carries `passthrough = ["nounwind", "willreturn",
  ["memory", "none"], ["vector-function-abi-variant",
  "_ZGV_LLVM_N8v_expf(_ZGVdN8v_expf),..."]]` (LLVM's VFABI mapping) next to
  declarations of the vector functions, so LLVM's loop vectoriser calls
  `_ZGVdN8v_expf` on `<8 x float>` where it vectorises the loop. Every libm
  declaration is `memory(none)`: msir never reads errno. `export_attributes`
  applies `passthrough` to the llvmlite module (xDSL's `convert_module` drops
  it) and keeps the vector functions alive in `@llvm.compiler.used`.
* Reductions: an `arith.addf`/`arith.mulf` that updates a loop-carried `scf.for`
  value (`yield addf(acc, x)`) gets the `reassoc` fast-math flag, and only that
  op: LLVM vectorises (and reorders) the accumulation. Every other float op
  keeps strict IEEE semantics.
* Parallel loops (pass option `parallel`, default on): an `scf.for` whose
  iterations are independent (`_parallel_plan`: step 1, no calls but
  `__msir_error`, no heap allocation, every written buffer indexed by the
  induction variable as first index or a row group's `msir.row_local`
  buffer, every carried value a reduction `acc = op(acc, x)` of
  `_REDUCTIONS`, directly or through an inner loop) and whose work (a static cost model: ~1 unit per scalar op,
  8 per libm call, inner loops times their trip count) may exceed two chunks
  of `threads.MIN_CHUNK_WORK` is outlined, outermost first, into::

      internal {partials} @f.par<k>(i64 begin, i64 end, captured...)  (noinline)
      internal void @f.par<k>.task(ptr ctx, i64 chunk, i64 begin, i64 end)

  (a `.` cannot clash with msir's function names, which are identifiers).
  `@f.par<k>` runs the loop over [begin, end) with each reduction started at
  its identity (-0.0 for addf, -inf for maximumf, ...) and allocates its own
  copy of each row-local buffer (stack up to 64 KiB, else heap); its pointer
  parameters are `noalias` when the captured buffers are `noalias` arguments
  or allocations of the parent. The parent stores the captured LLVM values in
  8-byte slots of a stack `ctx`, followed by one pointer per reduction to a
  stack array of `threads.MAX_CHUNKS` partials, calls
  `i64 @__msir_parallel_for(@f.par<k>.task, ctx, lb, ub, min_iters)` (the
  number of chunks run; `min_iters` = MIN_CHUNK_WORK / cost per iteration)
  and combines `init (+) partial[0] (+) ... (+) partial[n-1]` in chunk order:
  elementwise loops give bitwise the serial result; float sums and products
  are reassociated (as the vectoriser already does), deterministically for a
  given thread count. Loops inside an outlined body stay inline.
* `@__msir_status : i32` and `@__msir_site : i64` are module globals (weak
  linkage, so the JIT can look them up); `@__msir_error` is defined to keep the
  first error only. `memref.alloc` calls `__msir_alloc(max(64,
  round_up(bytes, 64)))` and `memref.dealloc` `__msir_free` (msir's caching
  allocator, `lowering.allocator`; 64-byte aligned); a null result (or a byte count that overflows)
  records error 3 at the op's `msir.site` (-1 without one) and returns from the
  function at once with zero results. After a call to a function that can do
  that, the caller checks the status and returns too, so no code runs on a null
  buffer.
* Recursion: before a call marked `msir.stack_check` (convert-msir-to-loops marks
  calls that may recurse), the native stack used since the entry wrapper (which
  records its frame address in `@__msir_stack_base`, a global the module has
  only then) is compared with STACK_LIMIT; beyond it, error 4 is recorded at
  the call's `msir.site` and the function returns at once, as on a failed
  allocation, so a recursion too deep for the stack raises instead of crashing.
* Public functions are external; their pointer parameters are `noalias` unless
  the module also calls them, except an output with `msir.alias_of = i` and
  input i (the caller may pass one buffer for both: see convert-msir-to-loops,
  Donation). Private functions with a body are internal.
* Each public function `@f` gets an entry wrapper for the JIT::

      i32 @f__entry(ptr %args, ptr %dims, ptr %results)

  `args` holds one 8-byte slot per argument of `@f`, in order: the data pointer
  of a memref, or the value of a scalar stored in the slot's low bytes with its
  own type (i1 as one byte 0/1, index as i64). `dims` holds the dynamic dims of
  all memref arguments, in argument order then dim order. `results` receives,
  per result of `@f`, one slot for a scalar or a memref's data pointer followed
  by one slot per dynamic dim. The wrapper sets `@__msir_status` to 0, calls
  `@f` and returns the status. The wrapper carries `msir.num_outputs` and the
  original `msir.arg_types`/`msir.result_types` for the JIT and, when `@f` has
  donated arguments, `msir.output_aliases` (per output, the input it may
  alias or -1) and `msir.donation_refused` (copied from `@f`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, math, memref, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FileLineColLoc,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from msir.errors import CompileError, SourceLoc
from msir.lowering.to_loops import ALIAS_OF_ATTR, DONATE_ATTR, DONATION_REFUSED_ATTR
from msir.lowering import allocator
from msir.lowering import vector_math

I1 = IntegerType(1)
I8 = IntegerType(8)
I32 = IntegerType(32)
I64 = IntegerType(64)
PTR = llvm.LLVMPointerType()

STATUS = "__msir_status"
SITE = "__msir_site"
ERROR_FN = "__msir_error"
ENTRY_SUFFIX = "__entry"

ALLOC_ALIGN = 64
# Byte counts above this are treated as failed allocations; it also keeps the
# round-up to 64 bytes from overflowing.
MAX_ALLOC_BYTES = 1 << 48
IMPOSSIBLE_ALLOC = 1 << 62

ERR_MEMORY = 3
ERR_RECURSION = 4

STACK_BASE = "__msir_stack_base"
STACK_CHECK = "msir.stack_check"
STACK_LIMIT = 4 << 20
"""Native stack (bytes) a call into the module may use below its entry wrapper
before a recursive call reports error 4 instead of overflowing the stack (the
main thread's stack is 8 MiB; Python and the caller keep the rest)."""

# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


def scalar_type(t: Attribute) -> Attribute:
    """The LLVM type of a scalar value of builtin type `t`."""
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, (IntegerType, Float32Type, Float64Type)):
        return t
    raise CompileError(f"msir-lower-to-llvm: unsupported type {t}")


def memory_type(t: Attribute) -> Attribute:
    """The LLVM type of a memref element in memory (i1 is stored as i8)."""
    return I8 if t == I1 else scalar_type(t)


def flat_types(t: Attribute) -> list[Attribute]:
    """The LLVM values a value of type `t` is flattened into at boundaries."""
    if isinstance(t, MemRefType):
        return [PTR] + [I64] * sum(1 for d in t.get_shape() if d < 0)
    return [scalar_type(t)]


def packed_type(types: Sequence[Attribute]) -> Attribute:
    """The LLVM return type carrying the flattened values `types`."""
    if not types:
        return llvm.LLVMVoidType()
    if len(types) == 1:
        return types[0]
    return llvm.LLVMStructType.from_type_list(types)


def _suffix(t: Attribute) -> str:
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    if isinstance(t, IndexType):
        return "i64"
    raise CompileError(f"msir-lower-to-llvm: no intrinsic suffix for type {t}")


def _byte_size(t: Attribute) -> int:
    if isinstance(t, Float64Type) or t in (I64,):
        return 8
    if isinstance(t, Float32Type) or t == I32:
        return 4
    if t == I8:
        return 1
    assert isinstance(t, IntegerType)
    return (t.width.data + 7) // 8


class Mem(NamedTuple):
    """A lowered memref: data pointer and sizes (int if static, else i64 SSA)."""

    ptr: SSAValue
    sizes: tuple[int | SSAValue, ...]


Value = SSAValue | Mem


def _loc_of(op: Operation) -> SourceLoc | None:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


# ---------------------------------------------------------------------------
# Function signatures and the module-level lowering
# ---------------------------------------------------------------------------


@dataclass
class Signature:
    arg_types: list[Attribute]  # original builtin types
    result_types: list[Attribute]
    flat_args: list[Attribute]
    ret_type: Attribute  # packed LLVM return type
    flat_results: list[Attribute]


def _signature(f: func.FuncOp) -> Signature:
    ins = list(f.function_type.inputs.data)
    outs = list(f.function_type.outputs.data)
    flat_args = [t for a in ins for t in flat_types(a)]
    flat_res = [t for r in outs for t in flat_types(r)]
    return Signature(ins, outs, flat_args, packed_type(flat_res), flat_res)


# ---------------------------------------------------------------------------
# Vector math: libm declarations with libmvec's vector variants
# ---------------------------------------------------------------------------

VFABI_ATTR = "vector-function-abi-variant"

# A pure libm function: msir never reads errno, so LLVM may vectorise,
# hoist and drop the calls.
# msir's allocator (lowering.allocator), described to LLVM as an allocation
# family: its result aliases nothing else (see export_attributes: `noalias`).
_ALLOC_ATTRS = ArrayAttr(
    [
        StringAttr("nounwind"),
        StringAttr("willreturn"),
        StringAttr('allockind("alloc,uninitialized")'),
        StringAttr("allocsize(0)"),
        ArrayAttr([StringAttr("alloc-family"), StringAttr("msir")]),
    ]
)
_FREE_ATTRS = ArrayAttr([StringAttr("nounwind"), StringAttr("willreturn")])

_PURE = ArrayAttr(
    [StringAttr("nounwind"), StringAttr("willreturn"), ArrayAttr([StringAttr("memory"), StringAttr("none")])]
)

# glibc's x86_64 vector ABI: ISA letter and vector register bits, widest first.
VECTOR_ABIS: dict[str, list[tuple[str, int]]] = {
    "none": [],
    "sse": [("b", 128)],
    "avx": [("c", 256), ("b", 128)],
    "avx2": [("d", 256), ("b", 128)],
    "avx512": [("e", 512), ("d", 256), ("b", 128)],
}

# The functions glibc (>= 2.35) has in libmvec, by f64 name (f32 adds 'f').
LIBMVEC_FUNCTIONS = frozenset(
    "acos acosh asin asinh atan atanh cbrt cos cosh erf erfc exp exp10 exp2 expm1 "
    "log log10 log1p log2 sin sinh tan tanh atan2 hypot pow".split()
)


@cache
def _host_vector_abi() -> str:
    """The widest vector ABI of this machine with libmvec present, or 'none'."""
    try:
        import llvmlite.binding as llvm_binding

        if not llvm_binding.get_process_triple().startswith("x86_64"):
            return "none"
        features = set(llvm_binding.get_host_cpu_features().flatten().split(","))
    except Exception:  # pragma: no cover - no llvmlite or no host information
        return "none"
    if _libmvec() is None:
        return "none"
    if "+avx512f" in features:
        return "avx512"
    if "+avx2" in features:
        return "avx2"
    if "+avx" in features:
        return "avx"
    return "sse"


@cache
def _libmvec():
    import ctypes

    try:
        return ctypes.CDLL("libmvec.so.1")
    except OSError:
        return None


@cache
def _in_libmvec(name: str) -> bool:
    lib = _libmvec()
    return lib is not None and hasattr(lib, name)


def _vector_isas(abi: str) -> tuple[list[tuple[str, int]], bool]:
    """The ISAs of `abi`, and whether to check each variant is in libmvec
    (for `host`; a named ABI is taken at its word: glibc >= 2.35)."""
    if abi == "host":
        return VECTOR_ABIS[_host_vector_abi()], True
    if abi not in VECTOR_ABIS:
        raise CompileError(
            f"msir-lower-to-llvm: unknown vector_abi '{abi}' "
            f"(expected host or one of {', '.join(VECTOR_ABIS)})"
        )
    return VECTOR_ABIS[abi], False


@cache
def _vector_variants(
    symbol: str, n_args: int, t: Attribute, abi: str
) -> list[tuple[str, int, str]]:
    """(ISA letter, lanes, name) of libmvec's variants of libm's `symbol`,
    one per vector width."""
    is_f32 = isinstance(t, Float32Type)
    if not (is_f32 or isinstance(t, Float64Type)):
        return []
    base = symbol[:-1] if is_f32 else symbol
    if base not in LIBMVEC_FUNCTIONS:
        return []
    isas, check = _vector_isas(abi)
    found, widths = [], set()
    for letter, bits in isas:
        lanes = bits // (32 if is_f32 else 64)
        name = f"_ZGV{letter}N{lanes}{'v' * n_args}_{symbol}"
        if lanes in widths or (check and not _in_libmvec(name)):
            continue
        widths.add(lanes)
        found.append((letter, lanes, name))
    return found


def _vfabi_mappings(passthrough: ArrayAttr) -> list[str]:
    for a in passthrough.data:
        if isinstance(a, ArrayAttr) and a.data[0] == StringAttr(VFABI_ATTR):
            value = a.data[1]
            assert isinstance(value, StringAttr)
            return value.data.split(",")
    return []


def export_attributes(module: ModuleOp, ir_module) -> None:
    """Carry what `convert_module` drops into its llvmlite `ir_module`: each
    `llvm.func`'s `passthrough` attributes (a string is a keyword attribute,
    `["memory", "none"]` is `memory(none)`, any other pair `"key"="value"`),
    and `@llvm.compiler.used` holding the vector variants named by
    `vector-function-abi-variant` (else global DCE drops the declarations
    before the loop vectoriser looks for them)."""
    from llvmlite import ir

    used: list[str] = []
    for op in module.ops:
        if not isinstance(op, llvm.FuncOp) or op.passthrough is None:
            continue
        words = []
        for a in op.passthrough.data:
            if isinstance(a, StringAttr):
                words.append(a.data)
            elif isinstance(a, ArrayAttr) and len(a.data) == 2:
                key, value = (x.data for x in a.data)  # type: ignore[attr-defined]
                words.append(f"{key}({value})" if key == "memory" else f'"{key}"="{value}"')
                if key == VFABI_ATTR:
                    used += [m[m.index("(") + 1 : -1] for m in value.split(",")]
        fn = ir_module.get_global(op.sym_name.data)
        fn.attributes = _RawAttributes(fn.attributes, words)
        if op.sym_name.data == allocator.ALLOC:
            fn.return_value.add_attribute("noalias")
    if used:
        ptr = ir.PointerType()
        array = ir.ArrayType(ptr, len(used))
        g = ir.GlobalVariable(ir_module, array, "llvm.compiler.used")
        g.linkage = "appending"
        g.section = "llvm.metadata"
        g.initializer = ir.Constant(array, [ir_module.get_global(n) for n in used])


def _RawAttributes(old, words: Sequence[str]):
    """`old` plus `words`: llvmlite's function attributes accept only a fixed
    list of keywords (no `memory(...)`, no string attributes)."""
    new = _raw_attributes_class()(list(old))
    for w in words:
        set.add(new, w)
    return new


@cache
def _raw_attributes_class():
    from llvmlite.ir.values import FunctionAttributes

    class RawFunctionAttributes(FunctionAttributes):
        def add(self, name):
            set.add(self, name)

    return RawFunctionAttributes


def _is_public(f: func.FuncOp) -> bool:
    vis = f.sym_visibility
    return vis is None or vis.data == "public"


class ModuleLowering:
    """State shared by the functions of one module: signatures, declarations."""

    def __init__(self, module: ModuleOp, vector_abi: str = "host", math_impl: str = "auto",
                 parallel: bool = True):
        self.module = module
        self.parallel = parallel
        self.outlined: list[llvm.FuncOp] = []  # parallel loop bodies and tasks
        _vector_isas(vector_abi)  # validates
        if math_impl not in vector_math.MATH_IMPLS:
            raise CompileError(
                f"msir-lower-to-llvm: unknown math_impl '{math_impl}' "
                f"(expected one of {', '.join(vector_math.MATH_IMPLS)})"
            )
        self.vector_abi = vector_abi
        self.math_impl = math_impl
        self.passthrough: dict[str, ArrayAttr] = {}
        self.funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
        self.sigs = {f.sym_name.data: _signature(f) for f in self.funcs}
        self.callees = {
            op.callee.string_value()
            for f in self.funcs
            for op in f.walk()
            if isinstance(op, func.CallOp)
        }
        self.checks_stack = any(
            STACK_CHECK in op.attributes for f in self.funcs for op in f.walk() if isinstance(op, func.CallOp)
        )
        self.may_fail = self._functions_that_may_fail()
        self.externals: dict[str, llvm.LLVMFunctionType] = {}

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
                    if STACK_CHECK in op.attributes:
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
        self.externals.setdefault(name, llvm.LLVMFunctionType(args, ret))

    def declare_math(self, symbol: str, n_args: int, t: Attribute) -> list[str]:
        """Declare libm's `symbol` (pure) with its vector variants; return the
        VFABI mappings (empty where libmvec has none for the target)."""
        if symbol in self.passthrough:
            return _vfabi_mappings(self.passthrough[symbol])
        self.declare(symbol, [t] * n_args, t)
        mappings = []
        for letter, width, vector_name in _vector_variants(symbol, n_args, t, self.vector_abi):
            vt = VectorType(t, [width])
            self.declare(vector_name, [vt] * n_args, vt)
            self.passthrough[vector_name] = _PURE
            params = "v" * n_args
            mappings.append(f"_ZGV_LLVM_N{width}{params}_{symbol}({vector_name})")
        attrs = list(_PURE.data)
        if mappings:
            attrs.append(ArrayAttr([StringAttr(VFABI_ATTR), StringAttr(",".join(mappings))]))
        self.passthrough[symbol] = ArrayAttr(attrs)
        return mappings

    def run(self) -> None:
        new_ops: list[Operation] = [
            llvm.GlobalOp(I32, STATUS, "weak", value=IntegerAttr(0, I32)),
            llvm.GlobalOp(I64, SITE, "weak", value=IntegerAttr(0, I64)),
            _error_function(),
        ]
        if self.checks_stack:
            new_ops.append(llvm.GlobalOp(I64, STACK_BASE, "weak", value=IntegerAttr(0, I64)))
        for f in self.funcs:
            name = f.sym_name.data
            if name == ERROR_FN:
                continue
            sig = self.sigs[name]
            if not f.body.blocks:
                self.declare(name, sig.flat_args, sig.ret_type)
                continue
            new_ops.append(FunctionLowering(self, f, sig).run())
            new_ops += self.outlined
            self.outlined.clear()
            if _is_public(f):
                new_ops.append(_entry_wrapper(f, sig, self.checks_stack))
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


def _error_function() -> llvm.FuncOp:
    """`@__msir_error(code, site)`: record the first error only."""
    entry = Block(arg_types=[I32, I64])
    record, done = Block(), Block()
    code, site = entry.args
    status_ptr = llvm.AddressOfOp(STATUS, PTR)
    status = llvm.LoadOp(status_ptr, I32)
    zero = llvm.ConstantOp(IntegerAttr(0, I32), I32)
    is_first = _icmp("eq", status.results[0], zero.results[0])
    entry.add_ops(
        [
            status_ptr,
            status,
            zero,
            is_first,
            llvm.CondBrOp(is_first, record, [], done, []),
        ]
    )
    site_ptr = llvm.AddressOfOp(SITE, PTR)
    record.add_ops(
        [
            llvm.StoreOp(code, status_ptr),
            site_ptr,
            llvm.StoreOp(site, site_ptr),
            llvm.BrOp(done),
        ]
    )
    done.add_op(llvm.ReturnOp())
    return llvm.FuncOp(
        ERROR_FN,
        llvm.LLVMFunctionType([I32, I64]),
        linkage=llvm.LinkageAttr("internal"),
        body=Region([entry, record, done]),
    )


# Fast constructors for the ops loop bodies are made of: IRDL's generic
# __init__ rebuilds and re-checks every property attribute, while `create` with
# shared, pre-built properties is several times cheaper.
_ORDERING = IntegerAttr(0, i64)
_NO_WRAP = IntegerAttr(0, 32)
_DYNAMIC_INDEX = DenseArrayBase.from_list(i32, [llvm.GEP_USE_SSA_VAL])
_ICMP_PREDICATES = {f.value: IntegerAttr(f.to_int(), i64) for f in llvm.ICmpPredicateFlag}
_NO_FASTMATH = {"fastmathFlags": llvm.FastMathAttr(None)}
_REASSOC = {"fastmathFlags": llvm.FastMathAttr([llvm.FastMathFlag.REASSOC])}


def _icmp(pred: str, a: SSAValue, b: SSAValue) -> Operation:
    return llvm.ICmpOp.create(
        operands=[a, b], result_types=[I1], properties={"predicate": _ICMP_PREDICATES[pred]}
    )


def _llvm_load(ptr: SSAValue, t: Attribute) -> Operation:
    return llvm.LoadOp.create(
        operands=[ptr], result_types=[t], properties={"ordering": _ORDERING}
    )


def _llvm_store(value: SSAValue, ptr: SSAValue) -> Operation:
    return llvm.StoreOp.create(operands=[value, ptr], properties={"ordering": _ORDERING})


def _llvm_gep(ptr: SSAValue, index: SSAValue, elem: Attribute) -> Operation:
    """`getelementptr inbounds elem, ptr, index`."""
    properties = {
        "rawConstantIndices": _DYNAMIC_INDEX,
        "elem_type": elem,
        "noWrapFlags": _NO_WRAP,
        "inbounds": UnitAttr(),
    }
    return llvm.GEPOp.create(operands=[ptr, index], result_types=[PTR], properties=properties)


def output_aliases(f: func.FuncOp) -> list[int]:
    """Per output argument of `f`: the input whose buffer it may be (its
    `msir.alias_of`), else -1."""
    n_out = f.attributes.get("msir.num_outputs")
    n = n_out.value.data if isinstance(n_out, IntegerAttr) else 0
    attrs = list(f.arg_attrs.data) if f.arg_attrs is not None else []
    out = []
    for a in attrs[len(attrs) - n:] if n else ():
        alias = a.data.get(ALIAS_OF_ATTR) if isinstance(a, DictionaryAttr) else None
        out.append(alias.value.data if isinstance(alias, IntegerAttr) else -1)
    return out


def _shared_params(f: func.FuncOp, sig: Signature) -> set[int]:
    """The flat parameter positions of the pointers of aliased argument pairs."""
    aliases = output_aliases(f)
    if not any(a >= 0 for a in aliases):
        return set()
    first, k = [], 0
    for t in sig.arg_types:
        first.append(k)
        k += len(flat_types(t))
    n_in = len(sig.arg_types) - len(aliases)
    shared = set()
    for j, i in enumerate(aliases):
        if i >= 0:
            shared.update((first[i], first[n_in + j]))
    return shared


def _entry_wrapper(f: func.FuncOp, sig: Signature, checks_stack: bool = False) -> llvm.FuncOp:
    """`i32 @f__entry(ptr args, ptr dims, ptr results)`; see the module docstring.
    With `checks_stack`, it first records its frame address in `@__msir_stack_base`."""
    block = Block(arg_types=[PTR, PTR, PTR])
    args_ptr, dims_ptr, out_ptr = block.args
    ops: list[Operation] = []

    def add(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def slot(base: SSAValue, index: int) -> SSAValue:
        if index == 0:
            return base
        return add(llvm.GEPOp(base, [index], I64, inbounds=True))

    def load(ptr: SSAValue, t: Attribute) -> SSAValue:
        if t == I1:
            return add(llvm.TruncOp(add(llvm.LoadOp(ptr, I8)), I1))
        return add(llvm.LoadOp(ptr, t))

    call_args: list[SSAValue] = []
    n_dims = 0
    for i, t in enumerate(sig.arg_types):
        if isinstance(t, MemRefType):
            call_args.append(add(llvm.LoadOp(slot(args_ptr, i), PTR)))
            for d in t.get_shape():
                if d < 0:
                    call_args.append(add(llvm.LoadOp(slot(dims_ptr, n_dims), I64)))
                    n_dims += 1
        else:
            call_args.append(load(slot(args_ptr, i), scalar_type(t)))

    status_ptr = add(llvm.AddressOfOp(STATUS, PTR))
    ops.append(llvm.StoreOp(add(llvm.ConstantOp(IntegerAttr(0, I32), I32)), status_ptr))
    if checks_stack:
        ops.append(llvm.StoreOp(_stack_address(add), add(llvm.AddressOfOp(STACK_BASE, PTR))))
    name = f.sym_name.data
    ret = None if not sig.flat_results else sig.ret_type
    call = llvm.CallOp(name, *call_args, return_type=ret)
    ops.append(call)
    flat = sig.flat_results
    for k, t in enumerate(flat):
        if len(flat) == 1:
            value = call.results[0]
        else:
            pos = DenseArrayBase.from_list(i64, [k])
            value = add(llvm.ExtractValueOp(pos, call.results[0], t))
        if t == I1:
            value = add(llvm.ZExtOp(value, I8))
        ops.append(llvm.StoreOp(value, slot(out_ptr, k)))
    ops.append(llvm.ReturnOp(add(llvm.LoadOp(status_ptr, I32))))
    block.add_ops(ops)
    num_outputs = f.attributes.get("msir.num_outputs", IntegerAttr(0, i64))
    donation: dict[str, Attribute] = {}
    if f.arg_attrs is not None and any(DONATE_ATTR in a.data for a in f.arg_attrs.data):  # type: ignore[attr-defined]
        donation = {
            "msir.output_aliases": DenseArrayBase.from_list(i64, output_aliases(f)),
            DONATION_REFUSED_ATTR: f.attributes.get(DONATION_REFUSED_ATTR, ArrayAttr([])),
        }
    return llvm.FuncOp(
        name + ENTRY_SUFFIX,
        llvm.LLVMFunctionType([PTR, PTR, PTR], I32),
        linkage=llvm.LinkageAttr("external"),
        body=Region([block]),
        extra_attrs={
            "msir.num_outputs": num_outputs,
            "msir.arg_types": ArrayAttr(sig.arg_types),
            "msir.result_types": ArrayAttr(sig.result_types),
            **donation,
        },
    )


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
        self.shared_params = _shared_params(f, sig) if sig.arg_types else set()
        """Flat parameters (pointers) that may be one buffer: an output and the
        donated input it may alias (`msir.alias_of`), never `noalias`."""
        self.vals: dict[SSAValue, Value] = {}
        self.ints: dict[SSAValue, int] = {}
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
        public = _is_public(f)
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
        return self.add(llvm.CallIntrinsicOp(name, args, [ret]))

    def call_external(self, name: str, args: Sequence[SSAValue], ret: Attribute | None):
        self.m.declare(name, [a.type for a in args], ret or llvm.LLVMVoidType())
        return self.add_call(llvm.CallOp(name, *args, return_type=ret))

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
        return self.add(llvm.MulOp(self.index(a), self.index(b), overflow=_NSW))

    def iadd(self, a: int | SSAValue, b: int | SSAValue) -> int | SSAValue:
        ka, kb = self.known(a), self.known(b)
        if ka is not None and kb is not None:
            return ka + kb
        if ka == 0:
            return b
        if kb == 0:
            return a
        return self.add(llvm.AddOp(self.index(a), self.index(b), overflow=_NSW))

    def address(self, m: Mem, indices: Sequence[SSAValue], elem: Attribute) -> SSAValue:
        linear: int | SSAValue = 0
        for size, i in zip(m.sizes, indices):
            linear = self.iadd(self.imul(linear, size), self.get(i))
        if self.known(linear) == 0:
            return m.ptr
        return self.add(_llvm_gep(m.ptr, self.index(linear), elem))

    def element_count(self, sizes: Sequence[int | SSAValue]) -> int | SSAValue:
        n: int | SSAValue = 1
        for s in sizes:
            n = self.imul(n, s)
        return n


_NSW = llvm.OverflowAttr((llvm.OverflowFlag.NO_SIGNED_WRAP,))


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
    properties = _NO_FASTMATH if is_float else {}

    def lower(fl: FunctionLowering, op: Operation) -> None:
        lhs, rhs = fl.get(op.operands[0]), fl.get(op.operands[1])
        props = _REASSOC if is_float and op in fl.reductions else properties
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
        fl.vals[op.results[0]] = fl.intrinsic(f"{base}.{_suffix(t)}", args, t)

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
        vectorised = bool(_vector_variants(symbol, len(args), t, fl.m.vector_abi))
        if vector_math.choose(name, t, fl.m.math_impl, vectorised, fl.inline_math_candidates):
            fl.vals[op.results[0]] = vector_math.emit(fl, name, args, t)
            return
        if intrinsic is not None and not vectorised:
            fl.vals[op.results[0]] = fl.intrinsic(f"{intrinsic}.{_suffix(t)}", args, t)
            return
        fl.m.declare_math(symbol, len(args), t)
        fl.vals[op.results[0]] = fl.add_call(llvm.CallOp(symbol, *args, return_type=t))

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
    minus_one = fl.add(_icmp("eq", rhs, fl.const(-1, t)))
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
        inexact = fl.add(_icmp("ne", r, fl.const(0, t)))
        sign = fl.add(llvm.XOrOp(r, rhs))
        differ = fl.add(_icmp("slt" if toward_floor else "sge", sign, fl.const(0, t)))
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


for _op, _llvm in [
    (arith.SIToFPOp, llvm.SIToFPOp),
    (arith.ExtFOp, llvm.FPExtOp),
    (arith.TruncFOp, llvm.FPTruncOp),
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
        name = f"{base}.{_suffix(t)}.{_suffix(src.type)}"
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
    negative = fl.add(_icmp("slt", src, fl.const(0, I64)))
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
    root = fl.intrinsic(f"llvm.sqrt.{_suffix(t)}", [fl.get(op.operand)], t)
    fl.vals[op.result] = fl.add(llvm.FDivOp(fl.const(1.0, t), root))


@lowers(math.AbsIOp)
def _absi(fl: FunctionLowering, op: math.AbsIOp) -> None:
    t = scalar_type(op.result.type)
    args = [fl.get(op.operand), fl.const(0, I1)]
    fl.vals[op.result] = fl.intrinsic(f"llvm.abs.{_suffix(t)}", args, t)


@lowers(math.FPowIOp)
def _fpowi(fl: FunctionLowering, op: math.FPowIOp) -> None:
    t = op.result.type
    base, exponent = fl.get(op.lhs), fl.get(op.rhs)
    if exponent.type != I32:
        exponent = fl.add(llvm.TruncOp(exponent, I32))
    name = f"llvm.powi.{_suffix(t)}.i32"
    fl.vals[op.result] = fl.intrinsic(name, [base, exponent], t)


# -- memref ------------------------------------------------------------------


def _site(op: Operation) -> int:
    site = op.attributes.get("msir.site")
    return site.value.data if isinstance(site, IntegerAttr) else -1


@lowers(memref.AllocOp)
def _alloc(fl: FunctionLowering, op: memref.AllocOp) -> None:
    t = op.memref.type
    dynamic = iter(op.dynamic_sizes)
    sizes = tuple(fl.get(next(dynamic)) if d < 0 else d for d in t.get_shape())
    elem_bytes = _byte_size(memory_type(t.element_type))
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
    fl.m.passthrough[allocator.ALLOC] = _ALLOC_ATTRS
    ptr = fl.call_external(allocator.ALLOC, [nbytes], PTR)
    # The xDSL llvm dialect has no icmp on pointers; the address as an integer
    # is only compared, never used to address memory.
    address = fl.add(llvm.PtrToIntOp(ptr, I64))
    failed = fl.add(_icmp("eq", address, fl.const(0, I64)))
    report = Block()
    fl.branch_unless(failed, report)
    code, site = fl.const(ERR_MEMORY, I32), fl.const(_site(op), I64)
    report.add_ops([llvm.CallOp(ERROR_FN, code, site), llvm.BrOp(fl.bail())])
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
    too_big = fl.add(_icmp("ugt", total, fl.const(MAX_ALLOC_BYTES, I64)))
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
    fl.m.passthrough[allocator.FREE] = _FREE_ATTRS
    fl.call_external(allocator.FREE, [fl.mem(op.memref).ptr], None)


@lowers(memref.LoadOp)
def _load(fl: FunctionLowering, op: memref.LoadOp) -> None:
    elem_t = op.memref.type.element_type
    elem = memory_type(elem_t)
    ptr = fl.address(fl.mem(op.memref), op.indices, elem)
    value = fl.add(_llvm_load(ptr, elem))
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
    fl.emit(_llvm_store(value, ptr))


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
        is_j = fl.add(_icmp("eq", index, fl.const(j, I64)))
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
        ptr = fl.add(_llvm_gep(ptr, fl.get(op.offsets[0]), elem))
    elif offset != 0:
        elem = memory_type(op.source.type.element_type)
        ptr = fl.add(_llvm_gep(ptr, fl.const(offset, I64), elem))
    fl.vals[op.result] = Mem(ptr, sizes)


# -- func --------------------------------------------------------------------


def _stack_address(add: Callable[[Operation], SSAValue]) -> SSAValue:
    """The current frame's address as an i64 (the stack grows down)."""
    zero = add(llvm.ConstantOp(IntegerAttr(0, I32), I32))
    frame = add(llvm.CallIntrinsicOp("llvm.frameaddress.p0", [zero], [PTR]))
    return add(llvm.PtrToIntOp(frame, I64))


def _check_stack(fl: FunctionLowering, op: func.CallOp) -> None:
    """Before a call that may recurse: report error 4 at the call's site and
    return at once when the stack below the entry wrapper exceeds STACK_LIMIT."""
    base = fl.add(llvm.LoadOp(fl.add(llvm.AddressOfOp(STACK_BASE, PTR)), I64))
    used = fl.add(llvm.SubOp(base, _stack_address(fl.add)))
    too_deep = fl.add(_icmp("ugt", used, fl.const(STACK_LIMIT, I64)))
    report = Block()
    fl.branch_unless(too_deep, report)
    code, site = fl.const(ERR_RECURSION, I32), fl.const(_site(op), I64)
    report.add_ops([llvm.CallOp(ERROR_FN, code, site), llvm.BrOp(fl.bail())])
    fl.region.add_block(report)


@lowers(func.CallOp)
def _call(fl: FunctionLowering, op: func.CallOp) -> None:
    name = op.callee.string_value()
    args = fl.flatten_all(op.arguments)
    if name == ERROR_FN:
        fl.add_call(llvm.CallOp(ERROR_FN, *args))
        return
    if STACK_CHECK in op.attributes:
        _check_stack(fl, op)
    sig = fl.m.sigs[name]
    ret = None if not sig.flat_results else sig.ret_type
    result = fl.add_call(llvm.CallOp(name, *args, return_type=ret))
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
        failed = fl.add(_icmp("ne", status, fl.const(0, I32)))
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


def _for(fl: FunctionLowering, op: scf.ForOp) -> None:
    lb, ub, step = fl.get(op.lb), fl.get(op.ub), fl.get(op.step)
    fl.bind(op.results, _loop(fl, op, lb, ub, step, fl.flatten_all(op.iter_args)))


def _loop(
    fl: FunctionLowering,
    op: scf.ForOp,
    lb: SSAValue,
    ub: SSAValue,
    step: SSAValue,
    inits: Sequence[SSAValue],
) -> list[SSAValue]:
    """The loop of `op` from `lb` to `ub` with the flattened `inits`; returns
    the flattened values carried out of it."""
    header = Block(arg_types=[I64, *(v.type for v in inits)])
    body, exit_block = Block(), Block()
    fl.emit(llvm.BrOp(header, lb, *inits))
    fl.start_block(header)
    iv, *carried = header.args
    fl.emit(llvm.CondBrOp(fl.add(_icmp("slt", iv, ub)), body, [], exit_block, []))
    fl.start_block(body)
    region_block = op.body.block
    _mark_reductions(fl, region_block)
    fl.vals[region_block.args[0]] = iv
    fl.bind(region_block.args[1:], carried)
    yield_op = fl.lower_ops(region_block)
    assert yield_op is not None
    next_iv = fl.add(llvm.AddOp(iv, step))
    fl.emit(llvm.BrOp(header, next_iv, *fl.flatten_all(yield_op.operands)))
    fl.start_block(exit_block)
    return carried


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
# Parallel loops: outlined bodies for the thread pool (msir.lowering.threads)
# ---------------------------------------------------------------------------

ROW_LOCAL_ATTR = "msir.row_local"
PARALLEL_FOR = "__msir_parallel_for"
PRIVATE_STACK_BYTES = 64 * 1024
"""A privatised row buffer up to this size lives on the chunk's stack."""
DYNAMIC_TRIPS = 64
"""Trip count the cost model assumes for an inner loop of unknown length."""

# The combining ops a parallel reduction may use, with their identity (the
# start of every chunk's partial) and how partials are combined.
_REDUCTIONS: dict[type[Operation], tuple[object, type[Operation] | str]] = {
    arith.AddfOp: (-0.0, llvm.FAddOp),
    arith.MulfOp: (1.0, llvm.FMulOp),
    arith.MaximumfOp: (float("-inf"), "llvm.maximum"),
    arith.MinimumfOp: (float("inf"), "llvm.minimum"),
    arith.MaxnumfOp: (float("nan"), "llvm.maxnum"),
    arith.MinnumfOp: (float("nan"), "llvm.minnum"),
    arith.AddiOp: (0, llvm.AddOp),
    arith.MuliOp: (1, llvm.MulOp),
    arith.AndIOp: (-1, llvm.AndOp),
    arith.OrIOp: (0, llvm.OrOp),
    arith.XOrIOp: (0, llvm.XOrOp),
    arith.MaxSIOp: ("min", "llvm.smax"),
    arith.MinSIOp: ("max", "llvm.smin"),
    arith.MaxUIOp: (0, "llvm.umax"),
    arith.MinUIOp: (-1, "llvm.umin"),
}

# math ops that are one instruction (or a cheap intrinsic) once vectorised;
# every other math op is a libm/libmvec call.
_CHEAP_MATH = (
    math.SqrtOp, math.AbsFOp, math.FloorOp, math.CeilOp, math.RoundOp, math.RoundEvenOp,
    math.TruncOp, math.CopySignOp, math.FmaOp, math.AbsIOp,
)


@dataclass
class _ParallelPlan:
    """How one `scf.for` is split: see `_parallel_plan`."""

    cost: int  # work units per iteration
    private: list[SSAValue]  # row buffers each chunk allocates for itself
    reductions: list[type[Operation]]  # the combining op of each carried value


def _static_trips(op: scf.ForOp) -> int | None:
    bounds = []
    for v in (op.lb, op.ub, op.step):
        owner = v.owner
        if not (isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr)):
            return None
        bounds.append(owner.value.value.data)
    lb, ub, step = bounds
    return max(0, -(-(ub - lb) // step)) if step > 0 else None


def _block_cost(block: Block) -> int:
    """Work units of one run of `block`: ~1 per scalar op, 4 per division, 8
    per libm call; nested loops times their trip count."""
    total = 0
    for op in block.ops:
        if isinstance(op, (arith.ConstantOp, scf.YieldOp, scf.ConditionOp)):
            continue
        if isinstance(op, scf.ForOp):
            trips = _static_trips(op)
            body = _block_cost(op.body.block) + 1
            total += (DYNAMIC_TRIPS if trips is None else trips) * body
        elif isinstance(op, scf.WhileOp):
            inner = sum(_block_cost(r.block) for r in op.regions if r.blocks)
            total += DYNAMIC_TRIPS * (inner + 1)
        elif isinstance(op, scf.IfOp):
            total += 1 + max((_block_cost(r.block) for r in op.regions if r.blocks), default=0)
        elif op.name.startswith("math.") and not isinstance(op, _CHEAP_MATH):
            total += 8
        elif isinstance(op, (arith.DivfOp, arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp)):
            total += 4
        else:
            total += 1
    return total


def _root(v: SSAValue) -> SSAValue:
    """The buffer a memref value is a view of (through memref.cast)."""
    while isinstance(v.owner, memref.CastOp):
        v = v.owner.source
    return v


def _parallel_plan(fl: FunctionLowering, op: scf.ForOp) -> _ParallelPlan | None:
    """How to split `op` across threads, or None to keep it serial.

    Parallel when its step is 1, its body calls nothing but `__msir_error`,
    allocates nothing on the heap, and every buffer it writes is either
    * indexed with the loop's induction variable as first index, in every
      load and store of the loop (iterations touch disjoint rows), or
    * a one-row buffer of a row group (`msir.row_local`, see
      `convert-msir-to-loops`), which each chunk replaces by its own;
    every buffer it touches is a function argument, an allocation or a call
    result (so distinct buffers never alias); and every loop-carried value is
    a reduction (`_reduction_kind`). Serial too when
    its size is known and below two chunks' worth of work."""
    from msir.lowering import threads

    body = op.body.block
    iv = body.args[0]
    if fl.known(fl.get(op.step)) != 1:
        return None
    inside: set[Operation] = set(op.body.walk())
    accesses: dict[SSAValue, list[tuple[Sequence[SSAValue], bool]]] = {}
    for inner in inside:
        if isinstance(inner, func.CallOp) and inner.callee.string_value() != ERROR_FN:
            return None
        if isinstance(inner, (memref.AllocOp, memref.DeallocOp)):
            return None
        if isinstance(inner, (memref.LoadOp, memref.StoreOp)):
            is_store = isinstance(inner, memref.StoreOp)
            accesses.setdefault(_root(inner.memref), []).append((inner.indices, is_store))
    entry = fl.f.body.blocks.first
    private = []
    for root, uses in accesses.items():
        owner = root.owner
        if isinstance(owner, memref.AllocaOp) and owner in inside:
            continue  # a buffer of one iteration
        if not (
            owner is entry
            or isinstance(owner, (memref.AllocOp, memref.AllocaOp, func.CallOp))
        ):
            return None
        if not any(is_store for _, is_store in uses):
            continue
        if isinstance(owner, memref.AllocOp) and ROW_LOCAL_ATTR in owner.attributes:
            private.append(root)
        elif any(not indices or indices[0] != iv for indices, _ in uses):
            return None
    reductions = []
    for j in range(len(body.args) - 1):
        kind = _reduction_kind(body, j)
        if kind is None:
            return None
        reductions.append(kind)
    cost = _block_cost(body) + 1
    trips = _static_trips(op)
    if trips is not None and trips * cost < 2 * threads.MIN_CHUNK_WORK:
        return None
    if not threads.load():
        return None
    return _ParallelPlan(cost, private, reductions)


def _reduction_kind(body: Block, j: int) -> type[Operation] | None:
    """The combining op if carried value `j` of the loop body `body` is a
    reduction: `yield op(acc, x)` with `acc` used once, or the result of an
    inner `scf.for` that receives `acc` as its only use and reduces it the
    same way (a full reduction of a 2-D nest)."""
    carried = body.args[1 + j]
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    value = terminator.operands[j]
    owner = value.owner
    # a running value used by anything but the yield (a prefix sum stored
    # per row) would depend on where its chunk starts
    if not (
        isinstance(owner, Operation)
        and owner.parent_block() is body
        and carried.has_one_use()
        and value.has_one_use()
    ):
        return None
    if type(owner) in _REDUCTIONS:
        return type(owner) if carried in owner.operands else None
    if isinstance(owner, scf.ForOp):
        inits = list(owner.iter_args)
        k = value.index  # type: ignore[attr-defined]
        if k < len(inits) and inits[k] is carried:
            return _reduction_kind(owner.body.block, k)
    return None


def _for_maybe_parallel(fl: FunctionLowering, op: scf.ForOp) -> None:
    plan = None
    if fl.m.parallel and not fl.outlined:
        plan = _parallel_plan(fl, op)
    if plan is None:
        _for(fl, op)
    else:
        _parallel_for(fl, op, plan)


LOWERINGS[scf.ForOp] = _for_maybe_parallel


def _identity(kind: type[Operation], t: Attribute) -> int | float:
    value = _REDUCTIONS[kind][0]
    if isinstance(value, str):
        width = t.width.data  # type: ignore[attr-defined]
        return -(1 << (width - 1)) if value == "min" else (1 << (width - 1)) - 1
    return value  # type: ignore[return-value]


def _combine(fl: FunctionLowering, kind: type[Operation], a: SSAValue, b: SSAValue) -> SSAValue:
    how = _REDUCTIONS[kind][1]
    if isinstance(how, str):
        return fl.intrinsic(f"{how}.{_suffix(a.type)}", [a, b], a.type)
    props = _REASSOC if issubclass(how, llvm.AbstractFloatArithOp) else {}
    return fl.add(how.create(operands=[a, b], result_types=[a.type], properties=props))


def _captured(op: Operation) -> list[SSAValue]:
    """Values used inside `op`'s regions and defined outside `op`, in order."""
    inside: set[SSAValue] = set()
    for inner in op.walk():
        inside.update(inner.results)
        for region in inner.regions:
            for block in region.blocks:
                inside.update(block.args)
    found: dict[SSAValue, None] = {}
    for inner in op.walk():
        if inner is op:
            continue
        for v in inner.operands:
            if v not in inside:
                found.setdefault(v, None)
    return list(found)


def _parallel_for(fl: FunctionLowering, op: scf.ForOp, plan: _ParallelPlan) -> None:
    """Outline `op` as `@<f>.par<k>(begin, end, captured...) -> partials`
    with a task `@<f>.par<k>.task(ctx, chunk, begin, end)` that unpacks the
    captured values from `ctx` and stores the partials of its chunk, and call
    `__msir_parallel_for`; then combine the partials in chunk order."""
    from msir.lowering import threads

    m = fl.m
    private = set(plan.private)
    captured = _captured(op)
    leaves: dict[SSAValue, None] = {}  # the parent's LLVM values the body needs

    def need(x: int | SSAValue) -> None:
        if isinstance(x, SSAValue) and not isinstance(x.owner, llvm.ConstantOp):
            leaves.setdefault(x, None)

    for v in captured:
        if _root(v) in private:
            continue
        value = fl.vals[v]
        if isinstance(value, Mem):
            need(value.ptr)
            for size in value.sizes:
                need(size)
        else:
            need(value)
    params = list(leaves)
    acc_types = [scalar_type(r.type) for r in op.results]
    # '.' never occurs in a Python identifier: no clash with msir functions
    name = f"{fl.f.sym_name.data}.par{len(m.outlined) // 2}"
    body_fn, heap_private = _outlined_body(fl, op, plan, name, captured, params, acc_types)
    task = _task_function(name, params, acc_types)
    m.outlined += [body_fn, task]

    slots = fl.prologue
    ctx = llvm.AllocaOp(fl.const(max(1, len(params) + len(acc_types)), I64), I64, alignment=8)
    slots.add_op(ctx)
    partials = []
    for t in acc_types:
        array = llvm.AllocaOp(fl.const(threads.MAX_CHUNKS, I64), t, alignment=64)
        slots.add_op(array)
        partials.append(array.results[0])
    # llvmlite types an alloca's pointer by its element: the slots hold
    # values of several types, so address them through an untyped pointer
    ctx_ptr = fl.add(llvm.BitcastOp(ctx.results[0], PTR))
    for j, x in enumerate([*params, *partials]):
        slot = ctx_ptr if j == 0 else fl.add(_llvm_gep(ctx_ptr, fl.const(j, I64), I64))
        fl.emit(_llvm_store(x, slot))
    task_address = fl.add(llvm.AddressOfOp(task.sym_name.data, PTR))
    min_iters = fl.const(-(-threads.MIN_CHUNK_WORK // plan.cost), I64)
    lb, ub = fl.get(op.lb), fl.get(op.ub)
    chunks = fl.call_external(PARALLEL_FOR, [task_address, ctx_ptr, lb, ub, min_iters], I64)
    if heap_private:
        status = fl.add(llvm.LoadOp(fl.add(llvm.AddressOfOp(STATUS, PTR)), I32))
        fl.branch_unless(fl.add(_icmp("ne", status, fl.const(0, I32))), fl.bail())
    if not acc_types:
        return
    # init (+) partial[0] (+) ... (+) partial[chunks - 1]
    header = Block(arg_types=[I64, *acc_types])
    combine, done = Block(), Block()
    fl.emit(llvm.BrOp(header, fl.const(0, I64), *fl.flatten_all(op.iter_args)))
    fl.start_block(header)
    k, *accs = header.args
    fl.emit(llvm.CondBrOp(fl.add(_icmp("slt", k, chunks)), combine, [], done, []))
    fl.start_block(combine)
    combined = [
        _combine(fl, kind, acc, fl.add(_llvm_load(fl.add(_llvm_gep(array, k, t)), t)))
        for kind, acc, array, t in zip(plan.reductions, accs, partials, acc_types)
    ]
    fl.emit(llvm.BrOp(header, fl.add(llvm.AddOp(k, fl.const(1, I64))), *combined))
    fl.start_block(done)
    fl.bind(op.results, accs)


def _noalias_params(fl: FunctionLowering, params: Sequence[SSAValue]) -> bool:
    """Whether the body's pointer parameters may be `noalias`: each is a
    distinct buffer (a `noalias` argument of the parent, or an allocation)."""
    parent_noalias = _is_public(fl.f) and fl.f.sym_name.data not in fl.m.callees
    for x in params:
        if x.type != PTR:
            continue
        owner = x.owner
        if owner is fl.prologue:
            if not parent_noalias or x.index in fl.shared_params:  # type: ignore[attr-defined]
                return False
        elif isinstance(owner, llvm.CallOp):
            if owner.callee.string_value() not in ("aligned_alloc", allocator.ALLOC):
                return False
        elif not isinstance(owner, llvm.AllocaOp):
            return False
    return True


def _outlined_body(
    fl: FunctionLowering,
    op: scf.ForOp,
    plan: _ParallelPlan,
    name: str,
    captured: Sequence[SSAValue],
    params: Sequence[SSAValue],
    acc_types: Sequence[Attribute],
) -> tuple[llvm.FuncOp, bool]:
    """`@name(i64 begin, i64 end, params...)`: the loop over [begin, end)
    with the reductions started at their identity, returning the partials.
    Also whether it allocates a private buffer on the heap (it can fail)."""
    ret = packed_type(acc_types)
    sig = Signature([], [], [I64, I64, *(x.type for x in params)], ret, list(acc_types))
    child = FunctionLowering(fl.m, fl.f, sig)
    child.outlined = True
    start = child.block
    child.region.add_block(start)
    begin, end, *args = child.prologue.args
    remap = dict(zip(params, args))

    def rebuild(x: int | SSAValue) -> int | SSAValue:
        if isinstance(x, int) or x in remap:
            return remap.get(x, x)  # type: ignore[arg-type]
        constant = x.owner
        assert isinstance(constant, llvm.ConstantOp)
        return child.const(constant.value.value.data, x.type)  # type: ignore[attr-defined]

    private: dict[SSAValue, SSAValue] = {}
    frees: list[SSAValue] = []
    for v in captured:
        value = fl.vals[v]
        root = _root(v)
        if root in plan.private:
            if root not in private:
                private[root] = _private_buffer(child, root, frees)
            assert isinstance(value, Mem)
            child.vals[v] = Mem(private[root], value.sizes)
        elif isinstance(value, Mem):
            child.vals[v] = Mem(rebuild(value.ptr), tuple(rebuild(s) for s in value.sizes))  # type: ignore[arg-type]
        else:
            child.vals[v] = rebuild(value)
    inits = [child.const(_identity(kind, t), t) for kind, t in zip(plan.reductions, acc_types)]
    partials = _loop(child, op, begin, end, child.const(1, I64), inits)
    for ptr in frees:
        child.call_external("free", [ptr], None)
    if not partials:
        child.emit(llvm.ReturnOp())
    elif len(partials) == 1:
        child.emit(llvm.ReturnOp(partials[0]))
    else:
        packed = child.add(llvm.UndefOp(ret))
        for j, value in enumerate(partials):
            packed = child.add(llvm.InsertValueOp(DenseArrayBase.from_list(i64, [j]), packed, value))
        child.emit(llvm.ReturnOp(packed))
    child.prologue.add_op(llvm.BrOp(start))
    # called from its task only: inlining would compile the loop twice
    props: dict[str, Attribute | None] = {"passthrough": ArrayAttr([StringAttr("noinline")])}
    if _noalias_params(fl, params):
        no_alias = DictionaryAttr({"llvm.noalias": UnitAttr()})
        props["arg_attrs"] = ArrayAttr(
            [no_alias if t == PTR else DictionaryAttr({}) for t in sig.flat_args]
        )
    body_fn = llvm.FuncOp(
        name,
        llvm.LLVMFunctionType(sig.flat_args, ret),
        linkage=llvm.LinkageAttr("internal"),
        body=child.region,
        other_props=props,
    )
    return body_fn, bool(frees)


def _private_buffer(child: FunctionLowering, root: SSAValue, frees: list[SSAValue]) -> SSAValue:
    """A chunk's own copy of the row buffer `root` (static shape): on the
    stack when small, else `aligned_alloc`ed (and freed at the end); a failed
    allocation reports error 3 and returns at once."""
    t = root.type
    assert isinstance(t, MemRefType)
    elem = memory_type(t.element_type)
    count = 1
    for d in t.get_shape():
        count *= d
    nbytes = count * _byte_size(elem)
    if nbytes <= PRIVATE_STACK_BYTES:
        alloca = llvm.AllocaOp(child.const(max(1, count), I64), elem, alignment=ALLOC_ALIGN)
        child.prologue.add_op(alloca)
        return alloca.results[0]
    rounded = max(ALLOC_ALIGN, -(-nbytes // ALLOC_ALIGN) * ALLOC_ALIGN)
    args = [child.const(ALLOC_ALIGN, I64), child.const(rounded, I64)]
    ptr = child.call_external("aligned_alloc", args, PTR)
    failed = child.add(_icmp("eq", child.add(llvm.PtrToIntOp(ptr, I64)), child.const(0, I64)))
    report = Block()
    child.branch_unless(failed, report)
    site = root.owner.attributes.get("msir.site")  # type: ignore[union-attr]
    code = child.const(ERR_MEMORY, I32)
    where = child.const(site.value.data if isinstance(site, IntegerAttr) else -1, I64)
    report.add_ops([llvm.CallOp(ERROR_FN, code, where), llvm.BrOp(child.bail())])
    child.region.add_block(report)
    frees.append(ptr)
    return ptr


def _task_function(name: str, params: Sequence[SSAValue], acc_types: Sequence[Attribute]) -> llvm.FuncOp:
    """`void @name.task(ptr ctx, i64 chunk, i64 begin, i64 end)`: loads the
    parameters of `@name` from the 8-byte slots of `ctx` (then one slot per
    reduction: its array of partials), calls it and stores the partials at
    index `chunk`."""
    block = Block(arg_types=[PTR, I64, I64, I64])
    ctx, chunk, begin, end = block.args
    ops: list[Operation] = []

    def add(o: Operation) -> SSAValue:
        ops.append(o)
        return o.results[0]

    def slot(j: int) -> SSAValue:
        return ctx if j == 0 else add(llvm.GEPOp(ctx, [j], I64, inbounds=True))

    values = [add(_llvm_load(slot(j), x.type)) for j, x in enumerate(params)]
    arrays = [add(_llvm_load(slot(len(params) + r), PTR)) for r in range(len(acc_types))]
    ret = None if not acc_types else packed_type(acc_types)
    call = llvm.CallOp(name, begin, end, *values, return_type=ret)
    ops.append(call)
    for r, (array, t) in enumerate(zip(arrays, acc_types)):
        if len(acc_types) == 1:
            value = call.results[0]
        else:
            value = add(llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [r]), call.results[0], t))
        ops.append(_llvm_store(value, add(_llvm_gep(array, chunk, t))))
    ops.append(llvm.ReturnOp())
    block.add_ops(ops)
    return llvm.FuncOp(
        f"{name}.task",
        llvm.LLVMFunctionType([PTR, I64, I64, I64]),
        linkage=llvm.LinkageAttr("internal"),
        body=Region([block]),
    )


# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------


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
