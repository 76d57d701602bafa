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
from msir.errors import DTypeError, MsirError, MsirIndexError, ShapeError, UnsupportedSyntaxError
from msir.frontend import numpy_bodies
from msir.frontend.base import TypeError_, ValueError_, _loc_attr
from msir.frontend.einsum import build_einsum
from msir.frontend.elementwise import binary_typing, check_square, unary_typing
from msir.frontend.ops_calls import OPS_HANDLERS
from msir.frontend.state import _MAX_UNROLL, RangeValue
from msir.frontend.values import KnownInt, Tensor, dtype_name, kind, promote
from msir.passes.ad_ir import IRBuilder


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
    if M.DYNAMIC in shape:  # an operand of runtime length (a mask read, an np.arange)
        c2, a2, b2 = tr.align_all([tc_, tr.cast(ta, dtype), tr.cast(tb, dtype)], shape, node)
    else:
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
        return tr.full_like(t, value, dtype if dtype is not None else t.dtype, node)

    return handler


def _np_full_like(tr, args, kwargs, node):
    a, fill, dtype = _params(tr, args, kwargs, ["a", "fill_value", "dtype"], {"dtype": None}, node, "np.full_like")
    t = tr.as_tensor(a, node)
    return tr.full_like(t, fill, dtype if dtype is not None else t.dtype, node)


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


# -- the composites of msir.frontend.numpy_bodies, through an IRBuilder ----------


def _body(tr, node, build: Callable[[IRBuilder], Any], *inputs: Tensor) -> Tensor:
    """The value `build` emits at the call; its errors are reported there.
    The bodies size their constants and slices from static shapes, so
    `inputs` of runtime length are refused."""
    if any(M.DYNAMIC in t.shape for t in inputs):
        raise tr.error(UnsupportedSyntaxError, "this NumPy function does not take an array of runtime length (a "
                       "boolean-mask read or an np.arange with runtime bounds) yet", node)
    try:
        v = build(IRBuilder(tr.block, _loc_attr(tr.loc)))
    except MsirError as e:
        if e.loc is not None:
            raise
        raise tr.error(type(e), e.message, node) from None
    return Tensor(v, M.dtype_of(v.type), M.shape_of(v.type), False)


