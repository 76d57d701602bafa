"""The elementwise primitives of msir: one table, from which every layer derives its part.

A row (`Elementwise`) says everything about one elementwise op: its name (the
op is `msir.<name>`, the differentiation rules and builders call it `<name>`),
its arity, the operand dtypes it accepts, the NumPy function with its
semantics, its scalar lowering, and its documentation. From the table:

* the dialect generates the op classes (`msir.dialects.msir`: `ExpOp`, ...);
* the Python frontend and the eager tracer map NumPy functions to ops and type
  them (ops that accept only floats compute integer arguments in float64, as
  NumPy does);
* the IR and NumPy builders of the differentiation rules map names to ops and
  to NumPy functions; every differentiable row gets its forward-mode rule from
  its reverse rule, or, if linear, by applying the op to the tangents
  (`msir.passes.grad_rules`);
* convert-msir-to-loops computes one element with the row's `arith`/`math` op
  (`float_op` for float operands, `int_op` for integer ones) or, for rows
  with neither, with an emitter of its own (`lowering/to_loops.py`, keyed by
  the row's name).

Adding an elementwise op: a row here, its reverse rule in
`passes/grad_rules.py` (unless `differentiable=False`), a test. Nothing here
imports xDSL: the eager path reads the table without it.

The half-precision dtypes float16 and bfloat16 are floats like the others in
every row; bfloat16 is NumPy's only through the optional `ml_dtypes` package
(the `bf16` extra), which `numpy_dtype` imports when a bfloat16 is first named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DTYPES = ("bool", "int32", "int64", "float16", "bfloat16", "float32", "float64")
"""Every dtype msir computes in."""
FLOATS = ("float16", "bfloat16", "float32", "float64")
NUMERIC = ("int32", "int64", "float16", "bfloat16", "float32", "float64")
INTEGRAL = ("bool", "int32", "int64")
HALF = ("float16", "bfloat16")
"""The half-precision floats: stored in 16 bits, computed in float32 on the CPU target."""


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of msir dtype `name`; bfloat16 imports `ml_dtypes`, and a
    DTypeError says how to install it where it is missing."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            from msir.errors import DTypeError

            raise DTypeError("dtype bfloat16 needs the ml_dtypes package: pip install 'msir[bf16]'") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class Elementwise:
    name: str
    """`msir.<name>`; the rules' and builders' name of the op."""
    arity: int
    dtypes: tuple[str, ...]
    """Operand (and result) dtypes the op accepts."""
    numpy: Callable | None
    """The NumPy function with the op's semantics (eager execution, constant folding);
    None for an op NumPy spells differently (`NumpyBuilder` implements it)."""
    summary: str
    """The op's docstring summary."""
    example: str
    """The element type of the docstring's example (`f32`, `i64`, `i1`)."""
    float_op: str | None = None
    """The `arith`/`math` op computing one float element (`math.exp`)."""
    int_op: str | None = None
    """The `arith`/`math` op computing one integer element."""
    differentiable: bool = True
    """False: the op's derivative is zero wherever it exists (or its results are integers)."""
    linear: bool = False
    """The op is linear in its operands (its forward rule applies it to the tangents)."""
    integer_identity: bool = False
    """On integer operands the op is the identity (NumPy's floor and ceil), though it accepts only floats."""

    @property
    def class_name(self) -> str:
        """The Python name of the op class: `exp` -> `ExpOp`, `floordiv` -> `FloorDivOp`."""
        return _CLASS_NAMES.get(self.name, self.name.capitalize()) + "Op"

    @property
    def doc(self) -> str:
        operands = "%a, %b" if self.arity == 2 else "%a"
        return f"{self.summary}\n\n    %r = msir.{self.name} {operands} : tensor<4x{self.example}>"

    @property
    def float_only(self) -> bool:
        """Does the op accept only floats (so an integer argument computes in float64)?"""
        return self.dtypes == FLOATS


_CLASS_NAMES = {"floordiv": "FloorDiv", "log1p": "Log1p", "expm1": "Expm1", "arctan2": "Arctan2"}


def _u(name, dtypes, numpy, summary, example="f32", **kw) -> Elementwise:
    return Elementwise(name, 1, dtypes, numpy, summary, example, **kw)


