"""The NumPy functions, Python builtins and array methods compiled code may call.

`_NUMPY_HANDLERS` maps each supported callable (`np.exp`, `np.sum`, `len`,
`range`, `math.sqrt`...) to a handler `(translator, args, kwargs, node)` that
binds the arguments as NumPy does (`_params`) and builds the value with the
translator's operations. Array methods (`x.sum(axis=0)`, `x.reshape(...)`)
are `_BoundMethod`s, called by `_call_method` through the same handlers.
Adding a NumPy function is one handler and one table entry. The functions of
`msir.ops` are in the table too, with their handlers from `msir.frontend.ops_calls`.
"""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from msir.dialects import msir as M
from msir.dialects import primitives
from msir.errors import DTypeError, UnsupportedSyntaxError
from msir.frontend.base import TypeError_, ValueError_
from msir.frontend.einsum import build_einsum
from msir.frontend.elementwise import check_square
from msir.frontend.ops_calls import OPS_HANDLERS
from msir.frontend.state import RangeValue
from msir.frontend.values import KnownInt, Tensor, dtype_name, kind, promote


@dataclass
class _BoundMethod:
    value: Tensor
    name: str


def _params(tr, args, kwargs, names: Sequence[str], defaults: dict[str, Any], node, fname: str) -> list[Any]:
    """Bind positional and keyword arguments of a library call to `names`."""
    if len(args) > len(names):
        raise tr.error(TypeError_, f"{fname} takes at most {len(names)} positional arguments", node)
    out = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise tr.error(UnsupportedSyntaxError, f"{fname}: the keyword argument '{k}' is not supported", node)
        out[k] = v
    missing = [n for n in names if n not in out and n not in defaults]
    if missing:
        raise tr.error(TypeError_, f"{fname} is missing the argument '{missing[0]}'", node)
    return [out.get(n, defaults.get(n)) for n in names]


def _numpy_result(t: Tensor) -> Tensor:
    """A NumPy function's result: never a weak Python scalar (`np.abs(1.5)` is
    a float64; the dtype was typed with the operands' weakness, NEP 50)."""
    return Tensor(t.ssa, t.dtype, t.shape, False) if t.weak else t


def _unary_np(name: str, np_name: str):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, f"np.{np_name}")
        return _numpy_result(tr.unary(name, tr.as_tensor(x, node), node))

    return handler


def _math_unary(name: str):
    """`math.<name>(x)`: Python converts `x` to a float first (`math.exp(True)`
    is a float, where `np.exp(True)` is a float16)."""

    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, f"math.{name}")
        t = tr.as_tensor(x, node)
        if kind(t.dtype) < 2:
            t = tr.cast(t, "float64", t.weak)
        return _numpy_result(tr.unary(name, t, node))

    return handler


def _binary_np(name: str, np_name: str):
    def handler(tr, args, kwargs, node):
        a, b = _params(tr, args, kwargs, ["x1", "x2"], {}, node, f"np.{np_name}")
        ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
        return _numpy_result(tr.elementwise(name, ta, tb, node))

    return handler


def _reduction(name: str):
    def handler(tr, args, kwargs, node):
        names = ["a", "axis", "dtype", "keepdims"] if name in ("sum", "prod", "mean") else ["a", "axis", "keepdims"]
        vals = _params(tr, args, kwargs, names, {"axis": None, "dtype": None, "keepdims": False}, node, f"np.{name}")
        if len(vals) == 4:
            a, axis, dtype, keepdims = vals
        else:
            (a, axis, keepdims), dtype = vals, None
        return tr.reduce(name, a, axis, keepdims, node, dtype)

    return handler


def _arg_reduction(name: str):
    def handler(tr, args, kwargs, node):
        a, axis, keepdims = _params(tr, args, kwargs, ["a", "axis", "keepdims"], {"axis": None, "keepdims": False}, node, f"np.{name}")
        return tr.arg_reduce(name, a, axis, keepdims, node)

    return handler


