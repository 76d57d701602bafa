"""The calling convention of compiled functions, on the Python side.

`signature_key(a)` is the part of an argument that selects a compiled version
(dtype and shape of an array, the Python type of a scalar, the structure of a
tuple or list); `Entry` is one compiled version: it flattens the arguments to
the native function's leaves, appends the captured arrays (checking that they
still have the traced type, and that the values read through plain objects
still hold their guards: `STALE` otherwise) and rebuilds the results'
structure. Shared by `msir.api.JitFunction` and the compiled `msir.vjp`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from msir.common.tensor import TracedTensorRead, is_traced
from msir.tree import leaves


class EagerArgument(Exception):
    """Raised by `signature_key` for a PyNative tracer: a jitted function called inside an
    eager transformation runs eagerly, so that the transformation sees its ops."""


def signature_key(a: Any) -> Any:
    """What of argument `a` selects a compiled version (see the module docstring)."""
    t = type(a)
    if t is np.ndarray:
        return (a.dtype, a.shape)
    if t is float or t is int or t is bool:
        return t
    if t is tuple or t is list:
        return (t, tuple(signature_key(x) for x in a))
    if isinstance(a, np.generic):  # np.float64 included: it is strongly typed
        return (a.dtype, ())
    if a is None or t is str:
        return ("const", a)
    from msir.eager.tracer import Tracer

    if isinstance(a, Tracer):
        raise EagerArgument
    from msir.frontend.driver import spec_of

    return spec_of(a)  # raises a DTypeError naming the type


STALE = object()
"""What `Entry.call` returns when a captured array no longer has its traced type."""


@dataclass
class Entry:
    native: Any
    traced: Any
    n_leaves: int
    checked: bool = False

    def __post_init__(self):
        # Arguments without tuples, lists or constants are passed as they are.
        self.flat = all(spec[0] in ("array", "float", "int", "bool") for spec in self.traced.arg_specs)
        # np.dtype objects: comparing them is ~50x faster than reading a dtype's .name (NumPy 2)
        self.capture_types = [(c, np.dtype(c.dtype), c.shape) for c in self.traced.captures]

    def call(self, args: tuple) -> Any:
        # Guards (msir.trace_cache.Guard) are known to hold at the first call: the entry was
        # just traced, or its manifest checked; a value that changes at every read then runs once.
        if self.checked and not all(g.holds() for g in self.traced.guards):
            return STALE
        self.checked = True
        if self.flat:
            inputs = list(args)
        else:
            inputs = []
            leaves(args, inputs)
        for c, dtype, shape in self.capture_types:
            value = c.get()
            if is_traced(value):
                raise TracedTensorRead
            if not isinstance(value, np.ndarray) or value.shape != shape or (
                value.dtype != dtype and value.dtype.name != c.dtype
            ):
                return STALE
            inputs.append(value)
        outs = self.native(*inputs)
        if self.traced.writes:
            self.write_parameters(inputs, outs)
        return self.rebuild(self.traced.out_structure, outs)

    def write_parameters(self, inputs: list, outs) -> None:
        """Copy the new values of the Parameters the code assigned (its last
        results) into their arrays (the captures they were read from), in place
        as MindSpore's Graph mode updates them."""
        first = len(outs) - len(self.traced.writes)
        for k, capture in enumerate(self.traced.writes):
            np.copyto(inputs[self.n_leaves + capture], outs[first + k])

    def rebuild(self, structure, outs):
        """The results of the native call `outs` in the traced function's result structure."""
        kind, payload = structure
        if kind == "leaf":
            arr = outs[payload]
            if arr.ndim == 0:
                return arr.item() if self.traced.out_weak[payload] else arr[()]
            return arr
        if kind == "tuple":
            return tuple(self.rebuild(s, outs) for s in payload)
        if kind == "list":
            return [self.rebuild(s, outs) for s in payload]
        return payload