def _np_logaddexp(tr, args, kwargs, node):
    a, b = _params(tr, args, kwargs, ["x1", "x2"], {}, node, "np.logaddexp")
    ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
    dtype = numpy_bodies.float_dtype(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = M.infer_broadcast(ta.shape, tb.shape)
    ta, tb = (tr.broadcast(tr.cast(t, dtype, False), shape) for t in (ta, tb))
    return _body(tr, node, lambda B: numpy_bodies.logaddexp_body(B, ta.ssa, tb.ssa), ta, tb)


def _np_outer(tr, args, kwargs, node):
    a, b = _params(tr, args, kwargs, ["a", "b"], {}, node, "np.outer")
    ta, tb = (tr.reshape(tr.as_tensor(x, node), (-1,), node) for x in (a, b))
    try:
        product, dtype, _ = binary_typing("mul", ta.dtype, ta.weak, tb.dtype, tb.weak)
    except MsirError as e:
        raise tr.error(type(e), e.message, node) from None
    ta, tb = tr.cast(ta, dtype, False), tr.cast(tb, dtype, False)
    return _body(tr, node, lambda B: numpy_bodies.outer_body(B, ta.ssa, tb.ssa, product), ta, tb)


def _static_size(tr, value, what: str, node) -> int:
    n = tr.static_int(value, what, node)
    if n < 0:
        raise tr.error(ValueError_, "negative dimensions are not allowed", node)
    return n


def _np_eye(tr, args, kwargs, node):
    n, m, k, dtype = _params(tr, args, kwargs, ["N", "M", "k", "dtype"], {"M": None, "k": 0, "dtype": float},
                             node, "np.eye")
    rows = _static_size(tr, n, "the size of np.eye", node)
    cols = rows if m is None else _static_size(tr, m, "the size of np.eye", node)
    diagonal = tr.static_int(k, "the diagonal of np.eye", node)
    dt = dtype_name(dtype, tr.loc)
    return _body(tr, node, lambda B: numpy_bodies.eye_body(B, rows, cols, diagonal, dt))


def _np_identity(tr, args, kwargs, node):
    n, dtype = _params(tr, args, kwargs, ["n", "dtype"], {"dtype": float}, node, "np.identity")
    size = _static_size(tr, n, "the size of np.identity", node)
    dt = dtype_name(dtype, tr.loc)
    return _body(tr, node, lambda B: numpy_bodies.eye_body(B, size, size, 0, dt))


def _np_triangle(upper: bool):
    fname = "np.triu" if upper else "np.tril"

    def handler(tr, args, kwargs, node):
        m, k = _params(tr, args, kwargs, ["m", "k"], {"k": 0}, node, fname)
        t = tr.as_tensor(m, node)
        diagonal = tr.static_int(k, f"the diagonal of {fname}", node)
        return _body(tr, node, lambda B: numpy_bodies.triangle_body(B, t.ssa, diagonal, upper), t)

    return handler


def _np_diag(tr, args, kwargs, node):
    v, k = _params(tr, args, kwargs, ["v", "k"], {"k": 0}, node, "np.diag")
    t = tr.as_tensor(v, node)
    diagonal = tr.static_int(k, "the diagonal of np.diag", node)

    def build(B):
        numpy_bodies.check_diag_rank(t.ndim)
        if t.ndim == 1:
            return numpy_bodies.diag_from_vector_body(B, t.ssa, diagonal)
        return numpy_bodies.diag_of_matrix_body(B, t.ssa, diagonal)

    return _body(tr, node, build, t)


def _np_scan(combine: str, fname: str):
    def handler(tr, args, kwargs, node):
        a, axis, dtype = _params(tr, args, kwargs, ["a", "axis", "dtype"], {"axis": None, "dtype": None}, node, fname)
        t = tr.as_tensor(a, node)
        if axis is None:
            t, ax = tr.reshape(t, (-1,), node), 0
        else:
            ax = M.normalize_axis(tr.static_int(axis, "an axis", node), t.ndim)
        t = tr.cast(t, dtype_name(dtype, tr.loc) if dtype is not None else numpy_bodies.scan_dtype(t.dtype), False)
        return _body(tr, node, lambda B: numpy_bodies.scan_body(B, t.ssa, ax, combine), t)

    return handler


def _np_norm(tr, args, kwargs, node):
    x, ord, axis, keepdims = _params(tr, args, kwargs, ["x", "ord", "axis", "keepdims"],
                                     {"ord": None, "axis": None, "keepdims": False}, node, "np.linalg.norm")
    if isinstance(ord, (Tensor, KnownInt)):
        raise tr.error(UnsupportedSyntaxError, "np.linalg.norm: ord must be known at compile time", node)
    t = tr.as_tensor(x, node)
    t = tr.cast(t, t.dtype if kind(t.dtype) == 2 else "float64", False)
    if axis is not None:
        axis = tr.static_ints(axis, "an axis", node) if isinstance(axis, (tuple, list)) else tr.static_int(
            axis, "an axis", node)

    def build(B):
        return numpy_bodies.norm_body(B, t.ssa, numpy_bodies.norm_axes(t.ndim, ord, axis), ord, bool(keepdims))

    return _body(tr, node, build, t)


def _np_truth(every: bool):
    fname = "np.all" if every else "np.any"

    def handler(tr, args, kwargs, node):
        a, axis, keepdims = _params(tr, args, kwargs, ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                                    node, fname)
        t = tr.as_tensor(a, node)
        axes = tr.axes(axis, t.ndim, node)
        return _body(tr, node, lambda B: numpy_bodies.truth_body(B, t.ssa, axes, bool(keepdims), every), t)

    return handler


def _np_take_along_axis(tr, args, kwargs, node):
    arr, indices, axis = _params(tr, args, kwargs, ["arr", "indices", "axis"], {}, node, "np.take_along_axis")
    a, i = tr.as_tensor(arr, node), tr.as_tensor(indices, node)
    if kind(i.dtype) != 1:
        raise tr.error(MsirIndexError, f"np.take_along_axis: `indices` must be an integer array, got {i.dtype}", node)
    if axis is None:
        a, ax = tr.reshape(a, (-1,), node), 0
    else:
        ax = M.normalize_axis(tr.static_int(axis, "an axis", node), a.ndim)
    i = tr.cast(i, "int64", False)
    return _body(tr, node, lambda B: numpy_bodies.take_along_axis_body(B, a.ssa, i.ssa, ax), a, i)


def _np_linspace(tr, args, kwargs, node):
    start, stop, num, endpoint, dtype = _params(tr, args, kwargs, ["start", "stop", "num", "endpoint", "dtype"],
                                                {"num": 50, "endpoint": True, "dtype": None}, node, "np.linspace")
    lo, hi = tr.as_tensor(start, node), tr.as_tensor(stop, node)
    if lo.ndim or hi.ndim:
        raise tr.error(UnsupportedSyntaxError, "np.linspace: start and stop must be scalars (array bounds are not "
                       "supported)", node)
    with_end = tr.static_bool(endpoint, node, "endpoint of np.linspace")
    compute = numpy_bodies.float_dtype(lo.dtype, lo.weak, hi.dtype, hi.weak)
    lo, hi = tr.cast(lo, compute, False), tr.cast(hi, compute, False)
    if isinstance(num, Tensor):
        y = tr.runtime_linspace(lo, hi, num, with_end, node)
    else:
        count = _static_size(tr, num, "the number of samples of np.linspace", node)
        y = _body(tr, node, lambda B: numpy_bodies.linspace_body(B, lo.ssa, hi.ssa, count, with_end))
    if dtype is None:
        return y
    target = dtype_name(dtype, tr.loc)
    # NumPy floors toward the integer dtype it is asked for
    return tr.cast(y if M.is_float(target) else tr.unary("floor", y, node), target, False)


def _np_float_class(which: str):
    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, f"np.{which}")
        t = tr.as_tensor(x, node)
        return _body(tr, node, lambda B: numpy_bodies.float_class_body(B, t.ssa, which), t)

    return handler


