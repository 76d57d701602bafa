"""`msir.ops`: the functional operators, in MindSpore's spelling (`mindspore.ops`).

    from msir import ops

    def loss(x, w, b, gamma, beta, labels):
        h = ops.gelu(ops.dense(x, w, b, name="fc1"), approximate="tanh", name="act1")
        h = ops.layer_norm(h, (h.shape[-1],), gamma, beta, name="ln1")
        return ops.cross_entropy(h, labels, name="loss")

What there is (parameters as MindSpore names them; NumPy broadcasting and
promotion throughout):

* arithmetic: `add`, `sub`, `mul`, `div`, `maximum`, `minimum`, `pow`, `neg`,
  `abs`, `square`, `exp`, `log`, `sqrt`, `tanh`;
* products: `matmul`, `dense` (`input @ weight.T + bias`, MindSpore's `Dense`),
  `einsum(equation, *operands)`;
* activations: `relu`, `sigmoid`, `gelu(input, approximate='none')`,
  `softmax(input, axis=-1)`, `log_softmax(logits, axis=-1)`;
* `layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)`;
* windows (NCHW): `conv2d(input, weight, bias=None, stride=1, pad_mode='valid',
  padding=0, dilation=1, groups=1)` (OIHW weight; `padding` one int, (h, w)
  or (top, bottom, left, right) with `pad_mode='pad'`), `max_pool2d(x,
  kernel_size, stride=None, padding=0)`, `avg_pool2d(input_x, kernel_size=1,
  stride=1, padding=0, count_include_pad=True)`; the poolings also take
  msir's keyword `pad_mode=` ('same', 'valid' or 'pad', the default), what
  `nn.MaxPool2d` / `nn.AvgPool2d` compute with (an average with `'same'`
  divides by the input elements each window covers, as MindSpore does);
* reductions with MindSpore's `axis` and `keep_dims`: `reduce_sum`,
  `reduce_mean`, `reduce_max`, `reduce_min` (`axis=None` or `()`: every axis);
* shapes: `reshape(input, shape)`, `transpose(input, input_perm)`,
  `concat(tensors, axis=0)`;
* losses: `cross_entropy(input, target, ..., reduction='mean')` (class indices
  or class probabilities, class axis 1) and `mse_loss(input, target, reduction='mean')`;
* `assign(variable, value)`: a Parameter takes a new value, also in compiled
  code (BatchNorm's moving statistics; `msir.frontend.parameter_writes`).

Every function takes a keyword `name=` (a string). In compiled code
(GRAPH_MODE) each op the call emits carries it as the attribute
`msir.name = "..."`, and every msir pass keeps it: the augmented forward of
`msir-grad` (and `msir-jvp`'s tangent function) holds the op with its name;
the adjoint ops that differentiate it are named `"<name>/grad"` (tangent ops
`"<name>/jvp"`, a second derivative's `"<name>/grad/grad"`); a fusion body's
ops and inlined ops keep theirs; `msir-lower-einsum` names an einsum's
decomposition after it. Auto-parallel planning will name sharding strategies
by it. Called in PYNATIVE_MODE, under `msir.grad`, or from plain Python, a
function computes with NumPy (through the eager tracer when an argument is
traced), and the name only has to be a string.

Decisions:

* `softmax`, `log_softmax`, `layer_norm`, `gelu`, `sigmoid` and the losses are
  the primitive ops of their definition (the `*_body` functions below), every
  one of them carrying the call's name, not new ops decomposed by a pass:
  the differentiation rules, fusion and the CPU lowering then apply unchanged
  (a `softmax` op would need its own rules, verifier and lowering, or a pass
  that every consumer runs first), and the planner still sees one node, the
  ops that share a name. The bodies are written once, against the
  differentiation rules' `Builder` interface: `IRBuilder` emits them in compiled
  code, the eager tracer's `TracingBuilder` runs them on arrays or tracers.
* `softmax` and `log_softmax` subtract the maximum behind `stop_gradient`
  (the result does not depend on it; the adjoint skips its rule).
* `sigmoid(x)` is `0.5 * tanh(0.5 * x) + 0.5`: one transcendental, and a
  finite derivative where `1 / (1 + exp(-x))` overflows.
* `gelu` has MindSpore's signature and default, `approximate='none'`
  (`x * Phi(x)`, with erf); msir has no erf primitive yet, so that form is
  refused with a clear error and `approximate='tanh'` (the form
  `mindspore.nn.GELU` uses by default) is computed.
* `layer_norm` has the signature of MindSpore's functional `ops.layer_norm`:
  the normalised axes are the trailing `len(normalized_shape)` ones.
* Integer or boolean inputs of the float-valued functions (activations,
  normalisation, losses) compute in float64, as NumPy's `np.exp` does.
* `cross_entropy` supports `weight=None` and `label_smoothing=0.0` only.
* `conv2d`, `max_pool2d` and `avg_pool2d` are msir ops (`msir.conv2d`, ...,
  with their own differentiation rules, decomposed for the CPU by
  `msir-lower-windows`: im2col and the BLAS). The poolings refuse what msir
  does not compute yet (`dilation` other than 1, `ceil_mode=True`,
  `return_indices=True`, a `divisor_override`) with a clear error.

The frontend's side (argument binding, the ops' names) is
`msir.frontend.ops_calls`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import msir
from msir.common.tensor import contains_tensor, unwrap, wrap
from msir.dialects import windows
from msir.errors import MsirError, MsirIndexError, ShapeError, UnsupportedSyntaxError
from msir.frontend.values import kind, promote
from msir.grad_operation import GradOperation

__all__ = [
    "abs", "add", "concat", "cross_entropy", "dense", "div", "einsum", "exp", "gelu", "layer_norm",
    "log", "log_softmax", "matmul", "maximum", "minimum", "mse_loss", "mul", "neg", "pow", "reduce_max",
    "reduce_mean", "reduce_min", "reduce_sum", "relu", "reshape", "sigmoid", "softmax", "sqrt", "square",
    "sub", "tanh", "transpose", "conv2d", "max_pool2d", "avg_pool2d",
    # MindSpore's spelling of what its tutorials and layers call (issue 14)
    "argmax", "binary_cross_entropy_with_logits", "cast", "cat", "expand_dims", "flatten", "full", "mean",
    "ones", "ones_like", "squeeze", "stack", "stop_gradient", "sum", "unsqueeze", "zeros", "zeros_like",
    "GradOperation", "MatMul", "assign",
]


LOSS_REDUCTIONS = ("none", "mean", "sum")
"""The `reduction=` choices of the losses."""


class BadOptionError(MsirError, ValueError):
    """An option (`reduction=`, `approximate=`) outside its choices."""


class BadArgumentError(MsirError, TypeError):
    """An argument of the wrong kind (a `name=` that is not a string)."""


# ---------------------------------------------------------------------------
# Argument checks, shared with the compiled frontend
# ---------------------------------------------------------------------------


def check_name(name: Any, fname: str) -> None:
    if name is not None and not isinstance(name, str):
        raise BadArgumentError(f"msir.ops.{fname}: name must be a string, got {type(name).__name__}")


def static_int(value: Any, what: str, fname: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise BadArgumentError(f"msir.ops.{fname}: {what} must be an int, got {type(value).__name__}")
    return int(value)


def axis_index(axis: Any, ndim: int, fname: str) -> int:
    """`axis` of an array of `ndim` dimensions, in [0, ndim)."""
    axis = static_int(axis, "axis", fname)
    if not -ndim <= axis < ndim:
        raise MsirIndexError(f"msir.ops.{fname}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def reduction_axis(axis: Any) -> Any:
    """MindSpore's `axis=()` reduces every axis, as NumPy's `axis=None` does."""
    return None if isinstance(axis, (tuple, list)) and not axis else axis


def check_choice(value: Any, choices: Sequence[str], what: str, fname: str) -> None:
    if value not in choices:
        raise BadOptionError(
            f"msir.ops.{fname}: {what} must be one of {', '.join(map(repr, choices))}, got {value!r}"
        )


def normalized_axes(normalized_shape: Sequence[int], shape: Sequence[int]) -> list[int]:
    """The trailing axes `layer_norm` normalises: `shape` must end in `normalized_shape`."""
    k = len(normalized_shape)
    if k == 0 or k > len(shape) or tuple(shape[len(shape) - k :]) != tuple(normalized_shape):
        raise ShapeError(
            f"msir.ops.layer_norm: normalized_shape {tuple(normalized_shape)} is not the trailing part of the "
            f"input's shape {tuple(shape)}"
        )
    return list(range(len(shape) - k, len(shape)))


def check_dense_weight(shape: Sequence[int]) -> None:
    if len(shape) != 2:
        raise ShapeError(f"msir.ops.dense: weight must be 2-D (out_channels, in_channels), got shape {tuple(shape)}")


def check_eps_shape(shape: Sequence[int]) -> None:
    if tuple(shape):
        raise ShapeError(f"msir.ops.layer_norm: eps must be a number, got an array of shape {tuple(shape)}")


def check_gelu_approximation(approximate: Any) -> None:
    check_choice(approximate, ("none", "tanh"), "approximate", "gelu")
    if approximate == "none":
        raise UnsupportedSyntaxError(
            "msir.ops.gelu(approximate='none') needs erf, which msir has no primitive for yet; "
            "use approximate='tanh' (what mindspore.nn.GELU computes by default)"
        )


def target_is_probabilities(dtype: str) -> bool:
    """Is a `cross_entropy` target of `dtype` class probabilities (else class indices)?"""
    if dtype == "bool":
        raise BadArgumentError("msir.ops.cross_entropy: the target must be class indices or probabilities, got bool")
    return kind(dtype) == 2


def cross_entropy_class_axis(
    input_shape: Sequence[int], target_shape: Sequence[int], probabilities: bool, weight: Any, label_smoothing: Any
) -> int:
    """The class axis of `cross_entropy`'s input (1, or 0 for one sample), its target checked against it."""
    if weight is not None:
        raise UnsupportedSyntaxError("msir.ops.cross_entropy: weight= is not supported yet")
    if label_smoothing != 0.0:
        raise UnsupportedSyntaxError("msir.ops.cross_entropy: label_smoothing= is not supported yet")
    if not input_shape:
        raise ShapeError("msir.ops.cross_entropy: the input needs a class axis, got a 0-d array")
    class_axis = 1 if len(input_shape) >= 2 else 0
    expected = tuple(input_shape) if probabilities else tuple(d for i, d in enumerate(input_shape) if i != class_axis)
    if tuple(target_shape) != expected:
        what = "class probabilities" if probabilities else "class indices"
        raise ShapeError(
            f"msir.ops.cross_entropy: a target of {what} for an input of shape {tuple(input_shape)} must have "
            f"shape {expected}, got {tuple(target_shape)}"
        )
    return class_axis


