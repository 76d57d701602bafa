"""Parameter initializers (mindspore.common.initializer).

`initializer(init, shape, dtype)` gives a Tensor of `shape` filled by `init`:
an `Initializer` (`Normal(sigma=0.01)`, `HeUniform(negative_slope=math.sqrt(5))`,
...), its name as MindSpore spells it ("normal", "ones", "he_uniform",
"xavier_uniform", ...), a number (every element), or a Tensor / array of
that shape. Random initializers draw from NumPy's global generator, which
`msir.set_seed` seeds (MindSpore's does too): the numbers are reproducible
in msir, but not MindSpore's own (its generator is another one).

Fans follow MindSpore: for a 2-D weight (out, in) fan_in = in, fan_out =
out; for more dimensions the trailing ones are the receptive field.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from msir.common import dtype as mstype
from msir.common.tensor import Tensor


class Initializer:
    """Fills an array in place (`_fill`); call it to get a filled array of a shape."""

    def __call__(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        arr = np.empty(shape, np.float64)
        self._fill(arr)
        return arr.astype(np.dtype(dtype))

    def _fill(self, arr: np.ndarray) -> None:  # pragma: no cover
        raise NotImplementedError


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) < 2:
        raise ValueError(f"fan in/out need a weight of at least 2 dimensions, got shape {shape}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _gain(nonlinearity: str, param: float | None = None) -> float:
    """MindSpore's `calculate_gain`."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"unknown nonlinearity {nonlinearity!r}")


class Zero(Initializer):
    def _fill(self, arr):
        arr[...] = 0


class One(Initializer):
    def _fill(self, arr):
        arr[...] = 1


class Constant(Initializer):
    def __init__(self, value: float):
        self.value = value

    def _fill(self, arr):
        arr[...] = self.value


class Normal(Initializer):
    """N(mean, sigma**2)."""

    def __init__(self, sigma: float = 0.01, mean: float = 0.0):
        self.sigma, self.mean = sigma, mean

    def _fill(self, arr):
        arr[...] = np.random.normal(self.mean, self.sigma, arr.shape)


class Uniform(Initializer):
    """U(-scale, scale)."""

    def __init__(self, scale: float = 0.07):
        self.scale = scale

    def _fill(self, arr):
        arr[...] = np.random.uniform(-self.scale, self.scale, arr.shape)


class TruncatedNormal(Initializer):
    """N(mean, sigma**2) truncated to [a, b] (MindSpore's defaults: +-2)."""

    def __init__(self, sigma: float = 0.01, mean: float = 0.0, a: float = -2.0, b: float = 2.0):
        self.sigma, self.mean, self.a, self.b = sigma, mean, a, b

    def _fill(self, arr):
        flat = np.random.normal(self.mean, self.sigma, arr.size)
        bad = (flat < self.a) | (flat > self.b)
        while bad.any():
            flat[bad] = np.random.normal(self.mean, self.sigma, int(bad.sum()))
            bad = (flat < self.a) | (flat > self.b)
        arr[...] = flat.reshape(arr.shape)


class HeUniform(Initializer):
    """U(-bound, bound), bound = gain * sqrt(3 / fan): MindSpore's default for Dense with negative_slope=sqrt(5)."""

    def __init__(self, negative_slope: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _fill(self, arr):
        fan_in, fan_out = _fans(arr.shape)
        fan = fan_in if self.mode == "fan_in" else fan_out
        bound = _gain(self.nonlinearity, self.negative_slope) * math.sqrt(3.0 / fan)
        arr[...] = np.random.uniform(-bound, bound, arr.shape)


class HeNormal(Initializer):
    """N(0, (gain / sqrt(fan))**2)."""

    def __init__(self, negative_slope: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
        self.negative_slope, self.mode, self.nonlinearity = negative_slope, mode, nonlinearity

    def _fill(self, arr):
        fan_in, fan_out = _fans(arr.shape)
        fan = fan_in if self.mode == "fan_in" else fan_out
        arr[...] = np.random.normal(0.0, _gain(self.nonlinearity, self.negative_slope) / math.sqrt(fan), arr.shape)


class XavierUniform(Initializer):
    """U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, gain: float = 1):
        self.gain = gain

    def _fill(self, arr):
        fan_in, fan_out = _fans(arr.shape)
        bound = self.gain * math.sqrt(6.0 / (fan_in + fan_out))
        arr[...] = np.random.uniform(-bound, bound, arr.shape)


class XavierNormal(Initializer):
    """N(0, (gain * sqrt(2 / (fan_in + fan_out)))**2)."""

    def __init__(self, gain: float = 1):
        self.gain = gain

    def _fill(self, arr):
        fan_in, fan_out = _fans(arr.shape)
        arr[...] = np.random.normal(0.0, self.gain * math.sqrt(2.0 / (fan_in + fan_out)), arr.shape)


_BY_NAME = {
    "zeros": Zero, "zero": Zero, "ones": One, "one": One, "normal": Normal, "uniform": Uniform,
    "truncatednormal": TruncatedNormal, "truncated_normal": TruncatedNormal,
    "he_uniform": HeUniform, "heuniform": HeUniform, "he_normal": HeNormal, "henormal": HeNormal,
    "xavier_uniform": XavierUniform, "xavieruniform": XavierUniform,
    "xavier_normal": XavierNormal, "xaviernormal": XavierNormal,
}


def initializer(init: Any, shape: Any = None, dtype: Any = mstype.float32) -> Tensor:
    """A Tensor of `shape` and `dtype` filled by `init` (see the module docstring)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape or ())
    np_dtype = np.dtype(dtype)
    if isinstance(init, Tensor):
        init = init.asnumpy()
    if isinstance(init, np.ndarray):
        if shape and tuple(init.shape) != shape:
            raise ValueError(f"initializer: the Tensor has shape {tuple(init.shape)}, the parameter {shape}")
        return Tensor(init.astype(np_dtype))
    if isinstance(init, (bool, int, float)):
        return Tensor(Constant(init)(shape, np_dtype))
    if isinstance(init, str):
        cls = _BY_NAME.get(init.lower())
        if cls is None:
            raise ValueError(f"unknown initializer {init!r} (known: {', '.join(sorted(_BY_NAME))})")
        init = cls()
    if not isinstance(init, Initializer):
        raise TypeError(f"initializer: expected an Initializer, its name, a number or a Tensor, got {type(init).__name__}")
    return Tensor(init(shape, np_dtype))


__all__ = [
    "Constant", "HeNormal", "HeUniform", "Initializer", "Normal", "One", "TruncatedNormal", "Uniform",
    "XavierNormal", "XavierUniform", "Zero", "initializer",
]
