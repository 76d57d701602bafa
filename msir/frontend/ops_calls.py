"""Calls of `msir.ops` functions in compiled code.

`OPS_HANDLERS` maps each function of `msir.ops` to a handler of the NumPy
handler table's form (`msir.frontend.numpy_handlers`): it binds the arguments
by the function's own signature, builds the value, and gives every op the call
emitted the call's `name=` as `msir.name` (`M.NAME_ATTR`). Arithmetic, products,
reductions and shapes build what the NumPy function of the same meaning builds
(`ops.add` as `np.add`, `ops.reduce_sum` as `np.sum`); the composites
(`softmax`, `layer_norm`, the losses...) emit the primitive ops of their
`msir.ops.*_body` through an `IRBuilder`, after casting their operands to one
float dtype. A bad argument is an error at the call.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, SSAValue

from msir import ops
from msir.common.tensor import Tensor as UserTensor
from msir.dialects import msir as M
from msir.errors import MsirError
from msir.frontend.base import TypeError_, ValueError_, _loc_attr
from msir.frontend.einsum import build_einsum
from msir.frontend.values import Tensor
from msir.passes.ad_ir import IRBuilder


def _tensor(v: SSAValue) -> Tensor:
    return Tensor(v, M.dtype_of(v.type), M.shape_of(v.type), False)


def _builder(tr) -> IRBuilder:
    return IRBuilder(tr.block, _loc_attr(tr.loc))


def _floats(tr, node: ast.AST, *operands: Any) -> list[Tensor]:
    """The operands cast to the dtype the float-valued functions compute in (`ops.float_dtype`)."""
    ts = [tr.as_tensor(x, node) for x in operands]
    dtype = ops.float_dtype([(t.dtype, t.weak) for t in ts])
    return [tr.cast(t, dtype, False) for t in ts]


# -- arithmetic, products, reductions, shapes: as the NumPy functions ----------


def _binary(prim: str, rhs: str = "other") -> Callable:
    def handler(tr, node, input, **operand):
        return tr.elementwise(prim, tr.as_tensor(input, node), tr.as_tensor(operand[rhs], node), node)

    return handler


def _unary(prim: str) -> Callable:
    def handler(tr, node, input):
        return tr.unary(prim, tr.as_tensor(input, node), node)

    return handler


def _square(tr, node, input):
    t = tr.as_tensor(input, node)
    return tr.elementwise("mul", t, t, node)


def _relu(tr, node, input):
    return tr.elementwise("maximum", tr.as_tensor(input, node), tr.as_tensor(0, node), node)


def _matmul(tr, node, input, other):
    return tr.matmul(input, other, node)


def _dense(tr, node, input, weight, bias):
    w = tr.as_tensor(weight, node)
    ops.check_dense_weight(w.shape)
    y = tr.matmul(input, tr.transpose(w, None, node), node)
    return y if bias is None else tr.elementwise("add", y, tr.as_tensor(bias, node), node)


def _einsum(tr, node, equation, operands):
    return build_einsum(tr, equation, operands, node, "msir.ops.einsum")


def _reduction(prim: str) -> Callable:
    def handler(tr, node, input, axis, keep_dims):
        return tr.reduce(prim, input, ops.reduction_axis(axis), keep_dims, node)

    return handler


def _reshape(tr, node, input, shape):
    return tr.reshape(tr.as_tensor(input, node), shape, node)


def _transpose(tr, node, input, input_perm):
    return tr.transpose(tr.as_tensor(input, node), input_perm, node)


def _concat(tr, node, tensors, axis):
    return tr.concatenate(tensors, axis, node)


# -- the composites: msir.ops' bodies through an IRBuilder ------------------------


def _axis(tr, node, axis, x: Tensor, fname: str) -> int:
    return ops.axis_index(tr.static_int(axis, "an axis", node), x.ndim, fname)


def _sigmoid(tr, node, input):
    (x,) = _floats(tr, node, input)
    return _tensor(ops.sigmoid_body(_builder(tr), x.ssa))


def _gelu(tr, node, input, approximate):
    ops.check_gelu_approximation(approximate)
    (x,) = _floats(tr, node, input)
    return _tensor(ops.gelu_tanh_body(_builder(tr), x.ssa))


def _softmax(tr, node, input, axis):
    (x,) = _floats(tr, node, input)
    return _tensor(ops.softmax_body(_builder(tr), x.ssa, _axis(tr, node, axis, x, "softmax")))


def _log_softmax(tr, node, logits, axis):
    (x,) = _floats(tr, node, logits)
    return _tensor(ops.log_softmax_body(_builder(tr), x.ssa, _axis(tr, node, axis, x, "log_softmax")))


def _layer_norm(tr, node, input, normalized_shape, weight, bias, eps):
    dims = tr.static_ints(normalized_shape, "normalized_shape", node)
    x, *params = _floats(tr, node, input, *(p for p in (weight, bias) if p is not None))
    w = params.pop(0).ssa if weight is not None else None
    b = params.pop(0).ssa if bias is not None else None
    eps_value = tr.cast(tr.as_tensor(eps, node), x.dtype, False)
    ops.check_eps_shape(eps_value.shape)
    axes = ops.normalized_axes(dims, x.shape)
    return _tensor(ops.layer_norm_body(_builder(tr), x.ssa, axes, w, b, eps_value.ssa))


def _cross_entropy(tr, node, input, target, weight, ignore_index, reduction, label_smoothing):
    ops.check_choice(reduction, ops.LOSS_REDUCTIONS, "reduction", "cross_entropy")
    ignore = tr.static_int(ignore_index, "ignore_index", node)
    t = tr.as_tensor(target, node)
    probabilities = ops.target_is_probabilities(t.dtype)
    if probabilities:
        x, t = _floats(tr, node, input, t)
    else:
        (x,) = _floats(tr, node, input)
    class_axis = ops.cross_entropy_class_axis(x.shape, t.shape, probabilities, weight, label_smoothing)
    classes = None if probabilities else tr.tensor(M.IotaOp(0, M.tensor_type((x.shape[class_axis],), "int64"))).ssa
    return _tensor(ops.cross_entropy_body(_builder(tr), x.ssa, t.ssa, classes, class_axis, ignore, reduction))


def _mse_loss(tr, node, input, target, reduction):
    ops.check_choice(reduction, ops.LOSS_REDUCTIONS, "reduction", "mse_loss")
    x, t = _floats(tr, node, input, target)
    shape = M.infer_broadcast(x.shape, t.shape)
    x, t = tr.broadcast(x, shape), tr.broadcast(t, shape)
    return _tensor(ops.mse_body(_builder(tr), x.ssa, t.ssa, reduction))


def _binary_cross_entropy_with_logits(tr, node, input, target, weight, pos_weight, reduction):
    ops.check_choice(reduction, ops.LOSS_REDUCTIONS, "reduction", "binary_cross_entropy_with_logits")
    given = [v for v in (weight, pos_weight) if v is not None]
    ts = _floats(tr, node, input, target, *given)
    shape = ts[0].shape
    for t in ts[1:]:
        shape = M.infer_broadcast(shape, t.shape)
    x, t, *w = [tr.broadcast(v, shape).ssa for v in ts]
    weight_v = w.pop(0) if weight is not None else None
    pos_v = w.pop(0) if pos_weight is not None else None
    return _tensor(ops.binary_cross_entropy_with_logits_body(_builder(tr), x, t, weight_v, pos_v, reduction))


def _creating(value: int):
    def handler(tr, node, shape, dtype):
        dims = (shape,) if not isinstance(shape, (tuple, list)) else shape
        return tr.full(dims, value, ops._np_dtype(dtype), node)

    return handler


def _full(tr, node, size, fill_value, dtype):
    dims = (size,) if not isinstance(size, (tuple, list)) else size
    if dtype is None and isinstance(fill_value, float):
        dtype = "float32"  # MindSpore: a Python float fills Float32
    return tr.full(dims, fill_value, None if dtype is None else ops._np_dtype(dtype), node)


def _creating_like(value: int):
    def handler(tr, node, input, dtype):
        t = tr.as_tensor(input, node)
        return tr.full(t.shape, value, ops._np_dtype(dtype, t.dtype), node)

    return handler


def _cast(tr, node, input, dtype):
    return tr.cast(tr.as_tensor(input, node), ops._np_dtype(dtype).name, False)


def _flatten(tr, node, input, order, start_dim, end_dim):
    ops.check_choice(order, ("C",), "order", "flatten")
    x = tr.as_tensor(input, node)
    start = tr.static_int(start_dim, "start_dim", node)
    end = tr.static_int(end_dim, "end_dim", node)
    return tr.reshape(x, ops.flatten_shape(x.shape, start, end), node)


def _numpy(fn: Callable, names: tuple[str, ...], renamed: dict[str, str] | None = None) -> Callable:
    """A builder calling NumPy's handler of `fn` with these parameters (renamed to NumPy's names)."""

    def handler(tr, node, **params):
        kwargs = {(renamed or {}).get(k, k): params[k] for k in names[1:]}
        return tr.call_value(fn, [params[names[0]]], kwargs, node)

    return handler


def _expand_dims(tr, node, input_x, axis):
    x = tr.as_tensor(input_x, node)
    a = ops.axis_index(tr.static_int(axis, "an axis", node), x.ndim + 1, "expand_dims")
    return tr.reshape(x, (*x.shape[:a], 1, *x.shape[a:]), node)


def _unsqueeze(tr, node, input, dim):
    return _expand_dims(tr, node, input, dim)


def _squeeze(tr, node, input, axis):
    x = tr.as_tensor(input, node)
    if axis is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        axes = [ops.axis_index(a, x.ndim, "squeeze") for a in tr.static_ints(axis if isinstance(axis, (tuple, list)) else (axis,), "an axis", node)]
    for a in axes:
        if x.shape[a] != 1:
            raise tr.error(ValueError_, f"squeeze: axis {a} has size {x.shape[a]}, not 1", node)
    return tr.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes), node)


def _stack(tr, node, tensors, axis):
    return tr.concatenate(tensors, axis, node, stack=True)


def _sum(tr, node, input, dim, keepdim, dtype):
    total = tr.reduce("sum", input, ops.reduction_axis(dim), keepdim, node)
    return total if dtype is None else _cast(tr, node, total, dtype)


# -- windows: msir ops through an IRBuilder (msir.ops' parameter checks) ------


def _static_window_arg(tr, node, value: Any, what: str) -> Any:
    """An int or a tuple of ints known at compile time (None and strings pass through)."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(tr.static_int(v, what, node) for v in value)
    return tr.static_int(value, what, node)