def float_dtype(dtypes_and_weakness: Sequence[tuple[str, bool]]) -> str:
    """The dtype the float-valued functions compute in: NumPy's promotion of
    the operands, float64 if that is not a float."""
    dtype, weak = dtypes_and_weakness[0]
    for d, w in dtypes_and_weakness[1:]:
        dtype, weak = promote(dtype, weak, d, w)
    return dtype if kind(dtype) == 2 else "float64"


# ---------------------------------------------------------------------------
# The composite ops, over the differentiation rules' Builder
# (msir.passes.grad_rules.Builder): operands of one float dtype
# ---------------------------------------------------------------------------


def _full(B, value: float, like) -> Any:
    return B.constant(value, B.dtype(like), B.shape(like))


def _max_behind_stop_gradient(B, x, axis: int) -> Any:
    return B.broadcast_to(B.unary("stop_gradient", B.reduce("max", x, [axis], True)), B.shape(x))


def softmax_body(B, x, axis: int) -> Any:
    shape = B.shape(x)
    e = B.unary("exp", B.binary("sub", x, _max_behind_stop_gradient(B, x, axis)))
    return B.binary("div", e, B.broadcast_to(B.reduce("sum", e, [axis], True), shape))


def log_softmax_body(B, x, axis: int) -> Any:
    shape = B.shape(x)
    z = B.binary("sub", x, _max_behind_stop_gradient(B, x, axis))
    log_sum = B.unary("log", B.reduce("sum", B.unary("exp", z), [axis], True))
    return B.binary("sub", z, B.broadcast_to(log_sum, shape))


