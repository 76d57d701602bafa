"""MindSpore's training wrappers (`mindspore.nn.wrap`): `WithLossCell`, `WithEvalCell`, `TrainOneStepCell`.

* `WithLossCell(backbone, loss_fn)(data, label)` is `loss_fn(backbone(data), label)`;
* `WithEvalCell(network, loss_fn)(data, label)` gives `(loss, outputs, label)`,
  what `Model.eval` hands to its metrics;
* `TrainOneStepCell(network, optimizer, sens=None)(*inputs)` runs one
  training step of `network` (a Cell returning the loss, e.g. a
  WithLossCell): the loss, its gradient with respect to
  `optimizer.parameters` (scaled by `sens`, 1.0 when None), the optimizer's
  update; it returns the loss.

In PYNATIVE_MODE the step runs eagerly: `msir.value_and_grad(network, None,
weights)` on the eager tape, then `optimizer(grads)`, unless an auto-parallel
context is set (`msir.set_auto_parallel_context`): then it runs compiled and
sharded as in GRAPH_MODE, which is what MindSpore does with a Cell it is to
run distributed in PyNative mode (`mindspore.shard` executes it in graph
mode). In GRAPH_MODE the whole step is one compiled function and one native
call: the weights and
the optimizer's state are explicit arguments of it (the network reads the
weights through `msir.transforms.BindParameters`), donated
(`msir.jit(donate_argnums=...)`) so that the native code writes the new
values into the Parameters' own arrays; the step's learning rate is a
runtime argument. Both modes compute the same update rule
(`msir.nn.optim`), so they give the same numbers.
"""

from __future__ import annotations

import types

import msir
from msir.common.tensor import unwrap, wrap
from msir.context import auto_parallel_key, pynative
from msir.errors import UnsupportedSyntaxError
from msir.nn.cell import Cell
from msir.nn.optim import Optimizer
from msir.transforms import BindParameters


class WithLossCell(Cell):
    """`loss_fn(backbone(data), label)` (mindspore.nn.WithLossCell)."""

    def __init__(self, backbone: Cell, loss_fn: Cell):
        super().__init__(auto_prefix=False)
        self._backbone = backbone
        self._loss_fn = loss_fn

    def construct(self, data, label):
        out = self._backbone(data)
        return self._loss_fn(out, label)

    @property
    def backbone_network(self) -> Cell:
        return self._backbone


class WithEvalCell(Cell):
    """`(loss_fn(network(data), label), network(data), label)` (mindspore.nn.WithEvalCell)."""

    def __init__(self, network: Cell, loss_fn: Cell, add_cast_fp32: bool = False):
        super().__init__(auto_prefix=False)
        self._network = network
        self._loss_fn = loss_fn
        self.add_cast_fp32 = add_cast_fp32

    def construct(self, data, label):
        outputs = self._network(data)
        loss = self._loss_fn(outputs, label)
        return loss, outputs, label


class TrainOneStepCell(Cell):
    """One training step: forward, backward and the optimizer's update (mindspore.nn.TrainOneStepCell)."""

    def __init__(self, network: Cell, optimizer: Optimizer, sens: float | None = None, return_grad: bool = False):
        super().__init__(auto_prefix=False)
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"TrainOneStepCell: optimizer must be an nn optimizer, got {type(optimizer).__name__}")
        if return_grad:
            raise UnsupportedSyntaxError("TrainOneStepCell: return_grad=True is not supported yet")
        if sens == 0:
            raise ValueError("TrainOneStepCell: sens cannot be 0")
        self.network = network
        self.network.set_grad()
        self.optimizer = optimizer
        self.weights = optimizer.parameters
        self.sens = 1.0 if sens is None else float(sens)
        self.network_of_weights = BindParameters(network, tuple(self.weights))
        """The network taking the weights' values as an extra last argument (the compiled step)."""

    def construct(self, *inputs):
        loss, grads = msir.value_and_grad(self.network, None, self.weights)(*inputs)
        if self.sens != 1.0:
            grads = tuple(g * self.sens for g in grads)
        self.optimizer(grads)
        return loss

    def __call__(self, *inputs):
        if pynative() and auto_parallel_key() is None:
            return super().__call__(*inputs)
        optimizer = self.optimizer
        lr = optimizer._current_lr()
        loss, new_weights, new_states = self._compiled_step()(
            optimizer._weight_arrays(), optimizer._state_arrays(), lr, tuple(unwrap(inputs))
        )
        optimizer._store(new_weights, new_states)
        return wrap(loss)

    def _compiled_step(self):
        jitted = vars(self).get("__msir_jit_step")
        if jitted is None:
            from msir.api import JitFunction

            jitted = JitFunction(types.MethodType(TrainOneStepCell._step, self), donate_argnums=(0, 1))
            vars(self)["__msir_jit_step"] = jitted
        return jitted

    def _step(self, weights, states, lr, inputs):
        """The step GRAPH_MODE compiles: weights and state in, the loss and their new values out."""
        loss, grads = msir.value_and_grad(self.network_of_weights, len(inputs))(*inputs, weights)
        if self.sens != 1.0:
            scaled = []
            for i in range(len(grads)):
                scaled.append(grads[i] * self.sens)
            grads = scaled
        new_weights, new_states = self.optimizer._update(weights, grads, states, lr)
        return loss, new_weights, new_states


__all__ = ["TrainOneStepCell", "WithEvalCell", "WithLossCell"]
