"""The values the frontend manipulates while it translates a function.

* `Tensor`: a runtime value (an SSA value of tensor type) with its NumPy dtype,
  shape and NEP 50 weakness (a Python scalar's value is *weak*: it does not
  upcast an array, `float32_array * 2.0` stays float32, and so do float16 and
  bfloat16 arrays: JAX's rule; NumPy's own ml_dtypes bfloat16 ignores weakness
  and gives float32).
* `KnownInt`: a Python int or bool argument (or arithmetic on them) whose value
  is known while tracing. It is a runtime value unless it reaches a static
  position (a shape, an axis, a slice bound); then it specialises: the arguments
  it depends on join the cache key.
* `Closure`: a nested `def` or lambda, called (inlined) or transformed at
  compile time.
* Plain Python objects for everything else known at compile time: int, float,
  bool, None, str, slices, dtypes, tuples and lists of values, functions and
  modules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from msir.dialects.primitives import DTYPES, numpy_dtype
from msir.errors import DTypeError, SourceLoc

if TYPE_CHECKING:
    from xdsl.ir import SSAValue

    from msir.frontend.source import FunctionSource

_KIND = {"bool": 0, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2}
_WEAK_DTYPE = {0: "bool", 1: "int64", 2: "float64"}


@dataclass(eq=False)
class Tensor:
    ssa: SSAValue
    dtype: str
    shape: tuple[int, ...]
    weak: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(eq=False)
class KnownInt:
    value: int | bool
    deps: frozenset[int]
    tensor: Tensor

    @property
    def dtype(self) -> str:
        return self.tensor.dtype


@dataclass
class StaticUses:
    """The argument positions whose Python int value the code used statically."""

    positions: set[int] = field(default_factory=set)


def kind(dtype: str) -> int:
    return _KIND[dtype]


def promote(a_dtype: str, a_weak: bool, b_dtype: str, b_weak: bool) -> tuple[str, bool]:
    """NumPy >= 2 (NEP 50) promotion of two operands: (result dtype, result weak)."""
    if a_weak and b_weak:
        return _WEAK_DTYPE[max(kind(a_dtype), kind(b_dtype))], True
    if not a_weak and not b_weak:
        if a_dtype == b_dtype:
            return a_dtype, False
        return _strong_result_type(a_dtype, b_dtype), False
    strong, weak = (b_dtype, a_dtype) if a_weak else (a_dtype, b_dtype)
    if kind(weak) <= kind(strong):
        return strong, False
    return ("float64" if kind(weak) == 2 else "int64"), False


def _strong_result_type(a_dtype: str, b_dtype: str) -> str:
    """NumPy's `np.result_type` of two array dtypes (bfloat16's rules are ml_dtypes'),
    a DTypeError where NumPy has none (bfloat16 with float16 or an integer)."""
    try:
        return np.result_type(numpy_dtype(a_dtype), numpy_dtype(b_dtype)).name
    except np.exceptions.DTypePromotionError:
        raise DTypeError(
            f"NumPy has no promotion rule for {a_dtype} and {b_dtype}: cast one of them explicitly "
            f"(e.g. x.astype(np.float32))"
        ) from None


def reduces_over_nothing(name: str, ndim: int, axis: Any) -> bool:
    """Whether NumPy's reduction `name` of a 0-d operand along `axis` is the
    operand itself: the ufunc reductions (sum, prod, max, min) accept one
    integer axis 0 or -1 there (`np.sum(np.float64(2), axis=0) == 2.0`);
    np.mean and tuples of axes raise."""
    if isinstance(axis, np.integer):
        axis = int(axis)
    return (ndim == 0 and name in ("sum", "prod", "max", "min") and isinstance(axis, int)
            and not isinstance(axis, bool) and axis in (0, -1))


def weak_dtype_of(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    return "float64"


@dataclass
class Closure:
    """A nested `def` or lambda: its AST and the scope it was defined in."""

    node: ast.FunctionDef | ast.Lambda
    env: dict[str, Any]
    source: FunctionSource
    defaults: list[Any]


def dtype_name(obj: Any, loc: SourceLoc | None = None) -> str:
    """A dtype argument (np.float32, 'float32', np.dtype, float, int, bool) as a name."""
    if obj is float:
        return "float64"
    if obj is int:
        return "int64"
    if obj is bool:
        return "bool"
    if isinstance(obj, str) and obj == "bfloat16":
        return numpy_dtype("bfloat16").name
    try:
        name = np.dtype(obj).name
    except TypeError:
        raise DTypeError(f"{obj!r} is not a dtype", loc) from None
    if name not in DTYPES:
        raise DTypeError(f"dtype {name} is not supported (use one of {', '.join(DTYPES)})", loc)
    return name
