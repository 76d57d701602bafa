"""The `msir` dialect: a functional tensor IR for NumPy-style programs.

Values are immutable builtin ranked tensors (`tensor<4x8xf32>`, rank 0 for
scalars) of f16, bf16, f32, f64, i1, i32 or i64. Elementwise ops take operands of equal
shape: NumPy broadcasting is made explicit by `msir.broadcast_to`, which keeps
differentiation rules, fusion and lowering simple.

Every op's verifier calls the same shape/dtype inference functions
(`infer_*` below) that the Python frontend uses to type the code it builds, so a
program the frontend accepts always verifies, and a hand-written one that does
not verify is refused with the same message the frontend would give.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    FunctionType,
    SymbolRefAttr,
    UnitAttr,
    DYNAMIC_INDEX,
    AnyTensorTypeConstr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    TupleType,
    I64,
    i1,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParamAttrConstraint,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    HasParent,
    IsTerminator,
    Pure,
    SingleBlockImplicitTerminator,
    SymbolTable,
    SymbolUserOpInterface,
)

from msir.dialects import primitives as P
from msir.dialects.windows import infer_conv2d, infer_pool2d
from msir.errors import ShapeError
from xdsl.utils.exceptions import VerifyException

# ---------------------------------------------------------------------------
# Element types
# ---------------------------------------------------------------------------

DTYPES = P.DTYPES
"""The NumPy dtypes msir computes in, by their NumPy names."""

_XDSL_OF_DTYPE: dict[str, Attribute] = {
    "bool": IntegerType(1),
    "int32": IntegerType(32),
    "int64": IntegerType(64),
    "float16": Float16Type(),
    "bfloat16": BFloat16Type(),
    "float32": Float32Type(),
    "float64": Float64Type(),
}
_DTYPE_OF_XDSL = {v: k for k, v in _XDSL_OF_DTYPE.items()}


def element_type(dtype: str) -> Attribute:
    """The xDSL element type of a NumPy dtype name (`"float32"` -> `f32`)."""
    if dtype not in _XDSL_OF_DTYPE:
        raise ShapeOrTypeError(f"dtype {dtype} is not supported (use one of {', '.join(DTYPES)})", "dtype")
    return _XDSL_OF_DTYPE[dtype]


def dtype_of(type_: Attribute) -> str:
    """The NumPy dtype name of a tensor type or an element type."""
    if isinstance(type_, TensorType):
        type_ = type_.element_type
    if type_ not in _DTYPE_OF_XDSL:
        raise ShapeOrTypeError(f"element type {type_} is not supported", "dtype")
    return _DTYPE_OF_XDSL[type_]


def tensor_type(shape: Sequence[int], dtype: str) -> TensorType:
    return TensorType(element_type(dtype), list(shape))


def shape_of(type_: Attribute) -> tuple[int, ...]:
    assert isinstance(type_, TensorType), type_
    return tuple(type_.get_shape())


def is_float(dtype: str) -> bool:
    return dtype in P.FLOATS


def is_int(dtype: str) -> bool:
    return dtype in ("int32", "int64")


DYNAMIC = DYNAMIC_INDEX

CHECKPOINT_ATTR = "msir.checkpoint"
"""A unit attribute on a `func.call` of a `msir.checkpoint` function: reverse
mode keeps the call's arguments and recomputes its residuals (`msir-grad`)."""
NAME_ATTR = "msir.name"
"""A string attribute naming the op after the user's `name=` (`msir.ops`); every
msir pass keeps it, and the ops a pass derives from a named op carry a name
derived from it (`msir.passes.ad_ir.derived_name`)."""
"""A dimension whose size is only known at run time (`?` in the IR, as xDSL's
`get_shape()` returns it); every negative dimension counts as dynamic."""


# ---------------------------------------------------------------------------
# Shape and dtype inference, shared by the verifiers and the frontend
# ---------------------------------------------------------------------------


class ShapeOrTypeError(Exception):
    """Raised by the inference functions; `kind` is "shape", "dtype" or "index".

    The frontend turns it into `ShapeError`/`DTypeError`/`IndexError` at the user's
    source location, the verifiers into a `VerifyException` naming the op.
    """

    def __init__(self, message: str, kind: str = "shape"):
        super().__init__(message)
        self.kind = kind


