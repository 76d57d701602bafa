"""Array operations the NumPy functions and methods build: reductions and shapes.

Reductions (`sum`, `prod`, `mean`, `max`, `min`, `argmax`, `argmin`) with
NumPy's accumulation dtypes, and shape operations (reshape, transpose,
filled arrays, `arange`, concatenate/stack), their static arguments (axes,
shapes, bounds) checked as NumPy checks them. `np.arange` with a runtime
bound and `np.linspace` with a runtime count give a value of runtime length
(`msir.ramp`; see `msir.frontend.subscripts` for how such values combine),
and reductions over a runtime length divide by, or check, its count.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

from msir.dialects import msir as M
from msir.errors import DTypeError, ShapeError, UnsupportedSyntaxError
from msir.frontend.base import ValueError_, ZeroDivisionError_
from msir.frontend.values import KnownInt, Tensor, dtype_name, kind, promote, reduces_over_nothing


def _is_literal(value: Any, number: int) -> bool:
    """Whether `value` is the Python int `number` written in the source (not a runtime value)."""
    return isinstance(value, int) and not isinstance(value, bool) and value == number


class ArrayOpsMixin:
    """Reductions and shape operations on tensors."""

    def reduce(self, name: str, x: Any, axis: Any, keepdims: Any, node: ast.AST, dtype: Any = None) -> Tensor:
        t = self.as_tensor(x, node)
        static_axis = axis.value if isinstance(axis, KnownInt) else axis
        axes = () if reduces_over_nothing(name, t.ndim, static_axis) else self.axes(axis, t.ndim, node)
        keep = bool(keepdims)
        if dtype is not None:
            t = self.cast(t, dtype_name(dtype, self.loc))
        elif name in ("sum", "prod") and kind(t.dtype) < 2:
            t = self.cast(t, "int64")
        elif name == "mean" and kind(t.dtype) < 2:
            t = self.cast(t, "float64")
        if name in ("max", "min") and any(t.shape[a] == 0 for a in axes):
            raise self.error(
                ValueError_,
                f"zero-size array to reduction operation {'maximum' if name == 'max' else 'minimum'} "
                "which has no identity",
                node,
            )
        if any(t.shape[a] == M.DYNAMIC for a in axes):
            return self.reduce_runtime_length(name, t, axes, keep, node)
        op = {
            "sum": M.ReduceSumOp,
            "prod": M.ReduceProdOp,
            "max": M.ReduceMaxOp,
            "min": M.ReduceMinOp,
            "mean": M.ReduceMeanOp,
        }[name]
        return self.tensor(op(t.ssa, axes, keep), False)

    def reduce_runtime_length(self, name: str, t: Tensor, axes: tuple[int, ...], keep: bool,
                              node: ast.AST) -> Tensor:
        """A reduction over the runtime-length dim of a mask read. A mean divides
        the sum by the count of true elements of the mask (so its derivative
        needs no size known at compile time); max and min of an empty selection
        raise NumPy's ValueError at run time."""
        if name == "mean":
            total = self.tensor(M.ReduceSumOp(t.ssa, axes, keep), False)
            count = self.runtime_count(t, t.dtype, node)
            rest = math.prod(t.shape[a] for a in axes if t.shape[a] != M.DYNAMIC)
            if rest != 1:
                count = self.elementwise("mul", count, self.constant(rest, t.dtype), node)
            return self.elementwise("div", total, count, node)
        if name in ("max", "min"):
            nonempty = self.compare("gt", self.runtime_count(t, "int64", node), 0, node)
            message = (f"zero-size array to reduction operation {'maximum' if name == 'max' else 'minimum'} "
                       "which has no identity")
            self.emit(M.CheckOp(nonempty.ssa, "ValueError", message))
        op = {"sum": M.ReduceSumOp, "prod": M.ReduceProdOp, "max": M.ReduceMaxOp, "min": M.ReduceMinOp}[name]
        return self.tensor(op(t.ssa, axes, keep), False)

    def arg_reduce(self, name: str, x: Any, axis: Any, keepdims: Any, node: ast.AST) -> Tensor:
        t = self.as_tensor(x, node)
        ax = None if axis is None else M.normalize_axis(self.static_int(axis, "axis", node), t.ndim)
        op = M.ArgmaxOp if name == "argmax" else M.ArgminOp
        return self.tensor(op(t.ssa, ax, bool(keepdims)), False)

    # -- shapes -------------------------------------------------------------

    def reshape(self, t: Tensor, shape: Any, node: ast.AST) -> Tensor:
        dims = list(self.static_ints(shape, "a reshape dimension", node))
        if dims.count(-1) > 1:
            raise self.error(ShapeError, "can only specify one unknown dimension", node)
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            size = math.prod(t.shape)
            if known == 0 or size % known:
                raise self.error(
                    ShapeError,
                    f"cannot reshape array of size {size} into shape {tuple(dims)}",
                    node,
                )
            dims[dims.index(-1)] = size // known
        M.check_reshape(t.shape, dims)
        if tuple(dims) == t.shape:
            return t
        return self.tensor(M.ReshapeOp(t.ssa, dims), t.weak)

    def transpose(self, t: Tensor, axes: Any, node: ast.AST) -> Tensor:
        perm = tuple(reversed(range(t.ndim))) if axes is None else tuple(
            M.normalize_axis(a, t.ndim) for a in self.static_ints(axes, "an axis", node)
        )
        if perm == tuple(range(t.ndim)):
            return t
        return self.tensor(M.TransposeOp(t.ssa, perm), t.weak)

    def full(self, shape: Any, value: Any, dtype: Any, node: ast.AST) -> Tensor:
        dims = self.static_ints(shape, "a shape", node)
        if any(d < 0 for d in dims):
            raise self.error(ValueError_, "negative dimensions are not allowed", node)
        v = self.as_tensor(value, node)
        dt = dtype_name(dtype, self.loc) if dtype is not None else (
            "float64" if v.weak and kind(v.dtype) == 2 else ("int64" if v.weak and kind(v.dtype) == 1 else v.dtype)
        )
        if v.ndim != 0:
            return self.broadcast(self.cast(v, dt, False), tuple(dims))
        if isinstance(value, (bool, int, float)) and 0 not in dims:
            attr = DenseIntOrFPElementsAttr.from_list(
                M.tensor_type(dims, dt), [float(value) if M.is_float(dt) else int(value)]
            )
            return self.tensor(M.ConstantOp(attr), False)
        return self.broadcast(self.cast(v, dt, False), tuple(dims))

    def full_like(self, like: Tensor, value: Any, dtype: Any, node: ast.AST) -> Tensor:
        """`np.full_like` (zeros_like, ones_like): a runtime length of `like`
        repeats the value along it, as a static operand meeting it does."""
        if M.DYNAMIC not in like.shape:
            return self.full(like.shape, value, dtype, node)
        v = self.cast(self.as_tensor(value, node), dtype_name(dtype, self.loc), False)
        if v.ndim:
            raise self.error(ShapeError, "np.full_like of an array of runtime length takes a scalar fill value", node)
        return self.align_all([like, v], like.shape, node)[1]

    def arange(self, args: list[Any], dtype: Any, node: ast.AST) -> Tensor:
        """np.arange as NumPy computes it: element i is `first + i * delta`,
        with `first` and `delta = cast(start + step) - first` in the result's
        dtype (so `dtype=` truncates as NumPy does), and the length
        `ceil((stop - start) / step)`, at least 0. Bounds known at compile time
        (Python numbers, ints that specialise) give a static length; a runtime
        scalar among them gives a `msir.ramp` of runtime length
        (`runtime_arange`)."""
        if not 1 <= len(args) <= 3:
            raise self.error(UnsupportedSyntaxError, "np.arange takes 1 to 3 positional arguments", node)
        if any(isinstance(a, Tensor) for a in args):
            return self.runtime_arange(args, dtype, node)
        for a in args:
            if isinstance(a, KnownInt):
                self.static_int(a, "an arange bound", node)
        vals = [a.value if isinstance(a, KnownInt) else a for a in args]
        start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) == 3 else 1)
        if step == 0:
            raise self.error(ZeroDivisionError_, "np.arange step cannot be zero", node)
        n = max(0, math.ceil((stop - start) / step))
        is_float = any(isinstance(v, float) for v in (start, stop, step))
        dt = dtype_name(dtype, self.loc) if dtype is not None else ("float64" if is_float else "int64")
        first = np.asarray(start).astype(dt)
        delta = (np.asarray(start + step).astype(dt) - first).item()
        idx = self.tensor(M.IotaOp(0, M.tensor_type((n,), "int64" if not M.is_float(dt) else dt)))
        idx = self.cast(idx, dt)
        if delta != 1:
            idx = self.elementwise("mul", idx, self.constant(delta, dt), node)
        if first.item() != 0:
            idx = self.elementwise("add", idx, self.constant(first.item(), dt), node)
        return self.cast(idx, dt, False)

    def runtime_arange(self, args: list[Any], dtype: Any, node: ast.AST) -> Tensor:
        """np.arange with a runtime scalar bound: a `msir.ramp` whose count is
        computed at run time as NumPy computes the length, bounds
        of integer kind giving int64 and any float giving float64 (NumPy's
        dtypes for scalar bounds, whatever their width). A step of zero is
        NumPy's ZeroDivisionError at run time (`msir.check`), a NaN length its
        ValueError, a length past 2**62 its "Maximum allowed size exceeded";
        each gives no elements. The values carry no derivative with respect
        to the bounds (the length does not vary smoothly with them)."""
        ts = [self.as_tensor(a, node) for a in args]
        for t in ts:
            if t.ndim != 0 or kind(t.dtype) > 2:
                raise self.error(ShapeError, "np.arange: start, stop and step must be scalars, got "
                                 f"{self.describe(t)}", node)
        one = self.constant(1, "int64", weak=True)
        start, stop, step = (self.constant(0, "int64", weak=True), ts[0], one) if len(ts) == 1 else (
            ts[0], ts[1], ts[2] if len(ts) == 3 else one)
        natural = "float64" if any(kind(t.dtype) == 2 for t in (start, stop, step)) else "int64"
        dt = dtype_name(dtype, self.loc) if dtype is not None else natural
        if dt == "bool":
            raise self.error(DTypeError, "np.arange with runtime bounds: dtype bool is not supported", node)
        unit_step = len(ts) < 3 or _is_literal(args[2], 1)
        if natural == "int64" and unit_step:
            # integer bounds and step 1: the length is exact, and computed as
            # np.linspace's count is (max(n, 0)), so np.arange(n) combines with it
            span = stop if len(ts) == 1 else self.elementwise("sub", self.cast(stop, "int64", False),
                                                              self.cast(start, "int64", False), node)
            count = self.elementwise("maximum", self.cast(span, "int64", False), self.constant(0, "int64"), node)
            first = self.cast(start, dt, False)
            delta = self.constant(1, dt)
            first, delta = (self.tensor(M.StopGradientOp(t.ssa)) for t in (first, delta))
            return self.tensor(M.RampOp(first.ssa, delta.ssa, count.ssa))
        # NumPy computes stop - start, its ratio to step and start + step in the
        # bounds' own (promoted) dtype, as their Python operators do
        zero_step = self.compare("eq", step, 0, node)
        message = "float division by zero" if natural == "float64" else "division by zero"
        self.emit(M.CheckOp(self.tensor(M.NotOp(zero_step.ssa)).ssa, "ZeroDivisionError", message))
        ratio = self.cast(self.elementwise("div", self.elementwise("sub", stop, start, node), step, node),
                          "float64", False)
        is_nan = self.compare("ne", ratio, ratio, node)
        too_long = self.compare("gt", self.unary("abs", ratio, node), float(2 ** 62), node)
        self.emit(M.CheckOp(self.binary("or", self.tensor(M.NotOp(is_nan.ssa)), zero_step, node).ssa, "ValueError",
                            "arange: cannot compute length"))
        self.emit(M.CheckOp(self.binary("or", self.tensor(M.NotOp(too_long.ssa)), zero_step, node).ssa, "ValueError",
                            "Maximum allowed size exceeded"))
        bad = self.binary("or", self.binary("or", is_nan, too_long, node), zero_step, node)
        length = self.tensor(M.SelectOp(bad.ssa, self.constant(0.0, "float64").ssa, self.unary("ceil", ratio, node).ssa))
        count = self.elementwise("maximum", self.cast(length, "int64", False), self.constant(0, "int64"), node)
        first = self.cast(start, dt, False)
        delta = self.elementwise("sub", self.cast(self.elementwise("add", start, step, node), dt, False), first, node)
        first, delta = (self.tensor(M.StopGradientOp(t.ssa)) for t in (first, delta))
        return self.tensor(M.RampOp(first.ssa, delta.ssa, count.ssa))

    def runtime_linspace(self, start: Tensor, stop: Tensor, num: Tensor, endpoint: bool, node: ast.AST) -> Tensor:
        """np.linspace with a runtime number of samples: the `msir.ramp`
        `start + i * step` of `num` rows, `step = (stop - start) / div` (div
        `num - 1` with the endpoint, else `num`; `stop - start` when div is 0),
        the last row `stop` exactly with the endpoint and two or more rows, as `numpy_bodies.
        linspace_body` computes a static count. A negative `num` is NumPy's
        ValueError at run time. Differentiable in start and stop."""
        if num.ndim != 0 or kind(num.dtype) != 1:
            raise self.error(DTypeError, f"np.linspace: num must be an integer, got {self.describe(num)}", node)
        n = self.cast(num, "int64", False)
        self.emit(M.CheckOp(self.compare("ge", n, 0, node).ssa, "ValueError",
                            "Number of samples, {0}, must be non-negative.", [n.ssa], [0]))
        count = self.elementwise("maximum", n, self.constant(0, "int64"), node)
        div = self.elementwise("sub", n, self.constant(1, "int64"), node) if endpoint else n
        delta = self.elementwise("sub", stop, start, node)
        divided = self.elementwise("div", delta, self.cast(div, start.dtype, False), node)
        positive = self.compare("gt", div, 0, node)
        step = self.tensor(M.SelectOp(positive.ssa, divided.ssa, delta.ssa))
        y = self.tensor(M.RampOp(start.ssa, step.ssa, count.ssa))
        if not endpoint:
            return y
        zero, one = self.constant(0, "int64"), self.constant(1, "int64")
        position = self.tensor(M.RampOp(zero.ssa, one.ssa, count.ssa))
        # NumPy writes stop over the last sample only when there are two or more
        final = self.tensor(M.SelectOp(self.compare("gt", n, 1, node).ssa,
                                       self.elementwise("sub", n, one, node).ssa, self.constant(-1, "int64").ssa))
        last = self.tensor(M.RampOp(final.ssa, zero.ssa, count.ssa))
        ends = self.tensor(M.RampOp(stop.ssa, self.full((), 0, stop.dtype, node).ssa, count.ssa))
        is_last = self.tensor(M.CompareOp("eq", position.ssa, last.ssa))
        return self.tensor(M.SelectOp(is_last.ssa, ends.ssa, y.ssa))

    def concatenate(self, arrays: Any, axis: Any, node: ast.AST, stack: bool = False) -> Tensor:
        if not isinstance(arrays, (tuple, list)):
            raise self.error(UnsupportedSyntaxError, "expected a tuple or list of arrays", node)
        ts = [self.as_tensor(a, node) for a in arrays]
        if not ts:
            raise self.error(ValueError_, "need at least one array to concatenate", node)
        dtype, weak = ts[0].dtype, ts[0].weak
        for t in ts[1:]:
            dtype, weak = promote(dtype, weak, t.dtype, t.weak)
        ts = [self.cast(t, dtype, False) for t in ts]
        ndim = ts[0].ndim + (1 if stack else 0)
        ax = M.normalize_axis(self.static_int(axis, "axis", node), ndim)
        op = M.StackOp if stack else M.ConcatenateOp
        return self.tensor(op([t.ssa for t in ts], ax), False)
