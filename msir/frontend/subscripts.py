"""Subscripts: `value[index]` of tuples, lists, dicts and arrays.

Tuple and list subscripts are compile-time (static ints and slices), so are
dict subscripts (constant keys, read by `msir.frontend.objects`). An array
subscript is NumPy's basic and integer-array indexing: ints, slices,
`None`, `...` and one integer array, lowered to `msir.slice` (a strided
window), `msir.take` (an integer array) and `msir.reshape` (dropped and new
axes). Boolean masks are refused (their result shape depends on the data).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from msir.dialects import msir as M
from msir.errors import MsirIndexError, UnsupportedSyntaxError
from msir.frontend.base import ValueError_
from msir.frontend.state import ObjectValue
from msir.frontend.values import Tensor, kind


class SubscriptsMixin:
    """Subscripts of tuples, lists, dicts and arrays."""

    def index(self, t: Tensor, i: int, node: ast.AST) -> Tensor:
        return self.subscript_value(t, i, node)

    def subscript(self, value: Any, idx_node: ast.expr, node: ast.AST) -> Any:
        idx = self.expr(idx_node)
        if isinstance(value, (tuple, list)):
            if isinstance(idx, slice):
                s = slice(*(None if p is None else self.static_int(p, "a slice bound", node) for p in (idx.start, idx.stop, idx.step)))
                return value[s]
            i = self.static_int(idx, "a tuple index", node)
            if not -len(value) <= i < len(value):
                raise self.error(MsirIndexError, f"tuple index {i} out of range (length {len(value)})", node)
            return value[i]
        if isinstance(value, Tensor):
            return self.subscript_value(value, idx, node)
        if isinstance(value, ObjectValue):
            return self.object_item(value, idx, node)
        raise self.error(UnsupportedSyntaxError, f"cannot index {self.describe(value)}", node)

    def subscript_value(self, t: Tensor, idx: Any, node: ast.AST) -> Tensor:
        items = list(idx) if isinstance(idx, tuple) else [idx]
        n_ellipsis = sum(1 for it in items if it is Ellipsis)
        if n_ellipsis > 1:
            raise self.error(MsirIndexError, "an index can only have a single ellipsis ('...')", node)
        consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
        if consumed > t.ndim:
            raise self.error(
                MsirIndexError,
                f"too many indices for array: array is {t.ndim}-dimensional, but {consumed} were indexed",
                node,
            )
        if n_ellipsis:
            k = next(i for i, it in enumerate(items) if it is Ellipsis)
            items[k : k + 1] = [slice(None)] * (t.ndim - consumed)
        else:
            items += [slice(None)] * (t.ndim - consumed)
        starts, sizes, steps, takes, out_shape = [], [], [], [], []
        axis = 0
        for it in items:
            if it is None:
                out_shape.append(("new", 1))
                continue
            dim = t.shape[axis]
            if isinstance(it, slice):
                bounds = [
                    None if p is None else self.static_int(p, "a slice bound", node)
                    for p in (it.start, it.stop, it.step)
                ]
                if bounds[2] == 0:
                    raise self.error(ValueError_, "slice step cannot be zero", node)
                r = range(*slice(*bounds).indices(dim))
                starts.append(r.start if len(r) else 0)
                sizes.append(len(r))
                steps.append(r.step)
                out_shape.append(("keep", len(r)))
            elif isinstance(it, (int, np.integer)) and not isinstance(it, bool):
                k = int(it)
                if not -dim <= k < dim:
                    raise self.error(
                        MsirIndexError,
                        f"index {k} is out of bounds for axis {axis} with size {dim}",
                        node,
                    )
                starts.append(k % dim)
                sizes.append(1)
                steps.append(1)
                out_shape.append(("drop", 0))
            else:
                if isinstance(it, bool) or (isinstance(it, Tensor) and it.dtype == "bool"):
                    raise self.error(
                        UnsupportedSyntaxError,
                        "boolean mask indexing gives a data-dependent shape and is not supported; "
                        "use np.where(mask, x, 0) instead",
                        node,
                    )
                it_t = self.as_tensor(it, node)
                if kind(it_t.dtype) != 1:
                    raise self.error(
                        MsirIndexError,
                        "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
                        f"integer or boolean arrays are valid indices (got {it_t.dtype})",
                        node,
                    )
                starts.append(0)
                sizes.append(dim)
                steps.append(1)
                takes.append((axis, it_t))
                out_shape.append(("take", it_t.shape))
            axis += 1
        if sum(1 for _, ix in takes if ix.ndim > 0) > 1:
            raise self.error(
                UnsupportedSyntaxError,
                "indexing with more than one integer array is not supported yet",
                node,
            )
        r = t
        if (starts, steps, sizes) != ([0] * t.ndim, [1] * t.ndim, list(t.shape)):
            r = self.tensor(M.SliceOp(t.ssa, starts, sizes, steps), t.weak)
        for ax, ix in sorted(takes, key=lambda p: -p[0]):
            r = self.tensor(M.TakeOp(r.ssa, ix.ssa, ax), t.weak)
            # The take replaced axis `ax` by the index's axes (none for a scalar).
        final: list[int] = []
        for what, v in out_shape:
            if what in ("new", "keep"):
                final.append(v)
            elif what == "take":
                final.extend(v)
        if tuple(final) != r.shape:
            r = self.tensor(M.ReshapeOp(r.ssa, final), t.weak)
        return r
