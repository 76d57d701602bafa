"""The host ABI of compiled msir code: how loops-level functions look to LLVM
and to the JIT (`msir.lowering.jit`), their entry wrappers and the runtime
globals. `msir-lower-to-llvm` (`msir.lowering.to_llvm`) builds functions to it.

Values at boundaries
====================
* `index` becomes `i64`; an i1 memref element is one byte (i8, 0 or 1).
* A memref value is *flattened* wherever it crosses a boundary (function
  argument or result, block argument): into its data pointer followed by one
  i64 per dynamic dim, in dim order (`flat_types`). A fully static memref is
  one `!llvm.ptr`. A function whose flattened results number more than one
  returns them packed in a literal `!llvm.struct<(...)>` (`packed_type`).
* Public functions are external; their pointer parameters are `noalias`
  unless the module also calls them, except an output with
  `msir.alias_of = i` and input i (the caller may pass one buffer for both:
  `shared_params`; see `msir.lowering.bufferize`, Donation). Private functions
  with a body are internal.

Runtime globals and errors
==========================
`@__msir_status : i32` and `@__msir_site : i64` are module globals (weak
linkage, so the JIT can look them up); `@__msir_error(i32 code, i64 site)` is
defined to keep the first error only (`runtime_globals`). Codes 1 and 2 come
from the loops level (`msir.lowering.loops_abi`); a failed allocation records
`ERR_MEMORY` and a recursion too deep for the native stack `ERR_RECURSION`,
and the function then returns at once with zero results (as does its caller,
after checking the status). A module with calls marked `msir.stack_check`
also has `@__msir_stack_base : i64`, where the entry wrapper records its frame
address; a checked call compares the stack used since then with `STACK_LIMIT`.
A module that calls `@__msir_raise` (a failed `msir.check`) also has
`@__msir_message : i64` and `@__msir_value0..3 : i64`: `@__msir_raise(i32 code,
i64 site, ptr message, i64 v0, ..., i64 v3)`, the first error only, records the
address of the check's constant message (NUL-terminated JSON) and its values'
bits, which the JIT decodes into the user's exception.

Entry wrappers
==============
Each public function `@f` gets an entry wrapper for the JIT (`entry_wrapper`)::

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

Allocation
==========
`memref.alloc` calls `__msir_alloc` and `memref.dealloc` `__msir_free`, msir's
caching allocator (`msir.lowering.allocator`; `ALLOC_ALIGN`-byte aligned),
declared as an allocation family (`ALLOC_ATTRS`): its result aliases nothing
else. `msir.lowering.llvm_text` prints such function attributes (and the
loop hints below) in the LLVM IR.

Loop hints
==========
A loop latch (the `llvm.br` back to a loop header) marked `FOLD_TAIL_ATTR`
gets LLVM's `llvm.loop.vectorize.predicate.enable` hint (`llvm_text`):
the loop vectoriser folds the remainder into the vector body with masked
loads and stores instead of emitting a scalar copy of the loop after it, or,
where it cannot, vectorises as without the hint. `msir-lower-to-llvm` marks
the loops whose scalar copy would cost more to compile than the masks cost
to run (`to_llvm.FOLD_TAIL_MIN_COST`). When every element such a loop loads,
stores or computes in floating point has one width, the attribute is that
width in bits, and the JIT adds `llvm.loop.vectorize.width` = the vector
bits LLVM's vectoriser uses on this CPU (`jit.vector_bits`) over it: the
width LLVM's cost model picks for such a loop (the same optimised IR), without
the cost model's search over every narrower width, a quarter of the
optimisation time of a 200-op function (W8: 12.3 -> 9.2 ms). `msir-opt -t
llvm` prints no width (its text is the same on every machine).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from msir.errors import CompileError
from msir.lowering.llvm_ops import I1, I8, I16, I32, I64, PTR, icmp
from msir.lowering.loops_abi import (
    ALIAS_OF_ATTR,
    DONATE_ATTR,
    DONATION_REFUSED_ATTR,
    ERROR_FUNC,
    NUM_OUTPUTS_ATTR,
    RAISE_FUNC,
    RAISE_SLOTS,
)

STATUS = "__msir_status"
SITE = "__msir_site"
ENTRY_SUFFIX = "__entry"
STACK_BASE = "__msir_stack_base"
MESSAGE = "__msir_message"
VALUE_SLOTS = tuple(f"__msir_value{k}" for k in range(RAISE_SLOTS))
STACK_LIMIT = 4 << 20
"""Native stack (bytes) a call into the module may use below its entry wrapper
before a recursive call reports error 4 instead of overflowing the stack (the
main thread's stack is 8 MiB; Python and the caller keep the rest)."""

ERR_MEMORY = 3
ERR_RECURSION = 4

FOLD_TAIL_ATTR = "msir.fold_tail"
"""Attribute of a loop latch `llvm.br`, unit or its elements' width in bits (an i64): see "Loop hints" above."""

ALLOC_ALIGN = 64

ALLOC_ATTRS = ArrayAttr(
    [
        StringAttr("nounwind"),
        StringAttr("willreturn"),
        StringAttr('allockind("alloc,uninitialized")'),
        StringAttr("allocsize(0)"),
        ArrayAttr([StringAttr("alloc-family"), StringAttr("msir")]),
    ]
)
"""msir's allocator as LLVM sees it: an allocation family whose result aliases
nothing else (`llvm_text` gives its result `noalias`)."""
FREE_ATTRS = ArrayAttr([StringAttr("nounwind"), StringAttr("willreturn")])

# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


def scalar_type(t: Attribute) -> Attribute:
    """The LLVM type of a scalar value of builtin type `t`."""
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, (IntegerType, Float16Type, Float32Type, Float64Type)):
        return t
    if isinstance(t, BFloat16Type):  # llvmlite has no bfloat: its bits (msir.lowering.llvm_half)
        return I16
    raise CompileError(f"msir-lower-to-llvm: unsupported type {t}")


