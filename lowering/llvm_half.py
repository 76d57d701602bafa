"""The half-precision conversions LLVM cannot be left to do, as llvm-dialect ops.

`msir-lower-to-llvm` keeps float16 as LLVM's `half`, whose conversions to and
from `float` are single instructions on x86-64 with F16C (every AVX2 CPU).
Two conversions are built here instead, from integer and float32 operations
only, because LLVM lowers them to compiler-rt calls (`__truncsfbf2`,
`__truncdfhf2`) that a JIT-loaded module cannot resolve:

* bfloat16, which the llvmlite export has no type for, lives in an `i16`:
  `bf16_to_f32` moves its bits to the top half of a float32 (exact);
  `f32_to_bf16` rounds to nearest even, NaN to the quiet NaN of its sign and
  overflow to infinity, bit for bit as ml_dtypes does.
* float64 -> float16 rounds once, as NumPy does, not twice through float32:
  `f64_to_f16` first rounds to float32 *to odd* (truncate, then set the last
  bit if anything was cut off), which float32 -> float16 then rounds exactly,
  since float32 carries more than two extra bits.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import Float16Type, Float32Type, Float64Type, IntegerAttr, IntegerType, i64
from xdsl.ir import Operation, SSAValue

from msir.lowering.llvm_ops import I16, I32

F32 = Float32Type()

Add = Callable[[Operation], SSAValue]
"""Appends an op to the current block and returns its result."""
Const = Callable[[int, IntegerType], SSAValue]
"""An integer constant of the given type."""


def _fcmp(pred: str, a: SSAValue, b: SSAValue) -> Operation:
    return llvm.FCmpOp(a, b, IntegerAttr(arith.CMPF_COMPARISON_OPERATIONS.index(pred), i64))


def bf16_to_f32(add: Add, const: Const, bits: SSAValue) -> SSAValue:
    """The float32 of the bfloat16 whose bits are the i16 `bits` (exact)."""
    wide = add(llvm.ZExtOp(bits, I32))
    return add(llvm.BitcastOp(add(llvm.ShlOp(wide, const(16, I32))), F32))


def f32_to_bf16(add: Add, const: Const, x: SSAValue) -> SSAValue:
    """The i16 bits of float32 `x` rounded to bfloat16 (nearest, ties to even)."""
    bits = add(llvm.BitcastOp(x, I32))
    lsb = add(llvm.AndOp(add(llvm.LShrOp(bits, const(16, I32))), const(1, I32)))
    rounded = add(llvm.AddOp(bits, add(llvm.AddOp(lsb, const(0x7FFF, I32)))))
    sign = add(llvm.AndOp(bits, const(0x80000000, I32)))
    quiet_nan = add(llvm.OrOp(sign, const(0x7FC00000, I32)))
    is_nan = add(_fcmp("uno", x, x))
    chosen = add(llvm.SelectOp(is_nan, quiet_nan, rounded))
    return add(llvm.TruncOp(add(llvm.LShrOp(chosen, const(16, I32))), I16))


def f64_to_f16(add: Add, const: Const, fabs: Callable[[SSAValue], SSAValue], x: SSAValue) -> SSAValue:
    """Float64 `x` rounded once to float16 (nearest, ties to even), through float32 rounded to odd."""
    nearest = add(llvm.FPTruncOp(x, F32))
    back = add(llvm.FPExtOp(nearest, Float64Type()))
    bits = add(llvm.BitcastOp(nearest, I32))
    # Nearest rounded away from zero: its predecessor in magnitude is the truncation.
    overshoot = add(llvm.ZExtOp(add(_fcmp("ogt", fabs(back), fabs(x))), I32))
    truncated = add(llvm.SubOp(bits, overshoot))
    inexact = add(llvm.ZExtOp(add(_fcmp("une", back, x)), I32))
    odd = add(llvm.OrOp(truncated, inexact))
    return add(llvm.FPTruncOp(add(llvm.BitcastOp(odd, F32)), Float16Type()))