def _float_unary(which: str):
    """np.tan / np.sinh / np.cosh: a composite of float primitives, typed as
    NumPy types np.sin (integers give float64, bool float16)."""
    body = {"tan": numpy_bodies.tan_body, "sinh": numpy_bodies.sinh_body, "cosh": numpy_bodies.cosh_body}[which]

    def handler(tr, args, kwargs, node):
        (x,) = _params(tr, args, kwargs, ["x"], {}, node, f"np.{which}")
        t = tr.as_tensor(x, node)
        try:
            _, dtype, _ = unary_typing("sin", t.dtype, t.weak)
        except DTypeError as e:
            raise tr.error(DTypeError, e.message.replace("np.sin", f"np.{which}"), node) from None
        t = tr.cast(t, dtype, False)
        return _body(tr, node, lambda B: body(B, t.ssa), t)

    return handler


def _np_round(tr, args, kwargs, node):
    a, decimals = _params(tr, args, kwargs, ["a", "decimals"], {"decimals": 0}, node, "np.round")
    t = tr.as_tensor(a, node)
    d = tr.static_int(decimals, "the decimals of np.round", node)
    if kind(t.dtype) != 2:
        if t.dtype == "bool":
            raise tr.error(DTypeError, "np.round of a bool array is not supported", node)
        if d < 0:
            raise tr.error(UnsupportedSyntaxError, "np.round of an integer array to negative decimals is not "
                           "supported (NumPy rounds it in integer arithmetic)", node)
        return _numpy_result(t)
    return _body(tr, node, lambda B: numpy_bodies.round_body(B, t.ssa, d), t)


def _np_diff(tr, args, kwargs, node):
    a, n, axis = _params(tr, args, kwargs, ["a", "n", "axis"], {"n": 1, "axis": -1}, node, "np.diff")
    t = tr.as_tensor(a, node)
    order = tr.static_int(n, "the order of np.diff", node)

    def build(B):
        numpy_bodies.check_diff(t.ndim, order)
        return numpy_bodies.diff_body(B, t.ssa, order, M.normalize_axis(tr.static_int(axis, "an axis", node), t.ndim))

    return _body(tr, node, build, t)