def sigmoid_body(B, x) -> Any:
    half = _full(B, 0.5, x)
    return B.binary("add", B.binary("mul", half, B.unary("tanh", B.binary("mul", half, x))), half)


def gelu_tanh_body(B, x) -> Any:
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    cube = B.binary("mul", B.binary("mul", x, x), x)
    inner = B.binary("add", x, B.binary("mul", _full(B, 0.044715, x), cube))
    t = B.unary("tanh", B.binary("mul", _full(B, math.sqrt(2.0 / math.pi), x), inner))
    return B.binary("mul", B.binary("mul", _full(B, 0.5, x), x), B.binary("add", _full(B, 1.0, x), t))


def layer_norm_body(B, x, axes: list[int], weight, bias, eps) -> Any:
    """(x - mean) / sqrt(var + eps) * weight + bias over `axes`; `eps` is rank 0."""
    shape = B.shape(x)
    centred = B.binary("sub", x, B.broadcast_to(B.reduce("mean", x, axes, True), shape))
    var = B.reduce("mean", B.binary("mul", centred, centred), axes, True)
    std = B.unary("sqrt", B.binary("add", var, B.broadcast_to(eps, B.shape(var))))
    y = B.binary("mul", centred, B.broadcast_to(B.binary("div", _full(B, 1.0, var), std), shape))
    if weight is not None:
        y = B.binary("mul", y, B.broadcast_to(weight, shape))
    if bias is not None:
        y = B.binary("add", y, B.broadcast_to(bias, shape))
    return y


def _reduce_loss(B, per_item, reduction: str, count=None) -> Any:
    """'none': the per-item losses; 'sum'; 'mean': over the items, or the sum over `count`'s sum."""
    if reduction == "none":
        return per_item
    axes = list(range(len(B.shape(per_item))))
    if reduction == "mean" and count is None:
        return B.reduce("mean", per_item, axes, False)
    total = B.reduce("sum", per_item, axes, False)
    return total if reduction == "sum" else B.binary("div", total, B.reduce("sum", count, axes, False))


def cross_entropy_body(B, x, target, classes, class_axis: int, ignore_index: int, reduction: str) -> Any:
    """-sum(target * log_softmax(x)) over the class axis. `classes` is None for a
    target of probabilities (x's shape); for class indices it is 0..C-1 (int64):
    the target becomes one-hot, items whose index is `ignore_index` count zero,
    and 'mean' divides by the items counted."""
    log_p = log_softmax_body(B, x, class_axis)
    if classes is None:
        per_item = B.unary("neg", B.reduce("sum", B.binary("mul", target, log_p), [class_axis], False))
        return _reduce_loss(B, per_item, reduction)
    shape, dtype = B.shape(x), B.dtype(x)
    index = B.cast(target, "int64")
    keep = list(shape)
    keep[class_axis] = 1
    along = [1] * len(shape)
    along[class_axis] = shape[class_axis]
    one_hot = B.compare(
        "eq", B.broadcast_to(B.reshape(classes, along), shape), B.broadcast_to(B.reshape(index, keep), shape)
    )
    picked = B.reduce("sum", B.binary("mul", B.cast(one_hot, dtype), log_p), [class_axis], False)
    counted = B.cast(B.compare("ne", index, B.constant(ignore_index, "int64", B.shape(index))), dtype)
    per_item = B.binary("mul", B.unary("neg", picked), counted)
    return _reduce_loss(B, per_item, reduction, counted)


def mse_body(B, x, target, reduction: str) -> Any:
    d = B.binary("sub", x, target)
    return _reduce_loss(B, B.binary("mul", d, d), reduction)


# ---------------------------------------------------------------------------
# Eager: plain Python, PYNATIVE_MODE, msir.grad in PYNATIVE_MODE
# ---------------------------------------------------------------------------


def _tracer():
    # the eager tracer (and the rule table it loads) only when a composite runs
    from msir.eager import tracer

    return tracer


