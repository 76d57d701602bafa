"""Half-precision arithmetic computed in float32, rounded once per op: the first
step of `convert-msir-to-loops` (the CPU target computes float16 and bfloat16
through float32; another target may compute them natively).

Contract
--------
Expects: verified `msir` IR, anywhere in a module (regions and fusion bodies
included). Inside a fusion the casts it inserts are scalar conversions in the
fused loop; an elementwise op outside one becomes a fusion of its own (its
casts and itself), so it is still one loop without buffers in between.

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
after every addition along the others, which this is more accurate than. A
reduction over trailing axes stays on half: `convert-msir-to-loops` accumulates
it in float32 itself (`reduces_natively`).

Casts: a cast between a half dtype and anything but float32 goes through
float32 (exact for half -> anything; for integers and bool -> half NumPy and
ml_dtypes round from float32 too, and float64 -> bfloat16 is ml_dtypes'
float64 -> float32 -> bfloat16), except float64 -> float16, which NumPy
rounds once from float64 and `msir-lower-to-llvm` does the same.

Guarantees: the ops that remain on half tensors move, select or store values
without arithmetic (constants, casts to and from float32 and float64 ->
float16, shapes, slices, take/scatter, select, tuples, control flow, tapes;
`scatter_add` and `tape_add` add in float32 and round per addition in
`convert-msir-to-loops`), and the reductions over trailing axes; every
result keeps its type; the module verifies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, LocationAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

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


class _Emitter:
    """Builds ops at one place (before an op, or into a new fusion body), each at `loc`."""

    def __init__(self, loc: LocationAttr, before: Operation | None = None, block: Block | None = None):
        self.loc, self.before, self.block = loc, before, block

    def add(self, op: Operation) -> SSAValue:
        op.location = self.loc
        if self.before is not None:
            self.before.parent_block().insert_op_before(op, self.before)  # type: ignore[union-attr]
        else:
            self.block.add_op(op)  # type: ignore[union-attr]
        return op.results[0]

    def cast(self, value: SSAValue, to: Attribute) -> SSAValue:
        """`value` cast to tensor type `to` (same shape)."""
        return self.add(M.CastOp.create(operands=[value], result_types=[to]))

    def f32(self, value: SSAValue) -> SSAValue:
        return self.cast(value, TensorType(_F32, value.type.get_shape()))  # type: ignore[attr-defined]


def _widened_op(e: _Emitter, op: Operation, operands: Sequence[SSAValue]) -> list[SSAValue]:
    """`op` rebuilt on float32 (its half operands cast up, its half results cast back): its results."""
    wide = type(op).create(
        operands=[e.f32(v) if is_half(v.type) else v for v in operands],
        result_types=[_widened(r.type) for r in op.results],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    e.add(wide)
    return [e.cast(new, old.type) if is_half(old.type) else new for old, new in zip(op.results, wide.results)]


def _routed_cast(e: _Emitter, op: M.CastOp, operands: Sequence[SSAValue]) -> list[SSAValue]:
    return [e.cast(e.f32(operands[0]), op.result.type)]


def _replace(op: Operation, build: Callable[[_Emitter, Operation, Sequence[SSAValue]], list[SSAValue]]) -> None:
    """Replace `op` by what `build` emits for it: in place inside a fusion or for an
    op no fusion may hold, else in a fusion of its own (one loop, no buffers between
    the casts and the op)."""
    parent = op.parent_op()
    if isinstance(parent, M.FusionOp) or not isinstance(op, M.FUSIBLE_ELEMENTWISE):
        results = build(_Emitter(op.location, before=op), op, op.operands)
    else:
        block = Block(arg_types=[v.type for v in op.operands])
        yielded = build(_Emitter(op.location, block=block), op, block.args)
        yield_ = M.YieldOp(*yielded)
        yield_.location = op.location
        block.add_op(yield_)
        fusion = M.FusionOp(list(op.operands), [r.type for r in op.results], Region(block))
        fusion.location = op.location
        op.parent_block().insert_op_before(fusion, op)  # type: ignore[union-attr]
        results = list(fusion.outputs)
    for old, new in zip(op.results, results):
        old.replace_all_uses_with(new)
    op.detach()
    op.erase()


def _is_direct_cast(src: Attribute, to: Attribute) -> bool:
    """Does convert-msir-to-loops cast between these element types in one rounding?"""
    if isinstance(src, Float32Type) or isinstance(to, Float32Type):
        return True
    return isinstance(src, Float64Type) and isinstance(to, Float16Type)


def _needs_routing(op: M.CastOp) -> bool:
    """Is `op` a cast from or to a half dtype that goes through float32?"""
    src, to = op.input.type.element_type, op.result.type.element_type  # type: ignore[attr-defined]
    return src != to and (is_half(src) or is_half(to)) and not _is_direct_cast(src, to)


def reduces_natively(op: Operation) -> bool:
    """Does convert-msir-to-loops reduce `op`'s half input itself? Over trailing
    axes it accumulates each row in an f32 register, reading the half elements
    (no f32 copy of the input); over others it accumulates in the result buffer,
    which must then be f32."""
    if not isinstance(op, M.ReduceOp) or not op.axes_list:
        return False
    rank = len(M.shape_of(op.input.type))
    return sorted(a % rank for a in op.axes_list) == list(range(rank - len(op.axes_list), rank))


def widen_half(module: ModuleOp) -> None:
    """Rewrite `module` in place as the module docstring says."""
    for op in list(module.walk()):
        if isinstance(op, M.CastOp):
            if _needs_routing(op):
                _replace(op, _routed_cast)
        elif isinstance(op, _COMPUTING) and any(is_half(v.type) for v in (*op.operands, *op.results)):
            if not reduces_natively(op):
                _replace(op, _widened_op)

