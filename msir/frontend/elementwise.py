"""NumPy's typing of elementwise calls, shared by the compiled frontend and the eager tracer.

`binary_typing` and `unary_typing` (and `check_square` for np.square) say, for a call of an elementwise primitive
(`msir.dialects.primitives`) on operands of given dtypes and weakness (NEP 50),
which primitive computes it, in which dtype, and whether the result is weak —
or raise a `DTypeError` whose message names the operation and the dtypes (the
frontend adds the user's source location). Both frontends then cast, broadcast
and emit; so `x / 2`, `True + True` and `np.exp(int_array)` type the same in
compiled and eager code.
"""

from __future__ import annotations

import numpy as np

from msir.dialects.primitives import BY_NAME, DTYPES
from msir.errors import DTypeError
from msir.frontend.values import kind, promote

_BOOL_EQUIVALENT = {"add": "or", "mul": "and", "maximum": "or", "minimum": "and"}
"""NumPy computes these on booleans as logical operations."""
_BOOL_AS_INT = {"floordiv": "floor_divide", "rem": "remainder", "pow": "power"}
"""NumPy computes these on booleans in int8, which msir does not compute in:
refused (as np.square of bools), never silently widened."""
_PYTHON_BOOL_ARITHMETIC = ("add", "sub", "mul", "floordiv", "rem", "pow")
"""Python bools do arithmetic as ints (`True + True == 2`)."""
_SYMBOL = {"and": "&", "or": "|", "xor": "^"}


def binary_typing(name: str, a_dtype: str, a_weak: bool, b_dtype: str, b_weak: bool) -> tuple[str, str, bool]:
    """(primitive, dtype both operands are cast to, result weak) of NumPy's `name(a, b)`."""
    row = BY_NAME[name]
    dtype, weak = promote(a_dtype, a_weak, b_dtype, b_weak)
    if row.float_only and kind(dtype) < 2:
        dtype = "float64"
    if dtype == "bool" and weak and name in _PYTHON_BOOL_ARITHMETIC:
        dtype = "int64"
    if dtype == "bool" and name in _BOOL_EQUIVALENT:
        return _BOOL_EQUIVALENT[name], "bool", weak
    if dtype == "bool" and name == "sub":
        raise DTypeError(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, the `^` "
            "operator, or the logical_xor function instead"
        )
    if dtype == "bool" and name in _BOOL_AS_INT:
        raise DTypeError(
            f"np.{_BOOL_AS_INT[name]} of bool arrays gives int8, which msir does not compute in: "
            f"cast an operand first (e.g. x.astype(np.int64))"
        )
    if dtype not in row.dtypes:
        if name in _SYMBOL:
            raise DTypeError(
                f"the operator {_SYMBOL[name]} is not supported for {a_dtype} and {b_dtype} "
                "(bitwise operations need bool or integer arrays)"
            )
        raise DTypeError(f"np.{name} is not supported for {a_dtype} and {b_dtype}")
    return name, dtype, weak


def unary_typing(name: str, dtype: str, weak: bool) -> tuple[str | None, str, bool]:
    """(primitive, dtype the operand is cast to, result weak) of NumPy's `name(x)`;
    primitive None: the result is the cast operand itself."""
    row = BY_NAME[name]
    if row.float_only:
        if kind(dtype) == 2:
            return name, dtype, False
        # bool and integers: the dtype NumPy gives, from NumPy itself (np.exp of
        # bool is float16, of an integer float64; np.floor keeps bool and integers
        # in 2.x, older versions made bool float16)
        result = row.numpy(np.zeros(0, dtype)).dtype.name
        if result not in DTYPES:
            raise DTypeError(f"np.{name} of a {dtype} array gives {result}, which msir does not compute in")
        if row.integer_identity:
            return None, result, weak and result == dtype
        return name, result, False
    if dtype == "bool" and "bool" not in row.dtypes:
        if name == "abs":
            return None, dtype, weak
        if name == "neg":
            raise DTypeError(
                "the numpy boolean negative, the `-` operator, is not supported, use the `~` operator or "
                "the logical_not function instead"
            )
        raise DTypeError(f"np.{name} is not supported for bool arrays")
    if dtype not in row.dtypes:
        raise DTypeError(f"np.{name} is not supported for {dtype} arrays")
    return name, dtype, weak


def check_square(dtype: str) -> None:
    """np.square is a multiplication of the operand by itself, in its dtype,
    except for bool, which NumPy squares in int8 (msir has no int8)."""
    if dtype == "bool":
        raise DTypeError("np.square of a bool array gives int8, which msir does not compute in")