def _conv2d(tr, node, input, weight, bias, stride, pad_mode, padding, dilation, groups):
    x, w, *b = _floats(tr, node, input, weight, *(() if bias is None else (bias,)))
    args = [_static_window_arg(tr, node, v, what) for v, what in
            ((stride, "stride"), (padding, "padding"), (dilation, "dilation"), (groups, "groups"))]
    p = ops.conv2d_params(x.shape, w.shape, args[0], pad_mode, args[1], args[2], args[3])
    B = _builder(tr)
    y = B.apply("conv2d", p, [x.ssa, w.ssa])
    return _tensor(ops.conv2d_bias_body(B, y, b[0].ssa) if b else y)


def _max_pool2d(tr, node, x, kernel_size, stride, padding, dilation, return_indices, ceil_mode, pad_mode):
    (v,) = _floats(tr, node, x)
    kernel, stride, padding, dilation = (_static_window_arg(tr, node, a, what) for a, what in (
        (kernel_size, "kernel_size"), (stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    p = ops.pool2d_params("max_pool2d", v.shape, kernel, stride, pad_mode, padding, dilation, ceil_mode,
                          return_indices)
    return _tensor(_builder(tr).apply("max_pool2d", p, [v.ssa]))


def _avg_pool2d(tr, node, input_x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                pad_mode):
    (v,) = _floats(tr, node, input_x)
    kernel, stride, padding = (_static_window_arg(tr, node, a, what) for a, what in (
        (kernel_size, "kernel_size"), (stride, "stride"), (padding, "padding")))
    p = ops.avg_pool2d_params(v.shape, kernel, stride, pad_mode, padding, ceil_mode, count_include_pad,
                              divisor_override)
    return _tensor(_builder(tr).apply("avg_pool2d", p, [v.ssa]))

def _stop_gradient(tr, node, value):
    t = tr.as_tensor(value, node)
    return tr.tensor(M.StopGradientOp(t.ssa), t.weak)


_BUILDERS: dict[Callable, Callable] = {
    ops.add: _binary("add"),
    ops.sub: _binary("sub"),
    ops.mul: _binary("mul"),
    ops.div: _binary("div"),
    ops.maximum: _binary("maximum"),
    ops.minimum: _binary("minimum"),
    ops.pow: _binary("pow", "exponent"),
    ops.neg: _unary("neg"),
    ops.abs: _unary("abs"),
    ops.exp: _unary("exp"),
    ops.log: _unary("log"),
    ops.sqrt: _unary("sqrt"),
    ops.tanh: _unary("tanh"),
    ops.square: _square,
    ops.matmul: _matmul,
    ops.dense: _dense,
    ops.einsum: _einsum,
    ops.relu: _relu,
    ops.sigmoid: _sigmoid,
    ops.gelu: _gelu,
    ops.softmax: _softmax,
    ops.log_softmax: _log_softmax,
    ops.layer_norm: _layer_norm,
    ops.conv2d: _conv2d,
    ops.max_pool2d: _max_pool2d,
    ops.avg_pool2d: _avg_pool2d,
    ops.reduce_sum: _reduction("sum"),
    ops.reduce_mean: _reduction("mean"),
    ops.reduce_max: _reduction("max"),
    ops.reduce_min: _reduction("min"),
    ops.reshape: _reshape,
    ops.transpose: _transpose,
    ops.concat: _concat,
    ops.cross_entropy: _cross_entropy,
    ops.mse_loss: _mse_loss,
    ops.binary_cross_entropy_with_logits: _binary_cross_entropy_with_logits,
    ops.ones: _creating(1),
    ops.zeros: _creating(0),
    ops.full: _full,
    ops.ones_like: _creating_like(1),
    ops.zeros_like: _creating_like(0),
    ops.cast: _cast,
    ops.flatten: _flatten,
    ops.expand_dims: _expand_dims,
    ops.unsqueeze: _unsqueeze,
    ops.squeeze: _squeeze,
    ops.stack: _stack,
    ops.cat: _concat,
    ops.mean: _reduction("mean"),
    ops.sum: _sum,
    ops.stop_gradient: _stop_gradient,
    ops.argmax: _numpy(np.argmax, ("input", "dim", "keepdim"), {"dim": "axis", "keepdim": "keepdims"}),
}
"""Each `msir.ops` function's builder: `(translator, node, **its parameters but name)`."""


def _name_ops_after(block: Block, last: Operation | None, name: str) -> None:
    """Give the ops of `block` after `last` (all of them if None) the name."""
    op = block.first_op if last is None else last.next_op
    while op is not None:
        for inner in op.walk():
            inner.attributes[M.NAME_ATTR] = StringAttr(name)
        op = op.next_op


@functools.cache
def _signature(fn: Callable) -> inspect.Signature:
    # on first call, not at import: the frontend's import time is every first compile's
    return inspect.signature(fn)


def _handler(fn: Callable, build: Callable) -> Callable:
    qualname = f"msir.ops.{fn.__name__}"

    def handler(tr, args, kwargs, node):
        try:
            bound = _signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            raise tr.error(TypeError_, f"{qualname}: {e}", node) from None
        bound.apply_defaults()
        params = dict(bound.arguments)
        name = params.pop("name")
        if name is not None and not isinstance(name, str):
            raise tr.error(TypeError_, f"{qualname}: name must be a string known at compile time, got "
                           f"{tr.describe(name)}", node)
        last = tr.block.last_op
        try:
            result = build(tr, node, **params)
        except MsirError as e:
            if e.loc is not None:
                raise
            raise tr.error(type(e), e.message, node) from None
        if name is not None:
            _name_ops_after(tr.block, last, name)
        return result

    return handler


def _tensor_constructor(tr, args, kwargs, node):
    """`msir.Tensor(input_data, dtype=None)` in compiled code: the value itself
    (cast to `dtype`), Python numbers and lists of them Float32 / Int64 / Bool
    as MindSpore makes them."""
    try:
        bound = inspect.signature(UserTensor).bind(*args, **kwargs)
    except TypeError as e:
        raise tr.error(TypeError_, f"msir.Tensor: {e}", node) from None
    params = bound.arguments
    if params.get("input_data") is None or params.get("init") is not None or params.get("shape") is not None:
        raise tr.error(TypeError_, "msir.Tensor in compiled code takes input_data (and dtype), not shape or init", node)
    data, dtype = params["input_data"], params.get("dtype")
    t = tr.as_tensor(data, node)
    if dtype is not None:
        return tr.cast(t, ops._np_dtype(dtype).name, False)
    if t.weak:  # a Python number or list: MindSpore's dtypes, not NumPy's
        return tr.cast(t, {"float64": "float32"}.get(t.dtype, t.dtype), False)
    return t


OPS_HANDLERS: dict[Callable, Callable] = {fn: _handler(fn, build) for fn, build in _BUILDERS.items()}
"""`msir.ops` functions by object, with the NumPy handler table's signature `(translator, args, kwargs, node)`;
also `msir.Tensor` (a constructor call)."""
OPS_HANDLERS[UserTensor] = _tensor_constructor
