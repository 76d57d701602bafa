"""MindSpore's optimizers (`mindspore.nn.optim`): `Optimizer`, `SGD`, `Momentum`, `Adam`, `AdamWeightDecay`.

An optimizer is a Cell holding the Parameters it updates (`parameters`) and
its state as Parameters named as MindSpore names them: `global_step`,
`learning_rate`, and per optimizer `momentum` (the value the rule uses is
fixed at construction: `momentum_value`), `accum.<name>`,
`stat.<name>` (SGD), `moments.<name>` (Momentum), `beta1_power`,
`beta2_power`, `moment1.<name>`, `moment2.<name>` (Adam), `adam_m.<name>`,
`adam_v.<name>` (AdamWeightDecay). Calling it with the gradients,
`optimizer(grads)`, updates the parameters and the state in place, then
advances `global_step`, as MindSpore's `construct` does.

One update rule per optimizer, `_update(weights, gradients, states, lr)`,
is a pure function of arrays written as msir-compilable NumPy: it gives the
new weights and the new state. PYNATIVE_MODE runs it as Python and writes
the results into the Parameters' arrays; GRAPH_MODE compiles it with the
weights and the state donated (`msir.jit(donate_argnums=...)`), so the
native code writes them in place; `TrainOneStepCell` compiles it into the
same native function as the forward and backward pass
(`msir.nn.wrap`). The learning rate of the step is a runtime argument, so a
schedule never recompiles.

What each rule computes is MindSpore 2.10's CPU kernel (`lr` the step's
learning rate, `g` the gradient after weight decay and loss scaling):

* weight decay (SGD, Momentum, Adam): `g + weight_decay * w` for the
  parameters whose name contains neither 'beta' nor 'gamma'; then
  `g / loss_scale`;
* SGD(momentum, dampening, nesterov): with momentum > 0, `accum = g` at a
  parameter's first step (`stat` is 1, then 0), else
  `accum * momentum + (1 - dampening) * g`; `g` becomes `accum`, or
  `g + momentum * accum` with nesterov; `w - lr * g`;
* Momentum(momentum, use_nesterov): `accum = accum * momentum + g`;
  `w - lr * accum`, or `w - lr * g - lr * momentum * accum` with nesterov;
* Adam(beta1, beta2, eps, use_nesterov): the powers advance first
  (`beta1_power *= beta1`), `m += (g - m)(1 - beta1)`,
  `v += (g^2 - v)(1 - beta2)`, `lr_t = lr sqrt(1 - beta2_power) / (1 - beta1_power)`,
  `w - lr_t m / (sqrt(v) + eps)` (nesterov: `m beta1 + (1 - beta1) g` for `m`);
* AdamWeightDecay(beta1, beta2, eps, weight_decay): no bias correction,
  `w - lr (m / (sqrt(v) + eps) + weight_decay w)` (decay on the names
  without 'beta' or 'gamma').

The learning rate is a number, a 0-d Tensor, or one value per step (a list,
the `msir.nn.dynamic_lr` functions, a 1-D Tensor): step `global_step` uses
entry `global_step`, and a step past the end of the list is an error (the
gather MindSpore uses refuses the index on CPU). Parameter groups (a list
of dicts) and `LearningRateSchedule` Cells are not supported yet and are
refused by name. An optimizer is called from Python (a PyNative or jitted
training step's caller, `TrainOneStepCell`); a call inside compiled code is
refused with an error saying so, since compiled code does not change
Parameters.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import numpy as np

from msir.common.parameter import Parameter, ParameterTuple
from msir.common.tensor import Tensor, unwrap
from msir.context import pynative
from msir.errors import UnsupportedSyntaxError
from msir.nn.cell import Cell
from msir.transforms import compile_time


@compile_time("python")
def _refuse_in_compiled_code(optimizer_name: str) -> None:
    raise UnsupportedSyntaxError(
        f"{optimizer_name}: an optimizer updates Parameters, which compiled code does not change; call it "
        f"outside the jitted function, or train with nn.TrainOneStepCell (one compiled step, parameters in place)"
    )


class Optimizer(Cell):
    """The base of the optimizers (mindspore.nn.Optimizer): the parameters,
    the learning rate per step, weight decay, loss scale and `global_step`."""

    __msir_call__ = "_call_in_compiled_code"

    def __init__(self, learning_rate: Any, parameters: Any, weight_decay: float = 0.0, loss_scale: float = 1.0):
        super().__init__(auto_prefix=False)
        name = type(self).__name__
        params = list(parameters) if isinstance(parameters, Iterable) and not isinstance(parameters, Tensor) \
            else parameters
        if not isinstance(params, list) or not params:
            raise TypeError(f"{name}: params must be a non-empty list of Parameters (net.trainable_params())")
        if all(isinstance(p, dict) for p in params):
            raise UnsupportedSyntaxError(f"{name}: parameter groups (a list of dicts) are not supported yet")
        if not all(isinstance(p, Parameter) for p in params):
            raise TypeError(f"{name}: every element of params must be a Parameter")
        if isinstance(loss_scale, bool) or not isinstance(loss_scale, (int, float)) or loss_scale <= 0:
            raise ValueError(f"{name}: loss_scale must be a positive number, got {loss_scale!r}")
        if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)):
            raise TypeError(f"{name}: weight_decay must be a float, got {type(weight_decay).__name__}")
        if weight_decay < 0:
            raise ValueError(f"{name}: weight_decay must be at least 0.0, got {weight_decay}")
        self.loss_scale = float(loss_scale)
        self.need_scale = self.loss_scale != 1.0
        self.global_step = Parameter(np.zeros(1, np.int32), name="global_step")
        self.learning_rate = self._build_lr(learning_rate)
        self.dynamic_lr = self.learning_rate.ndim == 1
        self.parameters = ParameterTuple(params)
        self._parameters = self.parameters
        self.weight_decay = float(weight_decay) * self.loss_scale
        self.exec_weight_decay = self.weight_decay > 0
        self.decay_flags = tuple("beta" not in p.name and "gamma" not in p.name for p in params)

    def _build_lr(self, learning_rate: Any) -> Parameter:
        """The learning rate as the Parameter `learning_rate`: 0-d, or 1-D (one per step)."""
        name = type(self).__name__
        if isinstance(learning_rate, bool):
            raise TypeError(f"{name}: learning_rate must be a number, a list or a Tensor, got a bool")
        if isinstance(learning_rate, (int, float)):
            if learning_rate < 0:
                raise ValueError(f"{name}: learning_rate must be at least 0, got {learning_rate}")
            return Parameter(np.array(learning_rate, np.float32), name="learning_rate")
        if isinstance(learning_rate, Cell):
            raise UnsupportedSyntaxError(
                f"{name}: a LearningRateSchedule Cell is not supported yet; give a list of per-step rates "
                f"(nn.cosine_decay_lr, ...)"
            )
        if isinstance(learning_rate, (Tensor, np.ndarray, np.generic, list, tuple)):
            values = np.asarray(unwrap(learning_rate), dtype=np.float32)
            if values.ndim > 1:
                raise ValueError(f"{name}: a learning rate Tensor must be 0-d or 1-D, got shape {values.shape}")
            if values.size == 0:
                raise ValueError(f"{name}: the list of learning rates is empty")
            return Parameter(values, name="learning_rate")
        raise TypeError(
            f"{name}: learning_rate must be a number, a list or a Tensor, got {type(learning_rate).__name__}"
        )

    def _register_state(self, attribute: str, state: ParameterTuple) -> ParameterTuple:
        """Keep a tuple of state Parameters as `attribute`, each registered by its name."""
        object.__setattr__(self, attribute, state)
        for p in state:
            self._params[p.name] = p
        return state

    # -- the learning rate and the weights -------------------------------------------

    def get_lr(self) -> Tensor:
        """The learning rate of the current step (a 0-d float32 Tensor)."""
        return Tensor._wrap(self._current_lr())

    def get_weight_decay(self) -> float:
        return self.weight_decay

    def _current_lr(self) -> np.ndarray:
        rates = self.learning_rate.asnumpy()
        if not self.dynamic_lr:
            return rates
        step = int(self.global_step.asnumpy()[0])
        if step >= rates.shape[0]:
            raise ValueError(
                f"{type(self).__name__}: the learning rate list has {rates.shape[0]} steps, "
                f"step {step} needs one more"
            )
        return np.array(rates[step])

    def _states(self) -> tuple:
        """The state `_update` reads and gives back: Parameters or ParameterTuples, in order."""
        return ()

    def _state_arrays(self) -> tuple:
        return tuple(
            tuple(p.asnumpy() for p in s) if isinstance(s, ParameterTuple) else s.asnumpy() for s in self._states()
        )

    def _weight_arrays(self) -> tuple:
        return tuple(p.asnumpy() for p in self.parameters)

    # -- one step ---------------------------------------------------------------------

    def _update(self, weights, gradients, states, lr):
        """The new weights and state (pure, msir-compilable): each optimizer's rule."""
        raise NotImplementedError(f"{type(self).__name__} must define _update()")

    def _prepared_gradients(self, weights, gradients):
        """Weight decay on the decayed parameters, then the loss scale undone."""
        out = []
        for i in range(len(weights)):
            g = gradients[i]
            if self.exec_weight_decay and self.decay_flags[i]:
                g = g + weights[i] * self.weight_decay
            if self.need_scale:
                g = g * (1.0 / self.loss_scale)
            out.append(g)
        return out

    def _donating_update(self, weights, states, gradients, lr):
        """`_update` with the weights and state first, the positions GRAPH_MODE donates."""
        return self._update(weights, gradients, states, lr)

    def _compiled_update(self):
        jitted = vars(self).get("__msir_jit_update")
        if jitted is None:
            from msir.api import JitFunction

            jitted = JitFunction(types.MethodType(Optimizer._donating_update, self), donate_argnums=(0, 1))
            vars(self)["__msir_jit_update"] = jitted
        return jitted

    def _store(self, new_weights, new_states) -> None:
        """Write the step's results into the Parameters' arrays (already there when donated),
        then advance `global_step`."""
        for p, new in zip(self.parameters, new_weights):
            _write(p, new)
        for s, new in zip(self._states(), new_states):
            if isinstance(s, ParameterTuple):
                for p, v in zip(s, new):
                    _write(p, v)
            else:
                _write(s, new)
        self.global_step.asnumpy()[...] += 1

    def _check_gradients(self, gradients: Any) -> tuple:
        grads = tuple(unwrap(tuple(gradients)))
        if len(grads) != len(self.parameters):
            raise ValueError(
                f"{type(self).__name__}: got {len(grads)} gradients for {len(self.parameters)} parameters"
            )
        for p, g in zip(self.parameters, grads):
            if np.shape(g) != p.shape:
                raise ValueError(
                    f"{type(self).__name__}: the gradient of '{p.name}' has shape {np.shape(g)}, "
                    f"the parameter {p.shape}"
                )
        return grads

    def __call__(self, gradients):
        grads = self._check_gradients(gradients)
        lr = self._current_lr()
        weights, states = self._weight_arrays(), self._state_arrays()
        if pynative():
            new_weights, new_states = unwrap(self._update(weights, grads, states, lr))
        else:
            new_weights, new_states = self._compiled_update()(weights, states, grads, lr)
        self._store(new_weights, new_states)
        return True

    def construct(self, gradients):
        return self(gradients)

    def _call_in_compiled_code(self, gradients):
        _refuse_in_compiled_code(self.cls_name)


