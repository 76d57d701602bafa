"""MindSpore's convolution and pooling layers (`mindspore.nn`): `Conv2d`, `MaxPool2d`, `AvgPool2d`.

Each is a `Cell` over the msir ops `conv2d`, `max_pool2d`, `avg_pool2d`
(`msir.ops`), NCHW, with MindSpore's constructor arguments and defaults:

* `Conv2d(in_channels, out_channels, kernel_size, stride=1, pad_mode='same',
  padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
  bias_init=None, data_format='NCHW')`: `weight` (out, in/group, KH, KW)
  from `HeUniform(negative_slope=sqrt(5))` and, with `has_bias=True`, `bias`
  (out,) from `Uniform(1/sqrt(in/group*KH*KW))`, as MindSpore initialises
  them (note MindSpore's defaults: `pad_mode='same'`, `has_bias=False`);
  `padding` (with `pad_mode='pad'`) one int or (top, bottom, left, right);
* `MaxPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0)` and
  `AvgPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0,
  count_include_pad=True)`: `pad_mode` 'same' / 'valid' / 'pad' (any case,
  as MindSpore accepts it); an average with `'same'` divides each window by
  the input elements it covers, what MindSpore computes. `dilation`,
  `return_indices`, `ceil_mode` and `divisor_override` other than their
  defaults are refused (msir does not compute them yet).

A layer given an input of the wrong shape raises a `ShapeError` naming the
layer, the expected and the received shape (`msir.nn.cell.check_input`).
"""

from __future__ import annotations

import math
from typing import Any

from msir import ops
from msir.common import dtype as mstype
from msir.common.initializer import HeUniform, Uniform
from msir.common.parameter import Parameter
from msir.dialects import windows
from msir.errors import UnsupportedSyntaxError
from msir.nn.cell import Cell, check_input
from msir.nn.layers import _initial, _positive_int


def _pad_mode(pad_mode: Any, layer: str) -> str:
    mode = pad_mode.lower() if isinstance(pad_mode, str) else pad_mode
    if mode not in windows.PAD_MODES:
        raise ValueError(f"{layer}: pad_mode must be one of 'same', 'valid', 'pad', got {pad_mode!r}")
    return mode


def _nchw_only(data_format: Any, layer: str) -> None:
    if data_format != "NCHW":
        raise UnsupportedSyntaxError(f"{layer}: only data_format='NCHW' is supported, got {data_format!r}")


class Conv2d(Cell):
    """2-D convolution of an NCHW input (mindspore.nn.Conv2d)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 pad_mode: str = "same", padding: Any = 0, dilation: Any = 1, group: int = 1,
                 has_bias: bool = False, weight_init: Any = None, bias_init: Any = None,
                 data_format: str = "NCHW", dtype: Any = mstype.float32):
        super().__init__()
        _nchw_only(data_format, "Conv2d")
        self.in_channels = _positive_int(in_channels, "in_channels", "Conv2d")
        self.out_channels = _positive_int(out_channels, "out_channels", "Conv2d")
        self.kernel_size = windows.pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = windows.pair(stride, "stride", "Conv2d")
        self.dilation = windows.pair(dilation, "dilation", "Conv2d")
        self.group = _positive_int(group, "group", "Conv2d")
        if self.in_channels % self.group or self.out_channels % self.group:
            raise ValueError(f"Conv2d: group {self.group} must divide in_channels {self.in_channels} and "
                             f"out_channels {self.out_channels}")
        self.pad_mode = _pad_mode(pad_mode, "Conv2d")
        self.padding = windows.quad(padding, "Conv2d") if self.pad_mode == "pad" else 0
        if self.pad_mode != "pad" and padding != 0:
            raise ValueError(f"Conv2d: padding must be 0 unless pad_mode is 'pad', got {padding!r}")
        self.has_bias = bool(has_bias)
        shape = (self.out_channels, self.in_channels // self.group, *self.kernel_size)
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(_initial(weight_init, shape, dtype, "Conv2d", "weight"), name="weight")
        if self.has_bias:
            if bias_init is None:
                bias_init = Uniform(scale=1 / math.sqrt(math.prod(shape[1:])))
            self.bias = Parameter(_initial(bias_init, (self.out_channels,), dtype, "Conv2d", "bias"), name="bias")
        else:
            self.bias = None

    def construct(self, x):
        check_input(self, x.shape, (None, self.in_channels, None, None))
        return ops.conv2d(x, self.weight, self.bias, self.stride, self.pad_mode, self.padding, self.dilation,
                          self.group)

    def extend_repr(self) -> str:
        return (f"input_channels={self.in_channels}, output_channels={self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}, "
                f"padding={self.padding}, dilation={self.dilation}, group={self.group}, has_bias={self.has_bias}")


class _Pool2d(Cell):
    def __init__(self, layer: str, kernel_size: Any, stride: Any, pad_mode: str, padding: Any, data_format: str):
        super().__init__()
        _nchw_only(data_format, layer)
        self.kernel_size = windows.pair(kernel_size, "kernel_size", layer)
        self.stride = windows.pair(stride, "stride", layer)
        self.pad_mode = _pad_mode(pad_mode, layer)
        if self.pad_mode != "pad" and padding != 0:
            raise ValueError(f"{layer}: padding must be 0 unless pad_mode is 'pad', got {padding!r}")
        self.padding = padding

    def extend_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, pad_mode={self.pad_mode}"


def _refuse(layer: str, **options: Any) -> None:
    """Refuse the options given a value other than their default (None or False here)."""
    given = {k: v for k, v in options.items() if v}
    if given:
        raise UnsupportedSyntaxError(f"{layer}: {', '.join(f'{k}={v!r}' for k, v in given.items())} is not "
                                     f"supported yet")


class MaxPool2d(_Pool2d):
    """The maximum over each window of an NCHW input (mindspore.nn.MaxPool2d)."""

    def __init__(self, kernel_size: Any = 1, stride: Any = 1, pad_mode: str = "valid", padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False, ceil_mode: bool = False,
                 data_format: str = "NCHW"):
        _refuse("MaxPool2d", dilation=None if dilation == 1 else dilation, return_indices=return_indices, ceil_mode=ceil_mode)
        super().__init__("MaxPool2d", kernel_size, stride, pad_mode, padding, data_format)

    def construct(self, x):
        check_input(self, x.shape, (None, None, None, None))
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding, pad_mode=self.pad_mode)


class AvgPool2d(_Pool2d):
    """The mean over each window of an NCHW input (mindspore.nn.AvgPool2d)."""

    def __init__(self, kernel_size: Any = 1, stride: Any = 1, pad_mode: str = "valid", padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Any = None,
                 data_format: str = "NCHW"):
        _refuse("AvgPool2d", ceil_mode=ceil_mode, divisor_override=divisor_override)
        super().__init__("AvgPool2d", kernel_size, stride, pad_mode, padding, data_format)
        self.count_include_pad = bool(count_include_pad)

    def construct(self, x):
        check_input(self, x.shape, (None, None, None, None))
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding, False, self.count_include_pad,
                              pad_mode=self.pad_mode)


__all__ = ["AvgPool2d", "Conv2d", "MaxPool2d"]