def _eager_floats(*operands: Any, broadcast: bool = False) -> list[Any]:
    """The operands as arrays or tracers of their float dtype (`float_dtype`),
    broadcast to one shape if asked."""
    T = _tracer()
    ts = [T._T.of(x) for x in operands]
    dtype = float_dtype([(t.dtype, t.weak) for t in ts])
    ts = [T._cast(t, dtype, False) for t in ts]
    if broadcast:
        shape = ts[0].shape
        for t in ts[1:]:
            shape = T._broadcast_shapes(shape, t.shape)
        ts = [T._bcast(t, shape) for t in ts]
    return [t.v for t in ts]


def _eager_result(v: Any) -> Any:
    """A 0-d result as NumPy returns it (a NumPy scalar)."""
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def _builder():
    return _tracer().TRACING_BUILDER


def _typed(x: Any):
    """`x` with its dtype, shape and weakness, as the eager tracer reads it."""
    return _tracer()._T.of(x)


# ---------------------------------------------------------------------------
# The functions
# ---------------------------------------------------------------------------


def add(input, other, *, name=None):
    """`input + other` (mindspore.ops.add)."""
    check_name(name, "add")
    return np.add(input, other)


def sub(input, other, *, name=None):
    """`input - other` (mindspore.ops.sub)."""
    check_name(name, "sub")
    return np.subtract(input, other)


def mul(input, other, *, name=None):
    """`input * other` (mindspore.ops.mul)."""
    check_name(name, "mul")
    return np.multiply(input, other)


def div(input, other, *, name=None):
    """`input / other`, true division (mindspore.ops.div)."""
    check_name(name, "div")
    return np.true_divide(input, other)


def maximum(input, other, *, name=None):
    """Elementwise maximum; NaN propagates (mindspore.ops.maximum)."""
    check_name(name, "maximum")
    return np.maximum(input, other)


def minimum(input, other, *, name=None):
    """Elementwise minimum; NaN propagates (mindspore.ops.minimum)."""
    check_name(name, "minimum")
    return np.minimum(input, other)


def pow(input, exponent, *, name=None):  # noqa: A001 (MindSpore's name)
    """`input ** exponent` (mindspore.ops.pow)."""
    check_name(name, "pow")
    return np.power(input, exponent)


def neg(input, *, name=None):
    """`-input` (mindspore.ops.neg)."""
    check_name(name, "neg")
    return np.negative(input)


def abs(input, *, name=None):  # noqa: A001 (MindSpore's name)
    """`|input|` (mindspore.ops.abs)."""
    check_name(name, "abs")
    return np.abs(input)


def square(input, *, name=None):
    """`input * input` (mindspore.ops.square)."""
    check_name(name, "square")
    return np.square(input)


def exp(input, *, name=None):
    """e ** input (mindspore.ops.exp)."""
    check_name(name, "exp")
    return np.exp(input)


def log(input, *, name=None):
    """The natural logarithm (mindspore.ops.log)."""
    check_name(name, "log")
    return np.log(input)


def sqrt(input, *, name=None):
    """The square root (mindspore.ops.sqrt)."""
    check_name(name, "sqrt")
    return np.sqrt(input)


def tanh(input, *, name=None):
    """The hyperbolic tangent (mindspore.ops.tanh)."""
    check_name(name, "tanh")
    return np.tanh(input)


def matmul(input, other, *, name=None):
    """The matrix product, NumPy's `matmul` (mindspore.ops.matmul)."""
    check_name(name, "matmul")
    return np.matmul(input, other)


def dense(input, weight, bias=None, *, name=None):
    """`input @ weight.T + bias`, `weight` of shape (out_channels, in_channels)
    (mindspore.ops.dense, the computation of `mindspore.nn.Dense`)."""
    check_name(name, "dense")
    check_dense_weight(_typed(weight).shape)
    y = np.matmul(input, np.transpose(weight))
    return y if bias is None else np.add(y, bias)


def einsum(equation, *operands, name=None):
    """Einstein summation, NumPy's subscripts (mindspore.ops.einsum)."""
    check_name(name, "einsum")
    return np.einsum(equation, *operands)


def relu(input, *, name=None):
    """max(input, 0) (mindspore.ops.relu)."""
    check_name(name, "relu")
    return np.maximum(input, 0)


def sigmoid(input, *, name=None):
    """1 / (1 + exp(-input)), computed as 0.5 tanh(0.5 input) + 0.5 (mindspore.ops.sigmoid)."""
    check_name(name, "sigmoid")
    (x,) = _eager_floats(input)
    return _eager_result(sigmoid_body(_builder(), x))


def gelu(input, approximate="none", *, name=None):
    """The Gaussian error linear unit (mindspore.ops.gelu); only approximate='tanh'
    is computed (see the module docstring)."""
    check_name(name, "gelu")
    check_gelu_approximation(approximate)
    (x,) = _eager_floats(input)
    return _eager_result(gelu_tanh_body(_builder(), x))


def softmax(input, axis=-1, *, name=None):
    """exp(input) / sum(exp(input)) along `axis` (mindspore.ops.softmax)."""
    check_name(name, "softmax")
    (x,) = _eager_floats(input)
    B = _builder()
    return _eager_result(softmax_body(B, x, axis_index(axis, len(B.shape(x)), "softmax")))