def _np_where(tr, args, kwargs, node):
    c, a, b = _params(tr, args, kwargs, ["condition", "x", "y"], {}, node, "np.where")
    tc_ = tr.as_tensor(c, node)
    if tc_.dtype != "bool":
        tc_ = tr.compare("ne", tc_, 0, node)
    ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
    dtype, weak = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = M.infer_broadcast(M.infer_broadcast(tc_.shape, ta.shape), tb.shape)
    c2 = tr.broadcast(tc_, shape)
    a2 = tr.broadcast(tr.cast(ta, dtype), shape)
    b2 = tr.broadcast(tr.cast(tb, dtype), shape)
    return tr.tensor(M.SelectOp(c2.ssa, a2.ssa, b2.ssa), False)


def _np_dot(tr, args, kwargs, node):
    a, b = _params(tr, args, kwargs, ["a", "b"], {}, node, "np.dot")
    ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
    if ta.ndim == 0 or tb.ndim == 0:
        return tr.elementwise("mul", ta, tb, node)
    if ta.ndim > 2 or tb.ndim > 2:
        raise tr.error(
            UnsupportedSyntaxError,
            "np.dot of arrays with more than 2 dimensions is not supported; use np.matmul or @",
            node,
        )
    return tr.matmul(ta, tb, node)


def _np_matmul(tr, args, kwargs, node):
    a, b = _params(tr, args, kwargs, ["x1", "x2"], {}, node, "np.matmul")
    return tr.matmul(a, b, node)


def _np_einsum(tr, args, kwargs, node):
    # `optimize` only chooses NumPy's contraction order; msir contracts pairwise, left to right.
    kwargs = {k: v for k, v in kwargs.items() if k != "optimize"}
    if kwargs:
        raise tr.error(UnsupportedSyntaxError, f"np.einsum: the keyword argument '{next(iter(kwargs))}' is not supported", node)
    if not args:
        raise tr.error(TypeError_, "np.einsum is missing the argument 'subscripts'", node)
    return build_einsum(tr, args[0], args[1:], node)


def _np_transpose(tr, args, kwargs, node):
    a, axes = _params(tr, args, kwargs, ["a", "axes"], {"axes": None}, node, "np.transpose")
    return tr.transpose(tr.as_tensor(a, node), axes, node)


def _np_reshape(tr, args, kwargs, node):
    a, shape = _params(tr, args, kwargs, ["a", "shape"], {}, node, "np.reshape")
    return tr.reshape(tr.as_tensor(a, node), shape, node)


def _np_concatenate(tr, args, kwargs, node):
    arrays, axis = _params(tr, args, kwargs, ["arrays", "axis"], {"axis": 0}, node, "np.concatenate")
    return tr.concatenate(arrays, axis, node)


def _np_stack(tr, args, kwargs, node):
    arrays, axis = _params(tr, args, kwargs, ["arrays", "axis"], {"axis": 0}, node, "np.stack")
    return tr.concatenate(arrays, axis, node, stack=True)


def _filler(value: Any):
    def handler(tr, args, kwargs, node):
        shape, dtype = _params(tr, args, kwargs, ["shape", "dtype"], {"dtype": None}, node, "np.zeros")
        return tr.full(shape, value, dtype if dtype is not None else float, node)

    return handler


def _np_full(tr, args, kwargs, node):
    shape, fill, dtype = _params(tr, args, kwargs, ["shape", "fill_value", "dtype"], {"dtype": None}, node, "np.full")
    return tr.full(shape, fill, dtype, node)


def _filler_like(value: Any):
    def handler(tr, args, kwargs, node):
        a, dtype = _params(tr, args, kwargs, ["a", "dtype"], {"dtype": None}, node, "np.*_like")
        t = tr.as_tensor(a, node)
        return tr.full(t.shape, value, dtype if dtype is not None else t.dtype, node)

    return handler


def _np_full_like(tr, args, kwargs, node):
    a, fill, dtype = _params(tr, args, kwargs, ["a", "fill_value", "dtype"], {"dtype": None}, node, "np.full_like")
    t = tr.as_tensor(a, node)
    return tr.full(t.shape, fill, dtype if dtype is not None else t.dtype, node)


def _np_arange(tr, args, kwargs, node):
    dtype = kwargs.pop("dtype", None)
    for k in ("start", "stop", "step"):
        if k in kwargs:
            raise tr.error(UnsupportedSyntaxError, "np.arange: pass start/stop/step positionally", node)
    if kwargs:
        raise tr.error(UnsupportedSyntaxError, f"np.arange: unsupported keyword {next(iter(kwargs))}", node)
    return tr.arange(list(args), dtype, node)