def _write(p: Parameter, value: Any) -> None:
    array = p.asnumpy()
    value = np.asarray(value)
    if value is not array:
        np.copyto(array, value, casting="same_kind")


def _one_minus_in_float32(value: float) -> float:
    """`1 - value` as MindSpore's float32 kernels compute it (1 - float32(0.999) is
    0.0010000467, not 0.001): a Python float holding that float32 number."""
    return float(np.float32(1.0) - np.float32(value))


def _nonnegative_float(value: Any, what: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: {what} must be a float, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name}: {what} must be at least 0.0, got {value}")
    return float(value)


def _check_betas(beta1: float, beta2: float, eps: float, name: str) -> None:
    for value, what in ((beta1, "beta1"), (beta2, "beta2")):
        if isinstance(value, bool) or not isinstance(value, float) or not 0.0 < value < 1.0:
            raise ValueError(f"{name}: {what} must be a float in (0, 1), got {value!r}")
    if isinstance(eps, bool) or not isinstance(eps, float) or eps <= 0:
        raise ValueError(f"{name}: eps must be a float greater than 0, got {eps!r}")


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, nesterov (mindspore.nn.SGD)."""

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        momentum = _nonnegative_float(momentum, "momentum", "SGD")
        self.dampening = _nonnegative_float(dampening, "dampening", "SGD")
        self.one_minus_dampening = _one_minus_in_float32(self.dampening)
        if not isinstance(nesterov, bool):
            raise TypeError(f"SGD: nesterov must be a bool, got {nesterov!r}")
        if nesterov and (momentum <= 0.0 or self.dampening != 0.0):
            raise ValueError(
                f"SGD: with nesterov, momentum must be > 0.0 and dampening 0.0, "
                f"got momentum {momentum}, dampening {self.dampening}"
            )
        self.nesterov = nesterov
        self.use_momentum = momentum > 0.0
        self.momentum = Parameter(np.array(momentum, np.float32), name="momentum")
        self.momentum_value = momentum
        self._register_state("accum", self.parameters.clone(prefix="accum", init="zeros"))
        self._register_state("stat", self.parameters.clone(prefix="stat", init="ones"))

    def _states(self) -> tuple:
        # without momentum MindSpore's kernel never reads nor writes accum and stat
        return (self.accum, self.stat) if self.use_momentum else ()

    def _update(self, weights, gradients, states, lr):
        gradients = self._prepared_gradients(weights, gradients)
        new_weights = []
        if not self.use_momentum:
            for i in range(len(weights)):
                new_weights.append(weights[i] - lr * gradients[i])
            return new_weights, ()
        accums, stats = states
        new_accums = []
        new_stats = []
        for i in range(len(weights)):
            g = gradients[i]
            stat = stats[i]
            accum = np.where(stat > 0, g, accums[i] * self.momentum_value + self.one_minus_dampening * g)
            g = g + accum * self.momentum_value if self.nesterov else accum
            new_weights.append(weights[i] - lr * g)
            new_accums.append(accum)
            # after every read of `stat`, so that its donated array can take the new value
            new_stats.append(stat * 0.0)
        return new_weights, (new_accums, new_stats)


class Momentum(Optimizer):
    """Gradient descent with momentum (mindspore.nn.Momentum, the ApplyMomentum kernel)."""

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0, use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if isinstance(momentum, bool) or not isinstance(momentum, float):
            raise TypeError(f"Momentum: momentum must be a float, got {type(momentum).__name__}")
        if momentum < 0.0:
            raise ValueError(f"Momentum: momentum must be at least 0.0, got {momentum}")
        if not isinstance(use_nesterov, bool):
            raise TypeError(f"Momentum: use_nesterov must be a bool, got {use_nesterov!r}")
        self.use_nesterov = use_nesterov
        self.momentum = Parameter(np.array(momentum, np.float32), name="momentum")
        self.momentum_value = momentum
        self.params = self.parameters
        self._register_state("moments", self.parameters.clone(prefix="moments", init="zeros"))

    def _states(self) -> tuple:
        return (self.moments,)

    def _update(self, weights, gradients, states, lr):
        gradients = self._prepared_gradients(weights, gradients)
        (moments,) = states
        new_weights = []
        new_moments = []
        for i in range(len(weights)):
            g = gradients[i]
            accum = moments[i] * self.momentum_value + g
            if self.use_nesterov:
                w = weights[i] - g * lr - accum * self.momentum_value * lr
            else:
                w = weights[i] - lr * accum
            new_weights.append(w)
            new_moments.append(accum)
        return new_weights, (new_moments,)


class Adam(Optimizer):
    """Adam with bias correction (mindspore.nn.Adam, the Adam kernel)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, use_locking=False,
                 use_nesterov=False, weight_decay=0.0, loss_scale=1.0, use_amsgrad=False, **kwargs):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        _check_betas(beta1, beta2, eps, "Adam")
        self.one_minus_beta1, self.one_minus_beta2 = _one_minus_in_float32(beta1), _one_minus_in_float32(beta2)
        if use_amsgrad or kwargs.get("use_lazy") or kwargs.get("use_offload"):
            raise UnsupportedSyntaxError("Adam: use_amsgrad, use_lazy and use_offload are not supported yet")
        unknown = set(kwargs) - {"use_lazy", "use_offload"}
        if unknown:
            raise KeyError(f"Adam: unknown keyword arguments {sorted(unknown)}; known: use_lazy, use_offload")
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)
        self.use_locking = bool(use_locking)
        self.use_nesterov = bool(use_nesterov)
        self.beta1_power = Parameter(np.array(1.0, np.float32), name="beta1_power")
        self.beta2_power = Parameter(np.array(1.0, np.float32), name="beta2_power")
        self._register_state("moment1", self.parameters.clone(prefix="moment1", init="zeros"))
        self._register_state("moment2", self.parameters.clone(prefix="moment2", init="zeros"))

    def _states(self) -> tuple:
        return (self.moment1, self.moment2, self.beta1_power, self.beta2_power)

    def _update(self, weights, gradients, states, lr):
        gradients = self._prepared_gradients(weights, gradients)
        moment1, moment2, beta1_power, beta2_power = states
        beta1_power = beta1_power * self.beta1
        beta2_power = beta2_power * self.beta2
        lr_t = lr * np.sqrt(1.0 - beta2_power) / (1.0 - beta1_power)
        new_weights = []
        new_m = []
        new_v = []
        for i in range(len(weights)):
            g = gradients[i]
            m = moment1[i] + (g - moment1[i]) * self.one_minus_beta1
            v = moment2[i] + (g * g - moment2[i]) * self.one_minus_beta2
            step = m * self.beta1 + self.one_minus_beta1 * g if self.use_nesterov else m
            new_weights.append(weights[i] - lr_t * step / (np.sqrt(v) + self.eps))
            new_m.append(m)
            new_v.append(v)
        return new_weights, (new_m, new_v, beta1_power, beta2_power)


