"""`ops.GradOperation`: MindSpore's older grad API, on `msir.grad`.

    grad_op = ops.GradOperation(get_all=False, get_by_list=False, sens_param=False)
    gradient_function = grad_op(net, weights)      # weights: with get_by_list
    gradients = gradient_function(*inputs)         # (*inputs, sens) with sens_param

What the gradient function returns, as MindSpore's does:

* neither flag: the gradient of the first input;
* `get_all`: a tuple, the gradient of every input;
* `get_by_list`: a tuple, the gradient of every Parameter of `weights`;
* both: `(gradients of the inputs, gradients of the weights)`.

The differentiated value is the network's output weighted by the
sensitivity: with `sens_param` the last argument is the output's cotangent
(`sum(output * sens)` is differentiated), without it the cotangent is ones
(`sum(output)`), so that an output of any shape has a gradient, as in
MindSpore. The output must be one tensor (not a tuple).

It uses the public API (`msir.grad`, loaded lazily by `msir/__init__`), so
that `msir.ops` can expose it without importing the compiler.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

import msir
from msir.errors import MsirError, UnsupportedSyntaxError
from msir.transforms import compiled_call_name


class GradOperation:
    """A higher-order function making gradient functions (mindspore.ops.GradOperation)."""

    def __init__(self, get_all: bool = False, get_by_list: bool = False, sens_param: bool = False):
        self.get_all = bool(get_all)
        self.get_by_list = bool(get_by_list)
        self.sens_param = bool(sens_param)

    def __call__(self, fn, weights=None) -> "GradientFunction":
        if self.get_by_list and weights is None:
            raise TypeError("GradOperation(get_by_list=True)(fn, weights): give the Parameters to differentiate")
        return GradientFunction(self, fn, weights if self.get_by_list else None)


class GradientFunction:
    """What `GradOperation(...)(fn, weights)` returns: call it on the inputs (and the sensitivity)."""

    def __init__(self, op: GradOperation, fn, weights):
        self.op = op
        self.fn = fn
        self.weights = weights
        self._by_arity: dict[int, Any] = {}

    def __call__(self, *args):
        n_inputs = len(args) - 1 if self.op.sens_param else len(args)
        if n_inputs < 1 and not self.op.get_by_list:
            raise TypeError("GradOperation: the gradient function needs at least one input")
        grad_fn = self._by_arity.get(len(args))
        if grad_fn is None:
            if self.op.get_all:
                position = tuple(range(n_inputs))
            else:
                position = None if self.op.get_by_list else 0
            weighted = WeightedOutput(self.fn, n_inputs, self.op.sens_param)
            grad_fn = msir.grad(weighted, position, self.weights)
            self._by_arity[len(args)] = grad_fn
        return grad_fn(*args)


class WeightedOutput:
    """`fn`'s output weighted by a sensitivity, summed: `sum(fn(*inputs) * sens)`
    called with `(*inputs, sens)`, or `sum(fn(*inputs))` without `sens`. Compiled
    code translates it through `__msir_translate__`; Python calls it directly."""

    def __init__(self, fn, n_inputs: int, with_sens: bool):
        self.fn = fn
        self.n_inputs = n_inputs
        self.with_sens = with_sens
        self.__name__ = f"weighted_{getattr(fn, '__name__', type(fn).__name__)}"
        names = [f"input{i}" for i in range(n_inputs)] + (["sens"] if with_sens else [])
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
        )

    def __call__(self, *args):
        out = self.fn(*args[: self.n_inputs])
        _check_one_output(out)
        return np.sum(out * args[-1]) if self.with_sens else np.sum(out)

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        out = tr.call_value(self.fn, list(args[: self.n_inputs]), kwargs, node)
        _check_one_output(out)
        if self.with_sens:
            out = tr.call_value(np.multiply, [out, args[-1]], {}, node)
        return tr.call_value(np.sum, [out], {}, node)


class SumOfOutputs:
    """What `msir.grad` / `msir.value_and_grad` differentiate when called on
    Tensors (MindSpore's form, `msir.api.Transformed`): `fn`'s outputs
    summed, every element of every output (a sensitivity of ones, as
    MindSpore's grad uses), or of the first only with `has_aux`; returned
    with the outputs themselves, `(total, outputs)`, so that the caller gives
    back the outputs (the value, the auxiliary outputs). Python calls give
    `fn` Tensors; compiled code translates it through `__msir_translate__`."""

    def __init__(self, fn, has_aux: bool):
        self.fn = fn
        self.has_aux = has_aux
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        runs = getattr(fn, compiled_call_name(fn)) if hasattr(type(fn), "__msir_call__") else fn
        try:
            self.__signature__ = inspect.signature(runs)  # a Cell's: its construct's
        except (TypeError, ValueError):
            pass

    def _summed(self, outputs: Any) -> list:
        if self.has_aux:
            if not isinstance(outputs, (tuple, list)) or len(outputs) < 2:
                raise _aux_error()
            return [outputs[0]]
        leaves: list = []
        _leaves_of(outputs, leaves)
        return leaves

    def __call__(self, *args):
        from msir.common.tensor import unwrap, wrap

        outputs = self.fn(*wrap(args))
        parts = [np.sum(x) for x in self._summed(outputs)]
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        return unwrap((total, outputs))

    def __msir_translate__(self, tr, args: list, kwargs: dict, node) -> Any:
        outputs = tr.call_value(self.fn, list(args), kwargs, node)
        total = None
        for x in self._summed(outputs):
            part = tr.call_value(np.sum, [x], {}, node)
            total = part if total is None else tr.call_value(np.add, [total, part], {}, node)
        return total, outputs


def _leaves_of(value: Any, out: list) -> None:
    if isinstance(value, (tuple, list)):
        for v in value:
            _leaves_of(v, out)
    elif value is not None:
        out.append(value)


def _aux_error() -> "GradArgumentError":
    return GradArgumentError("with has_aux=True the function must return more than one output (output, aux...)")


class GradArgumentError(MsirError, ValueError):
    """A function whose outputs do not fit how it is differentiated."""


def _check_one_output(out: Any) -> None:
    if isinstance(out, (tuple, list)):
        raise UnsupportedSyntaxError(
            f"GradOperation differentiates a function with one output; this one returns {len(out)} "
            "(use msir.grad(fn, has_aux=True) to differentiate the first and return the others)"
        )
