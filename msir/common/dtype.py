"""MindSpore's data types (`mindspore.float32`, `mindspore.dtype.int64`, ...).

A `Type` is a named dtype that prints as MindSpore prints it (`str(ms.float32)`
is `Float32`) and maps to a NumPy dtype. Tensors of every type here compute
in NumPy (PyNative); compiled code takes the dtypes msir's IR has
(`msir.dialects.primitives.DTYPES`: bool, int32, int64, float32, float64) and
refuses the others with a `DTypeError` naming the dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Type:
    """One MindSpore data type: its printed name and its NumPy dtype."""

    __slots__ = ("name", "np_dtype")

    def __init__(self, name: str, np_dtype: Any):
        self.name = name
        self.np_dtype = np.dtype(np_dtype)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype: NumPy reads a `Type` through it (`np.dtype(ms.float32)`,
        `np.ones(3, ms.float32)`, `x.astype(ms.int64)`, also in compiled code)."""
        return self.np_dtype

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = Type("Bool", np.bool_)
int8 = Type("Int8", np.int8)
int16 = Type("Int16", np.int16)
int32 = Type("Int32", np.int32)
int64 = Type("Int64", np.int64)
uint8 = Type("UInt8", np.uint8)
uint16 = Type("UInt16", np.uint16)
uint32 = Type("UInt32", np.uint32)
uint64 = Type("UInt64", np.uint64)
float16 = Type("Float16", np.float16)
float32 = Type("Float32", np.float32)
float64 = Type("Float64", np.float64)
complex64 = Type("Complex64", np.complex64)
complex128 = Type("Complex128", np.complex128)

# MindSpore's aliases
int_ = int64
uint = uint64
float_ = float32
half = float16
single = float32
double = float64

_ALL = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64, complex64,
        complex128)
_BY_NUMPY = {t.np_dtype: t for t in _ALL}
_BY_NAME = {t.name: t for t in _ALL}

number_type = tuple(t for t in _ALL if t is not bool_)
int_type = (int8, int16, int32, int64)
uint_type = (uint8, uint16, uint32, uint64)
float_type = (float16, float32, float64)


def _by_name(name: str) -> Type:
    return _BY_NAME[name]


def dtype_to_nptype(type_: Type) -> type:
    """The NumPy scalar type of `type_` (mindspore.dtype_to_nptype)."""
    return as_type(type_).np_dtype.type


def pytype_to_dtype(obj: Any) -> Type:
    """The `Type` of a Python or NumPy type (mindspore.pytype_to_dtype)."""
    return as_type(obj)


def as_type(dtype: Any) -> Type:
    """`dtype` (a `Type`, a NumPy dtype or type, a Python `bool`/`int`/`float`) as a `Type`."""
    if isinstance(dtype, Type):
        return dtype
    if dtype is bool:
        return bool_
    if dtype is int:
        return int64
    if dtype is float:
        return float32  # MindSpore: a Python float tensor is Float32
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError(f"{dtype!r} is not a MindSpore data type (use msir.float32, msir.int64, ...)") from None


def of_numpy(dtype: np.dtype) -> Type:
    """The `Type` of a NumPy array's dtype."""
    return as_type(dtype)