def fmt_shape(shape: Sequence[int]) -> str:
    dims = ", ".join("?" if d < 0 else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def infer_broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """The NumPy broadcast of two shapes (right-aligned; a 1 stretches)."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise ShapeOrTypeError(
                f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast together"
            )
    return tuple(reversed(out))


def check_broadcast_to(src: Sequence[int], dst: Sequence[int]) -> None:
    """`src` must broadcast to exactly `dst` (NumPy's `np.broadcast_to` rule)."""
    ok = len(src) <= len(dst) and all(
        s == d or s == 1 for s, d in zip(reversed(src), reversed(dst))
    )
    if not ok:
        raise ShapeOrTypeError(
            f"shape {fmt_shape(src)} cannot be broadcast to {fmt_shape(dst)}"
        )


def normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeOrTypeError(
            f"axis {axis} is out of bounds for array of dimension {ndim}", "index"
        )
    return axis % ndim


def infer_reduce(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    """Result shape of a reduction over normalised, distinct `axes`."""
    if len(set(axes)) != len(axes):
        raise ShapeOrTypeError(f"duplicate value in axes {list(axes)}")
    for a in axes:
        if not 0 <= a < len(shape):
            raise ShapeOrTypeError(
                f"axis {a} is out of bounds for array of dimension {len(shape)}", "index"
            )
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def infer_matmul(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Result shape of `np.matmul(a, b)`: 1-D operands are promoted, batch dims broadcast."""
    if len(a) == 0 or len(b) == 0:
        raise ShapeOrTypeError("matmul: input operand does not have enough dimensions (scalar given)")
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise ShapeOrTypeError(
            f"matmul: shapes {fmt_shape(a)} and {fmt_shape(b)} not aligned: "
            f"{a2[-1]} (dim {len(a) - 1}) != {b2[-2]} (dim {max(len(b) - 2, 0)})"
        )
    batch = infer_broadcast(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


EINSUM_SUBSCRIPTS = frozenset(string.ascii_letters)
"""The letters an `msir.einsum` spec may use (NumPy's; `...` is the frontend's to expand)."""


def parse_einsum(spec: str, operands: int) -> tuple[tuple[str, ...], str]:
    """The operand terms and the output term of an explicit einsum spec for
    `operands` operands: `"ij,jk->ik"` gives `(("ij", "jk"), "ik")`.

    The IR form is NumPy's explicit form with nothing left implicit: one or two
    operand terms, `->` and the output, letters only, no spaces and no ellipsis;
    output letters are distinct and each appears in an operand."""
    if not 1 <= operands <= 2:
        raise ShapeOrTypeError(
            f"einsum takes one or two operands, got {operands} (contract more operands pairwise)"
        )
    inputs, arrow, output = spec.partition("->")
    if not arrow:
        raise ShapeOrTypeError(f"einsum spec '{spec}' needs an explicit output ('->')")
    terms = tuple(inputs.split(","))
    for c in inputs.replace(",", "") + output:
        if c not in EINSUM_SUBSCRIPTS:
            raise ShapeOrTypeError(
                f"einsum spec '{spec}' has invalid subscript {c!r} (letters a-z, A-Z only)"
            )
    if len(terms) != operands:
        raise ShapeOrTypeError(
            f"einsum spec '{spec}' has {len(terms)} operand terms for {operands} operands"
        )
    for c in output:
        if output.count(c) > 1:
            raise ShapeOrTypeError(f"einsum output '{output}' repeats subscript '{c}'")
        if not any(c in t for t in terms):
            raise ShapeOrTypeError(f"einsum output subscript '{c}' appears in no operand of '{spec}'")
    return terms, output


def _einsum_sizes(terms: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """The size of every subscript of `terms` over operands of `shapes`, checking
    that each operand has one subscript per axis and each subscript one size
    (a repeated subscript takes a diagonal, so its axes agree too)."""
    sizes: dict[str, int] = {}
    first: dict[str, tuple[int, int]] = {}
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ShapeOrTypeError(
                f"einsum operand #{i} of shape {fmt_shape(shape)} has rank {len(shape)}, "
                f"but its subscripts '{term}' name {len(term)} axes"
            )
        for axis, (c, d) in enumerate(zip(term, shape)):
            if d < 0:
                raise ShapeOrTypeError(f"einsum needs static shapes, operand #{i} has shape {fmt_shape(shape)}")
            if c not in sizes:
                sizes[c], first[c] = d, (i, axis)
            elif sizes[c] != d:
                j, other = first[c]
                raise ShapeOrTypeError(
                    f"einsum subscript '{c}' has size {sizes[c]} at operand #{j} axis {other} "
                    f"but {d} at operand #{i} axis {axis}"
                )
    return sizes


def infer_einsum(spec: str, shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Result shape of `np.einsum(spec, *operands)` for an explicit spec (see
    `parse_einsum`) and operands of `shapes`, all of one dtype. Subscripts of
    one size only: NumPy's stretching of a size-1 axis is an explicit
    `msir.broadcast_to` before the einsum."""
    terms, output = parse_einsum(spec, len(shapes))
    sizes = _einsum_sizes(terms, shapes)
    return tuple(sizes[c] for c in output)


def infer_transpose(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    if sorted(perm) != list(range(len(shape))):
        raise ShapeOrTypeError(
            f"permutation {list(perm)} is not a permutation of the {len(shape)} axes of {fmt_shape(shape)}"
        )
    return tuple(shape[p] for p in perm)


def check_reshape(src: Sequence[int], dst: Sequence[int]) -> None:
    if any(d < 0 for d in (*src, *dst)):
        return
    if math.prod(src) != math.prod(dst):
        raise ShapeOrTypeError(
            f"cannot reshape array of size {math.prod(src)} into shape {fmt_shape(dst)}"
        )


def slice_size(start: int, stop: int, step: int) -> int:
    """Number of elements of `range(start, stop, step)` (bounds already normalised)."""
    return max(0, len(range(start, stop, step)))


def check_slice(shape: Sequence[int], starts: Sequence[int], sizes: Sequence[int], steps: Sequence[int]) -> None:
    """Every selected index `start + k*step`, k < size, must lie inside its axis."""
    if not len(shape) == len(starts) == len(sizes) == len(steps):
        raise ShapeOrTypeError(
            f"slice of a rank-{len(shape)} array needs {len(shape)} starts, sizes and steps"
        )
    for axis, (dim, start, size, step) in enumerate(zip(shape, starts, sizes, steps)):
        if step == 0:
            raise ShapeOrTypeError("slice step cannot be zero", "index")
        if size == 0 or dim < 0:
            continue
        last = start + (size - 1) * step
        if not (0 <= start < dim and 0 <= last < dim):
            raise ShapeOrTypeError(
                f"slice of axis {axis} (size {dim}) from {start} by {step} for {size} "
                f"elements leaves the axis",
                "index",
            )


def infer_take(shape: Sequence[int], idx_shape: Sequence[int], axis: int) -> tuple[int, ...]:
    if not 0 <= axis < len(shape):
        raise ShapeOrTypeError(
            f"axis {axis} is out of bounds for array of dimension {len(shape)}", "index"
        )
    return (*shape[:axis], *idx_shape, *shape[axis + 1 :])


def infer_concatenate(shapes: Sequence[Sequence[int]], axis: int) -> tuple[int, ...]:
    if not shapes:
        raise ShapeOrTypeError("need at least one array to concatenate")
    first = shapes[0]
    if len(first) == 0:
        raise ShapeOrTypeError("zero-dimensional arrays cannot be concatenated")
    if not 0 <= axis < len(first):
        raise ShapeOrTypeError(
            f"axis {axis} is out of bounds for array of dimension {len(first)}", "index"
        )
    total = 0
    for s in shapes:
        if len(s) != len(first) or any(
            i != axis and x != y for i, (x, y) in enumerate(zip(s, first))
        ):
            raise ShapeOrTypeError(
                f"all the input array dimensions except for the concatenation axis must "
                f"match exactly: {fmt_shape(first)} and {fmt_shape(s)} along axis {axis}"
            )
        total += s[axis]
    return (*first[:axis], total, *first[axis + 1 :])


def infer_stack(shapes: Sequence[Sequence[int]], axis: int) -> tuple[int, ...]:
    if not shapes:
        raise ShapeOrTypeError("need at least one array to stack")
    first = tuple(shapes[0])
    for s in shapes:
        if tuple(s) != first:
            raise ShapeOrTypeError(
                f"all input arrays must have the same shape: {fmt_shape(first)} and {fmt_shape(s)}"
            )
    if not 0 <= axis <= len(first):
        raise ShapeOrTypeError(
            f"axis {axis} is out of bounds for array of dimension {len(first) + 1}", "index"
        )
    return (*first[:axis], len(shapes), *first[axis:])


# ---------------------------------------------------------------------------
# Verifier helpers
# ---------------------------------------------------------------------------


def _operand_types(op: IRDLOperation, results: bool = True) -> str:
    """`input: tensor<2x3xf32>, result: tensor<6xf32>`: each operand (and result) by its field name."""
    definition = op.get_irdl_definition()
    parts = []
    for name, _ in (*definition.operands, *(definition.results if results else ())):
        value = getattr(op, name)
        values = value if isinstance(value, Sequence) else (value,)
        parts.append(f"{name}: {', '.join(str(v.type) for v in values) or '()'}")
    return ", ".join(parts)


def _verify(op: IRDLOperation, check) -> None:
    """Run an inference check and report a failure as a VerifyException naming the
    op, its operands and their types (the inference message alone names only shapes)."""
    try:
        check()
    except ShapeOrTypeError as e:
        raise VerifyException(f"'{op.name}' {e} ({_operand_types(op)})") from None


def _expect_type(op: IRDLOperation, what: str, actual: Attribute, expected: Attribute) -> None:
    if actual != expected:
        operands = _operand_types(op, results=False)
        raise VerifyException(
            f"'{op.name}' {what} has type {actual}, but the operands imply {expected}"
            + (f" ({operands})" if operands else "")
        )


def _init_fixed(op: IRDLOperation, operands: Sequence[SSAValue | Operation], result_types: Sequence[Attribute],
                properties: Mapping[str, Attribute] | None = None) -> None:
    """Initialise `op`, of a class whose operand and result definitions are all
    single (no variadic or optional ones) and whose properties are given whole,
    as `IRDLOperation.__init__` would, without `irdl_op_init`'s generic
    argument lists: those cost more than the op itself (the frontend's ops
    took ~45 % of tracing a 200-op elementwise function). A wrong count
    cannot happen through the constructors that use it (fixed signatures)
    and would fail the op's verification."""
    Operation.__init__(op, operands=[SSAValue.get(v) for v in operands], result_types=result_types,
                       properties=properties or {})


def _expect_dtype(op: Operation, what: str, type_: Attribute, allowed: Sequence[str]) -> None:
    element = type_.element_type if isinstance(type_, TensorType) else type_
    if _DTYPE_OF_XDSL.get(element) not in allowed:
        raise VerifyException(
            f"'{op.name}' {what} has type {type_}, expected element type in {{{', '.join(allowed)}}}"
        )


def _ints(attr: Attribute) -> tuple[int, ...]:
    # Int arrays are declared AnyAttr so that the assembly format prints them in
    # full (`array<i64: 1, 0>`); xDSL's format parser cannot read a bare DenseArrayBase.
    if not isinstance(attr, DenseArrayBase) or attr.elt_type != i64:
        raise VerifyException(f"expected an array<i64: ...> attribute, got {attr}")
    return tuple(attr.get_values())


def _expect_i64_array(op: Operation, what: str, attr: Attribute) -> None:
    if not isinstance(attr, DenseArrayBase) or attr.elt_type != i64:
        raise VerifyException(f"'{op.name}' {what} must be an array<i64: ...> attribute, got {attr}")


def _i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


FLOATS = P.FLOATS
NUMERIC = P.NUMERIC
INTEGRAL = P.INTEGRAL
ALL = DTYPES

_TensorT = AnyTensorTypeConstr

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A constant tensor.

    ```mlir
    %c = msir.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %s = msir.constant dense<0.5> : tensor<f64>
    ```
    """

    name = "msir.constant"
    T: ClassVar = VarConstraint("T", _TensorT)
    value = prop_def(ParamAttrConstraint(DenseIntOrFPElementsAttr, (T, AnyAttr())))
    result = result_def(T)
    traits = traits_def(Pure(), ConstantLike())
    assembly_format = "$value attr-dict"

    def __init__(self, value: DenseIntOrFPElementsAttr):
        _init_fixed(self, (), [value.type], {"value": value})

    def verify_(self) -> None:
        _expect_type(self, "result", self.result.type, self.value.type)
        _expect_dtype(self, "result", self.result.type, ALL)

    def is_splat(self) -> bool:
        """All elements equal, and at least one. Ask this, not `value.is_splat()`:
        xDSL's reads the first element, so an empty constant raises IndexError."""
        return bool(self.value.get_values()) and self.value.is_splat()

    def values(self) -> tuple[bool | int | float, ...]:
        """The elements as Python values, booleans as `False`/`True`. Read
        constants through this, not `value.get_values()`: xDSL keeps i1 as signed,
        so `true` reads as -1 and would fold `x + True` into `x - 1`."""
        values = self.value.get_values()
        if self.value.type.element_type == i1:  # type: ignore[attr-defined]
            return tuple(v != 0 for v in values)
        return tuple(values)


@irdl_op_definition
class IotaOp(IRDLOperation):
    """Counts 0, 1, 2, ... along `dim`, constant along the other axes (`np.arange`).

    ```mlir
    %i = msir.iota 0 : tensor<5xi64>
    ```
    """

    name = "msir.iota"
    dim = prop_def(IntegerAttr[I64])
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$dim attr-dict `:` type($result)"

    def __init__(self, dim: int, result_type: TensorType):
        super().__init__(properties={"dim": IntegerAttr(dim, i64)}, result_types=[result_type])

    def verify_(self) -> None:
        rank = len(shape_of(self.result.type))
        if not 0 <= self.dim.value.data < rank:
            raise VerifyException(
                f"'{self.name}' dim {self.dim.value.data} is out of range for result type {self.result.type}"
            )
        _expect_dtype(self, "result", self.result.type, NUMERIC)


@irdl_op_definition
class RampOp(IRDLOperation):
    """`%count` rows (the result's dynamic first dim), row i being
    `start + i * step` elementwise (`start`, `step` of one type, any rank):
    `np.arange` with bounds known only at run time, whose length the frontend
    computes, and the broadcast of a value to such a runtime length (a step of
    zeros). A count below zero gives no rows.

    ```mlir
    %r = msir.ramp %start, %step, %n : tensor<f64>, tensor<i64> to tensor<?xf64>
    ```
    """

    name = "msir.ramp"
    T: ClassVar = VarConstraint("T", _TensorT)
    start = operand_def(T)
    step = operand_def(T)
    count = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$start `,` $step `,` $count attr-dict `:` type($start) `,` type($count) `to` type($result)"

    def __init__(self, start, step, count):
        t = SSAValue.get(start).type
        super().__init__(operands=[start, step, count],
                         result_types=[TensorType(t.element_type, [DYNAMIC, *shape_of(t)])])

    def verify_(self) -> None:
        _expect_dtype(self, "start", self.start.type, NUMERIC)
        if not _scalar_type(self.count.type, ("int64",)):
            raise VerifyException(f"'{self.name}' count has type {self.count.type}, expected tensor<i64>")
        expected = TensorType(self.start.type.element_type, [DYNAMIC, *shape_of(self.start.type)])  # type: ignore[attr-defined]
        _expect_type(self, "result", self.result.type, expected)


# ---------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------


class ElementwiseBinaryOp(IRDLOperation):
    """Base of the elementwise binary ops: operands and result of one tensor type."""

    T: ClassVar = VarConstraint("T", _TensorT)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"
    ALLOWED: ClassVar[Sequence[str]] = NUMERIC

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        _init_fixed(self, (lhs, rhs), [SSAValue.get(lhs).type])

    def verify_(self) -> None:
        _expect_dtype(self, "operand", self.lhs.type, self.ALLOWED)


class ElementwiseUnaryOp(IRDLOperation):
    """Base of the elementwise unary ops: operand and result of one tensor type."""

    T: ClassVar = VarConstraint("T", _TensorT)
    operand = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($result)"
    ALLOWED: ClassVar[Sequence[str]] = FLOATS

    def __init__(self, operand: SSAValue | Operation):
        _init_fixed(self, (operand,), [SSAValue.get(operand).type])

    def verify_(self) -> None:
        _expect_dtype(self, "operand", self.operand.type, self.ALLOWED)


def _elementwise_op(row: P.Elementwise) -> type[IRDLOperation]:
    """The op class of a row of the primitive table (`msir.dialects.primitives`)."""
    base = ElementwiseBinaryOp if row.arity == 2 else ElementwiseUnaryOp
    cls = type(
        row.class_name,
        (base,),
        {"name": f"msir.{row.name}", "__doc__": row.doc, "ALLOWED": row.dtypes,
         "__annotations__": {"ALLOWED": "ClassVar[Sequence[str]]"}, "__module__": __name__},
    )
    return irdl_op_definition(cls)


ELEMENTWISE_OPS: dict[str, type[IRDLOperation]] = {row.name: _elementwise_op(row) for row in P.ELEMENTWISE}
"""The elementwise op class of each primitive, by its name (`"exp"`: `ExpOp`)."""
# Each class under its own name (`msir.dialects.msir.ExpOp`), as the hand-written ops are.
globals().update({cls.__name__: cls for cls in ELEMENTWISE_OPS.values()})

COMPARE_PREDICATES = ("lt", "le", "gt", "ge", "eq", "ne")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """Elementwise comparison; the result is a boolean tensor of the same shape.

    Predicates: lt, le, gt, ge, eq, ne (ordered: a comparison with NaN is false,
    except `ne`, as in NumPy).

    ```mlir
    %m = msir.compare lt, %a, %b : tensor<4xf32>
    ```
    """

    name = "msir.compare"
    T: ClassVar = VarConstraint("T", _TensorT)
    predicate = prop_def(base(Attribute))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(_TensorT)
    traits = traits_def(Pure())

    def __init__(self, predicate: str, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        from xdsl.dialects.builtin import StringAttr

        t = SSAValue.get(lhs).type
        assert isinstance(t, TensorType)
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": StringAttr(predicate)},
            result_types=[TensorType(IntegerType(1), t.get_shape())],
        )

    @property
    def predicate_name(self) -> str:
        return self.predicate.data  # type: ignore[attr-defined]

    def verify_(self) -> None:
        if not isinstance(self.predicate, StringAttr):
            raise VerifyException(f"'{self.name}' predicate must be a string attribute, got {self.predicate}")
        _expect_dtype(self, "operand", self.lhs.type, ALL)
        if self.predicate_name not in COMPARE_PREDICATES:
            raise VerifyException(
                f"'{self.name}' unknown predicate '{self.predicate_name}', expected one of "
                f"{', '.join(COMPARE_PREDICATES)}"
            )
        _expect_type(
            self, "result", self.result.type, TensorType(IntegerType(1), shape_of(self.lhs.type))
        )

    @classmethod
    def parse(cls, parser: Parser) -> CompareOp:
        pred = parser.parse_identifier()
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        operands = parser.resolve_operands([lhs, rhs], [t, t], parser.pos)
        op = cls(pred, operands[0], operands[1])
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.predicate_name}, ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)


@irdl_op_definition
class SelectOp(IRDLOperation):
    """Elementwise choice `np.where(cond, a, b)`; all operands of one shape.

    ```mlir
    %r = msir.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
    """

    name = "msir.select"
    T: ClassVar = VarConstraint("T", _TensorT)
    cond = operand_def(_TensorT)
    true_value = operand_def(T)
    false_value = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$cond `,` $true_value `,` $false_value attr-dict `:` type($cond) `,` type($result)"

    def __init__(self, cond, true_value, false_value):
        super().__init__(
            operands=[cond, true_value, false_value], result_types=[SSAValue.get(true_value).type]
        )

    def verify_(self) -> None:
        _expect_dtype(self, "condition", self.cond.type, ("bool",))
        _expect_dtype(self, "value", self.result.type, ALL)
        if shape_of(self.cond.type) != shape_of(self.result.type):
            raise VerifyException(
                f"'{self.name}' condition type {self.cond.type} and value type "
                f"{self.result.type} differ in shape"
            )


@irdl_op_definition
class CastOp(IRDLOperation):
    """Elementwise dtype conversion (`x.astype(dtype)`), with NumPy's semantics:
    float to int truncates toward zero, anything to bool is `!= 0`.

    ```mlir
    %r = msir.cast %a : tensor<4xf32> to tensor<4xi64>
    ```
    """

    name = "msir.cast"
    input = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input: SSAValue | Operation, dtype: str):
        t = SSAValue.get(input).type
        _init_fixed(self, (input,), [tensor_type(shape_of(t), dtype)])

    def verify_(self) -> None:
        if shape_of(self.input.type) != shape_of(self.result.type):
            raise VerifyException(
                f"'{self.name}' input type {self.input.type} and result type "
                f"{self.result.type} differ in shape"
            )
        _expect_dtype(self, "input", self.input.type, ALL)
        _expect_dtype(self, "result", self.result.type, ALL)


# ---------------------------------------------------------------------------
# Shape ops
# ---------------------------------------------------------------------------


class _ShapeOp(IRDLOperation):
    input = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())

    def _same_dtype(self) -> None:
        _expect_dtype(self, "input", self.input.type, ALL)
        if self.input.type.element_type != self.result.type.element_type:  # type: ignore[attr-defined]
            raise VerifyException(
                f"'{self.name}' input type {self.input.type} and result type "
                f"{self.result.type} differ in element type"
            )


class _ResizeOp(_ShapeOp):
    """Base of broadcast_to and reshape: the result type alone says what they do."""

    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    @staticmethod
    def check(src: Sequence[int], dst: Sequence[int]) -> None:
        raise NotImplementedError

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        t = SSAValue.get(input).type
        _init_fixed(self, (input,), [TensorType(t.element_type, list(shape))])

    def verify_(self) -> None:
        self._same_dtype()
        _verify(self, lambda: self.check(shape_of(self.input.type), shape_of(self.result.type)))


@irdl_op_definition
class BroadcastToOp(_ResizeOp):
    """Broadcasts to a larger shape by NumPy's rule (right-aligned; a 1 stretches).

    ```mlir
    %r = msir.broadcast_to %a : tensor<1x4xf32> to tensor<3x4xf32>
    ```
    """

    name = "msir.broadcast_to"
    check = staticmethod(check_broadcast_to)


@irdl_op_definition
class ReshapeOp(_ResizeOp):
    """Reinterprets the elements (row-major order) with a new shape of equal size.

    ```mlir
    %r = msir.reshape %a : tensor<2x3xf32> to tensor<6xf32>
    ```
    """

    name = "msir.reshape"
    check = staticmethod(check_reshape)


@irdl_op_definition
class TransposeOp(_ShapeOp):
    """Permutes the axes: result axis i is input axis `permutation[i]`.

    ```mlir
    %r = msir.transpose %a, array<i64: 1, 0> : tensor<2x3xf32> to tensor<3x2xf32>
    ```
    """

    name = "msir.transpose"
    permutation = prop_def(AnyAttr())
    assembly_format = "$input `,` $permutation attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input: SSAValue | Operation, permutation: Sequence[int]):
        t = SSAValue.get(input).type
        shape = infer_transpose(shape_of(t), permutation)
        super().__init__(
            operands=[input],
            properties={"permutation": _i64_array(permutation)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        self._same_dtype()
        _expect_i64_array(self, "permutation", self.permutation)
        _verify(
            self,
            lambda: self._check(infer_transpose(shape_of(self.input.type), _ints(self.permutation))),
        )

    def _check(self, shape: tuple[int, ...]) -> None:
        if shape != shape_of(self.result.type):
            raise ShapeOrTypeError(
                f"result type {self.result.type} does not match the permuted input {fmt_shape(shape)}"
            )


@irdl_op_definition
class SliceOp(_ShapeOp):
    """A strided static slice: result element `[k0, k1, ...]` is input element
    `[start0 + k0*step0, start1 + k1*step1, ...]`; the result type gives the sizes.
    Steps may be negative; bounds are normalised (no negative starts).

    ```mlir
    %r = msir.slice %a starts array<i64: 1, 0> steps array<i64: 2, -1> : tensor<5x4xf32> to tensor<2x4xf32>
    ```
    """

    name = "msir.slice"
    starts = prop_def(AnyAttr())
    steps = prop_def(AnyAttr())
    assembly_format = (
        "$input `starts` $starts `steps` $steps attr-dict `:` type($input) `to` type($result)"
    )

    def __init__(self, input, starts: Sequence[int], sizes: Sequence[int], steps: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(
            operands=[input],
            properties={"starts": _i64_array(starts), "steps": _i64_array(steps)},
            result_types=[TensorType(t.element_type, list(sizes))],
        )

    def verify_(self) -> None:
        self._same_dtype()
        _expect_i64_array(self, "starts", self.starts)
        _expect_i64_array(self, "steps", self.steps)
        _verify(
            self,
            lambda: check_slice(
                shape_of(self.input.type),
                _ints(self.starts),
                shape_of(self.result.type),
                _ints(self.steps),
            ),
        )


@irdl_op_definition
class TakeOp(IRDLOperation):
    """Gathers along `axis` with an integer index tensor of any shape (`np.take`,
    integer and list indexing). Negative indices count from the end; an index
    still out of range is reported at run time as an IndexError.

    ```mlir
    %r = msir.take %a[%i] axis 0 : tensor<5x4xf32>, tensor<3xi64> to tensor<3x4xf32>
    ```
    """

    name = "msir.take"
    input = operand_def(_TensorT)
    indices = operand_def(_TensorT)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `[` $indices `]` `axis` $axis attr-dict `:` type($input) `,` type($indices) "
        "`to` type($result)"
    )

    def __init__(self, input, indices, axis: int):
        t = SSAValue.get(input).type
        shape = infer_take(shape_of(t), shape_of(SSAValue.get(indices).type), axis)
        super().__init__(
            operands=[input, indices],
            properties={"axis": IntegerAttr(axis, i64)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        _expect_dtype(self, "input", self.input.type, ALL)
        _expect_dtype(self, "indices", self.indices.type, ("int32", "int64"))

        def check():
            shape = infer_take(
                shape_of(self.input.type), shape_of(self.indices.type), self.axis.value.data
            )
            expected = TensorType(self.input.type.element_type, list(shape))  # type: ignore[attr-defined]
            _expect_type(self, "result", self.result.type, expected)

        _verify(self, check)


class _JoinOp(IRDLOperation):
    """Base of concatenate and stack: tensors joined along `axis`."""

    inputs = var_operand_def(_TensorT)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$inputs `axis` $axis attr-dict `:` type($inputs) `to` type($result)"

    @staticmethod
    def infer(shapes: Sequence[Sequence[int]], axis: int) -> tuple[int, ...]:
        raise NotImplementedError

    @staticmethod
    def mismatch(v: Attribute, first: Attribute) -> str | None:
        """Why operand type `v` cannot join operand #0's type `first`, if it cannot."""
        raise NotImplementedError

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        t = inputs[0].type
        shape = self.infer([shape_of(v.type) for v in inputs], axis)
        super().__init__(
            operands=[inputs],
            properties={"axis": IntegerAttr(axis, i64)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        def check():
            shape = self.infer([shape_of(v.type) for v in self.inputs], self.axis.value.data)
            _expect_dtype(self, "operand #0", self.inputs[0].type, ALL)
            expected = TensorType(self.inputs[0].type.element_type, list(shape))  # type: ignore[attr-defined]
            for i, v in enumerate(self.inputs):
                why = self.mismatch(v.type, self.inputs[0].type)
                if why is not None:
                    raise ShapeOrTypeError(f"operand #{i} has type {v.type}, expected {why}")
            _expect_type(self, "result", self.result.type, expected)

        _verify(self, check)


@irdl_op_definition
class ConcatenateOp(_JoinOp):
    """Joins tensors along an existing axis (`np.concatenate`).

    ```mlir
    %r = msir.concatenate %a, %b axis 0 : tensor<2x4xf32>, tensor<3x4xf32> to tensor<5x4xf32>
    ```
    """

    name = "msir.concatenate"
    infer = staticmethod(infer_concatenate)

    @staticmethod
    def mismatch(v: Attribute, first: Attribute) -> str | None:
        same = v.element_type == first.element_type  # type: ignore[attr-defined]
        return None if same else f"element type {first.element_type}"  # type: ignore[attr-defined]


@irdl_op_definition
class StackOp(_JoinOp):
    """Joins tensors of one shape along a new axis (`np.stack`).

    ```mlir
    %r = msir.stack %a, %b axis 0 : tensor<4xf32>, tensor<4xf32> to tensor<2x4xf32>
    ```
    """

    name = "msir.stack"
    infer = staticmethod(infer_stack)

    @staticmethod
    def mismatch(v: Attribute, first: Attribute) -> str | None:
        return None if v == first else str(first)


# ---------------------------------------------------------------------------
# Reductions and contractions
# ---------------------------------------------------------------------------


class ReduceOp(IRDLOperation):
    """Base of the reductions over `axes`; keepdims is read off the result rank."""

    input = operand_def(_TensorT)
    axes = prop_def(AnyAttr())
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$input `axes` $axes attr-dict `:` type($input) `to` type($result)"
    ALLOWED: ClassVar[Sequence[str]] = NUMERIC

    def __init__(self, input, axes: Sequence[int], keepdims: bool = False):
        t = SSAValue.get(input).type
        shape = infer_reduce(shape_of(t), axes, keepdims)
        super().__init__(
            operands=[input],
            properties={"axes": _i64_array(axes)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    @property
    def axes_list(self) -> tuple[int, ...]:
        return _ints(self.axes)

    @property
    def keepdims(self) -> bool:
        return len(shape_of(self.result.type)) == len(shape_of(self.input.type)) and bool(self.axes_list)

    def verify_(self) -> None:
        _expect_dtype(self, "input", self.input.type, self.ALLOWED)
        _expect_i64_array(self, "axes", self.axes)
        in_shape, out_shape = shape_of(self.input.type), shape_of(self.result.type)
        keep = len(out_shape) == len(in_shape)

        def check():
            shape = infer_reduce(in_shape, self.axes_list, keep)
            expected = TensorType(self.input.type.element_type, list(shape))  # type: ignore[attr-defined]
            _expect_type(self, "result", self.result.type, expected)

        _verify(self, check)


def _reduce(op_name: str, doc: str, dtypes: Sequence[str] = NUMERIC) -> type[ReduceOp]:
    cls = type(
        "Reduce" + op_name.split("_")[1].title() + "Op",
        (ReduceOp,),
        {"name": op_name, "__doc__": doc, "ALLOWED": dtypes, "__annotations__": {"ALLOWED": "ClassVar[Sequence[str]]"}},
    )
    return irdl_op_definition(cls)


_REDUCE_EXAMPLE = "\n\n    %r = msir.{} %a axes array<i64: 1> : tensor<4x5xf32> to tensor<4xf32>"
ReduceSumOp = _reduce("msir.reduce_sum", "Sum over axes." + _REDUCE_EXAMPLE.format("reduce_sum"))
ReduceProdOp = _reduce("msir.reduce_prod", "Product over axes." + _REDUCE_EXAMPLE.format("reduce_prod"))
ReduceMaxOp = _reduce(
    "msir.reduce_max", "Maximum over axes; NaN propagates." + _REDUCE_EXAMPLE.format("reduce_max"), ALL
)
ReduceMinOp = _reduce(
    "msir.reduce_min", "Minimum over axes; NaN propagates." + _REDUCE_EXAMPLE.format("reduce_min"), ALL
)
ReduceMeanOp = _reduce(
    "msir.reduce_mean", "Arithmetic mean over axes (floats)." + _REDUCE_EXAMPLE.format("reduce_mean"), FLOATS
)


class ArgReduceOp(IRDLOperation):
    """Base of argmax/argmin: the index (i64) of the first extreme element along
    `axis`, or over the flattened tensor when `axis` is absent. A NaN counts as
    the extreme, as in NumPy."""

    input = operand_def(_TensorT)
    axis = opt_prop_def(IntegerAttr[I64])
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$input (`axis` $axis^)? attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input, axis: int | None, keepdims: bool = False):
        t = SSAValue.get(input).type
        shape = self.infer(shape_of(t), axis, keepdims)
        props = {"axis": IntegerAttr(axis, i64)} if axis is not None else {}
        super().__init__(
            operands=[input], properties=props, result_types=[TensorType(i64, list(shape))]
        )

    @staticmethod
    def infer(shape: Sequence[int], axis: int | None, keepdims: bool) -> tuple[int, ...]:
        if 0 in shape:
            raise ShapeOrTypeError("attempt to get argmax/argmin of an empty sequence")
        if axis is None:
            return (1,) * len(shape) if keepdims else ()
        return infer_reduce(shape, [axis], keepdims)

    @property
    def axis_value(self) -> int | None:
        return None if self.axis is None else self.axis.value.data

    def verify_(self) -> None:
        _expect_dtype(self, "input", self.input.type, ALL)
        in_shape, out_shape = shape_of(self.input.type), shape_of(self.result.type)
        keep = len(out_shape) == len(in_shape) and len(in_shape) > 0

        def check():
            shape = self.infer(in_shape, self.axis_value, keep)
            _expect_type(self, "result", self.result.type, TensorType(i64, list(shape)))

        _verify(self, check)


@irdl_op_definition
class ArgmaxOp(ArgReduceOp):
    """Index of the maximum (`np.argmax`).

    ```mlir
    %r = msir.argmax %a axis 1 : tensor<4x5xf32> to tensor<4xi64>
    ```
    """

    name = "msir.argmax"


@irdl_op_definition
class ArgminOp(ArgReduceOp):
    """Index of the minimum (`np.argmin`).

    ```mlir
    %r = msir.argmin %a : tensor<4x5xf32> to tensor<i64>
    ```
    """

    name = "msir.argmin"


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """Matrix product with `np.matmul` semantics: 1-D operands are promoted to a
    row/column and the added axis removed; leading batch axes broadcast.

    ```mlir
    %r = msir.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> to tensor<2x4xf32>
    ```
    """

    name = "msir.matmul"
    lhs = operand_def(_TensorT)
    rhs = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `to` type($result)"

    def __init__(self, lhs, rhs):
        lt, rt = SSAValue.get(lhs).type, SSAValue.get(rhs).type
        shape = infer_matmul(shape_of(lt), shape_of(rt))
        super().__init__(operands=[lhs, rhs], result_types=[TensorType(lt.element_type, list(shape))])

    def verify_(self) -> None:
        _expect_dtype(self, "lhs", self.lhs.type, NUMERIC)
        if self.lhs.type.element_type != self.rhs.type.element_type:  # type: ignore[attr-defined]
            raise VerifyException(
                f"'{self.name}' lhs type {self.lhs.type} and rhs type {self.rhs.type} differ in element type"
            )

        def check():
            shape = infer_matmul(shape_of(self.lhs.type), shape_of(self.rhs.type))
            expected = TensorType(self.lhs.type.element_type, list(shape))  # type: ignore[attr-defined]
            _expect_type(self, "result", self.result.type, expected)

        _verify(self, check)


@irdl_op_definition
class EinsumOp(IRDLOperation):
    """Einstein summation over one or two operands (`np.einsum`) with an explicit
    spec (`parse_einsum`): each operand term names its axes, the output term the
    result's; a letter absent from the output is summed, a letter repeated in an
    operand takes its diagonal. Operands share the element type (no bools).
    `msir-lower-einsum` decomposes it into transposes, reshapes and a (batched)
    `msir.matmul`, or broadcasts, `msir.mul` and `msir.reduce_sum`.

    ```mlir
    %r = msir.einsum "bij,bkj->bik" %a, %b : tensor<5x2x3xf32>, tensor<5x4x3xf32> to tensor<5x2x4xf32>
    %t = msir.einsum "ii->" %m : tensor<3x3xf64> to tensor<f64>
    ```
    """

    name = "msir.einsum"
    spec = prop_def(StringAttr)
    inputs = var_operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$spec $inputs attr-dict `:` type($inputs) `to` type($result)"

    def __init__(self, spec: str, inputs: Sequence[SSAValue]):
        types = [SSAValue.get(v).type for v in inputs]
        shape = infer_einsum(spec, [shape_of(t) for t in types])
        super().__init__(
            operands=[list(inputs)],
            properties={"spec": StringAttr(spec)},
            result_types=[TensorType(types[0].element_type, list(shape))],
        )

    @property
    def spec_string(self) -> str:
        return self.spec.data

    def verify_(self) -> None:
        types = [v.type for v in self.inputs]
        for i, t in enumerate(types):
            _expect_dtype(self, f"operand #{i}", t, NUMERIC)
            if t.element_type != types[0].element_type:  # type: ignore[attr-defined]
                raise VerifyException(
                    f"'{self.name}' operand #0 type {types[0]} and operand #{i} type {t} differ in element type"
                )

        def check():
            shape = infer_einsum(self.spec_string, [shape_of(t) for t in types])
            expected = TensorType(types[0].element_type, list(shape))  # type: ignore[attr-defined]
            _expect_type(self, "result", self.result.type, expected)

        _verify(self, check)


# ---------------------------------------------------------------------------
# Tuples
# ---------------------------------------------------------------------------


@irdl_op_definition
class MakeTupleOp(IRDLOperation):
    """Packs values into a tuple. The empty tuple is written with an empty type
    list, so that the next op's result is not read as an operand.

    ```mlir
    %t = msir.make_tuple %a, %b : tensor<f32>, tensor<4xf32>
    %e = msir.make_tuple : ()
    ```
    """

    name = "msir.make_tuple"
    elements = var_operand_def(AnyAttr())
    result = result_def(TupleType)
    traits = traits_def(Pure())

    def __init__(self, elements: Sequence[SSAValue]):
        super().__init__(operands=[elements], result_types=[TupleType(tuple(e.type for e in elements))])

    def verify_(self) -> None:
        _expect_type(self, "result", self.result.type, TupleType(tuple(e.type for e in self.elements)))

    @classmethod
    def parse(cls, parser: Parser) -> MakeTupleOp:
        names = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = []
        if names:
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        else:
            parser.parse_punctuation("(")
            parser.parse_punctuation(")")
        op = cls(parser.resolve_operands(names, types, parser.pos))
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        if self.elements:
            printer.print_string(" ")
            printer.print_list(self.elements, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if self.elements:
            printer.print_list([e.type for e in self.elements], printer.print_attribute)
        else:
            printer.print_string("()")


@irdl_op_definition
class GetTupleOp(IRDLOperation):
    """Reads element `index` of a tuple.

    ```mlir
    %a = msir.get_tuple %t[0] : tuple<tensor<f32>, tensor<4xf32>> to tensor<f32>
    ```
    """

    name = "msir.get_tuple"
    tuple = operand_def(TupleType)
    index = prop_def(IntegerAttr[I64])
    result = result_def(AnyAttr())
    traits = traits_def(Pure())
    assembly_format = "$tuple `[` $index `]` attr-dict `:` type($tuple) `to` type($result)"

    def __init__(self, tup: SSAValue | Operation, index: int):
        t = SSAValue.get(tup).type
        assert isinstance(t, TupleType)
        super().__init__(
            operands=[tup],
            properties={"index": IntegerAttr(index, i64)},
            result_types=[t.types.data[index]],
        )

    def verify_(self) -> None:
        types = self.tuple.type.types.data  # type: ignore[attr-defined]
        i = self.index.value.data
        if not 0 <= i < len(types):
            raise VerifyException(
                f"'{self.name}' index {i} is out of range for {self.tuple.type} ({len(types)} elements)"
            )
        _expect_type(self, "result", self.result.type, types[i])


# ---------------------------------------------------------------------------
# Scatters (the adjoints of slice and take)
# ---------------------------------------------------------------------------


@irdl_op_definition
class ScatterSliceOp(_ShapeOp):
    """Zeros of the result type with the input placed at a strided slice: result
    element `[start0 + k0*step0, ...]` is input element `[k0, ...]`. The adjoint
    of `msir.slice` (and `msir.slice` is its adjoint).

    ```mlir
    %r = msir.scatter_slice %a starts array<i64: 1, 0> steps array<i64: 2, -1> : tensor<2x4xf32> to tensor<5x4xf32>
    ```
    """

    name = "msir.scatter_slice"
    starts = prop_def(AnyAttr())
    steps = prop_def(AnyAttr())
    assembly_format = (
        "$input `starts` $starts `steps` $steps attr-dict `:` type($input) `to` type($result)"
    )

    def __init__(self, input, starts: Sequence[int], steps: Sequence[int], shape: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(
            operands=[input],
            properties={"starts": _i64_array(starts), "steps": _i64_array(steps)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        self._same_dtype()
        _verify(
            self,
            lambda: check_slice(
                shape_of(self.result.type), _ints(self.starts), shape_of(self.input.type), _ints(self.steps)
            ),
        )


@irdl_op_definition
class ScatterAddOp(IRDLOperation):
    """Zeros of the result type into which `updates` are added at `indices` along
    `axis` (repeated indices accumulate; negative ones count from the end). The
    adjoint of `msir.take`.

    ```mlir
    %r = msir.scatter_add %u[%i] axis 0 : tensor<3x4xf32>, tensor<3xi64> to tensor<5x4xf32>
    ```
    """

    name = "msir.scatter_add"
    updates = operand_def(_TensorT)
    indices = operand_def(_TensorT)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = (
        "$updates `[` $indices `]` `axis` $axis attr-dict `:` type($updates) `,` type($indices) "
        "`to` type($result)"
    )

    def __init__(self, updates, indices, axis: int, shape: Sequence[int]):
        t = SSAValue.get(updates).type
        super().__init__(
            operands=[updates, indices],
            properties={"axis": IntegerAttr(axis, i64)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        _expect_dtype(self, "indices", self.indices.type, ("int32", "int64"))
        _expect_dtype(self, "updates", self.updates.type, NUMERIC)

        def check():
            shape = infer_take(shape_of(self.result.type), shape_of(self.indices.type), self.axis.value.data)
            if shape != shape_of(self.updates.type):
                raise ShapeOrTypeError(
                    f"updates type {self.updates.type} does not match taking indices "
                    f"{self.indices.type} from the result {self.result.type}"
                )

        _verify(self, check)


def infer_compress(shape: Sequence[int], mask_shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of `x[mask]` for a boolean `mask` of x's leading dims: one dim of
    runtime size (the number of true elements) followed by x's remaining dims."""
    k = len(mask_shape)
    if k == 0 or tuple(shape[:k]) != tuple(mask_shape):
        raise ShapeOrTypeError(
            f"a mask of shape {fmt_shape(mask_shape)} does not match the leading dims of shape {fmt_shape(shape)}",
            "index",
        )
    return (DYNAMIC, *shape[k:])


@irdl_op_definition
class CompressOp(IRDLOperation):
    """The elements (or sub-arrays) of `input` where the boolean `mask`, of
    input's leading dims, is true, in row-major order (`x[mask]`). The
    result's first dim is the number of true elements, known at run time.

    ```mlir
    %r = msir.compress %a[%m] : tensor<5x4xf32>, tensor<5xi1> to tensor<?x4xf32>
    ```
    """

    name = "msir.compress"
    input = operand_def(_TensorT)
    mask = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$input `[` $mask `]` attr-dict `:` type($input) `,` type($mask) `to` type($result)"

    def __init__(self, input, mask):
        t = SSAValue.get(input).type
        shape = infer_compress(shape_of(t), shape_of(SSAValue.get(mask).type))
        super().__init__(operands=[input, mask], result_types=[TensorType(t.element_type, list(shape))])

    def verify_(self) -> None:
        _expect_dtype(self, "input", self.input.type, ALL)
        _expect_dtype(self, "mask", self.mask.type, ("bool",))

        def check():
            shape = infer_compress(shape_of(self.input.type), shape_of(self.mask.type))
            expected = TensorType(self.input.type.element_type, list(shape))  # type: ignore[attr-defined]
            _expect_type(self, "result", self.result.type, expected)

        _verify(self, check)


@irdl_op_definition
class ExpandOp(IRDLOperation):
    """Zeros of the result type with the rows of `updates` written, in order,
    where `mask` (of the result's leading dims) is true: the inverse of
    `msir.compress` and its adjoint. The first dim of `updates` (static or
    `?`) must be at least the number of true elements, or an IndexError is
    reported at run time.

    ```mlir
    %r = msir.expand %u[%m] : tensor<?x4xf32>, tensor<5xi1> to tensor<5x4xf32>
    ```
    """

    name = "msir.expand"
    updates = operand_def(_TensorT)
    mask = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$updates `[` $mask `]` attr-dict `:` type($updates) `,` type($mask) `to` type($result)"

    def __init__(self, updates, mask, shape: Sequence[int]):
        t = SSAValue.get(updates).type
        super().__init__(operands=[updates, mask], result_types=[TensorType(t.element_type, list(shape))])

    def verify_(self) -> None:
        _expect_dtype(self, "updates", self.updates.type, ALL)
        _expect_dtype(self, "mask", self.mask.type, ("bool",))

        def check():
            rows, *rest = infer_compress(shape_of(self.result.type), shape_of(self.mask.type))
            given = shape_of(self.updates.type)
            expected = TensorType(self.result.type.element_type, [given[0] if given else rows, *rest])  # type: ignore[attr-defined]
            _expect_type(self, "updates", self.updates.type, expected)

        _verify(self, check)


@irdl_op_definition
class StopGradientOp(IRDLOperation):
    """The identity, whose derivative is zero (`msir.stop_gradient(x)`).

    ```mlir
    %r = msir.stop_gradient %a : tensor<4xf32>
    ```
    """

    name = "msir.stop_gradient"
    T: ClassVar = VarConstraint("T", _TensorT)
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input):
        super().__init__(operands=[input], result_types=[SSAValue.get(input).type])


MAX_CHECK_VALUES = 4
"""How many runtime scalars one `msir.check` message may show (native code keeps them in fixed slots)."""


def check_message_fields(template: str) -> int:
    """The number of runtime values `template` formats: its fields must be `{0}`, `{1:.3f}`, `{2!r}`...
    numbered from 0 in order (the frontend writes them so); raises ValueError otherwise."""
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    if fields != [str(k) for k in range(len(fields))]:
        raise ValueError(f"the fields of a check message must be {{0}}, {{1}}, ... in order, got {fields}")
    return len(fields)


@irdl_op_definition
class CheckOp(IRDLOperation):
    """A runtime check of user code (`assert`, `raise` on a runtime condition):
    when the rank-0 `%cond` is false, the call raises the Python exception
    `error` at the op's location, with `message` formatted by `str.format` on
    the rank-0 `values` (at most MAX_CHECK_VALUES). Compiled code records the
    first failed check and goes on (it never reads memory out of bounds);
    msir's runtime raises it when the native call returns. It has a side
    effect, so dead-code elimination keeps it, and no derivative.

    ```mlir
    msir.check %ok, "ValueError", "bad {0}" (%n : tensor<i64>) {python_numbers = array<i64: 0>} : tensor<i1>
    ```
    """

    name = "msir.check"
    cond = operand_def(_TensorT)
    values = var_operand_def(_TensorT)
    error = prop_def(StringAttr)
    message = prop_def(StringAttr)
    python_numbers = opt_prop_def(DenseArrayBase)
    """The positions of the values that are Python numbers (formatted as `int`/`float`/`bool`,
    where the others format as NumPy scalars: `repr` differs)."""
    assembly_format = "$cond `,` $error `,` $message (`(` $values^ `:` type($values) `)`)? attr-dict `:` type($cond)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, cond: SSAValue, error: str, message: str, values: Sequence[SSAValue] = (),
                 python_numbers: Sequence[int] = ()):
        props: dict[str, Attribute] = {"error": StringAttr(error), "message": StringAttr(message)}
        if python_numbers:
            props["python_numbers"] = DenseArrayBase.from_list(i64, list(python_numbers))
        super().__init__(operands=[cond, list(values)], properties=props)

    def verify_(self) -> None:
        t = self.cond.type
        if not (isinstance(t, TensorType) and t.get_shape() == () and t.element_type == i1):
            raise VerifyException(f"'msir.check' condition must be a tensor<i1>, got {t}")
        from msir.errors import USER_ERRORS

        if self.error.data not in USER_ERRORS:
            raise VerifyException(f"'msir.check' error must be one of {', '.join(USER_ERRORS)}, got {self.error.data}")
        for v in self.values:
            if not (isinstance(v.type, TensorType) and v.type.get_shape() == ()):
                raise VerifyException(f"'msir.check' values must be rank-0 tensors, got {v.type}")
        if len(self.values) > MAX_CHECK_VALUES:
            raise VerifyException(f"'msir.check' shows at most {MAX_CHECK_VALUES} runtime values, got {len(self.values)}")
        try:
            n = check_message_fields(self.message.data)
        except ValueError as e:
            raise VerifyException(f"'msir.check' {e}") from None
        if n != len(self.values):
            raise VerifyException(f"'msir.check' message formats {n} values, but {len(self.values)} are given")


# ---------------------------------------------------------------------------
# Function values and differentiation
# ---------------------------------------------------------------------------


class ClosureCalleeExists(SymbolUserOpInterface):
    """A closure's `@callee` is a function of the module whose parameters are
    the closure's own, then its captures', and whose results are the closure's
    (a pass that followed a dangling name would fail inside, with a KeyError)."""

    def verify(self, op: Operation) -> None:
        from xdsl.dialects.func import FuncOp

        assert isinstance(op, ClosureOp)
        callee = SymbolTable.lookup_symbol(op, op.callee)
        if not isinstance(callee, FuncOp):
            what = "is not a function" if callee is not None else "is not defined in the module"
            raise VerifyException(f"'msir.closure' callee {op.callee} {what}")
        closure_type = op.result.type
        assert isinstance(closure_type, FunctionType)
        expected = (*closure_type.inputs.data, *(c.type for c in op.captures))
        got = callee.function_type
        if tuple(got.inputs.data) != expected or tuple(got.outputs.data) != tuple(closure_type.outputs.data):
            shown = FunctionType.from_lists(list(expected), list(closure_type.outputs.data))
            raise VerifyException(f"'msir.closure' of {op.callee} has type {closure_type} with captures "
                                  f"({', '.join(str(c.type) for c in op.captures)}), so the callee must be "
                                  f"{shown}, but it is {got}")


@irdl_op_definition
class ClosureOp(IRDLOperation):
    """A function value: `@callee` with `captures` bound to its trailing
    parameters. Its type lists the parameters still to be given.

    ```mlir
    %f = msir.closure @loss(%w) : (tensor<4xf32>) -> tensor<f32>
    ```
    """

    name = "msir.closure"
    callee = prop_def(SymbolRefAttr)
    captures = var_operand_def(AnyAttr())
    result = result_def(FunctionType)
    traits = traits_def(Pure(), ClosureCalleeExists())
    assembly_format = "$callee `(` $captures `)` attr-dict `:` type($result) (`captures` type($captures)^)?"

    def __init__(self, callee: str, captures: Sequence[SSAValue], type_: FunctionType):
        super().__init__(
            operands=[list(captures)],
            properties={"callee": SymbolRefAttr(callee)},
            result_types=[type_],
        )


@irdl_op_definition
class ApplyOp(IRDLOperation):
    """Calls a function value.

    ```mlir
    %y = msir.apply %f(%x) : (tensor<4xf32>) -> tensor<f32>
    ```
    """

    name = "msir.apply"
    fn = operand_def(FunctionType)
    args = var_operand_def(AnyAttr())
    res = var_result_def(AnyAttr())
    traits = traits_def(Pure())

    def __init__(self, fn: SSAValue, args: Sequence[SSAValue]):
        t = fn.type
        assert isinstance(t, FunctionType)
        super().__init__(operands=[fn, list(args)], result_types=[list(t.outputs.data)])

    def verify_(self) -> None:
        t = self.fn.type
        assert isinstance(t, FunctionType)
        if [a.type for a in self.args] != list(t.inputs.data):
            raise VerifyException(
                f"'{self.name}' arguments ({', '.join(str(a.type) for a in self.args)}) do not match "
                f"the function type {t}"
            )
        if [r.type for r in self.res] != list(t.outputs.data):
            raise VerifyException(f"'{self.name}' results do not match the function type {t}")

    @classmethod
    def parse(cls, parser: Parser) -> ApplyOp:
        fn = parser.parse_unresolved_operand()
        parser.parse_punctuation("(")
        names = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_function_type()
        (f,) = parser.resolve_operands([fn], [t], parser.pos)
        args = parser.resolve_operands(names, list(t.inputs.data), parser.pos)
        op = cls(f, args)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.fn)
        printer.print_string("(")
        printer.print_list(self.args, printer.print_operand)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.fn.type)


class _TransformOp(IRDLOperation):
    """Base of the differentiation ops: a function value in, a function value out.

    `argnums` index the function's parameters (after the frontend flattened
    tuples); `has_aux` says that results after the first are auxiliary outputs,
    returned but not differentiated."""

    fn = operand_def(FunctionType)
    argnums = prop_def(AnyAttr())
    has_aux = opt_prop_def(UnitAttr)
    result = result_def(FunctionType)
    traits = traits_def(Pure())
    assembly_format = "$fn `argnums` $argnums (`has_aux` $has_aux^)? attr-dict `:` type($fn) `to` type($result)"

    def __init__(self, fn: SSAValue, argnums: Sequence[int], has_aux: bool = False):
        t = fn.type
        assert isinstance(t, FunctionType)
        props: dict[str, Attribute] = {"argnums": _i64_array(argnums)}
        if has_aux:
            props["has_aux"] = UnitAttr()
        rt = self.transformed_type(list(t.inputs.data), list(t.outputs.data), tuple(argnums), has_aux)
        super().__init__(operands=[fn], properties=props, result_types=[rt])

    @property
    def argnums_list(self) -> tuple[int, ...]:
        return _ints(self.argnums)

    @staticmethod
    def transformed_type(inputs, outputs, argnums, has_aux) -> FunctionType:
        raise NotImplementedError

    def verify_(self) -> None:
        t = self.fn.type
        assert isinstance(t, FunctionType)
        inputs, outputs = list(t.inputs.data), list(t.outputs.data)
        argnums = _ints(self.argnums)
        for a in argnums:
            if not 0 <= a < len(inputs):
                raise VerifyException(f"'{self.name}' argnum {a} is out of range for {t}")
        if self.has_aux is not None and len(outputs) < 1:
            raise VerifyException(f"'{self.name}' has_aux needs a function with results, got {t}")
        try:
            expected = self.transformed_type(inputs, outputs, argnums, self.has_aux is not None)
        except ShapeOrTypeError as e:
            raise VerifyException(f"'{self.name}' {e} (function type {t})") from None
        _expect_type(self, "result", self.result.type, expected)


def _scalar_output(outputs, has_aux: bool):
    main = outputs[0] if outputs else None
    if main is None or not isinstance(main, TensorType) or shape_of(main) != ():
        raise ShapeOrTypeError(
            f"grad needs a function with a scalar (rank-0) first result, got {main}"
        )
    if not is_float(dtype_of(main)):
        raise ShapeOrTypeError(f"grad needs a float result, got {main}", "dtype")
    return main


@irdl_op_definition
class GradOp(_TransformOp):
    """The gradient function of a function with a scalar float result: it takes
    the same parameters and returns the gradients with respect to `argnums`
    (then the auxiliary results, with `has_aux`).

    ```mlir
    %g = msir.grad %f argnums array<i64: 0> : (tensor<4xf32>, tensor<f32>) -> tensor<f32> to (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    ```
    """

    name = "msir.grad"

    @staticmethod
    def transformed_type(inputs, outputs, argnums, has_aux) -> FunctionType:
        _scalar_output(outputs, has_aux)
        aux = outputs[1:] if has_aux else []
        return FunctionType.from_lists(inputs, [inputs[a] for a in argnums] + aux)


@irdl_op_definition
class ValueAndGradOp(_TransformOp):
    """Like `msir.grad`, returning the value (and auxiliary results) first.

    ```mlir
    %g = msir.value_and_grad %f argnums array<i64: 0> : (tensor<4xf32>) -> tensor<f32> to (tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>)
    ```
    """

    name = "msir.value_and_grad"

    @staticmethod
    def transformed_type(inputs, outputs, argnums, has_aux) -> FunctionType:
        _scalar_output(outputs, has_aux)
        values = outputs if has_aux else outputs[:1]
        return FunctionType.from_lists(inputs, values + [inputs[a] for a in argnums])


@irdl_op_definition
class VjpOp(_TransformOp):
    """The function returning the results and the pullback, a function value
    from the (non-aux) results' cotangents to the cotangents of `argnums`.

    ```mlir
    %v = msir.vjp %f argnums array<i64: 0> : (tensor<4xf32>) -> tensor<4xf32> to (tensor<4xf32>) -> (tensor<4xf32>, (tensor<4xf32>) -> tensor<4xf32>)
    ```
    """

    name = "msir.vjp"

    @staticmethod
    def transformed_type(inputs, outputs, argnums, has_aux) -> FunctionType:
        main = outputs[:1] if has_aux else outputs
        pullback = FunctionType.from_lists(main, [inputs[a] for a in argnums])
        return FunctionType.from_lists(inputs, outputs + [pullback])


@irdl_op_definition
class JvpOp(_TransformOp):
    """Forward mode: the function taking the parameters and tangents for
    `argnums`, returning the results and the (non-aux) results' tangents.

    ```mlir
    %j = msir.jvp %f argnums array<i64: 0> : (tensor<4xf32>) -> tensor<f32> to (tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>)
    ```
    """

    name = "msir.jvp"

    @staticmethod
    def transformed_type(inputs, outputs, argnums, has_aux) -> FunctionType:
        main = outputs[:1] if has_aux else outputs
        return FunctionType.from_lists(inputs + [inputs[a] for a in argnums], outputs + main)


# ---------------------------------------------------------------------------
# Fusion regions
# ---------------------------------------------------------------------------

FUSIBLE_ELEMENTWISE: tuple[type[Operation], ...] = ()
"""Ops that may appear in a fusion body (filled in below, after their definitions)."""


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminates a region of an msir op, yielding its results.

    ```mlir
    msir.yield %a, %b : tensor<4xf32>, tensor<4xi1>
    ```
    """

    name = "msir.yield"
    values = var_operand_def(AnyAttr())
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(FusionOp, IfOp, ForOp, WhileOp), Pure()))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class FusionOp(IRDLOperation):
    """A group of elementwise ops computed in one loop nest, without buffers for
    the values inside. Every result has the fusion's iteration shape; the body
    (value semantics, like a function body) takes the inputs as block arguments,
    holds only elementwise ops, compares, selects, casts, splat constants and
    `broadcast_to` of inputs or constants, and yields the results. Built by
    `msir-fuse`; `convert-msir-to-loops` lowers it to a single loop nest.

    ```mlir
    %r = msir.fusion (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>):
      %0 = msir.broadcast_to %ba : tensor<8xf32> to tensor<4x8xf32>
      %1 = msir.add %xa, %0 : tensor<4x8xf32>
      %2 = msir.tanh %1 : tensor<4x8xf32>
      msir.yield %2 : tensor<4x8xf32>
    }
    ```
    """

    name = "msir.fusion"
    inputs = var_operand_def(_TensorT)
    outputs = var_result_def(_TensorT)
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(self, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)], regions=[body])

    @property
    def iteration_shape(self) -> tuple[int, ...]:
        return shape_of(self.outputs[0].type)

    def verify_(self) -> None:
        block = self.body.block
        if len(block.args) != len(self.inputs):
            raise VerifyException(
                f"'{self.name}' has {len(self.inputs)} inputs but its body takes {len(block.args)} arguments"
            )
        for i, (a, v) in enumerate(zip(block.args, self.inputs)):
            if a.type != v.type:
                raise VerifyException(
                    f"'{self.name}' input #{i} has type {v.type} but body argument #{i} has type {a.type}"
                )
        if not self.outputs:
            raise VerifyException(f"'{self.name}' must have at least one result")
        shape = self.iteration_shape
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException(f"'{self.name}' body must end with msir.yield")
        if [v.type for v in term.values] != [r.type for r in self.outputs]:
            raise VerifyException(
                f"'{self.name}' yields ({', '.join(str(v.type) for v in term.values)}) but its results "
                f"are ({', '.join(str(r.type) for r in self.outputs)})"
            )
        for r in self.outputs:
            if shape_of(r.type) != shape:
                raise VerifyException(
                    f"'{self.name}' result type {r.type} does not have the iteration shape {fmt_shape(shape)}"
                )
        for op in block.ops:
            if op is term:
                continue
            if not isinstance(op, FUSIBLE_ELEMENTWISE + (BroadcastToOp, ConstantOp)):
                raise VerifyException(f"'{self.name}' body cannot hold '{op.name}' (not elementwise)")
            full = shape_of(op.results[0].type) == shape
            if isinstance(op, ConstantOp):
                if not (op.is_splat() and (full or shape_of(op.result.type) == ())):
                    raise VerifyException(
                        f"'{self.name}' body constants must be splats of the iteration shape or rank 0, got {op.result.type}"
                    )
            elif not full:
                raise VerifyException(
                    f"'{self.name}' body op '{op.name}' has result type {op.results[0].type}, not the "
                    f"iteration shape {fmt_shape(shape)}"
                )
            if isinstance(op, BroadcastToOp):
                src = op.input
                if not (
                    (isinstance(src, BlockArgument) and src.block is block)
                    or isinstance(src.owner, ConstantOp)
                ):
                    raise VerifyException(
                        f"'{self.name}' body broadcast_to must broadcast an input or a constant"
                    )
            else:
                for v in op.operands:
                    if shape_of(v.type) != shape:
                        raise VerifyException(
                            f"'{self.name}' body op '{op.name}' operand type {v.type} is not the "
                            f"iteration shape {fmt_shape(shape)}; broadcast it first"
                        )

    @classmethod
    def parse(cls, parser: Parser) -> FusionOp:
        parser.parse_punctuation("(")
        names = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        parser.parse_punctuation(")")
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        inputs = parser.resolve_operands(names, ftype.inputs.data, parser.pos)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        op = cls(inputs, ftype.outputs.data, body)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(") : ")
        printer.print_function_type([v.type for v in self.inputs], [r.type for r in self.outputs])
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)


# ---------------------------------------------------------------------------
# Structured control flow
# ---------------------------------------------------------------------------


def _scalar_type(t: Attribute, dtypes: Sequence[str]) -> bool:
    return isinstance(t, TensorType) and shape_of(t) == () and dtype_of(t) in dtypes


def _verify_yield(op: Operation, region: Region, types: Sequence[Attribute], what: str) -> None:
    term = region.block.last_op
    if not isinstance(term, YieldOp):
        raise VerifyException(f"'{op.name}' {what} must end with msir.yield")
    got = [v.type for v in term.values]
    if got != list(types):
        raise VerifyException(
            f"'{op.name}' {what} yields ({', '.join(map(str, got))}) but the op has results "
            f"({', '.join(map(str, types))})"
        )


def _parse_values_and_types(parser: Parser) -> tuple[list, list]:
    """`(%a, %b) : (t1, t2)` or `() : ()`."""
    parser.parse_punctuation("(")
    names = parser.parse_optional_undelimited_comma_separated_list(
        parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
    ) or []
    parser.parse_punctuation(")")
    parser.parse_punctuation(":")
    parser.parse_punctuation("(")
    types = parser.parse_optional_undelimited_comma_separated_list(parser.parse_optional_type, parser.parse_type) or []
    parser.parse_punctuation(")")
    return parser.resolve_operands(names, types, parser.pos), list(types)


def _print_values_and_types(printer: Printer, values: Sequence[SSAValue]) -> None:
    printer.print_string("(")
    printer.print_list(values, printer.print_operand)
    printer.print_string(") : (")
    printer.print_list([v.type for v in values], printer.print_attribute)
    printer.print_string(")")


@irdl_op_definition
class IfOp(IRDLOperation):
    """Runs one of two regions on a rank-0 boolean condition; both yield values of
    the result types (the variables the branches assign, in SSA form).

    ```mlir
    %r = msir.if %c -> (tensor<4xf32>) {
      %0 = msir.exp %x : tensor<4xf32>
      msir.yield %0 : tensor<4xf32>
    } else {
      msir.yield %x : tensor<4xf32>
    }
    ```
    """

    name = "msir.if"
    cond = operand_def(_TensorT)
    res = var_result_def(AnyAttr())
    then_region = region_def("single_block")
    else_region = region_def("single_block")

    def __init__(self, cond: SSAValue, result_types: Sequence[Attribute], then_region: Region, else_region: Region):
        super().__init__(operands=[cond], result_types=[list(result_types)], regions=[then_region, else_region])

    def verify_(self) -> None:
        if not _scalar_type(self.cond.type, ("bool",)):
            raise VerifyException(f"'{self.name}' condition has type {self.cond.type}, expected tensor<i1>")
        types = [r.type for r in self.res]
        _verify_yield(self, self.then_region, types, "then region")
        _verify_yield(self, self.else_region, types, "else region")

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        c = parser.parse_unresolved_operand()
        types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            parser.parse_punctuation("(")
            types = parser.parse_optional_undelimited_comma_separated_list(parser.parse_optional_type, parser.parse_type) or []
            parser.parse_punctuation(")")
        (cond,) = parser.resolve_operands([c], [TensorType(IntegerType(1), [])], parser.pos)
        then_region = parser.parse_region()
        parser.parse_keyword("else")
        else_region = parser.parse_region()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(cond, types, then_region, else_region)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.cond)
        if self.res:
            printer.print_string(" -> (")
            printer.print_list([r.type for r in self.res], printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.then_region)
        printer.print_string(" else ")
        printer.print_region(self.else_region)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)


@irdl_op_definition
class ForOp(IRDLOperation):
    """A counted loop: the body runs for i = lower, lower + step, ... while
    i < upper (i > upper for a negative step), with loop-carried values. The body
    takes the counter (tensor<i64>) and the carried values, and yields the next
    carried values; the results are the last ones (the initial ones if the body
    never runs).

    ```mlir
    %r = msir.for %lb to %ub step %st (%h0) : (tensor<4xf32>) {
    ^bb0(%i: tensor<i64>, %h: tensor<4xf32>):
      %0 = msir.tanh %h : tensor<4xf32>
      msir.yield %0 : tensor<4xf32>
    }
    ```
    """

    name = "msir.for"
    lower = operand_def(_TensorT)
    upper = operand_def(_TensorT)
    step = operand_def(_TensorT)
    inits = var_operand_def(AnyAttr())
    res = var_result_def(AnyAttr())
    body = region_def("single_block")

    def __init__(self, lower, upper, step, inits: Sequence[SSAValue], body: Region):
        super().__init__(
            operands=[lower, upper, step, list(inits)], result_types=[[v.type for v in inits]], regions=[body]
        )

    def verify_(self) -> None:
        for what, v in (("lower bound", self.lower), ("upper bound", self.upper), ("step", self.step)):
            if not _scalar_type(v.type, ("int64",)):
                raise VerifyException(f"'{self.name}' {what} has type {v.type}, expected tensor<i64>")
        types = [v.type for v in self.inits]
        args = [a.type for a in self.body.block.args]
        if args != [TensorType(i64, []), *types]:
            raise VerifyException(
                f"'{self.name}' body takes ({', '.join(map(str, args))}), expected the counter "
                f"tensor<i64> and the carried types ({', '.join(map(str, types))})"
            )
        _verify_yield(self, self.body, types, "body")

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        i64t = TensorType(i64, [])
        bounds = [parser.parse_unresolved_operand()]
        parser.parse_keyword("to")
        bounds.append(parser.parse_unresolved_operand())
        parser.parse_keyword("step")
        bounds.append(parser.parse_unresolved_operand())
        lower, upper, step = parser.resolve_operands(bounds, [i64t] * 3, parser.pos)
        inits, _ = _parse_values_and_types(parser)
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(lower, upper, step, inits, body)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.lower)
        printer.print_string(" to ")
        printer.print_operand(self.upper)
        printer.print_string(" step ")
        printer.print_operand(self.step)
        printer.print_string(" ")
        _print_values_and_types(printer, self.inits)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)


@irdl_op_definition
class ConditionOp(IRDLOperation):
    """Terminates the condition region of `msir.while` with a rank-0 boolean.

    ```mlir
    msir.condition %c : tensor<i1>
    ```
    """

    name = "msir.condition"
    cond = operand_def(_TensorT)
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(WhileOp), Pure()))
    assembly_format = "$cond attr-dict `:` type($cond)"

    def __init__(self, cond: SSAValue):
        super().__init__(operands=[cond])


@irdl_op_definition
class WhileOp(IRDLOperation):
    """A loop whose trip count depends on data: while the condition region (taking
    the carried values) yields true, the body maps the carried values to the next
    ones. The results are the carried values when the condition fails.

    ```mlir
    %r = msir.while (%x0) : (tensor<f64>) {
    ^bb0(%x: tensor<f64>):
      %c = msir.compare gt, %x, %one : tensor<f64>
      msir.condition %c : tensor<i1>
    } do {
    ^bb0(%x: tensor<f64>):
      %h = msir.mul %x, %half : tensor<f64>
      msir.yield %h : tensor<f64>
    }
    ```
    """

    name = "msir.while"
    inits = var_operand_def(AnyAttr())
    res = var_result_def(AnyAttr())
    cond_region = region_def("single_block")
    body = region_def("single_block")

    def __init__(self, inits: Sequence[SSAValue], cond_region: Region, body: Region):
        super().__init__(
            operands=[list(inits)], result_types=[[v.type for v in inits]], regions=[cond_region, body]
        )

    def verify_(self) -> None:
        types = [v.type for v in self.inits]
        for what, region in (("condition region", self.cond_region), ("body", self.body)):
            args = [a.type for a in region.block.args]
            if args != types:
                raise VerifyException(
                    f"'{self.name}' {what} takes ({', '.join(map(str, args))}), expected the carried types "
                    f"({', '.join(map(str, types))})"
                )
        term = self.cond_region.block.last_op
        if not isinstance(term, ConditionOp) or not _scalar_type(term.cond.type, ("bool",)):
            raise VerifyException(f"'{self.name}' condition region must end with msir.condition of a tensor<i1>")
        _verify_yield(self, self.body, types, "body")

    @classmethod
    def parse(cls, parser: Parser) -> WhileOp:
        inits, _ = _parse_values_and_types(parser)
        cond_region = parser.parse_region()
        parser.parse_keyword("do")
        body = parser.parse_region()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(inits, cond_region, body)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_values_and_types(printer, self.inits)
        printer.print_string(" ")
        printer.print_region(self.cond_region, print_entry_block_args=True)
        printer.print_string(" do ")
        printer.print_region(self.body, print_entry_block_args=True)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)



# ---------------------------------------------------------------------------
# Tapes: per-iteration residuals of differentiated loops
# ---------------------------------------------------------------------------


@irdl_op_definition
class TapeAllocOp(IRDLOperation):
    """A tape of `%n` rows (the result's dynamic first dimension), each of the
    shape of the rest of the type; rows are written by `msir.tape_set` before they
    are read. Reverse mode stores the residuals of a loop's iterations in tapes.

    ```mlir
    %t = msir.tape_alloc %n : tensor<i64> to tensor<?x4xf32>
    ```
    """

    name = "msir.tape_alloc"
    rows = operand_def(_TensorT)
    result = result_def(_TensorT)
    assembly_format = "$rows attr-dict `:` type($rows) `to` type($result)"

    def __init__(self, rows: SSAValue, row_type: TensorType):
        t = TensorType(row_type.element_type, [DYNAMIC, *row_type.get_shape()])
        super().__init__(operands=[rows], result_types=[t])

    def verify_(self) -> None:
        if not _scalar_type(self.rows.type, ("int64",)):
            raise VerifyException(f"'{self.name}' row count has type {self.rows.type}, expected tensor<i64>")
        shape = shape_of(self.result.type)
        if not shape or shape[0] >= 0:
            raise VerifyException(f"'{self.name}' result type {self.result.type} needs a dynamic first dimension")


class _TapeRowWriteOp(IRDLOperation):
    """Base of tape_set and tape_add: a new tape from `%t`, row `%k` and `%v`
    (updated in place when lowered: a tape value is used once)."""

    T: ClassVar = VarConstraint("T", _TensorT)
    tape = operand_def(T)
    index = operand_def(_TensorT)
    value = operand_def(_TensorT)
    result = result_def(T)
    assembly_format = "$tape `[` $index `]` `,` $value attr-dict `:` type($tape) `,` type($index) `,` type($value)"

    def __init__(self, tape: SSAValue, index: SSAValue, value: SSAValue):
        super().__init__(operands=[tape, index, value], result_types=[tape.type])

    def verify_(self) -> None:
        _verify_tape_row(self, self.tape.type, self.index.type, self.value.type)


@irdl_op_definition
class TapeSetOp(_TapeRowWriteOp):
    """The tape with row `%k` replaced by `%v` (updated in place when lowered:
    a tape value is used once).

    ```mlir
    %t2 = msir.tape_set %t[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
    ```
    """

    name = "msir.tape_set"


@irdl_op_definition
class TapeGetOp(IRDLOperation):
    """Row `%k` of a tape (the tape is not consumed).

    ```mlir
    %v = msir.tape_get %t[%k] : tensor<?x4xf32>, tensor<i64> to tensor<4xf32>
    ```
    """

    name = "msir.tape_get"
    tape = operand_def(_TensorT)
    index = operand_def(_TensorT)
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = "$tape `[` $index `]` attr-dict `:` type($tape) `,` type($index) `to` type($result)"

    def __init__(self, tape: SSAValue, index: SSAValue):
        t = tape.type
        assert isinstance(t, TensorType)
        super().__init__(operands=[tape, index], result_types=[TensorType(t.element_type, list(t.get_shape())[1:])])

    def verify_(self) -> None:
        _verify_tape_row(self, self.tape.type, self.index.type, self.result.type)


@irdl_op_definition
class TapePushOp(IRDLOperation):
    """The tape with one more row, `%v`, appended after its last one (a tape of
    n rows becomes one of n + 1). Reverse mode records the residuals of a loop
    whose trip count is unknown in advance (`msir.while`) this way, starting
    from `msir.tape_alloc` of 0 rows. The tape operand is not used again: the
    lowering appends in place into a buffer whose capacity doubles when full
    (amortised O(1), no allocation per push), and copies only when the operand
    is still needed.

    ```mlir
    %t0 = msir.tape_alloc %zero : tensor<i64> to tensor<?x4xf32>
    %t1 = msir.tape_push %t0, %v : tensor<?x4xf32>, tensor<4xf32>
    %v0 = msir.tape_get %t1[%zero] : tensor<?x4xf32>, tensor<i64> to tensor<4xf32>
    ```
    """

    name = "msir.tape_push"
    T: ClassVar = VarConstraint("T", _TensorT)
    tape = operand_def(T)
    value = operand_def(_TensorT)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$tape `,` $value attr-dict `:` type($tape) `,` type($value)"

    def __init__(self, tape: SSAValue, value: SSAValue):
        super().__init__(operands=[tape, value], result_types=[tape.type])

    def verify_(self) -> None:
        _verify_row_type(self, self.tape.type, self.value.type)


@irdl_op_definition
class TapeAddOp(_TapeRowWriteOp):
    """The tape with `%v` added to row `%k` (updated in place when lowered, like
    `msir.tape_set`). Reverse mode accumulates the cotangent of a tape read in a
    loop (`msir.tape_get`), or of an array from outside a loop read by rows
    (`xs[i]`, a tensor with a static first dim), one row per iteration with it.

    ```mlir
    %t2 = msir.tape_add %t[%k], %v : tensor<?x4xf32>, tensor<i64>, tensor<4xf32>
    ```
    """

    name = "msir.tape_add"


@irdl_op_definition
class TapeZerosOp(IRDLOperation):
    """A tape of zeros with as many rows as `%t` (the zero cotangent of a tape,
    or of an array of static rows that `msir.tape_add` accumulates into).

    ```mlir
    %z = msir.tape_zeros %t : tensor<?x4xf32>
    ```
    """

    name = "msir.tape_zeros"
    T: ClassVar = VarConstraint("T", _TensorT)
    like = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$like attr-dict `:` type($like)"

    def __init__(self, like: SSAValue):
        super().__init__(operands=[like], result_types=[like.type])

    def verify_(self) -> None:
        if not shape_of(self.like.type):
            raise VerifyException(f"'{self.name}' type {self.like.type} has no rows (rank 0)")


def _verify_tape_row(op: Operation, tape: Attribute, index: Attribute, row: Attribute) -> None:
    if not _scalar_type(index, ("int64",)):
        raise VerifyException(f"'{op.name}' index has type {index}, expected tensor<i64>")
    _verify_row_type(op, tape, row, static_rows=True)


def _verify_row_type(op: Operation, tape: Attribute, row: Attribute, static_rows: bool = False) -> None:
    """`row` is a row of `tape`, a `tensor<?x...>` (with `static_rows`, any
    tensor of rank >= 1: reverse mode adds rows into the cotangent of an array
    a loop reads by rows with `msir.tape_add`)."""
    if not isinstance(tape, TensorType) or not isinstance(row, TensorType) or not tape.get_shape() or (
        TensorType(row.element_type, [tape.get_shape()[0] if static_rows else DYNAMIC, *row.get_shape()]) != tape
    ):
        raise VerifyException(f"'{op.name}' row type {row} does not match the tape type {tape}")



# ---------------------------------------------------------------------------
# Window ops: convolution and pooling (shapes in msir.dialects.windows;
# msir-lower-windows decomposes them for the CPU)
# ---------------------------------------------------------------------------


def _verify_window(op: IRDLOperation, infer) -> None:
    """Check a window op's float operands, its i64 array properties and its
    result type against `infer()` (a `msir.dialects.windows` shape function)."""
    for name, _ in op.get_irdl_definition().operands:
        _expect_dtype(op, name, getattr(op, name).type, FLOATS)
    first = op.operands[0].type
    for v in op.operands[1:]:
        if v.type.element_type != first.element_type:  # type: ignore[attr-defined]
            raise VerifyException(f"'{op.name}' operands differ in element type ({_operand_types(op, results=False)})")
    for name in ("kernel", "stride", "padding", "dilation"):
        if name in op.properties:
            _expect_i64_array(op, name, op.properties[name])
            values = _ints(op.properties[name])
            if len(values) != (4 if name == "padding" else 2) or min(values) < (0 if name == "padding" else 1):
                what = "four non-negative" if name == "padding" else "two positive"
                raise VerifyException(f"'{op.name}' {name} must hold {what} values, got {list(values)}")
    try:
        shape = infer()
    except ShapeError as e:
        raise VerifyException(f"'{op.name}' {e.message.removeprefix(op.name + ': ')} ({_operand_types(op)})") from None
    _expect_type(op, "result", op.results[0].type, TensorType(first.element_type, list(shape)))  # type: ignore[attr-defined]


@irdl_op_definition
class Conv2dOp(IRDLOperation):
    """2-D cross-correlation (MindSpore's `Conv2D`), NCHW input, OIHW weight
    (out channels, in channels / groups, KH, KW); explicit `padding` (top,
    bottom, left, right) of zeros, `stride` and `dilation` (rows, columns).

    ```mlir
    %y = msir.conv2d %x, %w stride array<i64: 1, 1> padding array<i64: 1, 1, 1, 1> dilation array<i64: 1, 1> groups 1 : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> to tensor<1x4x8x8xf32>
    ```
    """

    name = "msir.conv2d"
    input = operand_def(_TensorT)
    weight = operand_def(_TensorT)
    stride = prop_def(AnyAttr())
    padding = prop_def(AnyAttr())
    dilation = prop_def(AnyAttr())
    groups = prop_def(IntegerAttr[I64])
    result = result_def(_TensorT)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `,` $weight `stride` $stride `padding` $padding `dilation` $dilation `groups` $groups attr-dict "
        "`:` type($input) `,` type($weight) `to` type($result)"
    )

    def __init__(self, input, weight, stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                 groups: int):
        t = SSAValue.get(input).type
        shape = infer_conv2d(shape_of(t), shape_of(SSAValue.get(weight).type), stride, padding, dilation, groups)
        super().__init__(
            operands=[input, weight],
            properties={"stride": _i64_array(stride), "padding": _i64_array(padding),
                        "dilation": _i64_array(dilation), "groups": IntegerAttr(groups, i64)},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        _verify_window(self, lambda: infer_conv2d(
            shape_of(self.input.type), shape_of(self.weight.type), _ints(self.stride), _ints(self.padding),
            _ints(self.dilation), self.groups.value.data, "msir.conv2d"))


class _Pool2dOp(IRDLOperation):
    """Base of the 2-D poolings: windows `kernel` every `stride` over an NCHW input padded by `padding`."""

    input = operand_def(_TensorT)
    kernel = prop_def(AnyAttr())
    stride = prop_def(AnyAttr())
    padding = prop_def(AnyAttr())
    result = result_def(_TensorT)
    traits = traits_def(Pure())

    def __init__(self, input, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                 properties: dict | None = None):
        t = SSAValue.get(input).type
        shape = infer_pool2d(shape_of(t), kernel, stride, padding, self.name)
        super().__init__(
            operands=[input],
            properties={"kernel": _i64_array(kernel), "stride": _i64_array(stride), "padding": _i64_array(padding),
                        **(properties or {})},
            result_types=[TensorType(t.element_type, list(shape))],
        )

    def verify_(self) -> None:
        _verify_window(self, lambda: infer_pool2d(
            shape_of(self.input.type), _ints(self.kernel), _ints(self.stride), _ints(self.padding), self.name))


@irdl_op_definition
class MaxPool2dOp(_Pool2dOp):
    """The maximum of each window (MindSpore's `MaxPool`); padding counts as -inf.

    ```mlir
    %y = msir.max_pool2d %x kernel array<i64: 2, 2> stride array<i64: 2, 2> padding array<i64: 0, 0, 0, 0> : tensor<1x3x8x8xf32> to tensor<1x3x4x4xf32>
    ```
    """

    name = "msir.max_pool2d"
    assembly_format = (
        "$input `kernel` $kernel `stride` $stride `padding` $padding attr-dict `:` type($input) `to` type($result)"
    )


@irdl_op_definition
class AvgPool2dOp(_Pool2dOp):
    """The mean of each window (MindSpore's `AvgPool`): the sum over the window
    size with `count_include_pad` 1, over the input elements it covers with 0
    (what MindSpore's `pad_mode='same'` computes).

    ```mlir
    %y = msir.avg_pool2d %x kernel array<i64: 3, 3> stride array<i64: 2, 2> padding array<i64: 1, 1, 1, 1> count_include_pad 0 : tensor<1x3x8x8xf32> to tensor<1x3x4x4xf32>
    ```
    """

    name = "msir.avg_pool2d"
    count_include_pad = prop_def(IntegerAttr[I64])
    assembly_format = (
        "$input `kernel` $kernel `stride` $stride `padding` $padding `count_include_pad` $count_include_pad "
        "attr-dict `:` type($input) `to` type($result)"
    )

    def __init__(self, input, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                 count_include_pad: bool):
        super().__init__(input, kernel, stride, padding,
                         {"count_include_pad": IntegerAttr(int(count_include_pad), i64)})

    @property
    def includes_padding(self) -> bool:
        return bool(self.count_include_pad.value.data)

    def verify_(self) -> None:
        if self.count_include_pad.value.data not in (0, 1):
            raise VerifyException(f"'{self.name}' count_include_pad must be 0 or 1, got {self.count_include_pad.value.data}")
        super().verify_()



FUSIBLE_ELEMENTWISE = (ElementwiseBinaryOp, ElementwiseUnaryOp, CompareOp, SelectOp, CastOp)


Msir = Dialect(
    "msir",
    [
        ConstantOp,
        IotaOp,
        *ELEMENTWISE_OPS.values(),
        CompareOp,
        SelectOp,
        CastOp,
        BroadcastToOp,
        ReshapeOp,
        TransposeOp,
        SliceOp,
        TakeOp,
        ConcatenateOp,
        StackOp,
        ReduceSumOp,
        ReduceProdOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceMeanOp,
        ArgmaxOp,
        ArgminOp,
        MatmulOp,
        EinsumOp,
        Conv2dOp,
        MaxPool2dOp,
        AvgPool2dOp,
        MakeTupleOp,
        GetTupleOp,
        FusionOp,
        YieldOp,
        ScatterSliceOp,
        ScatterAddOp,
        CompressOp,
        ExpandOp,
        RampOp,
        StopGradientOp,
        ClosureOp,
        ApplyOp,
        GradOp,
        ValueAndGradOp,
        VjpOp,
        JvpOp,
        IfOp,
        ForOp,
        WhileOp,
        ConditionOp,
        TapeAllocOp,
        TapeSetOp,
        CheckOp,
        TapePushOp,
        TapeGetOp,
        TapeAddOp,
        TapeZerosOp,
    ],
    [],
)

