"""The window ops (`conv2d`, `max_pool2d`, `avg_pool2d`) in msir primitives, and
their derivatives, written once against the differentiation rules' `Builder`.

Every window op starts from one gather: `take` along the flattened spatial axis
of the input (N, C, H*W) with an index table (KH*KW, OH*OW) that `iota`s and
integer arithmetic compute (no constant data in the IR): tap t of output
position q reads row `oh*stride + kh*dilation - top`, column likewise, each
clamped into the input. The result (N, C, KH*KW, OH*OW) is the column matrix
of im2col, in one loop nest. Where a tap falls into the padding (its
unclamped row or column outside the input), a mask zeroes it.

* `decompose_conv2d`: the masked columns reshaped to (N, groups,
  C/groups*KH*KW, OH*OW) and one batched `matmul` with the weight reshaped to
  (groups, O/groups, C/groups*KH*KW) (groups = 1: (O, C*KH*KW) against (N,
  C*KH*KW, OH*OW)), which convert-msir-to-loops runs through the BLAS.
* `decompose_max_pool2d`: `reduce_max` over the tap axis of the clamped
  columns: a clamped tap repeats an input element of its own window (padding
  is smaller than the kernel), so padding never wins and -inf and NaN behave
  as in MindSpore, without an infinite constant (which msir's textual IR
  cannot carry through a round trip).
* `decompose_avg_pool2d`: `reduce_sum` of the masked columns over the window
  size or, without `count_include_pad`, over the mask's sum.
* `conv2d_input_grad`: the transposed convolution, as GEMM + col2im: the
  weight's transpose times the cotangent, `scatter_add`ed back through the
  forward's index table (cheaper than the equivalent convolution of the
  dilated, padded cotangent with the flipped weight, which gathers
  KH*KW times the input);
* `conv2d_weight_grad`: the cotangent times the forward's columns
  transposed, one batched GEMM (the transpose a BLAS flag), summed over the
  batch; the columns are the forward's `take` again, which common
  subexpression elimination merges (a convolution of the input, channels as
  batch, with the cotangent as kernel gathered OH*OW times the kernel's taps
  again and transposed input and cotangent: 2-3x slower on LeNet).
  Both are built of primitives with rules, so reverse mode differentiates again.
* `max_pool2d_vjp` / `max_pool2d_jvp`: the cotangent goes to the first
  maximum of each window in row-major order, as MindSpore's MaxPoolGrad does
  (checked: a window of equal values sends everything to its top-left
  element): the smallest tap holding the maximum (`reduce_min` of the tap
  numbers where the column equals it), `scatter_add`ed back through the same
  index table (a clamped tap is the input element it repeats, and the first
  tap reaching an element is never a later element's); `avg_pool2d_vjp`: the
  cotangent over the divisor, masked, `scatter_add`ed back.

`msir-lower-windows` calls the decompositions with an `IRBuilder`; the eager
path (`NumpyBuilder`) with NumPy arrays. Parameters are `op_params`' dicts:
`stride`, `padding` (top, bottom, left, right), `dilation`, `groups` for
conv2d; `kernel`, `stride`, `padding` (and `count_include_pad`) for pooling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msir.dialects.windows import infer_conv2d, infer_pool2d

V = Any


def _gather_table(B, in_hw: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                  dilation: Sequence[int], out_hw: Sequence[int], mask_dtype: str | None) -> tuple[V, V | None]:
    """The im2col index table (KH*KW, OH*OW) into the flattened (clamped) input,
    and the mask (same shape, `mask_dtype`) of taps inside it: None without
    padding or without a `mask_dtype`."""
    grid = (kernel[0], kernel[1], out_hw[0], out_hw[1])
    coords, inside = [], None

    def scaled(axis: int, factor: int) -> V:
        i = B.iota("int64", grid, axis)
        return i if factor == 1 else B.binary("mul", i, B.constant(factor, "int64", grid))

    for axis, size, before in ((0, in_hw[0], padding[0]), (1, in_hw[1], padding[2])):
        at = B.binary("add", scaled(axis + 2, stride[axis]), scaled(axis, dilation[axis]))
        if before:
            at = B.binary("sub", at, B.constant(before, "int64", grid))
        if any(padding) and mask_dtype is not None:
            ok = B.binary("and", B.compare("ge", at, B.constant(0, "int64", grid)),
                          B.compare("lt", at, B.constant(size, "int64", grid)))
            inside = ok if inside is None else B.binary("and", inside, ok)
        if any(padding):
            at = B.binary("minimum", B.binary("maximum", at, B.constant(0, "int64", grid)),
                          B.constant(size - 1, "int64", grid))
        coords.append(at)
    flat = B.binary("add", B.binary("mul", coords[0], B.constant(in_hw[1], "int64", grid)), coords[1])
    table = (kernel[0] * kernel[1], out_hw[0] * out_hw[1])
    mask = None if inside is None else B.reshape(B.cast(inside, mask_dtype), table)
    return B.reshape(flat, table), mask


def _columns(B, x: V, table: V, mask: V | None) -> V:
    """The gathered columns (N, C, KH*KW, OH*OW) of `x`, padding taps zeroed if `mask` is given."""
    n, c, h, w = B.shape(x)
    cols = B.take(B.reshape(x, (n, c, h * w)), table, 2)
    return cols if mask is None else B.binary("mul", cols, B.broadcast_to(mask, B.shape(cols)))


def _spread(B, u: V, table: V, x_shape: Sequence[int]) -> V:
    """The adjoint of `_columns` without its mask: `u` (N, C, KH*KW, OH*OW) added back into the input's elements."""
    n, c, h, w = x_shape
    return B.reshape(B.scatter_add(u, table, 2, (n, c, h * w)), (n, c, h, w))