def log_softmax(logits, axis=-1, *, name=None):
    """log(softmax(logits)) along `axis` (mindspore.ops.log_softmax)."""
    check_name(name, "log_softmax")
    (x,) = _eager_floats(logits)
    B = _builder()
    return _eager_result(log_softmax_body(B, x, axis_index(axis, len(B.shape(x)), "log_softmax")))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, *, name=None):
    """(input - mean) / sqrt(var + eps) * weight + bias over the trailing axes of
    `normalized_shape` (mindspore.ops.layer_norm)."""
    check_name(name, "layer_norm")
    dims = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    x, *params = _eager_floats(input, *(p for p in (weight, bias) if p is not None))
    w = params.pop(0) if weight is not None else None
    b = params.pop(0) if bias is not None else None
    B = _builder()
    T = _tracer()
    eps_value = T._cast(_typed(eps), B.dtype(x), False)
    check_eps_shape(eps_value.shape)
    axes = normalized_axes(dims, B.shape(x))
    return _eager_result(layer_norm_body(B, x, axes, w, b, eps_value.v))


# -- windows: conv2d and the poolings (msir ops, msir.dialects.windows) -------


def explicit_padding(padding: Any, fname: str) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from one int, (height, width) or four ints."""
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        padding = (padding[0], padding[0], padding[1], padding[1])
    return windows.quad(padding, f"msir.ops.{fname}")


def conv2d_params(x_shape, w_shape, stride, pad_mode, padding, dilation, groups) -> dict:
    """The `msir.conv2d` parameters of an `ops.conv2d` call, its shapes checked."""
    fname = "msir.ops.conv2d"
    stride, dilation = windows.pair(stride, "stride", fname), windows.pair(dilation, "dilation", fname)
    groups = static_int(groups, "groups", "conv2d")
    if len(w_shape) != 4 or len(x_shape) != 4:
        windows.infer_conv2d(x_shape, w_shape, stride, (0, 0, 0, 0), dilation, groups, fname)
    if pad_mode == "pad":
        padding = explicit_padding(padding, "conv2d")
    pads = windows.resolve_padding(pad_mode, padding, x_shape[2:], w_shape[2:], stride, dilation, fname)
    windows.infer_conv2d(x_shape, w_shape, stride, pads, dilation, groups, fname)
    return {"stride": stride, "padding": pads, "dilation": dilation, "groups": groups}


def pool2d_params(fname: str, x_shape, kernel_size, stride, pad_mode, padding, dilation=1, ceil_mode=False,
                  return_indices=False) -> dict:
    """The parameters of a pooling op (`kernel`, `stride`, `padding`), its shape checked."""
    qualname = f"msir.ops.{fname}"
    if dilation not in (1, (1, 1), [1, 1]) or ceil_mode or return_indices:
        raise UnsupportedSyntaxError(
            f"{qualname}: dilation other than 1, ceil_mode=True and return_indices=True are not supported yet "
            f"(got dilation={dilation!r}, ceil_mode={ceil_mode!r}, return_indices={return_indices!r})")
    kernel = windows.pair(kernel_size, "kernel_size", qualname)
    stride = kernel if stride is None else windows.pair(stride, "stride", qualname)
    if len(x_shape) != 4:
        windows.infer_pool2d(x_shape, kernel, stride, (0, 0, 0, 0), qualname)
    if pad_mode == "pad":
        padding = explicit_padding(padding, fname)
    pads = windows.resolve_padding(pad_mode, padding, x_shape[2:], kernel, stride, (1, 1), qualname)
    windows.infer_pool2d(x_shape, kernel, stride, pads, qualname)
    return {"kernel": kernel, "stride": stride, "padding": pads}


def avg_pool2d_params(x_shape, kernel_size, stride, pad_mode, padding, ceil_mode, count_include_pad,
                      divisor_override) -> dict:
    if divisor_override not in (None, 0):
        raise UnsupportedSyntaxError(f"msir.ops.avg_pool2d: divisor_override is not supported yet, got "
                                     f"{divisor_override!r}")
    p = pool2d_params("avg_pool2d", x_shape, kernel_size, stride, pad_mode, padding, ceil_mode=ceil_mode)
    # MindSpore's 'same' averages over the input elements a window covers
    p["count_include_pad"] = bool(count_include_pad) and pad_mode != "same"
    return p


def conv2d_bias_body(B, y, bias) -> Any:
    """`y` (N, O, H, W) plus a per-channel `bias` (O,)."""
    n, o, h, w = B.shape(y)
    if tuple(B.shape(bias)) != (o,):
        raise ShapeError(f"msir.ops.conv2d: bias must have shape ({o},), one per output channel, got "
                         f"{tuple(B.shape(bias))}")
    return B.binary("add", y, B.broadcast_to(B.reshape(bias, (1, o, 1, 1)), (n, o, h, w)))


def conv2d(input, weight, bias=None, stride=1, pad_mode="valid", padding=0, dilation=1, groups=1, *, name=None):
    """2-D convolution (cross-correlation) of an NCHW input with an OIHW weight (mindspore.ops.conv2d)."""
    check_name(name, "conv2d")
    x, w, *b = _eager_floats(input, weight, *(() if bias is None else (bias,)))
    B = _builder()
    p = conv2d_params(B.shape(x), B.shape(w), stride, pad_mode, padding, dilation, groups)
    y = B.apply("conv2d", p, [x, w])
    return _eager_result(conv2d_bias_body(B, y, b[0]) if b else y)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False, *,
               pad_mode="pad", name=None):
    """The maximum over each window of an NCHW input (mindspore.ops.max_pool2d; padding is -inf)."""
    check_name(name, "max_pool2d")
    (v,) = _eager_floats(x)
    B = _builder()
    p = pool2d_params("max_pool2d", B.shape(v), kernel_size, stride, pad_mode, padding, dilation, ceil_mode,
                      return_indices)
    return _eager_result(B.apply("max_pool2d", p, [v]))


def avg_pool2d(input_x, kernel_size=1, stride=1, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None, *, pad_mode="pad", name=None):
    """The mean over each window of an NCHW input (mindspore.ops.avg_pool2d)."""
    check_name(name, "avg_pool2d")
    (v,) = _eager_floats(input_x)
    B = _builder()
    p = avg_pool2d_params(B.shape(v), kernel_size, stride, pad_mode, padding, ceil_mode, count_include_pad,
                          divisor_override)
    return _eager_result(B.apply("avg_pool2d", p, [v]))


def reduce_sum(input, axis=None, keep_dims=False, *, name=None):
    """The sum over `axis` (mindspore.ops.ReduceSum; `axis=()`: every axis)."""
    check_name(name, "reduce_sum")
    return np.sum(input, axis=reduction_axis(axis), keepdims=bool(keep_dims))


def reduce_mean(input, axis=None, keep_dims=False, *, name=None):
    """The mean over `axis` (mindspore.ops.mean; `axis=()`: every axis)."""
    check_name(name, "reduce_mean")
    return np.mean(input, axis=reduction_axis(axis), keepdims=bool(keep_dims))


def reduce_max(input, axis=None, keep_dims=False, *, name=None):
    """The maximum over `axis` (mindspore.ops.ReduceMax; `axis=()`: every axis)."""
    check_name(name, "reduce_max")
    return np.max(input, axis=reduction_axis(axis), keepdims=bool(keep_dims))


def reduce_min(input, axis=None, keep_dims=False, *, name=None):
    """The minimum over `axis` (mindspore.ops.ReduceMin; `axis=()`: every axis)."""
    check_name(name, "reduce_min")
    return np.min(input, axis=reduction_axis(axis), keepdims=bool(keep_dims))


def reshape(input, shape, *, name=None):
    """`input` with the shape `shape`, one dimension may be -1 (mindspore.ops.reshape)."""
    check_name(name, "reshape")
    return np.reshape(input, shape)


def transpose(input, input_perm, *, name=None):
    """`input`'s axes permuted by `input_perm` (mindspore.ops.transpose)."""
    check_name(name, "transpose")
    return np.transpose(input, input_perm)