def _np_broadcast_to(tr, args, kwargs, node):
    a, shape = _params(tr, args, kwargs, ["array", "shape"], {}, node, "np.broadcast_to")
    t = tr.as_tensor(a, node)
    dims = tr.static_ints(shape, "a shape", node)
    M.check_broadcast_to(t.shape, dims)
    return tr.broadcast(t, tuple(dims))


def _np_expand_dims(tr, args, kwargs, node):
    a, axis = _params(tr, args, kwargs, ["a", "axis"], {}, node, "np.expand_dims")
    t = tr.as_tensor(a, node)
    axes = tr.static_ints(axis, "an axis", node)
    nd = t.ndim + len(axes)
    axes = sorted(M.normalize_axis(x, nd) for x in axes)
    shape = list(t.shape)
    for x in axes:
        shape.insert(x, 1)
    return tr.reshape(t, tuple(shape), node)


def _np_squeeze(tr, args, kwargs, node):
    a, axis = _params(tr, args, kwargs, ["a", "axis"], {"axis": None}, node, "np.squeeze")
    t = tr.as_tensor(a, node)
    if axis is None:
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    else:
        axes = [M.normalize_axis(x, t.ndim) for x in tr.static_ints(axis, "an axis", node)]
        for x in axes:
            if t.shape[x] != 1:
                raise tr.error(ValueError_, "cannot select an axis to squeeze out which has size not equal to one", node)
    return tr.reshape(t, tuple(d for i, d in enumerate(t.shape) if i not in axes), node)


def _np_clip(tr, args, kwargs, node):
    kwargs = {{"min": "a_min", "max": "a_max"}.get(k, k): v for k, v in kwargs.items()}
    a, lo, hi = _params(tr, args, kwargs, ["a", "a_min", "a_max"], {"a_min": None, "a_max": None}, node, "np.clip")
    r = tr.as_tensor(a, node)
    if lo is not None:
        r = tr.elementwise("maximum", r, tr.as_tensor(lo, node), node)
    if hi is not None:
        r = tr.elementwise("minimum", r, tr.as_tensor(hi, node), node)
    return r


def _np_square(tr, args, kwargs, node):
    (x,) = _params(tr, args, kwargs, ["x"], {}, node, "np.square")
    t = tr.as_tensor(x, node)
    try:
        check_square(t.dtype)
    except DTypeError as e:
        raise tr.error(DTypeError, e.message, node) from None
    return _numpy_result(tr.elementwise("mul", t, t, node))


def _np_var(std: bool):
    def handler(tr, args, kwargs, node):
        a, axis, keepdims = _params(tr, args, kwargs, ["a", "axis", "keepdims"], {"axis": None, "keepdims": False}, node, "np.var")
        t = tr.as_tensor(a, node)
        mean = tr.reduce("mean", t, axis, True, node)
        d = tr.elementwise("sub", t if kind(t.dtype) == 2 else tr.cast(t, "float64"), mean, node)
        v = tr.reduce("mean", tr.elementwise("mul", d, d, node), axis, keepdims, node)
        return tr.unary("sqrt", v, node) if std else v

    return handler


def _np_logical(name: str):
    def handler(tr, args, kwargs, node):
        ts = [tr.as_tensor(a, node) for a in args]
        ts = [t if t.dtype == "bool" else tr.compare("ne", t, 0, node) for t in ts]
        if name == "not":
            return tr.tensor(M.NotOp(ts[0].ssa), False)
        return tr.elementwise(name, ts[0], ts[1], node)

    return handler


def _np_scalar_type(dtype: str):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {"x": 0}, node, f"np.{dtype}")
        if isinstance(x, (bool, int, float)):
            return tr.constant(x, dtype)
        return tr.cast(tr.as_tensor(x, node), dtype, False)

    return handler


def _np_asarray(tr, args, kwargs, node):
    a, dtype = _params(tr, args, kwargs, ["a", "dtype"], {"dtype": None}, node, "np.asarray")
    t = tr.as_tensor(a, node)
    if dtype is not None:
        return tr.cast(t, dtype_name(dtype, tr.loc), False)
    return tr.cast(t, t.dtype, False)


def _log_base(base: float):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, "np.log")
        lx = tr.unary("log", tr.as_tensor(x, node), node)
        return tr.elementwise("div", lx, tr.constant(math.log(base), lx.dtype), node)

    return handler


