"""Half-precision arithmetic computed in float32, rounded once per op: the first
step of `convert-msir-to-loops` (the CPU target computes float16 and bfloat16
through float32; another target may compute them natively).

Contract
--------
Expects: verified `msir` IR, anywhere in a module (regions and fusion bodies
included). Inside a fusion the casts it inserts are scalar conversions in the
fused loop; outside one each is a loop of its own.

Rewrites: every op that computes with the values of a float16 or bfloat16
tensor — elementwise ops, `msir.compare`, the reductions, `argmax`/`argmin`,
`msir.matmul`, `msir.einsum`, `msir.iota` — into the same op on float32: each
half operand is cast to float32 first (exact), each half result is computed
in float32 and cast back (one rounding, to nearest even). That is how NumPy
computes float16 (and ml_dtypes bfloat16) ufuncs: one float32 evaluation and
one rounding per op, so an elementwise chain rounds after every op, as
NumPy's does, and `add`, `sub`, `mul`, `div`, `sqrt` are bit-exact (float32
has more than 2p+2 bits for p = 11 or 8, so the double rounding is exact).
A matmul accumulates in float32 and rounds once (NumPy's float16 matmul does
the same; a float32 matmul runs through the BLAS). A reduction accumulates in
float32 and rounds once: NumPy does so along the contiguous axis, and rounds
after every addition along the others, which this is more accurate than.

Casts: a cast between a half dtype and anything but float32 goes through
float32 (exact for half -> anything; for integers and bool -> half NumPy and
ml_dtypes round from float32 too, and float64 -> bfloat16 is ml_dtypes'
float64 -> float32 -> bfloat16), except float64 -> float16, which NumPy
rounds once from float64 and `msir-lower-to-llvm` does the same.

Guarantees: the ops that remain on half tensors move, select or store values
without arithmetic (constants, casts to and from float32 and float64 ->
float16, shapes, slices, take/scatter, select, tuples, control flow, tapes;
`scatter_add` and `tape_add` add in float32 and round per addition in
`convert-msir-to-loops`); every result keeps its type; the module verifies.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from msir.dialects import msir as M

_COMPUTING = (
    M.ElementwiseBinaryOp,
    M.ElementwiseUnaryOp,
    M.CompareOp,
    M.ReduceOp,
    M.ArgReduceOp,
    M.MatmulOp,
    M.EinsumOp,
    M.IotaOp,
)
"""The ops whose results are arithmetic on their operands' values (or, for iota, on indices)."""

_F32 = Float32Type()


def is_half(t: Attribute) -> bool:
    """Is `t` a tensor (or element type) of float16 or bfloat16?"""
    element = t.element_type if isinstance(t, TensorType) else t
    return isinstance(element, Float16Type | BFloat16Type)


def _widened(t: Attribute) -> Attribute:
    return TensorType(_F32, t.get_shape()) if is_half(t) else t  # type: ignore[attr-defined]


def _cast_before(op: Operation, value: SSAValue, element: Attribute) -> SSAValue:
    """`value` cast to element type `element`, the cast inserted before `op` at its location."""
    cast = M.CastOp.create(operands=[value], result_types=[TensorType(element, value.type.get_shape())])  # type: ignore[attr-defined]
    cast.location = op.location
    op.parent_block().insert_op_before(cast, op)  # type: ignore[union-attr]
    return cast.results[0]


def _widen(op: Operation) -> None:
    """Rebuild `op` on float32 operands and results, casting back its half results."""
    operands = [_cast_before(op, v, _F32) if is_half(v.type) else v for v in op.operands]
    wide = type(op).create(
        operands=operands,
        result_types=[_widened(r.type) for r in op.results],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    wide.location = op.location
    op.parent_block().insert_op_before(wide, op)  # type: ignore[union-attr]
    for old, new in zip(op.results, wide.results):
        if is_half(old.type):
            narrow = M.CastOp.create(operands=[new], result_types=[old.type])
            narrow.location = op.location
            op.parent_block().insert_op_before(narrow, op)  # type: ignore[union-attr]
            new = narrow.results[0]
        old.replace_all_uses_with(new)
    op.detach()
    op.erase()


def _is_direct_cast(src: Attribute, to: Attribute) -> bool:
    """Does convert-msir-to-loops cast between these element types in one rounding?"""
    if isinstance(src, Float32Type) or isinstance(to, Float32Type):
        return True
    return isinstance(src, Float64Type) and isinstance(to, Float16Type)


def _route_cast(op: M.CastOp) -> None:
    """A cast from or to a half dtype through float32, where it is not direct."""
    src, to = op.input.type.element_type, op.result.type.element_type  # type: ignore[attr-defined]
    if src == to or not (is_half(src) or is_half(to)) or _is_direct_cast(src, to):
        return
    op.operands[0] = _cast_before(op, op.input, _F32)


def widen_half(module: ModuleOp) -> None:
    """Rewrite `module` in place as the module docstring says."""
    for op in list(module.walk()):
        if isinstance(op, M.CastOp):
            _route_cast(op)
        elif isinstance(op, _COMPUTING) and any(is_half(v.type) for v in (*op.operands, *op.results)):
            _widen(op)