def concat(tensors, axis=0, *, name=None):
    """`tensors` joined along `axis` (mindspore.ops.concat)."""
    check_name(name, "concat")
    return np.concatenate(tensors, axis=axis)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, *,
                  name=None):
    """The cross entropy of logits `input` (class axis 1, or 0 for one sample)
    and `target`: class indices (an integer array without the class axis) or
    class probabilities (a float array of `input`'s shape); `reduction` is
    'mean', 'sum' or 'none' (mindspore.ops.cross_entropy)."""
    check_name(name, "cross_entropy")
    check_choice(reduction, LOSS_REDUCTIONS, "reduction", "cross_entropy")
    ignore = static_int(ignore_index, "ignore_index", "cross_entropy")
    target = _typed(target)
    probabilities = target_is_probabilities(target.dtype)
    if probabilities:
        x, t = _eager_floats(input, target)
    else:
        (x,), t = _eager_floats(input), target.v
    B = _builder()
    class_axis = cross_entropy_class_axis(B.shape(x), B.shape(t), probabilities, weight, label_smoothing)
    classes = None if probabilities else np.arange(B.shape(x)[class_axis], dtype=np.int64)
    return _eager_result(cross_entropy_body(B, x, t, classes, class_axis, ignore, reduction))


def mse_loss(input, target, reduction="mean", *, name=None):
    """The mean (or sum, or none) of `(input - target) ** 2` (mindspore.ops.mse_loss)."""
    check_name(name, "mse_loss")
    check_choice(reduction, LOSS_REDUCTIONS, "reduction", "mse_loss")
    x, t = _eager_floats(input, target, broadcast=True)
    return _eager_result(mse_body(_builder(), x, t, reduction))


def binary_cross_entropy_with_logits_body(B, x, target, weight, pos_weight, reduction: str) -> Any:
    """weight * (pos_weight * target * softplus(-x) + (1 - target) * softplus(x)),
    -log(sigmoid(x)) being softplus(-x) = max(-x, 0) + log(1 + exp(-|x|)):
    finite for every x. Operands of one shape; `weight`, `pos_weight` may be None."""

    def softplus(z):
        return B.binary("add", B.binary("maximum", z, _full(B, 0.0, z)),
                        B.unary("log", B.binary("add", _full(B, 1.0, z), B.unary("exp", B.unary("neg", B.unary("abs", z))))))

    positive = B.binary("mul", target, softplus(B.unary("neg", x)))
    if pos_weight is not None:
        positive = B.binary("mul", pos_weight, positive)
    loss = B.binary("add", positive, B.binary("mul", B.binary("sub", _full(B, 1.0, target), target), softplus(x)))
    if weight is not None:
        loss = B.binary("mul", weight, loss)
    return _reduce_loss(B, loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction="mean", *, name=None):
    """The binary cross entropy of logits `input` and probabilities `target`,
    weighted by `weight` and, for the positive term, `pos_weight` (both
    broadcast); `reduction` is 'mean', 'sum' or 'none'
    (mindspore.ops.binary_cross_entropy_with_logits)."""
    check_name(name, "binary_cross_entropy_with_logits")
    check_choice(reduction, LOSS_REDUCTIONS, "reduction", "binary_cross_entropy_with_logits")
    given = [v for v in (weight, pos_weight) if v is not None]
    x, t, *w = _eager_floats(input, target, *given, broadcast=True)
    weight_v = w.pop(0) if weight is not None else None
    pos_v = w.pop(0) if pos_weight is not None else None
    return _eager_result(binary_cross_entropy_with_logits_body(_builder(), x, t, weight_v, pos_v, reduction))