def _py_abs(tr, args, kwargs, node):
    (x,) = _params(tr, args, kwargs, ["x"], {}, node, "abs")
    if isinstance(x, (int, float)) and not isinstance(x, KnownInt):
        return abs(x)
    return tr.unary("abs", tr.as_tensor(x, node), node)


def _py_minmax(name: str):
    def handler(tr, args, kwargs, node):
        if kwargs:
            raise tr.error(UnsupportedSyntaxError, f"{name}() with keyword arguments is not supported", node)
        items = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
        if len(args) == 1 and isinstance(args[0], Tensor):
            items = [tr.index(args[0], i, node) for i in range(args[0].shape[0])]
        if not items:
            raise tr.error(ValueError_, f"{name}() arg is an empty sequence", node)
        if all(isinstance(i, (int, float)) for i in items):
            return getattr(builtins, name)(items)
        items = [tr.as_tensor(i, node) if isinstance(i, KnownInt) else i for i in items]
        best = items[0]
        for it in items[1:]:
            # Python's max(a, b) keeps a unless b > a (min: unless b < a).
            pred = "gt" if name == "max" else "lt"
            better = tr.compare(pred, it, best, node)
            tb, tit = tr.as_tensor(best, node), tr.as_tensor(it, node)
            dtype, weak = promote(tb.dtype, tb.weak, tit.dtype, tit.weak)
            shape = M.infer_broadcast(better.shape, M.infer_broadcast(tb.shape, tit.shape))
            best = tr.tensor(
                M.SelectOp(
                    tr.broadcast(better, shape).ssa,
                    tr.broadcast(tr.cast(tit, dtype), shape).ssa,
                    tr.broadcast(tr.cast(tb, dtype), shape).ssa,
                ),
                weak,
            )
        return best

    return handler


def _py_sum(tr, args, kwargs, node):
    items, start = _params(tr, args, kwargs, ["iterable", "start"], {"start": 0}, node, "sum")
    if isinstance(items, Tensor):
        items = [tr.index(items, i, node) for i in range(items.shape[0])]
    total = start
    for it in items:
        total = tr.binary("add", total, it, node)
    return total


def _py_len(tr, args, kwargs, node):
    (x,) = _params(tr, args, kwargs, ["obj"], {}, node, "len")
    if isinstance(x, (tuple, list)):
        return len(x)
    t = tr.as_tensor(x, node)
    if t.ndim == 0:
        raise tr.error(TypeError_, "len() of unsized object", node)
    return t.shape[0]


def _py_convert(name: str):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {"x": 0}, node, name)
        if isinstance(x, (bool, int, float)):
            return {"float": float, "int": int, "bool": bool}[name](x)
        if isinstance(x, KnownInt) and name == "int":
            return x
        t = tr.as_tensor(x, node)
        if t.ndim != 0:
            raise tr.error(
                TypeError_, f"only 0-dimensional arrays can be converted to Python scalars ({name}())", node
            )
        return tr.cast(t, {"float": "float64", "int": "int64", "bool": "bool"}[name], True)

    return handler


def _py_range(tr, args, kwargs, node):
    if kwargs or not 1 <= len(args) <= 3:
        raise tr.error(TypeError_, "range() takes 1 to 3 positional arguments", node)
    for a in args:
        if isinstance(a, float) or (isinstance(a, Tensor) and (a.ndim != 0 or kind(a.dtype) != 1)):
            raise tr.error(TypeError_, f"range() needs integers, got {tr.describe(a)}", node)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    return RangeValue(start, stop, step)


