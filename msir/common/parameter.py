"""`Parameter` and `ParameterTuple`: the trainable state of a network (MindSpore's).

A `Parameter` is a `Tensor` with a `name` and `requires_grad`. Its array can
be replaced (`set_data`) or written in place; compiled code reads it as a
runtime argument at every call (a hidden argument of the compiled function,
`msir.frontend.objects`), so updating a Parameter never recompiles, and
`msir.grad(..., weights=...)` differentiates with respect to it.

Names follow MindSpore: a Parameter created without a name takes the name of
the Cell attribute it is assigned to, and a Cell assigned into another one
prefixes its parameters' names with the attribute's name
(`net.fc1.weight` is named "fc1.weight").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from msir.common.tensor import Tensor, unwrap

PARAMETER_NAME_DEFAULT = "Parameter"


class Parameter(Tensor):
    """`Parameter(default_input, name=None, requires_grad=True)`: `default_input`
    is a Tensor, an array, a number, or an initializer name / `Initializer`
    whose shape comes from the Tensor (MindSpore's `Parameter(initializer(...))`)."""

    def __init__(self, default_input: Any, name: str | None = None, requires_grad: bool = True,
                 layerwise_parallel: bool = False, parallel_optimizer: bool = True):
        if isinstance(default_input, Tensor):
            data = default_input.asnumpy()
        elif isinstance(default_input, (np.ndarray, np.generic)):
            data = np.asarray(default_input)
        elif isinstance(default_input, (bool, int, float)):
            data = Tensor(default_input).asnumpy()
        else:
            raise TypeError(
                f"Parameter: default_input must be a Tensor, a NumPy array or a number, "
                f"got {type(default_input).__name__}"
            )
        self._data = data
        self._name = PARAMETER_NAME_DEFAULT if name is None else _check_name(name)
        self.requires_grad = bool(requires_grad)
        self.layerwise_parallel = layerwise_parallel
        self.parallel_optimizer = parallel_optimizer

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = _check_name(value)

    @property
    def data(self) -> "Parameter":
        """The Parameter itself (MindSpore's `Parameter.data`)."""
        return self

    def value(self) -> Tensor:
        """The current value as a Tensor sharing the array."""
        return Tensor._wrap(self._data)

    def set_data(self, data: Any, slice_shape: bool = False) -> "Parameter":
        """Replace the value by `data` (a Tensor, array or number) of the same
        shape; the dtype becomes this Parameter's. Compiled code reads the new
        value at its next call without compiling again."""
        new = np.asarray(unwrap(data))
        if new.shape != self._data.shape and not slice_shape:
            raise ValueError(
                f"Parameter '{self.name}': set_data got shape {new.shape}, the parameter has shape {self._data.shape}"
            )
        self._data = new.astype(self._data.dtype, copy=False)
        return self

    def assign_value(self, value: Any) -> "Parameter":
        """Write `value` into the parameter's array in place."""
        np.copyto(self.asnumpy(), np.asarray(unwrap(value)), casting="same_kind")
        return self

    def clone(self, init: str = "same") -> "Parameter":
        """A new Parameter with a copy of the value (`init="same"`) or filled by
        the initializer `init`, named as this one."""
        if init == "same":
            data = np.copy(self.asnumpy())
        else:
            from msir.common.initializer import initializer

            data = initializer(init, self.shape, self._data.dtype).asnumpy()
        return Parameter(data, self.name, self.requires_grad)

    def __repr__(self) -> str:
        return (
            f"Parameter (name={self.name}, shape={self.shape}, dtype={self.dtype}, "
            f"requires_grad={self.requires_grad})"
        )

    __str__ = __repr__

    def __reduce__(self):
        return (Parameter, (np.copy(self.asnumpy()), self.name, self.requires_grad))


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a Parameter's name must be a non-empty string, got {name!r}")
    return name


class ParameterTuple(tuple):
    """A tuple of Parameters (what `Cell.trainable_params()` gives to an optimizer)."""

    def __new__(cls, iterable=()):
        items = tuple(iterable)
        for p in items:
            if not isinstance(p, Parameter):
                raise TypeError(f"ParameterTuple holds Parameters, got {type(p).__name__}")
        names = [p.name for p in items]
        duplicated = {n for n in names if names.count(n) > 1 and n != PARAMETER_NAME_DEFAULT}
        if duplicated:
            raise ValueError(f"ParameterTuple: the parameter names {sorted(duplicated)} are not unique")
        return super().__new__(cls, items)

    def clone(self, prefix: str, init: str = "same") -> "ParameterTuple":
        """Copies of the parameters named `prefix.<name>` (optimizer state)."""
        out = []
        for p in self:
            q = p.clone(init)
            q.name = f"{prefix}.{p.name}"
            out.append(q)
        return ParameterTuple(out)