def bfloat16_bits(value: float) -> int:
    """The 16 bits of bfloat16 `value` (a bfloat16 value, as xDSL's FloatAttr of bf16 holds)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if value != value:  # NaN: the quiet NaN of its sign
        return (bits >> 16 & 0x8000) | 0x7FC0
    return (bits + 0x7FFF + (bits >> 16 & 1)) >> 16


def memory_type(t: Attribute) -> Attribute:
    """The LLVM type of a memref element in memory (i1 is stored as i8)."""
    return I8 if t == I1 else scalar_type(t)


def byte_size(t: Attribute) -> int:
    """The size in memory of a value of LLVM type `t`."""
    if isinstance(t, Float64Type) or t in (I64,):
        return 8
    if isinstance(t, Float32Type) or t == I32:
        return 4
    if isinstance(t, Float16Type):
        return 2
    if t == I8:
        return 1
    assert isinstance(t, IntegerType)
    return (t.width.data + 7) // 8


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


class Mem(NamedTuple):
    """A lowered memref: data pointer and sizes (int if static, else i64 SSA)."""

    ptr: SSAValue
    sizes: tuple[int | SSAValue, ...]


@dataclass
class Signature:
    arg_types: list[Attribute]  # original builtin types
    result_types: list[Attribute]
    flat_args: list[Attribute]
    ret_type: Attribute  # packed LLVM return type
    flat_results: list[Attribute]


def signature(f: func.FuncOp) -> Signature:
    ins = list(f.function_type.inputs.data)
    outs = list(f.function_type.outputs.data)
    flat_args = [t for a in ins for t in flat_types(a)]
    flat_res = [t for r in outs for t in flat_types(r)]
    return Signature(ins, outs, flat_args, packed_type(flat_res), flat_res)


def is_public(f: func.FuncOp) -> bool:
    vis = f.sym_visibility
    return vis is None or vis.data == "public"


def output_aliases(f: func.FuncOp) -> list[int]:
    """Per output argument of `f`: the input whose buffer it may be (its
    `msir.alias_of`), else -1."""
    n_out = f.attributes.get(NUM_OUTPUTS_ATTR)
    n = n_out.value.data if isinstance(n_out, IntegerAttr) else 0
    attrs = list(f.arg_attrs.data) if f.arg_attrs is not None else []
    out = []
    for a in attrs[len(attrs) - n:] if n else ():
        alias = a.data.get(ALIAS_OF_ATTR) if isinstance(a, DictionaryAttr) else None
        out.append(alias.value.data if isinstance(alias, IntegerAttr) else -1)
    return out


def shared_params(f: func.FuncOp, sig: Signature) -> set[int]:
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


# ---------------------------------------------------------------------------
# The runtime globals and the entry wrappers
# ---------------------------------------------------------------------------


def runtime_globals(checks_stack: bool, raises: bool = False) -> list[Operation]:
    """`@__msir_status`, `@__msir_site`, `@__msir_error` and, for a module
    whose calls check the stack, `@__msir_stack_base`; for a module with
    failed-check calls (`raises`), `@__msir_raise` and its globals."""
    ops: list[Operation] = [
        llvm.GlobalOp(I32, STATUS, "weak", value=IntegerAttr(0, I32)),
        llvm.GlobalOp(I64, SITE, "weak", value=IntegerAttr(0, I64)),
        _error_function(),
    ]
    if checks_stack:
        ops.append(llvm.GlobalOp(I64, STACK_BASE, "weak", value=IntegerAttr(0, I64)))
    if raises:
        ops += [llvm.GlobalOp(I64, name, "weak", value=IntegerAttr(0, I64)) for name in (MESSAGE, *VALUE_SLOTS)]
        ops.append(_raise_function())
    return ops


def _raise_function() -> llvm.FuncOp:
    """`@__msir_raise(code, site, message, v0..v3)`: record the first error with its message and values."""
    entry = Block(arg_types=[I32, I64, PTR, *[I64] * RAISE_SLOTS])
    record, done = Block(), Block()
    code, site, message, *values = entry.args
    status_ptr = llvm.AddressOfOp(STATUS, PTR)
    status = llvm.LoadOp(status_ptr, I32)
    zero = llvm.ConstantOp(IntegerAttr(0, I32), I32)
    is_first = icmp("eq", status.results[0], zero.results[0])
    entry.add_ops([status_ptr, status, zero, is_first, llvm.CondBrOp(is_first, record, [], done, [])])
    site_ptr = llvm.AddressOfOp(SITE, PTR)
    message_ptr = llvm.AddressOfOp(MESSAGE, PTR)
    address = llvm.PtrToIntOp(message, I64)
    record.add_ops([llvm.StoreOp(code, status_ptr), site_ptr, llvm.StoreOp(site, site_ptr),
                    message_ptr, address, llvm.StoreOp(address, message_ptr)])
    for name, v in zip(VALUE_SLOTS, values):
        slot = llvm.AddressOfOp(name, PTR)
        record.add_ops([slot, llvm.StoreOp(v, slot)])
    record.add_op(llvm.BrOp(done))
    done.add_op(llvm.ReturnOp())
    return llvm.FuncOp(
        RAISE_FUNC,
        llvm.LLVMFunctionType([I32, I64, PTR, *[I64] * RAISE_SLOTS]),
        linkage=llvm.LinkageAttr("internal"),
        body=Region([entry, record, done]),
    )


def _error_function() -> llvm.FuncOp:
    """`@__msir_error(code, site)`: record the first error only."""
    entry = Block(arg_types=[I32, I64])
    record, done = Block(), Block()
    code, site = entry.args
    status_ptr = llvm.AddressOfOp(STATUS, PTR)
    status = llvm.LoadOp(status_ptr, I32)
    zero = llvm.ConstantOp(IntegerAttr(0, I32), I32)
    is_first = icmp("eq", status.results[0], zero.results[0])
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
        ERROR_FUNC,
        llvm.LLVMFunctionType([I32, I64]),
        linkage=llvm.LinkageAttr("internal"),
        body=Region([entry, record, done]),
    )


def stack_address(add: Callable[[Operation], SSAValue]) -> SSAValue:
    """The current frame's address as an i64 (the stack grows down)."""
    zero = add(llvm.ConstantOp(IntegerAttr(0, I32), I32))
    frame = add(llvm.CallIntrinsicOp("llvm.frameaddress.p0", [zero], [PTR]))
    return add(llvm.PtrToIntOp(frame, I64))


def entry_wrapper(f: func.FuncOp, sig: Signature, checks_stack: bool = False) -> llvm.FuncOp:
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
        ops.append(llvm.StoreOp(stack_address(add), add(llvm.AddressOfOp(STACK_BASE, PTR))))
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
    num_outputs = f.attributes.get(NUM_OUTPUTS_ATTR, IntegerAttr(0, i64))
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
            NUM_OUTPUTS_ATTR: num_outputs,
            "msir.arg_types": ArrayAttr(sig.arg_types),
            "msir.result_types": ArrayAttr(sig.result_types),
            **donation,
        },
    )