_NUMPY_HANDLERS: dict[Any, Callable] = {
    # the elementwise primitives NumPy spells as ufuncs (`not` is np.logical_not, below)
    **{p.numpy: _unary_np(p.name, p.numpy.__name__) for p in primitives.UNARY if p.name != "not"},
    **{p.numpy: _binary_np(p.name, p.numpy.__name__) for p in primitives.BINARY if p.numpy is not None},
    np.power: _binary_np("pow", "power"),
    np.log2: _log_base(2.0),
    np.log10: _log_base(10.0),
    np.sum: _reduction("sum"),
    np.prod: _reduction("prod"),
    np.mean: _reduction("mean"),
    np.max: _reduction("max"),
    np.min: _reduction("min"),
    np.amax: _reduction("max"),
    np.amin: _reduction("min"),
    np.argmax: _arg_reduction("argmax"),
    np.argmin: _arg_reduction("argmin"),
    np.where: _np_where,
    np.dot: _np_dot,
    np.matmul: _np_matmul,
    np.einsum: _np_einsum,
    np.transpose: _np_transpose,
    np.reshape: _np_reshape,
    np.concatenate: _np_concatenate,
    np.stack: _np_stack,
    np.zeros: _filler(0),
    np.ones: _filler(1),
    np.full: _np_full,
    np.zeros_like: _filler_like(0),
    np.ones_like: _filler_like(1),
    np.full_like: _np_full_like,
    np.arange: _np_arange,
    np.broadcast_to: _np_broadcast_to,
    np.expand_dims: _np_expand_dims,
    np.squeeze: _np_squeeze,
    np.clip: _np_clip,
    np.square: _np_square,
    np.var: _np_var(False),
    np.std: _np_var(True),
    np.logical_and: _np_logical("and"),
    np.logical_or: _np_logical("or"),
    np.logical_xor: _np_logical("xor"),
    np.logical_not: _np_logical("not"),
    np.asarray: _np_asarray,
    np.array: _np_asarray,
    np.float16: _np_scalar_type("float16"),
    np.float32: _np_scalar_type("float32"),
    np.float64: _np_scalar_type("float64"),
    np.int32: _np_scalar_type("int32"),
    np.int64: _np_scalar_type("int64"),
    np.bool_: _np_scalar_type("bool"),
    abs: _py_abs,
    max: _py_minmax("max"),
    min: _py_minmax("min"),
    sum: _py_sum,
    len: _py_len,
    float: _py_convert("float"),
    int: _py_convert("int"),
    bool: _py_convert("bool"),
    range: _py_range,
    **{getattr(math, n): _math_unary(n) for n in ("exp", "log", "sqrt", "tanh", "sin", "cos")},
}
_NUMPY_HANDLERS.update(OPS_HANDLERS)


_BFLOAT16 = _np_scalar_type("bfloat16")


def _handler_for(fn: Any) -> Callable | None:
    try:
        found = _NUMPY_HANDLERS.get(fn)
    except TypeError:
        return None
    if found is not None:
        return found
    # ml_dtypes.bfloat16 without importing ml_dtypes: code that names it has imported it
    ml_dtypes = sys.modules.get("ml_dtypes")
    return _BFLOAT16 if ml_dtypes is not None and fn is ml_dtypes.bfloat16 else None


_ARRAY_METHODS = {
    "sum", "prod", "mean", "max", "min", "argmax", "argmin", "reshape", "astype", "transpose",
    "flatten", "ravel", "squeeze", "clip", "dot", "var", "std", "item",
}


def _call_method(tr, m: _BoundMethod, args, kwargs, node) -> Any:
    x = m.value
    name = m.name
    if name in ("sum", "prod", "mean", "max", "min", "var", "std", "argmax", "argmin", "clip", "dot", "squeeze"):
        fn = {
            "sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min, "var": np.var,
            "std": np.std, "argmax": np.argmax, "argmin": np.argmin, "clip": np.clip, "dot": np.dot,
            "squeeze": np.squeeze,
        }[name]
        return _NUMPY_HANDLERS[fn](tr, [x, *args], kwargs, node)
    if name == "reshape":
        shape = args[0] if len(args) == 1 else tuple(args)
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        return tr.reshape(x, shape, node)
    if name == "transpose":
        axes = None if not args else (args[0] if len(args) == 1 else tuple(args))
        return tr.transpose(x, axes, node)
    if name in ("flatten", "ravel"):
        return tr.reshape(x, (-1,), node)
    if name == "astype":
        (dtype,) = _params(tr, args, kwargs, ["dtype"], {}, node, "astype")
        return tr.cast(x, dtype_name(dtype, tr.loc), False)
    if name == "item":
        if math.prod(x.shape) != 1:
            raise tr.error(ValueError_, "can only convert an array of size 1 to a Python scalar", node)
        t = tr.reshape(x, (), node)
        return tr.cast(t, "float64" if kind(t.dtype) == 2 else ("bool" if t.dtype == "bool" else "int64"), True)
    raise AssertionError(name)
