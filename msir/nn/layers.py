"""MindSpore's basic layers (`mindspore.nn`): Dense, the activations, Flatten, Dropout, LayerNorm, Embedding.

Each is a `Cell` whose `construct` is ordinary msir-compilable code over
`msir.ops` (compiled in GRAPH_MODE, run op by op in PYNATIVE_MODE), with
MindSpore's constructor arguments, defaults, parameter names and
initialisers:

* `Dense(in_channels, out_channels, weight_init=None, bias_init=None,
  has_bias=True, activation=None)`: `weight` (out, in) from
  `HeUniform(negative_slope=sqrt(5))`, `bias` from `Uniform(1/sqrt(in))`,
  MindSpore's defaults; any number of leading axes;
* `ReLU`, `GELU(approximate=True)` (the tanh form; `approximate=False`
  needs erf, which msir refuses at the call), `Sigmoid`, `Tanh`,
  `Softmax(axis=-1)`, `Flatten(start_dim=1, end_dim=-1)`;
* `Dropout(keep_prob=None, p=None)`: zeroes each element with probability
  `p` (0.5 by default) and scales the others by 1/(1-p) in training
  (`set_train()`), the identity in evaluation. Its random numbers come from
  NumPy's global generator at every call (`msir.set_seed` makes them
  reproducible), the same in both modes; compiled code reads them as a
  hidden argument drawn at each call (so that code is never kept in the
  persistent trace cache);
* `LayerNorm(normalized_shape, begin_norm_axis=-1, begin_params_axis=-1,
  gamma_init='ones', beta_init='zeros', epsilon=1e-7)`: `gamma`, `beta`;
  msir normalises the trailing `len(normalized_shape)` axes, so the axes
  must say that;
* `Embedding(vocab_size, embedding_size, use_one_hot=False,
  embedding_table='normal', dtype=int32, padding_idx=None)`:
  `embedding_table` (vocab, size), the row `padding_idx` zero; the one-hot
  form computes the same values, by the same gather.

A layer given an input of the wrong shape raises a `ShapeError` naming the
layer, the expected and the received shape (`msir.nn.cell.check_input`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from msir import ops
from msir.common import dtype as mstype
from msir.common.initializer import HeUniform, Normal, Uniform, initializer
from msir.common.parameter import Parameter
from msir.common.tensor import Tensor, unwrap
from msir.errors import ShapeError
from msir.nn.cell import Cell, check_input


def _positive_int(value: Any, what: str, layer: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{layer}: {what} must be a positive int, got {value!r}")
    return int(value)


class ReLU(Cell):
    """max(x, 0)."""

    def construct(self, x):
        return ops.relu(x)


class GELU(Cell):
    """The Gaussian error linear unit; `approximate=True` (MindSpore's default) is the tanh form."""

    def __init__(self, approximate: bool = True):
        super().__init__()
        self.approximate = "tanh" if approximate else "none"

    def construct(self, x):
        return ops.gelu(x, approximate=self.approximate)


class Sigmoid(Cell):
    def construct(self, x):
        return ops.sigmoid(x)


class Tanh(Cell):
    def construct(self, x):
        return ops.tanh(x)


class Softmax(Cell):
    """exp(x) / sum(exp(x)) along `axis`."""

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def construct(self, x):
        return ops.softmax(x, self.axis)

    def extend_repr(self) -> str:
        return f"axis={self.axis}"


_ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "sigmoid": Sigmoid, "tanh": Tanh, "softmax": Softmax}


def _activation(activation: Any) -> Cell | None:
    if activation is None or isinstance(activation, Cell):
        return activation
    if isinstance(activation, str) and activation.lower() in _ACTIVATIONS:
        return _ACTIVATIONS[activation.lower()]()
    raise ValueError(f"unknown activation {activation!r} (known: {', '.join(sorted(_ACTIVATIONS))}, or a Cell)")


class Flatten(Cell):
    """The axes `start_dim..end_dim` merged into one (by default all but the batch axis)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def construct(self, x):
        return ops.flatten(x, start_dim=self.start_dim, end_dim=self.end_dim)


class Dense(Cell):
    """`activation(x @ weight.T + bias)`, `weight` of shape (out_channels, in_channels)."""

    def __init__(self, in_channels: int, out_channels: int, weight_init: Any = None, bias_init: Any = None,
                 has_bias: bool = True, activation: Any = None, dtype: Any = mstype.float32):
        super().__init__()
        self.in_channels = _positive_int(in_channels, "in_channels", "Dense")
        self.out_channels = _positive_int(out_channels, "out_channels", "Dense")
        self.has_bias = bool(has_bias)
        if weight_init is None:
            weight_init = HeUniform(math.sqrt(5))
        self.weight = Parameter(_initial(weight_init, (self.out_channels, self.in_channels), dtype, "Dense", "weight"),
                                name="weight")
        if self.has_bias:
            if bias_init is None:
                bias_init = Uniform(scale=1 / math.sqrt(self.in_channels))
            self.bias = Parameter(_initial(bias_init, (self.out_channels,), dtype, "Dense", "bias"), name="bias")
        else:
            self.bias = None
        self.activation = _activation(activation)

    def construct(self, x):
        check_input(self, x.shape, (..., self.in_channels))
        y = ops.dense(x, self.weight, self.bias)
        if self.activation is not None:
            y = self.activation(y)
        return y

    def extend_repr(self) -> str:
        return f"input_channels={self.in_channels}, output_channels={self.out_channels}, has_bias={self.has_bias}"


def _initial(init: Any, shape: tuple[int, ...], dtype: Any, layer: str, what: str) -> Tensor:
    """The initial value of a layer's parameter; a Tensor given as `init` must have its shape."""
    if isinstance(init, (Tensor, np.ndarray)) and tuple(np.shape(unwrap(init))) != shape:
        raise ShapeError(f"{layer}: {what}_init has shape {tuple(np.shape(unwrap(init)))}, expected {shape}")
    return initializer(init, shape, dtype)