def _b(name, dtypes, numpy, summary, example="f32", **kw) -> Elementwise:
    return Elementwise(name, 2, dtypes, numpy, summary, example, **kw)


ELEMENTWISE: tuple[Elementwise, ...] = (
    _b("add", NUMERIC, np.add, "Elementwise sum.", float_op="arith.addf", int_op="arith.addi", linear=True),
    _b("sub", NUMERIC, np.subtract, "Elementwise difference.", float_op="arith.subf", int_op="arith.subi",
       linear=True),
    _b("mul", NUMERIC, np.multiply, "Elementwise product.", float_op="arith.mulf", int_op="arith.muli"),
    _b("div", FLOATS, np.true_divide, "Elementwise true division (floats only).", float_op="arith.divf"),
    _b("floordiv", NUMERIC, np.floor_divide,
       "Elementwise floor division, rounding toward -inf like NumPy's `//`.", "i64", differentiable=False),
    _b("rem", NUMERIC, np.remainder, "Elementwise remainder with the sign of the divisor, like NumPy's `%`.", "i64"),
    _b("pow", NUMERIC, None, "Elementwise power `a ** b`.", "f64"),
    _b("maximum", NUMERIC, np.maximum, "Elementwise maximum; NaN propagates (`np.maximum`).",
       float_op="arith.maximumf", int_op="arith.maxsi"),
    _b("minimum", NUMERIC, np.minimum, "Elementwise minimum; NaN propagates (`np.minimum`).",
       float_op="arith.minimumf", int_op="arith.minsi"),
    _b("and", INTEGRAL, np.bitwise_and, "Elementwise logical/bitwise and.", "i1", int_op="arith.andi",
       differentiable=False),
    _b("or", INTEGRAL, np.bitwise_or, "Elementwise logical/bitwise or.", "i1", int_op="arith.ori",
       differentiable=False),
    _b("xor", INTEGRAL, np.bitwise_xor, "Elementwise logical/bitwise xor.", "i1", int_op="arith.xori",
       differentiable=False),
    _b("arctan2", FLOATS, np.arctan2, "Elementwise quadrant-aware inverse tangent of `a / b` (`np.arctan2(a, b)`).",
       float_op="math.atan2"),
    _u("neg", NUMERIC, np.negative, "Elementwise negation.", linear=True),
    _u("abs", NUMERIC, np.abs, "Elementwise absolute value.", float_op="math.absf", int_op="math.absi"),
    _u("sign", NUMERIC, np.sign, "Elementwise sign (-1, 0 or 1; NaN stays NaN).", differentiable=False),
    _u("not", ("bool",), np.logical_not, "Elementwise logical not.", "i1", differentiable=False),
    _u("exp", FLOATS, np.exp, "Elementwise e**x.", float_op="math.exp"),
    _u("log", FLOATS, np.log, "Elementwise natural logarithm.", float_op="math.log"),
    _u("log1p", FLOATS, np.log1p, "Elementwise log(1 + x).", float_op="math.log1p"),
    _u("expm1", FLOATS, np.expm1, "Elementwise exp(x) - 1.", float_op="math.expm1"),
    _u("sin", FLOATS, np.sin, "Elementwise sine.", float_op="math.sin"),
    _u("cos", FLOATS, np.cos, "Elementwise cosine.", float_op="math.cos"),
    _u("tanh", FLOATS, np.tanh, "Elementwise hyperbolic tangent.", float_op="math.tanh"),
    _u("sqrt", FLOATS, np.sqrt, "Elementwise square root.", float_op="math.sqrt"),
    _u("arctan", FLOATS, np.arctan, "Elementwise inverse tangent.", float_op="math.atan"),
    _u("floor", FLOATS, np.floor, "Elementwise floor.", float_op="math.floor", differentiable=False,
       integer_identity=True),
    _u("ceil", FLOATS, np.ceil, "Elementwise ceiling.", float_op="math.ceil", differentiable=False,
       integer_identity=True),
)

BY_NAME: dict[str, Elementwise] = {p.name: p for p in ELEMENTWISE}
UNARY: tuple[Elementwise, ...] = tuple(p for p in ELEMENTWISE if p.arity == 1)
BINARY: tuple[Elementwise, ...] = tuple(p for p in ELEMENTWISE if p.arity == 2)
