"""Names: reading variables, and values of enclosing scopes.

A name resolves in the function's own scope, then its closure cells, its
globals, the builtins. What an enclosing scope holds is compile-time, except
arrays: they become hidden runtime arguments of the entry function
(`Capture`, read again at every call), threaded into outlined functions as
extra parameters (`localize`). Every name resolved outside the traced code is
reported to the trace cache's recorder (its dependency manifest). Objects
and dicts become `ObjectValue`s, read through the path they were reached by
(`msir.frontend.objects`).
"""

from __future__ import annotations

import ast
import builtins
import types
from typing import Any

import numpy as np
from xdsl.ir import BlockArgument

from msir.dialects import msir as M
from msir.errors import MsirNameError, UnsupportedSyntaxError
from msir.common.tensor import Tensor as UserTensor
from msir.frontend.objects import array_of, is_method_of_object
from msir.frontend.state import Capture, MethodValue, Path, _Undefined
from msir.frontend.values import Closure, KnownInt, Tensor, dtype_name
from msir.trace_cache import is_plain_object


class NamesMixin:
    """Name lookup, enclosing-scope values and captured arrays."""

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            v = self.scope[name]
            if isinstance(v, _Undefined):
                raise self.error(UnsupportedSyntaxError, f"variable '{name}' {v.why}", node)
            return self.localize(v)
        ref = None
        if self.tc.recorder is not None:
            ref = self.tc.recorder.resolved(self.closure, self.globals, name)
        if name in self.closure:
            return self.localize(self.external(self.closure[name], name, node, ref=ref))
        if name in self.globals:
            return self.localize(self.external(self.globals[name], name, node, lambda: self.globals[name], ref))
        if hasattr(builtins, name):
            return getattr(builtins, name)
        error = self.error(MsirNameError, f"name '{name}' is not defined", node)
        error.name = name
        raise error

    def localize(self, value: Any) -> Any:
        """A value of an enclosing function, made a parameter of this outlined one."""
        if isinstance(value, Tensor):
            owner = value.ssa.block if isinstance(value.ssa, BlockArgument) else value.ssa.owner.parent_block()
            owner = self.tc.block_fn.get(owner, owner)
            if owner is self.fn_block or self.fn_block not in self.tc.fn_captures:
                return value
            mapping, order = self.tc.fn_captures[self.fn_block]
            if value.ssa not in mapping:
                arg = self.fn_block.insert_arg(value.ssa.type, len(self.fn_block.args))
                arg.name_hint = value.ssa.name_hint
                mapping[value.ssa] = Tensor(arg, value.dtype, value.shape, value.weak)
                order.append(value)
            return mapping[value.ssa]
        if isinstance(value, KnownInt):
            return KnownInt(value.value, value.deps, self.localize(value.tensor))
        if isinstance(value, tuple):
            return tuple(self.localize(v) for v in value)
        if isinstance(value, list):
            return [self.localize(v) for v in value]
        return value

    def external(self, value: Any, name: str, node: ast.AST, getter=None, ref: list | None = None) -> Any:
        """A value from an enclosing scope: arrays become hidden runtime arguments,
        objects and dicts values read through `getter` (`ref`: the trace cache
        recorder's reference to the value)."""
        if isinstance(value, Closure):
            return value
        if isinstance(value, types.CellType):
            cell = value
            value = cell.cell_contents
            getter = lambda: cell.cell_contents  # noqa: E731
        if isinstance(value, np.ndarray):
            return self.capture(value, name, getter or (lambda: value), node)
        if isinstance(value, UserTensor):
            outer = getter or (lambda: value)
            return self.tensor_value(value, name, lambda: array_of(outer()), node)
        if isinstance(value, (tuple, list)) and any(_holds_values_to_read(v) for v in value):
            outer = getter or (lambda: value)
            items = [
                self.external(v, f"{name}_{i}", node, (lambda i=i: outer()[i]), None if ref is None else ["i", ref, i])
                for i, v in enumerate(value)
            ]
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, np.generic):
            return self.constant(value.item(), dtype_name(value.dtype), weak=False)
        if isinstance(value, dict) or is_plain_object(value):
            return self.object_value(value, Path(getter or (lambda: value), name, ref))
        if is_method_of_object(value):
            outer = getter or (lambda: value)
            owner = Path(lambda: outer().__self__, f"{name}.__self__", None if ref is None else ["a", ref, "__self__"])
            return MethodValue(self.object_value(value.__self__, owner), value.__func__, value.__name__)
        return value

    def capture(self, value: np.ndarray, name: str, getter, node) -> Tensor:
        for i, c in enumerate(self.tc.captures):
            # the name first: a getter may draw random numbers (msir.nn's Dropout), read only at calls
            if c.name == name and c.get() is value:
                return self.tc.capture_values[i]
        dtype = dtype_name(value.dtype, self.source.loc(node))
        assert self.tc.entry_block is not None
        arg = self.tc.entry_block.insert_arg(M.tensor_type(value.shape, dtype), len(self.tc.entry_block.args))
        arg.name_hint = name
        t = Tensor(arg, dtype, tuple(value.shape))
        self.tc.capture_values[len(self.tc.captures)] = t
        self.tc.captures.append(Capture(getter, name, dtype, tuple(value.shape)))
        return t


def _holds_values_to_read(v: Any) -> bool:
    """Is `v` an item that makes a tuple or list be read item by item?"""
    return isinstance(v, (np.ndarray, UserTensor, tuple, list, dict)) or is_plain_object(v) or is_method_of_object(v)
