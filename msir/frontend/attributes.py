"""Attributes: `value.attr` on frontend values.

Array attributes (`.shape`, `.ndim`, `.size`, `.dtype`, `.T`) are known while
tracing; array methods (`x.sum`, `x.reshape`...) become bound methods that
the NumPy handler table calls. A module attribute is a value of an enclosing
scope (`external`), reported to the trace cache's recorder. Attributes of
plain objects are read by `msir.frontend.objects`.
"""

from __future__ import annotations

import ast
import math
import types
from typing import Any

import numpy as np

from msir.dialects import msir as M
from msir.errors import UnsupportedSyntaxError
from msir.frontend.base import AttributeError_
from msir.frontend.numpy_handlers import _ARRAY_METHODS, _BoundMethod
from msir.frontend.state import ObjectValue
from msir.frontend.values import KnownInt, Tensor


def _shape(tr, t: Tensor, node) -> tuple:
    """The shape, a runtime length (of a mask read, an np.arange) as a runtime int64 scalar."""
    return tuple(tr.runtime_count(t, "int64", node) if d == M.DYNAMIC else d for d in t.shape)


def _size(tr, t: Tensor, node):
    if M.DYNAMIC not in t.shape:
        return math.prod(t.shape)
    rest = math.prod(d for d in t.shape if d != M.DYNAMIC)
    return tr.binary("mul", tr.runtime_count(t, "int64", node), rest, node)


ARRAY_ATTRIBUTES = {
    "shape": _shape,
    "ndim": lambda tr, t, node: t.ndim,
    "size": _size,
    "dtype": lambda tr, t, node: np.dtype(t.dtype),
    "T": lambda tr, t, node: tr.transpose(t, None, node),
}
"""The array attributes compiled code reads, known while tracing (`.T` emits a transpose)."""


class AttributesMixin:
    """`value.attr` of arrays, modules, dtypes and objects."""

    def attribute(self, value: Any, attr: str, node: ast.AST) -> Any:
        if isinstance(value, ObjectValue):
            return self.object_attribute(value, attr, node)
        number = _python_number(value)
        if number is not None and not hasattr(number, attr):
            # a Python number is not an array: `1.5 .T` fails in Python
            raise self.error(AttributeError_, f"'{type(number).__name__}' object has no attribute '{attr}'", node)
        if isinstance(value, KnownInt):
            value = value.tensor
        if isinstance(value, Tensor):
            if attr in ARRAY_ATTRIBUTES:
                return ARRAY_ATTRIBUTES[attr](self, value, node)
            if attr in _ARRAY_METHODS:
                return _BoundMethod(value, attr)
            raise self.error(UnsupportedSyntaxError, f"array attribute '.{attr}' is not supported in compiled functions", node)
        if isinstance(value, types.ModuleType):
            if not hasattr(value, attr):
                raise self.error(UnsupportedSyntaxError, f"module '{value.__name__}' has no attribute '{attr}'", node)
            ref = self.tc.recorder.module_attribute(value, attr) if self.tc.recorder is not None else None
            module = value
            value = self.external(
                getattr(module, attr), f"{module.__name__}.{attr}", node, lambda: getattr(module, attr), ref
            )
            return self.localize(value)
        if isinstance(value, np.dtype) and attr in ("name", "type"):
            return getattr(value, attr)
        raise self.error(UnsupportedSyntaxError, f"attribute '.{attr}' of {self.describe(value)} is not supported", node)


def _python_number(value: Any) -> bool | int | float | None:
    """A Python number of the type `value` has in the user's program, if it
    is one: a Python int argument (known int) or a weak rank-0 value."""
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, KnownInt):
        return value.value
    if isinstance(value, Tensor) and value.weak and value.ndim == 0:
        return {"bool": True, "int64": 1}.get(value.dtype, 1.0)
    return None
