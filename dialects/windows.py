"""Shapes and padding of msir's window ops: `msir.conv2d`, `msir.max_pool2d`, `msir.avg_pool2d`.

One place computes, for NCHW inputs (and OIHW convolution weights), the result
shape of each op and the explicit padding a MindSpore `pad_mode` stands for.
The dialect's verifiers, the compiled frontend (`msir.ops`' handlers), the
eager tracer and the decomposition (`msir.passes.window_algebra`) all call
it, so a shape the frontend accepts always verifies, with the same message.
Nothing here imports xDSL: the eager path reads it without it.

Padding is explicit everywhere below the user API: four non-negative ints
`(top, bottom, left, right)`, MindSpore's order for its `padding` tuple.
`pad_mode='same'` gives the output size ceil(in / stride) and splits the
padding needed for it with the smaller half first (`top`, `left`), as
MindSpore (and TensorFlow) do; `'valid'` pads nothing; `'pad'` takes the
user's `padding` (one int for all four sides, or four).

Errors are `msir.errors.ShapeError`s naming the op, the operand and the
shapes; the verifiers turn them into `VerifyException`s, the frontend puts
them at the user's source line.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from msir.errors import ShapeError

PAD_MODES = ("same", "valid", "pad")


def pair(value: Any, what: str, op: str) -> tuple[int, int]:
    """A (height, width) pair from an int or a 2-sequence of ints, each positive."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(items) != 2 or not all(_is_int(v) and v > 0 for v in items):
        raise ShapeError(f"{op}: {what} must be a positive int or two positive ints, got {value!r}")
    return int(items[0]), int(items[1])


def quad(value: Any, op: str) -> tuple[int, int, int, int]:
    """The explicit padding (top, bottom, left, right) from one int or four, each non-negative."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * 4
    if len(items) != 4 or not all(_is_int(v) and v >= 0 for v in items):
        raise ShapeError(f"{op}: padding must be a non-negative int or four (top, bottom, left, right), got {value!r}")
    return int(items[0]), int(items[1]), int(items[2]), int(items[3])


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def resolve_padding(pad_mode: str, padding: Any, in_hw: Sequence[int], kernel: Sequence[int],
                    stride: Sequence[int], dilation: Sequence[int], op: str) -> tuple[int, int, int, int]:
    """The explicit padding that `pad_mode` (with `padding` for 'pad') gives an input of spatial size `in_hw`."""
    if pad_mode not in PAD_MODES:
        raise ShapeError(f"{op}: pad_mode must be one of 'same', 'valid', 'pad', got {pad_mode!r}")
    if pad_mode != "pad":
        if padding not in (0, (0, 0, 0, 0), [0, 0, 0, 0]):
            raise ShapeError(f"{op}: padding must be 0 unless pad_mode is 'pad' (pad_mode {pad_mode!r}, "
                             f"padding {padding!r})")
        if pad_mode == "valid":
            return 0, 0, 0, 0
        sides = []
        for size, k, s, d in zip(in_hw, kernel, stride, dilation):
            out = -(-size // s)
            needed = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            sides += [needed // 2, needed - needed // 2]
        return sides[0], sides[1], sides[2], sides[3]
    return quad(padding, op)


def _spatial_out(size: int, before: int, after: int, k: int, s: int, d: int) -> int:
    return (size + before + after - d * (k - 1) - 1) // s + 1


def _check_nchw(shape: Sequence[int], what: str, op: str) -> None:
    if len(shape) != 4:
        raise ShapeError(f"{op}: {what} must be 4-D (N, C, H, W), got shape {tuple(shape)}")


def infer_conv2d(x: Sequence[int], w: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                 dilation: Sequence[int], groups: int, op: str = "conv2d") -> tuple[int, int, int, int]:
    """Result shape of a 2-D convolution of `x` (N, C, H, W) with weight `w` (O, C/groups, KH, KW)."""
    _check_nchw(x, "the input", op)
    if len(w) != 4:
        raise ShapeError(f"{op}: the weight must be 4-D (out_channels, in_channels/groups, KH, KW), "
                         f"got shape {tuple(w)}")
    n, c, h, wd = x
    o, cg, kh, kw = w
    if groups <= 0 or c % groups or o % groups:
        raise ShapeError(f"{op}: groups {groups} must divide both the input's {c} channels and the weight's "
                         f"{o} output channels")
    if cg * groups != c:
        raise ShapeError(f"{op}: the weight {tuple(w)} expects {cg * groups} input channels "
                         f"({cg} per group, {groups} groups), the input {tuple(x)} has {c}")
    return (n, o, *_window_out((h, wd), (kh, kw), stride, padding, dilation, tuple(x), op))


def infer_pool2d(x: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                 op: str = "pool2d") -> tuple[int, int, int, int]:
    """Result shape of a 2-D pooling of `x` (N, C, H, W) over windows `kernel`."""
    _check_nchw(x, "the input", op)
    pt, pb, pl, pr = padding
    if max(pt, pb) >= kernel[0] or max(pl, pr) >= kernel[1]:
        # a window of padding only would have no element to pool
        raise ShapeError(f"{op}: padding {tuple(padding)} must be smaller than the kernel {tuple(kernel)}")
    return (x[0], x[1], *_window_out(tuple(x[2:]), kernel, stride, padding, (1, 1), tuple(x), op))


def _window_out(in_hw, kernel, stride, padding, dilation, x, op) -> tuple[int, int]:
    pt, pb, pl, pr = padding
    oh = _spatial_out(in_hw[0], pt, pb, kernel[0], stride[0], dilation[0])
    ow = _spatial_out(in_hw[1], pl, pr, kernel[1], stride[1], dilation[1])
    if oh <= 0 or ow <= 0:
        reach = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        raise ShapeError(f"{op}: the window {reach} (kernel {tuple(kernel)}, dilation {tuple(dilation)}) is larger "
                         f"than the padded input (input {x}, padding {tuple(padding)})")
    return oh, ow