def _np_stack_along(which: str):
    """np.hstack / np.vstack: np.concatenate of the arrays made at least 1-d
    (hstack; joined along axis 1 unless they are 1-d) or 2-d (vstack, a 1-d
    array becoming one row)."""

    def handler(tr, args, kwargs, node):
        (arrays,) = _params(tr, args, kwargs, ["tup"], {}, node, f"np.{which}")
        if not isinstance(arrays, (tuple, list)):
            raise tr.error(UnsupportedSyntaxError, f"np.{which} takes a tuple or list of arrays", node)
        ts = [tr.as_tensor(x, node) for x in arrays]
        if which == "vstack":
            ts = [tr.reshape(t, (1, 1) if t.ndim == 0 else (1, *t.shape), node) if t.ndim < 2 else t for t in ts]
            return tr.concatenate(ts, 0, node)
        ts = [tr.reshape(t, (1,), node) if t.ndim == 0 else t for t in ts]
        return tr.concatenate(ts, 0 if ts and ts[0].ndim == 1 else 1, node)

    return handler


def _np_compare(pred: str, fname: str):
    def handler(tr, args, kwargs, node):
        a, b = _params(tr, args, kwargs, ["x1", "x2"], {}, node, fname)
        return _numpy_result(tr.compare(pred, tr.as_tensor(a, node), tr.as_tensor(b, node), node))

    return handler


def _np_shape_of(what: str):
    """np.shape / np.size / np.ndim: the array attribute."""

    def handler(tr, args, kwargs, node):
        (a,) = _params(tr, args, kwargs, ["a"], {}, node, f"np.{what}")
        return tr.attribute(tr.as_tensor(a, node), what, node)

    return handler


def _np_ravel(tr, args, kwargs, node):
    (a,) = _params(tr, args, kwargs, ["a"], {}, node, "np.ravel")
    return tr.reshape(tr.as_tensor(a, node), (-1,), node)


def _np_copy(tr, args, kwargs, node):
    (a,) = _params(tr, args, kwargs, ["a"], {}, node, "np.copy")
    return _numpy_result(tr.as_tensor(a, node))  # values are immutable: the copy is the value


def _np_isclose(every: bool):
    """np.isclose, and np.allclose (every element close)."""
    fname = "np.allclose" if every else "np.isclose"

    def handler(tr, args, kwargs, node):
        a, b, rtol, atol, equal_nan = _params(tr, args, kwargs, ["a", "b", "rtol", "atol", "equal_nan"],
                                              {"rtol": 1e-05, "atol": 1e-08, "equal_nan": False}, node, fname)
        ta, tb = tr.as_tensor(a, node), tr.as_tensor(b, node)
        dtype = numpy_bodies.float_dtype(ta.dtype, ta.weak, tb.dtype, tb.weak)
        shape = M.infer_broadcast(ta.shape, tb.shape)
        ta, tb = (tr.broadcast(tr.cast(t, dtype, False), shape) for t in (ta, tb))
        tol = [_static_float(tr, v, f"{name} of {fname}", node) for v, name in ((rtol, "rtol"), (atol, "atol"))]
        nan = tr.static_bool(equal_nan, node, f"equal_nan of {fname}")
        close = _body(tr, node, lambda B: numpy_bodies.isclose_body(B, ta.ssa, tb.ssa, *tol, nan), ta, tb)
        if not every:
            return close
        return _body(tr, node, lambda B: numpy_bodies.truth_body(B, close.ssa, tuple(range(close.ndim)), False, True),
                     close)

    return handler


def _static_float(tr, value, what: str, node) -> float:
    if isinstance(value, (bool, int, float)):
        return float(value)
    raise tr.error(UnsupportedSyntaxError, f"{what} must be a number known at compile time", node)


def _np_count_nonzero(tr, args, kwargs, node):
    a, axis, keepdims = _params(tr, args, kwargs, ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                                node, "np.count_nonzero")
    t = tr.as_tensor(a, node)
    nonzero = t if t.dtype == "bool" else tr.compare("ne", t, 0, node)
    return tr.reduce("sum", tr.cast(nonzero, "int64"), axis, keepdims, node)