def decompose_conv2d(B, x: V, w: V, p: dict) -> V:
    """conv2d(x, w) as im2col and a batched matmul (see the module docstring)."""
    stride, padding, dilation, groups = p["stride"], p["padding"], p["dilation"], p["groups"]
    n, _, oh, ow = infer_conv2d(B.shape(x), B.shape(w), stride, padding, dilation, groups)
    o, cg, kh, kw = B.shape(w)
    table, mask = _gather_table(B, B.shape(x)[2:], (kh, kw), stride, padding, dilation, (oh, ow), B.dtype(x))
    col = _columns(B, x, table, mask)  # (N, C, KH*KW, OH*OW)
    k = cg * kh * kw
    if groups == 1:
        y = B.matmul(B.reshape(w, (o, k)), B.reshape(col, (n, k, oh * ow)))  # (N, O, OH*OW)
    else:
        y = B.matmul(B.reshape(w, (groups, o // groups, k)), B.reshape(col, (n, groups, k, oh * ow)))
    return B.reshape(y, (n, o, oh, ow))


def conv2d(B, x: V, w: V, p: dict) -> V:
    """A conv2d op with the parameters of `p`."""
    return B.apply("conv2d", {k: p[k] for k in ("stride", "padding", "dilation", "groups")}, [x, w])


def conv2d_input_grad(B, ct: V, w: V, x_shape: Sequence[int], p: dict) -> V:
    """d<ct, conv2d(x, w)>/dx: the transposed convolution as GEMM + col2im: the
    weight's transpose times the cotangent gives each column's cotangent, which
    `scatter_add` puts back through the forward's index table (the taps in the
    padding masked out)."""
    stride, padding, dilation, groups = p["stride"], p["padding"], p["dilation"], p["groups"]
    n, c, h, wd = x_shape
    o, cg, kh, kw = B.shape(w)
    _, _, oh, ow = B.shape(ct)
    k, q = cg * kh * kw, oh * ow
    table, mask = _gather_table(B, (h, wd), (kh, kw), stride, padding, dilation, (oh, ow), B.dtype(ct))
    if groups == 1:
        cols = B.matmul(B.transpose(B.reshape(w, (o, k)), (1, 0)), B.reshape(ct, (n, o, q)))  # (N, K, P)
    else:
        wt = B.transpose(B.reshape(w, (groups, o // groups, k)), (0, 2, 1))  # (groups, K, O/groups)
        cols = B.matmul(wt, B.reshape(ct, (n, groups, o // groups, q)))  # (N, groups, K, P)
    cols = B.reshape(cols, (n, c, kh * kw, q))
    if mask is not None:
        cols = B.binary("mul", cols, B.broadcast_to(mask, B.shape(cols)))
    return _spread(B, cols, table, x_shape)


def conv2d_weight_grad(B, x: V, ct: V, w_shape: Sequence[int], p: dict) -> V:
    """d<ct, conv2d(x, w)>/dw: the cotangent times the forward's im2col columns,
    transposed: one batched GEMM (N, O, OH*OW) x (N, OH*OW, C*KH*KW) (per group),
    the transpose read in place by the BLAS, summed over the batch. The columns
    are the forward's own `take` (common subexpression), so the gradient gathers
    nothing again."""
    stride, padding, dilation, groups = p["stride"], p["padding"], p["dilation"], p["groups"]
    o, cg, kh, kw = w_shape
    n, c, h, wd = B.shape(x)
    _, _, oh, ow = B.shape(ct)
    k, q = cg * kh * kw, oh * ow
    table, mask = _gather_table(B, (h, wd), (kh, kw), stride, padding, dilation, (oh, ow), B.dtype(x))
    col = _columns(B, x, table, mask)  # (N, C, KH*KW, OH*OW)
    if groups == 1:
        per_image = B.matmul(B.reshape(ct, (n, o, q)), B.transpose(B.reshape(col, (n, k, q)), (0, 2, 1)))
    else:
        per_image = B.matmul(B.reshape(ct, (n, groups, o // groups, q)),
                             B.transpose(B.reshape(col, (n, groups, k, q)), (0, 1, 3, 2)))
    return B.reshape(B.reduce("sum", per_image, [0], False), (o, cg, kh, kw))


# -- pooling -----------------------------------------------------------------


def _pool_table(B, x: V, p: dict, op: str) -> tuple[V, V | None, tuple[int, int, int, int]]:
    out = infer_pool2d(B.shape(x), p["kernel"], p["stride"], p["padding"], op)
    table, mask = _gather_table(B, B.shape(x)[2:], p["kernel"], p["stride"], p["padding"], (1, 1), out[2:],
                                B.dtype(x) if op == "avg_pool2d" else None)
    return table, mask, out


def _as_columns(B, y: V, taps: int) -> V:
    """`y` (N, C, OH, OW) broadcast along the tap axis: (N, C, taps, OH*OW)."""
    n, c, oh, ow = B.shape(y)
    return B.broadcast_to(B.reshape(y, (n, c, 1, oh * ow)), (n, c, taps, oh * ow))


def decompose_max_pool2d(B, x: V, p: dict) -> V:
    """The maximum of each window: `reduce_max` over the taps of the clamped columns."""
    table, _, out = _pool_table(B, x, p, "max_pool2d")
    return B.reshape(B.reduce("max", _columns(B, x, table, None), [2], False), out)


def _first_maximum(B, x: V, y: V, p: dict) -> tuple[V, V, tuple[int, ...]]:
    """The index table and where each window's first maximum is (a bool one-hot along the taps)."""
    table, _, _ = _pool_table(B, x, p, "max_pool2d")
    cols = _columns(B, x, table, None)
    shape = B.shape(cols)
    tap = B.iota("int64", shape, 2)
    hit = B.compare("eq", cols, _as_columns(B, y, shape[2]))
    first = B.reduce("min", B.select(hit, tap, B.constant(shape[2], "int64", shape)), [2], True)
    return table, B.compare("eq", tap, B.broadcast_to(first, shape)), shape


def max_pool2d_vjp(B, x: V, y: V, ct: V, p: dict) -> V:
    table, first, shape = _first_maximum(B, x, y, p)
    routed = B.select(first, _as_columns(B, ct, shape[2]), B.constant(0.0, B.dtype(ct), shape))
    return _spread(B, routed, table, B.shape(x))


def max_pool2d_jvp(B, x: V, y: V, t: V, p: dict) -> V:
    table, first, shape = _first_maximum(B, x, y, p)
    picked = B.select(first, _columns(B, t, table, None), B.constant(0.0, B.dtype(y), shape))
    return B.reshape(B.reduce("sum", picked, [2], False), B.shape(y))


def _divisor(B, mask: V | None, p: dict, shape: Sequence[int], dtype: str) -> V:
    """What each window's sum is divided by, of `shape` (N, C, OH*OW): its size,
    or the input elements it covers."""
    kh, kw = p["kernel"]
    if p["count_include_pad"] or mask is None:
        return B.constant(float(kh * kw), dtype, shape)
    return B.broadcast_to(B.reduce("sum", mask, [0], False), shape)


def decompose_avg_pool2d(B, x: V, p: dict) -> V:
    """The mean of each window: the masked columns summed over the taps, over the divisor."""
    table, mask, out = _pool_table(B, x, p, "avg_pool2d")
    total = B.reduce("sum", _columns(B, x, table, mask), [2], False)  # (N, C, OH*OW)
    return B.reshape(B.binary("div", total, _divisor(B, mask, p, B.shape(total), B.dtype(x))), out)


def avg_pool2d_vjp(B, x: V, ct: V, p: dict) -> V:
    table, mask, out = _pool_table(B, x, p, "avg_pool2d")
    n, c, oh, ow = out
    flat = (n, c, oh * ow)
    share = B.binary("div", B.reshape(ct, flat), _divisor(B, mask, p, flat, B.dtype(ct)))
    share = _as_columns(B, B.reshape(share, out), p["kernel"][0] * p["kernel"][1])
    if mask is not None:
        share = B.binary("mul", share, B.broadcast_to(mask, B.shape(share)))
    return _spread(B, share, table, B.shape(x))