def _shape_arg(shape: Any, fname: str) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return tuple(static_int(d, "a shape", fname) for d in dims)


def _np_dtype(dtype: Any, default: Any = "float32") -> np.dtype:
    """A MindSpore or NumPy dtype (None: `default`) as a NumPy dtype."""
    return np.dtype(default if dtype is None else dtype)


def ones(shape, dtype=None, *, name=None):
    """A Tensor of ones of `shape` (an int or a tuple), Float32 unless `dtype` (mindspore.ops.ones)."""
    check_name(name, "ones")
    return wrap(np.ones(_shape_arg(shape, "ones"), _np_dtype(dtype)))


def zeros(shape, dtype=None, *, name=None):
    """A Tensor of zeros of `shape`, Float32 unless `dtype` (mindspore.ops.zeros)."""
    check_name(name, "zeros")
    return wrap(np.zeros(_shape_arg(shape, "zeros"), _np_dtype(dtype)))


def full(size, fill_value, dtype=None, *, name=None):
    """A Tensor of `size` filled with `fill_value` (mindspore.ops.full); the dtype
    is `dtype`, else the value's (Float32 for a Python float, Int64 for an int)."""
    check_name(name, "full")
    default = "float32" if isinstance(fill_value, float) else "int64" if isinstance(fill_value, int) else None
    return wrap(np.full(_shape_arg(size, "full"), fill_value, _np_dtype(dtype, default or np.asarray(fill_value).dtype)))


def ones_like(input, dtype=None, *, name=None):
    """Ones of `input`'s shape and dtype (or `dtype`) (mindspore.ops.ones_like)."""
    check_name(name, "ones_like")
    return np.ones(_typed(input).shape, _np_dtype(dtype, _typed(input).dtype))


def zeros_like(input, dtype=None, *, name=None):
    """Zeros of `input`'s shape and dtype (or `dtype`) (mindspore.ops.zeros_like)."""
    check_name(name, "zeros_like")
    return np.zeros(_typed(input).shape, _np_dtype(dtype, _typed(input).dtype))


def cast(input, dtype, *, name=None):
    """`input` converted to `dtype` (mindspore.ops.cast)."""
    check_name(name, "cast")
    return _tracer().TRACING_BUILDER.cast(_typed(input).v, _np_dtype(dtype).name)


def flatten_shape(shape: Sequence[int], start_dim: int, end_dim: int, fname: str = "flatten") -> tuple[int, ...]:
    """`shape` with the axes `start_dim..end_dim` merged into one (a 0-d shape becomes (1,))."""
    if not shape:
        return (1,)
    start, end = axis_index(start_dim, len(shape), fname), axis_index(end_dim, len(shape), fname)
    if start > end:
        raise BadOptionError(f"{fname}: start_dim {start_dim} comes after end_dim {end_dim}")
    return (*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :])


def flatten(input, order="C", *, start_dim=1, end_dim=-1, name=None):
    """`input` with the axes `start_dim..end_dim` merged (mindspore.ops.flatten:
    by default every axis but the first, the batch axis)."""
    check_name(name, "flatten")
    check_choice(order, ("C",), "order", "flatten")
    return np.reshape(input, flatten_shape(_typed(input).shape, start_dim, end_dim))


def expand_dims(input_x, axis, *, name=None):
    """`input_x` with a new axis of size 1 at `axis` (mindspore.ops.expand_dims)."""
    check_name(name, "expand_dims")
    return np.expand_dims(input_x, axis)


def unsqueeze(input, dim, *, name=None):
    """`input` with a new axis of size 1 at `dim` (mindspore.ops.unsqueeze)."""
    check_name(name, "unsqueeze")
    return np.expand_dims(input, dim)


def squeeze(input, axis=None, *, name=None):
    """`input` without its axes of size 1 (those of `axis` only, if given) (mindspore.ops.squeeze)."""
    check_name(name, "squeeze")
    return np.squeeze(input, axis)


def stack(tensors, axis=0, *, name=None):
    """`tensors` joined along a new axis `axis` (mindspore.ops.stack)."""
    check_name(name, "stack")
    return np.stack(tensors, axis=axis)


def mean(input, axis=None, keep_dims=False, *, name=None):
    """The mean over `axis` (mindspore.ops.mean)."""
    check_name(name, "mean")
    return np.mean(input, axis=reduction_axis(axis), keepdims=bool(keep_dims))


def sum(input, dim=None, keepdim=False, *, dtype=None, name=None):  # noqa: A001 (MindSpore's name)
    """The sum over `dim` (mindspore.ops.sum), in `dtype` if given."""
    check_name(name, "sum")
    total = np.sum(input, axis=reduction_axis(dim), keepdims=bool(keepdim))
    return total if dtype is None else cast(total, dtype)


def argmax(input, dim=None, keepdim=False, *, name=None):
    """The index of the largest value along `dim` (every axis flattened if None), Int64 (mindspore.ops.argmax)."""
    check_name(name, "argmax")
    return np.argmax(input, axis=dim, keepdims=bool(keepdim))


