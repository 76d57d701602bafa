"""Cheap constructors for the llvm-dialect ops loop bodies are made of, and
the LLVM types they use.

IRDL's generic `__init__` rebuilds and re-checks every property attribute;
`create` with shared, pre-built properties is several times cheaper. Used by
`msir-lower-to-llvm` (`msir.lowering.to_llvm`), its parallel outlining
(`msir.lowering.parallel_outline`) and the runtime functions of
`msir.lowering.llvm_abi`.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    UnitAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from msir.errors import CompileError

I1 = IntegerType(1)
I8 = IntegerType(8)
I16 = IntegerType(16)
I32 = IntegerType(32)
I64 = IntegerType(64)
PTR = llvm.LLVMPointerType()

_ORDERING = IntegerAttr(0, i64)
_NO_WRAP = IntegerAttr(0, 32)
_DYNAMIC_INDEX = DenseArrayBase.from_list(i32, [llvm.GEP_USE_SSA_VAL])
_ICMP_PREDICATES = {f.value: IntegerAttr(f.to_int(), i64) for f in llvm.ICmpPredicateFlag}
NO_FASTMATH = {"fastmathFlags": llvm.FastMathAttr(None)}
"""Properties of a float op with strict IEEE semantics."""
REASSOC = {"fastmathFlags": llvm.FastMathAttr([llvm.FastMathFlag.REASSOC])}
"""Properties of a float op LLVM may reassociate (a reduction's accumulation)."""
NSW = llvm.OverflowAttr((llvm.OverflowFlag.NO_SIGNED_WRAP,))


def icmp(pred: str, a: SSAValue, b: SSAValue) -> Operation:
    return llvm.ICmpOp.create(
        operands=[a, b], result_types=[I1], properties={"predicate": _ICMP_PREDICATES[pred]}
    )


def llvm_load(ptr: SSAValue, t: Attribute) -> Operation:
    return llvm.LoadOp.create(
        operands=[ptr], result_types=[t], properties={"ordering": _ORDERING}
    )


def llvm_store(value: SSAValue, ptr: SSAValue) -> Operation:
    return llvm.StoreOp.create(operands=[value, ptr], properties={"ordering": _ORDERING})


def llvm_gep(ptr: SSAValue, index: SSAValue, elem: Attribute) -> Operation:
    """`getelementptr inbounds elem, ptr, index`."""
    properties = {
        "rawConstantIndices": _DYNAMIC_INDEX,
        "elem_type": elem,
        "noWrapFlags": _NO_WRAP,
        "inbounds": UnitAttr(),
    }
    return llvm.GEPOp.create(operands=[ptr, index], result_types=[PTR], properties=properties)


def intrinsic_suffix(t: Attribute) -> str:
    """The suffix of an LLVM intrinsic's name for values of type `t` (`f32`, `i64`)."""
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    if isinstance(t, IndexType):
        return "i64"
    raise CompileError(f"msir-lower-to-llvm: no intrinsic suffix for type {t}")
