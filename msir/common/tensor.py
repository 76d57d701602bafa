"""`msir.Tensor`: MindSpore's tensor, backed by a NumPy array.

A `Tensor` holds one array (`asnumpy()` returns it, not a copy) and reads as
MindSpore's: `dtype` is a `msir.common.dtype.Type` (`str(t.dtype)` is
`Float32`), `shape` a tuple, arithmetic and comparisons give Tensors, and the
common methods (`reshape`, `transpose`, `sum`, `mean`, `max`, `argmax`,
`astype`, `expand_dims`, `squeeze`, `flatten`, `item`, ...) have MindSpore's
names and keywords. NumPy functions and ufuncs accept Tensors: `np.asarray(t)`
is the array itself, `np.exp(t)` a Tensor.

msir's transformations and compiled code see a Tensor as its array:
`unwrap` gives the arrays of a tree of arguments without copying them, and
`wrap` turns results back into Tensors. Results come back as Tensors when an
argument was a Tensor (or a Cell computed them); plain NumPy calls stay NumPy.
While PyNative mode differentiates, a Tensor may hold the eager tracer of its
value (`msir.eager.tracer.Tracer`) instead of an array: arithmetic then
records the ops, and reading the values (`asnumpy()`) is refused.

Construction follows MindSpore: Python floats (and lists of them) become
Float32, Python ints Int64, bools Bool; NumPy arrays keep their dtype unless
`dtype=` says otherwise; `Tensor(shape=..., dtype=..., init=One())` fills from
an `Initializer` (`msir.common.initializer`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msir.common import dtype as mstype


def _is_tracer(v: Any) -> bool:
    return type(v).__name__ == "Tracer" and type(v).__module__ == "msir.eager.tracer"


def _as_array(input_data: Any, dtype: Any) -> np.ndarray:
    """MindSpore's conversion of `Tensor(input_data, dtype)`'s data to an array."""
    if isinstance(input_data, Tensor):
        data = input_data.asnumpy()
    elif isinstance(input_data, (np.ndarray, np.generic)):
        data = np.asarray(input_data)
    else:
        data = np.asarray(input_data)
        if data.dtype == np.float64:  # Python floats are Float32 in MindSpore
            data = data.astype(np.float32)
        elif data.dtype.kind == "i":
            data = data.astype(np.int64)
    if dtype is not None:
        np_dtype = mstype.as_type(dtype).np_dtype
        if data.dtype != np_dtype:
            data = data.astype(np_dtype)
    return data


class TracedTensorRead(Exception):
    """Compiled code was about to read a Tensor that holds an eager tracer (a
    Parameter PyNative mode is differentiating, `weights=`): the jitted
    function runs eagerly instead, so that the differentiation sees its ops
    (`msir.api.JitFunction`)."""


def is_traced(value: Any) -> bool:
    """Does `value` (a Tensor, or what one holds) hold an eager tracer?"""
    return _is_tracer(value._data if isinstance(value, Tensor) else value)


class Tensor:
    """A MindSpore tensor: `Tensor(input_data=None, dtype=None, shape=None, init=None)`."""

    __array_priority__ = 100

    def __init__(self, input_data: Any = None, dtype: Any = None, shape: Any = None, init: Any = None,
                 const_arg: bool = False):
        if input_data is None:
            if shape is None:
                raise ValueError("Tensor: give input_data, or shape with dtype (and init)")
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            np_dtype = mstype.as_type(dtype if dtype is not None else mstype.float32).np_dtype
            if init is None:
                data = np.zeros(shape, np_dtype)
            elif callable(init):  # an Initializer (msir.common.initializer) fills the shape
                data = np.asarray(init(shape, np_dtype))
            else:
                raise TypeError(
                    f"Tensor: init must be an Initializer (msir.common.initializer.One(), ...), got {init!r}"
                )
        else:
            if init is not None:
                raise ValueError("Tensor: give either input_data or init, not both")
            data = _as_array(input_data, dtype)
            if shape is not None and tuple(data.shape) != ((shape,) if isinstance(shape, int) else tuple(shape)):
                raise ValueError(f"Tensor: input_data has shape {data.shape}, but shape={shape} was given")
        self._data = data

    @staticmethod
    def from_numpy(array: np.ndarray) -> "Tensor":
        """A Tensor sharing `array`'s memory (mindspore.Tensor.from_numpy)."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Tensor.from_numpy expects a NumPy array, got {type(array).__name__}")
        return Tensor._wrap(array)

    @classmethod
    def _wrap(cls, data: Any) -> "Tensor":
        """A Tensor holding `data` (an array or an eager tracer) as it is."""
        t = Tensor.__new__(Tensor)
        t._data = np.asarray(data) if isinstance(data, np.generic) else data
        return t

    # -- what it holds ---------------------------------------------------------

    def asnumpy(self) -> np.ndarray:
        """The array this Tensor holds (not a copy: writing to it writes the Tensor)."""
        if _is_tracer(self._data):
            from msir.errors import UnsupportedSyntaxError

            raise UnsupportedSyntaxError(
                "asnumpy() of a Tensor being differentiated: its value is not known yet (keep it a Tensor)"
            )
        return self._data

    numpy = asnumpy

    def __array__(self, dtype=None, copy=None):
        a = self.asnumpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> mstype.Type:
        return mstype.of_numpy(np.dtype(self._data.dtype))

    @property
    def ndim(self) -> int:
        return len(self._data.shape)

    def dim(self) -> int:
        return self.ndim

    @property
    def size(self) -> int:
        return int(np.prod(self._data.shape))

    @property
    def itemsize(self) -> int:
        return np.dtype(self._data.dtype).itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def T(self) -> "Tensor":
        return Tensor._wrap(np.transpose(self._data))

    def __len__(self) -> int:
        if not self._data.shape:
            raise TypeError("len() of a 0-d Tensor")
        return self._data.shape[0]

    def item(self, index=None):
        a = self.asnumpy()
        return a.item() if index is None else a.item(index)

    def tolist(self):
        return self.asnumpy().tolist()

    def __bool__(self) -> bool:
        return bool(self.asnumpy())

    def __float__(self) -> float:
        return float(self.asnumpy())

    def __int__(self) -> int:
        return int(self.asnumpy())

    def __index__(self) -> int:
        return int(self.asnumpy().__index__())

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        if _is_tracer(self._data):
            return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, value=<being differentiated>)"
        value = np.array2string(self._data, separator=", ", prefix="Tensor(")
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, value={value})"

    def __str__(self) -> str:
        return repr(self) if _is_tracer(self._data) else str(self._data)

    # -- NumPy protocols ---------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw = [unwrap(x) for x in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(unwrap(o) for o in out)
        result = getattr(ufunc, method)(*raw, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        return wrap(func(*unwrap(args), **unwrap(kwargs)))

    # -- arithmetic ---------------------------------------------------------------

    def _binary(op):
        def method(self, other):
            return Tensor._wrap(op(self._data, unwrap(other)))

        def reflected(self, other):
            return Tensor._wrap(op(unwrap(other), self._data))

        return method, reflected

    __add__, __radd__ = _binary(np.add)
    __sub__, __rsub__ = _binary(np.subtract)
    __mul__, __rmul__ = _binary(np.multiply)
    __truediv__, __rtruediv__ = _binary(np.divide)
    __floordiv__, __rfloordiv__ = _binary(np.floor_divide)
    __mod__, __rmod__ = _binary(np.mod)
    __pow__, __rpow__ = _binary(np.power)
    __matmul__, __rmatmul__ = _binary(np.matmul)
    __and__, __rand__ = _binary(np.logical_and)
    __or__, __ror__ = _binary(np.logical_or)
    __lt__, _ = _binary(np.less)
    __le__, _ = _binary(np.less_equal)
    __gt__, _ = _binary(np.greater)
    __ge__, _ = _binary(np.greater_equal)
    __eq__, _ = _binary(np.equal)
    __ne__, _ = _binary(np.not_equal)
    del _binary, _

    def __neg__(self) -> "Tensor":
        return Tensor._wrap(np.negative(self._data))

    def __pos__(self) -> "Tensor":
        return self

    def __abs__(self) -> "Tensor":
        return Tensor._wrap(np.abs(self._data))

    def __invert__(self) -> "Tensor":
        return Tensor._wrap(np.logical_not(self._data))

    # -- indexing -------------------------------------------------------------------

    def __getitem__(self, index) -> "Tensor":
        return Tensor._wrap(self._data[unwrap(index)])

    def __setitem__(self, index, value) -> None:
        self.asnumpy()[unwrap(index)] = unwrap(value)

    # -- methods (MindSpore's names and keywords) ------------------------------------

    def astype(self, dtype, copy: bool = True) -> "Tensor":
        np_dtype = mstype.as_type(dtype).np_dtype
        return Tensor._wrap(self._data.astype(np_dtype) if not _is_tracer(self._data)
                            else np.asarray(self._data, np_dtype))

    to = astype

    def float(self) -> "Tensor":
        return self.astype(mstype.float32)

    def copy(self) -> "Tensor":
        return Tensor._wrap(np.copy(self.asnumpy()))

    def reshape(self, *shape) -> "Tensor":
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Tensor._wrap(np.reshape(self._data, tuple(shape)))

    view = reshape

    def flatten(self, order: str = "C", *, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        shape = self.shape
        if not shape:
            return self.reshape(1)
        start, end = start_dim % len(shape), end_dim % len(shape)
        return self.reshape(*shape[:start], int(np.prod(shape[start : end + 1])), *shape[end + 1 :])

    def transpose(self, *axes) -> "Tensor":
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return Tensor._wrap(np.transpose(self._data, tuple(axes) if axes else None))

    def swapaxes(self, axis0: int, axis1: int) -> "Tensor":
        return Tensor._wrap(np.swapaxes(self._data, axis0, axis1))

    def expand_dims(self, axis: int) -> "Tensor":
        return Tensor._wrap(np.expand_dims(self._data, axis))

    unsqueeze = expand_dims

    def squeeze(self, axis=None) -> "Tensor":
        return Tensor._wrap(np.squeeze(self._data, axis))

    def _reduce(fn):
        def method(self, axis=None, keepdims=False, **kwargs):
            keep = kwargs.pop("keep_dims", keepdims)
            axis = tuple(axis) if isinstance(axis, list) else axis
            axis = None if axis == () else axis
            if kwargs:
                raise TypeError(f"unexpected keyword argument {next(iter(kwargs))!r}")
            return Tensor._wrap(fn(self._data, axis=axis, keepdims=keep))

        return method

    sum = _reduce(np.sum)
    mean = _reduce(np.mean)
    max = _reduce(np.max)
    min = _reduce(np.min)
    prod = _reduce(np.prod)
    all = _reduce(np.all)
    any = _reduce(np.any)
    del _reduce

    def var(self, axis=None, ddof: int = 0, keepdims: bool = False) -> "Tensor":
        return Tensor._wrap(np.var(self._data, axis=axis, ddof=ddof, keepdims=keepdims))

    def std(self, axis=None, ddof: int = 0, keepdims: bool = False) -> "Tensor":
        return Tensor._wrap(np.std(self._data, axis=axis, ddof=ddof, keepdims=keepdims))

    def argmax(self, axis=None, keepdims: bool = False) -> "Tensor":
        return Tensor._wrap(np.argmax(self._data, axis=axis, keepdims=keepdims).astype(np.int64))

    def argmin(self, axis=None, keepdims: bool = False) -> "Tensor":
        return Tensor._wrap(np.argmin(self._data, axis=axis, keepdims=keepdims).astype(np.int64))

    def abs(self) -> "Tensor":
        return Tensor._wrap(np.abs(self._data))

    def exp(self) -> "Tensor":
        return Tensor._wrap(np.exp(self._data))

    def log(self) -> "Tensor":
        return Tensor._wrap(np.log(self._data))

    def sqrt(self) -> "Tensor":
        return Tensor._wrap(np.sqrt(self._data))

    def square(self) -> "Tensor":
        return Tensor._wrap(np.multiply(self._data, self._data))

    def tanh(self) -> "Tensor":
        return Tensor._wrap(np.tanh(self._data))

    def pow(self, exponent) -> "Tensor":
        return Tensor._wrap(np.power(self._data, unwrap(exponent)))

    def matmul(self, other) -> "Tensor":
        return Tensor._wrap(np.matmul(self._data, unwrap(other)))

    def clip(self, min=None, max=None) -> "Tensor":  # noqa: A002 (MindSpore's names)
        return Tensor._wrap(np.clip(self._data, unwrap(min), unwrap(max)))

    def fill(self, value) -> "Tensor":
        return Tensor._wrap(np.full(self.shape, value, self._data.dtype))

    def zero_(self) -> "Tensor":
        self.asnumpy()[...] = 0
        return self

    def is_contiguous(self) -> bool:
        return True

    def init_data(self) -> "Tensor":
        return self


def unwrap(value: Any) -> Any:
    """`value` with every Tensor in it (tuples, lists, dict values) replaced by
    the array (or tracer) it holds; nothing is copied."""
    if isinstance(value, Tensor):
        return value._data
    t = type(value)
    if t is tuple or t is list or isinstance(value, tuple):
        items = [unwrap(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if t is dict:
        return {k: unwrap(v) for k, v in value.items()}
    return value


def contains_tensor(value: Any) -> bool:
    """Does `value` (a tree of tuples, lists and dicts) hold a Tensor?"""
    if isinstance(value, Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(contains_tensor(v) for v in value)
    if type(value) is dict:
        return any(contains_tensor(v) for v in value.values())
    return False


def wrap(value: Any) -> Any:
    """`value` with every array (and eager tracer) in it a Tensor; NumPy
    scalars become 0-d Tensors, Python numbers stay numbers."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)) or _is_tracer(value):
        return Tensor._wrap(value)
    t = type(value)
    if t is tuple or t is list:
        items = [wrap(v) for v in value]
        return tuple(items) if t is tuple else items
    return value