def _np_average(tr, args, kwargs, node):
    a, axis, weights, returned, keepdims = _params(
        tr, args, kwargs, ["a", "axis", "weights", "returned", "keepdims"],
        {"axis": None, "weights": None, "returned": False, "keepdims": False}, node, "np.average")
    t = tr.as_tensor(a, node)
    with_sum = tr.static_bool(returned, node, "returned of np.average")
    if weights is None:
        avg = tr.reduce("mean", t, axis, keepdims, node)
        if not with_sum:
            return avg
        count = math.prod(t.shape) // max(math.prod(avg.shape), 1) if math.prod(avg.shape) else 0
        return avg, tr.full(avg.shape, count, avg.dtype, node)
    w = tr.as_tensor(weights, node)
    if w.shape != t.shape:
        if axis is None or w.ndim != 1:
            raise tr.error(ShapeError, "Axis must be specified when shapes of a and weights differ.", node)
        ax = M.normalize_axis(tr.static_int(axis, "an axis", node), t.ndim)
        if w.shape[0] != t.shape[ax]:
            raise tr.error(ShapeError, "Length of weights not compatible with specified axis.", node)
        w = tr.reshape(w, tuple(w.shape[0] if i == ax else 1 for i in range(t.ndim)), node)
    dtype = numpy_bodies.float_dtype(t.dtype, t.weak, w.dtype, w.weak)
    t, w = tr.cast(t, dtype, False), tr.cast(w, dtype, False)
    total = tr.reduce("sum", tr.broadcast(w, t.shape), axis, keepdims, node)
    avg = tr.elementwise("div", tr.reduce("sum", tr.elementwise("mul", t, w, node), axis, keepdims, node), total, node)
    return (avg, total) if with_sum else avg


def _np_atleast(ndim: int):
    """np.atleast_1d / np.atleast_2d: a 0-d array as (1,) or (1, 1), a 1-d one
    as a row (1, n); several arrays give a tuple, as NumPy 2 does."""

    def one(tr, x, node):
        t = tr.as_tensor(x, node)
        if t.ndim >= ndim:
            return t
        return tr.reshape(t, (1,) * (ndim - t.ndim) + t.shape, node)

    def handler(tr, args, kwargs, node):
        if kwargs:
            raise tr.error(UnsupportedSyntaxError, f"np.atleast_{ndim}d takes no keyword arguments", node)
        out = [one(tr, x, node) for x in args]
        return out[0] if len(out) == 1 else tuple(out)

    return handler


def _np_sort(argsort: bool):
    fname = "np.argsort" if argsort else "np.sort"

    def handler(tr, args, kwargs, node):
        a, axis, sort_kind, order = _params(tr, args, kwargs, ["a", "axis", "kind", "order"],
                                            {"axis": -1, "kind": None, "order": None}, node, fname)
        t = tr.as_tensor(a, node)
        if axis is None:
            t, ax = tr.reshape(t, (-1,), node), 0
        else:
            ax = M.normalize_axis(tr.static_int(axis, "an axis", node), t.ndim)
        body = numpy_bodies.argsort_body if argsort else numpy_bodies.sort_body

        def build(B):
            numpy_bodies.check_sort_kind(sort_kind, order, fname)
            return body(B, t.ssa, ax)

        return _body(tr, node, build, t)

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
            items = [tr.index(args[0], i, node) for i in range(tr.rows(args[0], node))]
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
        items = [tr.index(items, i, node) for i in range(tr.rows(items, node))]
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
    # a runtime length (a mask read, an np.arange) is a runtime int64 scalar
    return tr.runtime_count(t, "int64", node) if t.shape[0] == M.DYNAMIC else t.shape[0]


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


def _unrolled_items(tr, value: Any, fname: str, node) -> list[Any]:
    """The items of what `enumerate`/`zip` iterate over, known now: a loop over
    their result unrolls, so a range's bounds specialise the function and an
    array gives its rows."""
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, RangeValue):
        bounds = [tr.static_int(b, f"a bound of a range that {fname}() iterates over", node)
                  for b in (value.start, value.stop, value.step)]
        if bounds[2] == 0:
            raise tr.error(ValueError_, "range() arg 3 must not be zero", node)
        items = list(range(*bounds))
    elif isinstance(value, Tensor) and value.ndim > 0:
        items = list(range(tr.rows(value, node)))
    else:
        raise tr.error(TypeError_, f"{fname}() over {tr.describe(value)} is not supported in compiled code "
                       "(a tuple, list, range or array is)", node)
    if len(items) > _MAX_UNROLL:
        raise tr.error(UnsupportedSyntaxError, f"{fname}() unrolls at most {_MAX_UNROLL} items, got {len(items)}",
                       node)
    return [tr.index(value, i, node) for i in items] if isinstance(value, Tensor) else items