class AdamWeightDecay(Optimizer):
    """Adam with decoupled weight decay, no bias correction (mindspore.nn.AdamWeightDecay)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(learning_rate, params, weight_decay)
        _check_betas(beta1, beta2, eps, "AdamWeightDecay")
        self.one_minus_beta1, self.one_minus_beta2 = _one_minus_in_float32(beta1), _one_minus_in_float32(beta2)
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)
        self._register_state("moments1", self.parameters.clone(prefix="adam_m", init="zeros"))
        self._register_state("moments2", self.parameters.clone(prefix="adam_v", init="zeros"))

    def _states(self) -> tuple:
        return (self.moments1, self.moments2)

    def _update(self, weights, gradients, states, lr):
        # MindSpore's AdamWeightDecay decays in the update, not the gradient (no decay_weight call).
        moments1, moments2 = states
        new_weights = []
        new_m = []
        new_v = []
        for i in range(len(weights)):
            g = gradients[i]
            m = moments1[i] + (g - moments1[i]) * self.one_minus_beta1
            v = moments2[i] + (g * g - moments2[i]) * self.one_minus_beta2
            update = m / (np.sqrt(v) + self.eps)
            if self.exec_weight_decay and self.decay_flags[i]:
                update = update + self.weight_decay * weights[i]
            new_weights.append(weights[i] - lr * update)
            new_m.append(m)
            new_v.append(v)
        return new_weights, (new_m, new_v)


__all__ = ["Adam", "AdamWeightDecay", "Momentum", "Optimizer", "SGD"]
