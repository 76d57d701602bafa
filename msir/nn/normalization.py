"""MindSpore's batch normalisation layers (`mindspore.nn`): `BatchNorm1d`, `BatchNorm2d`.

`BatchNorm2d(num_features, eps=1e-5, momentum=0.9, affine=True,
gamma_init='ones', beta_init='zeros', moving_mean_init='zeros',
moving_var_init='ones', use_batch_statistics=None)` normalises each channel
of an NCHW input (`BatchNorm1d`: of an (N, C) input):

* in training (`set_train()`, or `use_batch_statistics=True`) by the batch's
  mean and biased variance over every axis but the channel's, then updates
  `moving_mean` and `moving_variance` (Parameters named `mean` and
  `variance`, not trainable) as MindSpore does — checked against its
  numbers: `moving = momentum * moving + (1 - momentum) * batch`, the
  variance's batch value being the *unbiased* one (MindSpore's `momentum` is
  the weight of the old value, the opposite of PyTorch's);
* in evaluation by the moving statistics.

`y = (x - mean) / sqrt(var + eps) * gamma + beta` (`gamma`, `beta` trainable
when `affine`).

The moving statistics are updated by `ops.assign` in `construct`, in both
modes: PYNATIVE_MODE sets the Parameters' data at the call; compiled code
(GRAPH_MODE: `net(x)`, `msir.jit`, `TrainOneStepCell`, `Model.train`)
returns their new values as extra results that the call writes into the
Parameters (`msir.frontend.parameter_writes`). The update is not
differentiated (`stop_gradient`), as in MindSpore.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msir import ops
from msir.common import dtype as mstype
from msir.common.parameter import Parameter
from msir.errors import UnsupportedSyntaxError
from msir.nn.cell import Cell, check_input
from msir.nn.layers import _initial, _positive_int
from msir.transforms import compile_time


@compile_time("python")
def _values_per_channel(shape: tuple) -> int:
    """How many values of an input of `shape` (N, C, ...) each channel's statistics reduce."""
    return int(np.prod([d for i, d in enumerate(shape) if i != 1]))


class _BatchNorm(Cell):
    _LAYER = "BatchNorm"
    _RANK = 4

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.9, affine: bool = True,
                 gamma_init: Any = "ones", beta_init: Any = "zeros", moving_mean_init: Any = "zeros",
                 moving_var_init: Any = "ones", use_batch_statistics: bool | None = None,
                 data_format: str = "NCHW", dtype: Any = mstype.float32):
        super().__init__()
        layer = type(self).__name__
        if data_format != "NCHW":
            raise UnsupportedSyntaxError(f"{layer}: only data_format='NCHW' is supported, got {data_format!r}")
        self.num_features = _positive_int(num_features, "num_features", layer)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{layer}: momentum must be in [0, 1], got {momentum!r}")
        self.eps, self.momentum = float(eps), float(momentum)
        self.use_batch_statistics = use_batch_statistics
        shape = (self.num_features,)
        self.moving_mean = Parameter(_initial(moving_mean_init, shape, dtype, layer, "moving_mean"), name="mean",
                                     requires_grad=False)
        self.moving_variance = Parameter(_initial(moving_var_init, shape, dtype, layer, "moving_var"),
                                         name="variance", requires_grad=False)
        self.gamma = Parameter(_initial(gamma_init, shape, dtype, layer, "gamma"), name="gamma", requires_grad=affine)
        self.beta = Parameter(_initial(beta_init, shape, dtype, layer, "beta"), name="beta", requires_grad=affine)
        # the axes statistics reduce and the shape a channel's value broadcasts from
        self._axes = (0,) if self._RANK == 2 else (0, 2, 3)
        self._channel_shape = (1, self.num_features) if self._RANK == 2 else (1, self.num_features, 1, 1)

    def construct(self, x):
        check_input(self, x.shape, (None, self.num_features) + (None,) * (self._RANK - 2))
        batch = self.training if self.use_batch_statistics is None else self.use_batch_statistics
        if batch:
            mean = ops.mean(x, self._axes, keep_dims=True)
            centred = x - mean
            var = ops.mean(centred * centred, self._axes, keep_dims=True)
            new_mean, new_var = self._moving_statistics(mean, var, _values_per_channel(x.shape))
            ops.assign(self.moving_mean, new_mean)
            ops.assign(self.moving_variance, new_var)
        else:
            centred = x - ops.reshape(self.moving_mean, self._channel_shape)
            var = ops.reshape(self.moving_variance, self._channel_shape)
        scale = ops.reshape(self.gamma, self._channel_shape) / ops.sqrt(var + self.eps)
        return centred * scale + ops.reshape(self.beta, self._channel_shape)

    def _moving_statistics(self, mean, var, count):
        """The new moving mean and variance: `momentum * moving + (1 - momentum) * batch`,
        with the unbiased batch variance (`count` values per channel)."""
        m = self.momentum
        batch_mean = ops.reshape(ops.stop_gradient(mean), (self.num_features,))
        batch_var = ops.reshape(ops.stop_gradient(var), (self.num_features,)) * (count / (count - 1))
        return m * self.moving_mean + (1 - m) * batch_mean, m * self.moving_variance + (1 - m) * batch_var

    def extend_repr(self) -> str:
        return (f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"gamma={self.gamma}, beta={self.beta}, moving_mean={self.moving_mean}, "
                f"moving_variance={self.moving_variance}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of an (N, C) input (mindspore.nn.BatchNorm1d)."""

    _RANK = 2


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of an (N, C, H, W) input (mindspore.nn.BatchNorm2d)."""

    _RANK = 4


__all__ = ["BatchNorm1d", "BatchNorm2d"]