def _py_enumerate(tr, args, kwargs, node):
    iterable, start = _params(tr, args, kwargs, ["iterable", "start"], {"start": 0}, node, "enumerate")
    first = tr.static_int(start, "the start of enumerate()", node)
    return [(first + k, item) for k, item in enumerate(_unrolled_items(tr, iterable, "enumerate", node))]


def _py_zip(tr, args, kwargs, node):
    strict = kwargs.pop("strict", False)
    if kwargs:
        raise tr.error(TypeError_, f"zip() got an unexpected keyword argument '{next(iter(kwargs))}'", node)
    columns = [_unrolled_items(tr, a, "zip", node) for a in args]
    if strict and len({len(c) for c in columns}) > 1:
        raise tr.error(ValueError_, "zip() arguments have different lengths (strict=True)", node)
    return list(zip(*columns))


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
    np.tan: _float_unary("tan"),
    np.sinh: _float_unary("sinh"),
    np.cosh: _float_unary("cosh"),
    np.round: _np_round,
    np.around: _np_round,
    np.diff: _np_diff,
    np.hstack: _np_stack_along("hstack"),
    np.vstack: _np_stack_along("vstack"),
    np.equal: _np_compare("eq", "np.equal"),
    np.not_equal: _np_compare("ne", "np.not_equal"),
    np.less: _np_compare("lt", "np.less"),
    np.less_equal: _np_compare("le", "np.less_equal"),
    np.greater: _np_compare("gt", "np.greater"),
    np.greater_equal: _np_compare("ge", "np.greater_equal"),
    np.isclose: _np_isclose(False),
    np.allclose: _np_isclose(True),
    np.count_nonzero: _np_count_nonzero,
    np.average: _np_average,
    np.atleast_1d: _np_atleast(1),
    np.atleast_2d: _np_atleast(2),
    np.shape: _np_shape_of("shape"),
    np.size: _np_shape_of("size"),
    np.ndim: _np_shape_of("ndim"),
    np.ravel: _np_ravel,
    np.copy: _np_copy,
    np.logaddexp: _np_logaddexp,
    np.outer: _np_outer,
    np.eye: _np_eye,
    np.identity: _np_identity,
    np.tril: _np_triangle(False),
    np.triu: _np_triangle(True),
    np.diag: _np_diag,
    np.cumsum: _np_scan("add", "np.cumsum"),
    np.linalg.norm: _np_norm,
    np.any: _np_truth(False),
    np.linspace: _np_linspace,
    np.take_along_axis: _np_take_along_axis,
    np.sort: _np_sort(argsort=False),
    np.isnan: _np_float_class("isnan"),
    np.isinf: _np_float_class("isinf"),
    np.isfinite: _np_float_class("isfinite"),
    np.argsort: _np_sort(argsort=True),
    np.all: _np_truth(True),
    np.cumprod: _np_scan("mul", "np.cumprod"),
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
    enumerate: _py_enumerate,
    zip: _py_zip,
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
    stands_for = getattr(fn, "msir_stands_for", None)  # np.arange while an eager transformation runs
    if stands_for is not None:
        try:
            return _NUMPY_HANDLERS.get(stands_for)
        except TypeError:
            return None
    # ml_dtypes.bfloat16 without importing ml_dtypes: code that names it has imported it
    ml_dtypes = sys.modules.get("ml_dtypes")
    return _BFLOAT16 if ml_dtypes is not None and fn is ml_dtypes.bfloat16 else None


_ARRAY_METHODS = {
    "sum", "prod", "mean", "max", "min", "argmax", "argmin", "reshape", "astype", "transpose",
    "flatten", "ravel", "squeeze", "clip", "dot", "var", "std", "item", "cumsum", "cumprod", "any", "all", "argsort",
}


def _call_method(tr, m: _BoundMethod, args, kwargs, node) -> Any:
    x = m.value
    name = m.name
    if name in ("sum", "prod", "mean", "max", "min", "var", "std", "argmax", "argmin", "clip", "dot", "squeeze",
                "cumsum", "cumprod", "any", "all", "argsort"):
        fn = {
            "sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min, "var": np.var,
            "std": np.std, "argmax": np.argmax, "argmin": np.argmin, "clip": np.clip, "dot": np.dot,
            "squeeze": np.squeeze, "cumsum": np.cumsum, "cumprod": np.cumprod,
            "any": np.any, "all": np.all, "argsort": np.argsort,
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