cat = concat


def stop_gradient(value, *, name=None):
    """`value`, with a zero derivative (mindspore.ops.stop_gradient; `msir.stop_gradient`)."""
    check_name(name, "stop_gradient")
    return msir.stop_gradient(value)


# ---------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------


class MatMul:
    """MindSpore's primitive `ops.MatMul(transpose_a=False, transpose_b=False)`:
    `MatMul()(a, b)` is `matmul(a, b)` (of the transposed operands where asked).
    `.shard(((2, 1), (1, 4)))` gives it a strategy in MindSpore's slice tuples
    (per input, per dimension of the input as given: the slices of its rows
    and columns), which `msir.set_auto_parallel_context(parallel_mode=
    "semi_auto_parallel")` plans with; each primitive is one op named
    `MatMul-op<k>`, so the strategy follows it into the traced function."""

    _created = 0

    def __init__(self, transpose_a: bool = False, transpose_b: bool = False):
        self.transpose_a, self.transpose_b = bool(transpose_a), bool(transpose_b)
        self.name = f"MatMul-op{MatMul._created}"
        MatMul._created += 1

    def shard(self, in_strategy) -> MatMul:
        """Set the primitive's strategy (`in_strategy`: two tuples of ints, one per input); returns it."""
        if not (isinstance(in_strategy, (tuple, list)) and len(in_strategy) == 2 and all(
                isinstance(t, (tuple, list)) and len(t) == 2
                and all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in t) for t in in_strategy)):
            raise BadArgumentError(f"msir.ops.MatMul.shard: in_strategy must be two tuples of two positive ints, "
                                   f"one per input, like ((2, 1), (1, 4)); got {in_strategy!r}"
                                   f"{_rank_hint(in_strategy)}", _caller_loc())
        from msir.context import set_primitive_strategy

        set_primitive_strategy(self.name, tuple(tuple(t) for t in in_strategy))
        return self

    def __call__(self, a, b):
        if self.transpose_a:
            a = transpose(a, (1, 0), name=self.name)
        if self.transpose_b:
            b = transpose(b, (1, 0), name=self.name)
        return matmul(a, b, name=self.name)

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        """Compiled: the ops of `__call__` at the caller's line (errors and op names point there)."""
        if kwargs or len(args) != 2:
            raise tr.error(BadArgumentError, "MatMul()(a, b) takes two positional arguments", node)
        a, b = args
        if self.transpose_a:
            a = tr.call_value(transpose, [a, (1, 0)], {"name": self.name}, node)
        if self.transpose_b:
            b = tr.call_value(transpose, [b, (1, 0)], {"name": self.name}, node)
        return tr.call_value(matmul, [a, b], {"name": self.name}, node)


def _rank_hint(in_strategy) -> str:
    """Why slice tuples do not fit MatMul's two matrices, where it is a tuple of another length."""
    if isinstance(in_strategy, (tuple, list)):
        for i, t in enumerate(in_strategy[:2]):
            if isinstance(t, (tuple, list)) and len(t) != 2:
                return f": the entry for input {i} has {len(t)} numbers, but the input is a matrix (rank 2)"
    return ""


def _caller_loc():
    """The source position of the user's call into this module (of `MatMul(...).shard(...)`)."""
    import sys

    from msir.errors import SourceLoc

    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return None
    positions = list(frame.f_code.co_positions())  # one per 2-byte instruction
    start = positions[frame.f_lasti // 2][2] if frame.f_lasti // 2 < len(positions) else None
    col = start + 1 if start is not None else 1
    return SourceLoc(frame.f_code.co_filename, frame.f_lineno, col)


class _Assign:
    """`assign(variable, value)`: the Parameter `variable` takes `value`
    (mindspore.ops.assign), cast to its dtype; gives the new value. In Python
    (PYNATIVE_MODE) it sets the Parameter's data now (from the value of a
    traced one: the update is not differentiated); compiled code returns the
    new value as an extra result that the call writes into the Parameter's
    array (`msir.frontend.parameter_writes`)."""

    __name__ = "assign"
    __msir_effect__ = True
    """A statement `ops.assign(p, v)` is allowed in compiled code: its effect is the Parameter's update."""

    def __call__(self, variable, value):
        from msir.common.parameter import Parameter
        from msir.eager.tracer import base_value

        if not isinstance(variable, Parameter):
            raise BadArgumentError(f"msir.ops.assign: the variable must be a Parameter, got {type(variable).__name__}")
        variable.set_data(np.asarray(base_value(unwrap(value))))
        return variable

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        from msir.frontend.parameter_writes import translate_assign

        return translate_assign(tr, args, kwargs, node)


assign = _Assign()


def _tensor_io(fn):
    """`fn` on `msir.Tensor`s: called with their arrays (no copies), its
    results come back as Tensors when an argument was one. Compiled code
    calls the same object (`msir.frontend.ops_calls` keys its builders by it)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not (contains_tensor(args) or contains_tensor(kwargs)):
            return fn(*args, **kwargs)
        return wrap(fn(*unwrap(args), **unwrap(kwargs)))

    return call


_CREATING = ("ones", "zeros", "full")
"""They give Tensors from Python without a Tensor argument, as MindSpore's do."""
for _name in __all__:
    if _name not in _CREATING and _name not in ("GradOperation", "MatMul", "assign"):
        globals()[_name] = _tensor_io(globals()[_name])
del _name