class _UniformLike:
    """U[0, 1) numbers of an array's shape, drawn from NumPy's global generator
    anew at every call: in compiled code a hidden argument whose getter draws
    them when the compiled function is called."""

    __name__ = "uniform_like"

    def __call__(self, x):
        return np.random.random(np.shape(x) if not hasattr(x, "shape") else x.shape)

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        x = tr.as_tensor(args[0], node)
        shape = x.shape
        if tr.tc.recorder is not None and tr.tc.recorder.failed is None:
            tr.tc.recorder.failed = "it draws random numbers at every call (nn.Dropout)"
        drawn = tr.capture(np.empty(shape), f"uniform_{len(tr.tc.captures)}", lambda: np.random.random(shape), node)
        return tr.localize(drawn)  # an argument of the entry function, read where the call is


uniform_like = _UniformLike()


class Dropout(Cell):
    """Each element zeroed with probability `p` in training, the others scaled by 1/(1-p)."""

    def __init__(self, keep_prob: float | None = None, p: float | None = None, dtype: Any = mstype.float32):
        super().__init__()
        if keep_prob is not None and p is not None:
            raise ValueError("Dropout: give keep_prob or p, not both")
        p = (1.0 - keep_prob) if keep_prob is not None else (0.5 if p is None else p)
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p!r}")
        self.p = float(p)
        self.scale = 1.0 / (1.0 - self.p)

    def construct(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = ops.cast(uniform_like(x) >= self.p, x.dtype)
        return x * keep * self.scale

    def extend_repr(self) -> str:
        return f"p={self.p}"


class LayerNorm(Cell):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over the trailing axes `normalized_shape`."""

    def __init__(self, normalized_shape, begin_norm_axis: int = -1, begin_params_axis: int = -1,
                 gamma_init: Any = "ones", beta_init: Any = "zeros", epsilon: float = 1e-7,
                 dtype: Any = mstype.float32):
        super().__init__()
        if not isinstance(normalized_shape, (tuple, list)):
            raise TypeError(f"LayerNorm: normalized_shape must be a tuple or list, got {type(normalized_shape).__name__}")
        self.normalized_shape = tuple(_positive_int(d, "normalized_shape", "LayerNorm") for d in normalized_shape)
        trailing = -len(self.normalized_shape)
        if begin_norm_axis != trailing or begin_params_axis != trailing:
            raise ValueError(
                f"LayerNorm: msir normalises the trailing len(normalized_shape) = {len(self.normalized_shape)} "
                f"axes: begin_norm_axis and begin_params_axis must be {trailing}, got {begin_norm_axis} and "
                f"{begin_params_axis}"
            )
        self.begin_norm_axis, self.begin_params_axis = begin_norm_axis, begin_params_axis
        self.epsilon = float(epsilon)
        self.gamma = Parameter(_initial(gamma_init, self.normalized_shape, dtype, "LayerNorm", "gamma"), name="gamma")
        self.beta = Parameter(_initial(beta_init, self.normalized_shape, dtype, "LayerNorm", "beta"), name="beta")

    def construct(self, input_x):
        check_input(self, input_x.shape, (..., *self.normalized_shape))
        return ops.layer_norm(input_x, self.normalized_shape, self.gamma, self.beta, self.epsilon)

    def extend_repr(self) -> str:
        return f"normalized_shape={list(self.normalized_shape)}, begin_norm_axis={self.begin_norm_axis}"


class Embedding(Cell):
    """Rows of `embedding_table` (vocab_size, embedding_size) picked by integer ids."""

    def __init__(self, vocab_size: int, embedding_size: int, use_one_hot: bool = False,
                 embedding_table: Any = "normal", dtype: Any = mstype.int32, padding_idx: int | None = None):
        super().__init__()
        self.vocab_size = _positive_int(vocab_size, "vocab_size", "Embedding")
        self.embedding_size = _positive_int(embedding_size, "embedding_size", "Embedding")
        self.use_one_hot = bool(use_one_hot)
        self.dtype = mstype.as_type(dtype)
        if isinstance(embedding_table, str) and embedding_table.lower() == "normal":
            embedding_table = Normal()  # MindSpore's sigma, 0.01
        table = _initial(embedding_table, (self.vocab_size, self.embedding_size), mstype.float32, "Embedding",
                         "embedding_table").asnumpy()
        if padding_idx is not None:
            if not -self.vocab_size <= padding_idx < self.vocab_size:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for vocab_size {self.vocab_size}")
            table[padding_idx] = 0
        self.padding_idx = padding_idx
        self.embedding_table = Parameter(table, name="embedding_table")

    def construct(self, ids):
        return self.embedding_table[ids]

    def extend_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, embedding_size={self.embedding_size}, use_one_hot={self.use_one_hot}"


__all__ = ["Dense", "Dropout", "Embedding", "Flatten", "GELU", "LayerNorm", "ReLU", "Sigmoid", "Softmax", "Tanh"]
