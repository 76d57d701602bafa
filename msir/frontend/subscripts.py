"""Subscripts: `value[index]` of tuples, lists, dicts and arrays.

Tuple and list subscripts are compile-time (static ints and slices), so are
dict subscripts (constant keys, read by `msir.frontend.objects`). An array
subscript is NumPy's basic and integer-array indexing: ints, slices,
`None`, `...` and one integer array, lowered to `msir.slice` (a strided
window), `msir.take` (an integer array) and `msir.reshape` (dropped and new
axes). A boolean mask of the array's leading dims, alone in the index, is
`msir.compress`: its result's first dim is only known at run time (see
`msir.frontend.masks`); masks mixed with other indices are refused.

Runtime lengths. A first dim of runtime size comes from one source: the
`msir.compress` of a mask read or the `msir.ramp` of an `np.arange` with
runtime bounds (`length_source`). Values of one source combine
elementwise (masks computed alike, or counts computed alike, are one
source); a static operand repeats along the runtime dim (compressed by the
mask, or a ramp of step zero); values of two sources are refused, since
their lengths cannot be proved equal. Such an axis is indexed only whole
(`:`, `None` beside it) or by an integer array, and is not iterated over.

A slice with a runtime start and a length known at compile time (`x[i:i + k]`,
`x[i - 1:i + 2]`, with `i` a runtime scalar such as a loop counter) is a
window, as JAX's `dynamic_slice`: the frontend proves the length static when
the bounds are the same expression plus compile-time offsets, and reads the
window with `msir.take` of `start + iota(k)` (so it differentiates: the
adjoint scatters back). A window must lie inside the axis: a start below 0
or past `size - k` is an IndexError at the subscript's line at run time
(`msir.check`; JAX would clamp the start, Python would return a shorter
slice, neither of which a static shape allows). Steps other than 1 are refused.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import numpy as np

from xdsl.ir import OpResult, SSAValue

from msir.dialects import msir as M
from msir.errors import MsirIndexError, ShapeError, UnsupportedSyntaxError
from msir.frontend import masks
from msir.frontend.base import ValueError_
from msir.frontend.state import ObjectValue
from msir.frontend.values import Tensor, kind


@dataclass(frozen=True)
class Window:
    """A slice `start:start + length` of an array axis with a runtime start."""

    start: Tensor
    length: int


def _base_and_offset(node: ast.expr) -> tuple[str, ast.expr | None, int]:
    """`e + c` / `e - c` / `c + e` as (the AST of e, dumped; c's AST; its sign), else (e, None, 0)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        sign = 1 if isinstance(node.op, ast.Add) else -1
        if not isinstance(node.left, ast.Constant) or isinstance(node.op, ast.Sub):
            return ast.dump(node.left), node.right, sign
        return ast.dump(node.right), node.left, 1
    return ast.dump(node), None, 0


def _is_mask(it: Any) -> bool:
    return isinstance(it, Tensor) and it.dtype == "bool" and it.ndim > 0


def _runtime_length(shape: tuple[int, ...]) -> bool:
    """Whether `shape` is that of a mask read: a runtime first dim, the rest static."""
    return bool(shape) and shape[0] == M.DYNAMIC and M.DYNAMIC not in shape[1:]


def _same_value(a: SSAValue, b: SSAValue) -> bool:
    """Whether `a` and `b` are one value, or results of pure ops computed alike
    from the same values (`x > 0` written twice)."""
    if a is b:
        return True
    if not (isinstance(a, OpResult) and isinstance(b, OpResult)) or a.index != b.index:
        return False
    x, y = a.owner, b.owner
    return (type(x) is type(y) and not x.regions and not y.regions and x.properties == y.properties
            and x.attributes == y.attributes and len(x.operands) == len(y.operands)
            and all(_same_value(p, q) for p, q in zip(x.operands, y.operands)))


def _same_length(a: M.CompressOp | M.RampOp, b: M.CompressOp | M.RampOp) -> bool:
    """Whether two length sources give one runtime length: the same mask, or the same count."""
    if type(a) is not type(b):
        return False
    return _same_value(a.mask, b.mask) if isinstance(a, M.CompressOp) else _same_value(a.count, b.count)


class SubscriptsMixin:
    """Subscripts of tuples, lists, dicts and arrays."""

    def window_length(self, lower: ast.expr, upper: ast.expr, node: ast.AST) -> int | None:
        """`upper - lower` when both are one expression plus compile-time offsets (`i`, `i + k`), else None."""
        base_lo, off_lo, sign_lo = _base_and_offset(lower)
        base_hi, off_hi, sign_hi = _base_and_offset(upper)
        if base_lo != base_hi:
            return None
        lo = 0 if off_lo is None else sign_lo * self.static_int(self.expr(off_lo), "a slice offset", node)
        hi = 0 if off_hi is None else sign_hi * self.static_int(self.expr(off_hi), "a slice offset", node)
        return hi - lo

    def windows(self, idx_node: ast.expr, idx: Any, node: ast.AST) -> Any:
        """`idx` with each slice whose start is runtime and whose length is static as a `Window`."""
        nodes = idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node]
        items = list(idx) if isinstance(idx_node, ast.Tuple) else [idx]
        for k, (n, it) in enumerate(zip(nodes, items)):
            if not (isinstance(n, ast.Slice) and isinstance(it, slice) and isinstance(it.start, Tensor)):
                continue
            if n.upper is None:
                continue
            if n.step is not None and not (isinstance(it.step, int) and it.step == 1):
                raise self.error(UnsupportedSyntaxError, "a slice with a runtime start takes step 1", n)
            length = self.window_length(n.lower, n.upper, n)
            if length is None:
                raise self.error(UnsupportedSyntaxError, "a slice with a runtime start needs a length known at "
                                 "compile time: write its stop as the start plus a constant (x[i:i + k])", n)
            if length < 0:
                raise self.error(MsirIndexError, f"the slice {ast.unparse(n)} has a negative length ({length})", n)
            if it.start.ndim != 0 or kind(it.start.dtype) != 1:
                raise self.error(MsirIndexError, f"a slice start must be an integer scalar, got "
                                 f"{self.describe(it.start)}", n)
            items[k] = Window(it.start, length)
        return tuple(items) if isinstance(idx_node, ast.Tuple) else items[0]

    def read_window(self, t: Tensor, axis: int, w: Window, node: ast.AST) -> Tensor:
        """Axis `axis` of `t` narrowed to the window, its bounds checked at run time."""
        dim = t.shape[axis]
        if w.length > dim:
            raise self.error(MsirIndexError, f"a window of {w.length} does not fit axis {axis} with size {dim}", node)
        start = self.cast(w.start, "int64", False)
        inside = self.binary("and", self.compare("ge", start, 0, node),
                             self.compare("le", start, dim - w.length, node), node)
        message = f"slice start {{0}} is out of bounds for a window of {w.length} on axis {axis} with size {dim}"
        self.emit(M.CheckOp(inside.ssa, "IndexError", message, [start.ssa], [0]))
        offsets = self.tensor(M.IotaOp(0, M.tensor_type((w.length,), "int64")))
        idx = self.elementwise("add", self.broadcast(start, (w.length,)), offsets, node)
        return self.tensor(M.TakeOp(t.ssa, idx.ssa, axis), t.weak)

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
            return self.subscript_value(value, self.windows(idx_node, idx, node), node)
        if isinstance(value, ObjectValue):
            return self.object_item(value, idx, node)
        raise self.error(UnsupportedSyntaxError, f"cannot index {self.describe(value)}", node)

    def read_mask(self, t: Tensor, items: list, node: ast.AST) -> Tensor:
        """`x[mask]` (also `x[mask, ...]`, `x[mask, :]`) as `msir.compress`."""
        if not _is_mask(items[0]) or not all(it is Ellipsis or it == slice(None) for it in items[1:]):
            raise self.error(UnsupportedSyntaxError, masks.MIXED_INDEX, node)
        problem = masks.mask_shape_error(t.shape, items[0].shape)
        if problem is not None:
            raise self.error(MsirIndexError, problem, node)
        return self.tensor(M.CompressOp(t.ssa, items[0].ssa), t.weak)

    def rows(self, t: Tensor, node: ast.AST | None) -> int:
        """The static length of `t`'s first axis, for code that unrolls over it
        (iteration, unpacking, `sum`/`max` of an array); a runtime length is refused."""
        if t.shape[0] == M.DYNAMIC:
            raise self.error(UnsupportedSyntaxError, f"cannot iterate over {self.describe(t)}: its length is known "
                             "only at run time (a boolean-mask read or an np.arange with runtime bounds); use the "
                             "NumPy function (np.sum, np.max...) instead", node)
        return t.shape[0]

    def length_source(self, t: Tensor, node: ast.AST | None) -> M.CompressOp | M.RampOp:
        """The op that gave `t` its runtime length (first dim): the
        `msir.compress` of an `x[mask]` or the `msir.ramp` of an `np.arange`
        with runtime bounds that `t` derives from through ops keeping that dim
        (elementwise ops, casts, reductions of other axes)."""
        v = t.ssa
        while isinstance(v, OpResult) and not isinstance(v.owner, (M.CompressOp, M.RampOp)):
            v = next((o for o in v.owner.operands if _runtime_length(M.shape_of(o.type))), None)
        if not isinstance(v, OpResult):
            raise self.error(ShapeError, "cannot tell which mask or np.arange the runtime length of "
                             f"{self.describe(t)} comes from: only values computed from one x[mask] or "
                             "np.arange in this function combine with other arrays", node)
        return v.owner

    def runtime_count(self, t: Tensor, dtype: str, node: ast.AST | None) -> Tensor:
        """The runtime length of `t` (the true elements of its mask, or its
        np.arange's count) as a 0-d `dtype`."""
        source = self.length_source(t, node)
        if isinstance(source, M.RampOp):
            return self.cast(Tensor(source.count, "int64", (), False), dtype)
        ones = self.cast(Tensor(source.mask, "bool", M.shape_of(source.mask.type), False), "int64")
        return self.cast(self.tensor(M.ReduceSumOp(ones.ssa, tuple(range(ones.ndim)), False)), dtype)

    def align_runtime_lengths(self, a: Tensor, b: Tensor, shape: tuple[int, ...],
                              node: ast.AST | None) -> tuple[Tensor, Tensor]:
        """`a` and `b` broadcast to `shape`, whose first dim is a runtime length (`align_all`)."""
        a2, b2 = self.align_all([a, b], shape, node)
        return a2, b2

    def align_all(self, ts: list[Tensor], shape: tuple[int, ...], node: ast.AST | None) -> list[Tensor]:
        """Each of `ts` broadcast to `shape`, whose first dim is a runtime length.
        Runtime lengths must come from one source (masks computed alike
        count as one, so do np.arange counts), since values of unrelated
        lengths cannot be proved to broadcast. A static operand repeats along
        the runtime dim: for a mask it is broadcast to the mask's shape and
        compressed by it, for an np.arange it is a `msir.ramp` of step zero
        with the arange's count."""
        if not _runtime_length(shape):
            raise self.error(ShapeError, f"cannot broadcast shape {M.fmt_shape(shape)}: only the first dim "
                             "of an array may have a runtime size", node)
        runtime = [t for t in ts if _runtime_length(t.shape) and t.ndim == len(shape)]
        sources = [self.length_source(t, node) for t in runtime]
        for t, other in zip(runtime[1:], sources[1:]):
            if not _same_length(sources[0], other):
                kinds = {type(sources[0]), type(other)}
                what = ("masks" if kinds == {M.CompressOp} else "np.arange calls" if kinds == {M.RampOp}
                        else "sources")
                fix = "index both with one mask" if what == "masks" else "compute both from one np.arange or one mask"
                raise self.error(ShapeError, f"cannot broadcast {self.describe(runtime[0])} with {self.describe(t)}: "
                                 f"their runtime lengths come from different {what}; {fix}", node)
        source = sources[0]
        out = []
        for t in ts:
            if _runtime_length(t.shape) and t.ndim == len(shape):
                out.append(self.broadcast(t, shape))
                continue
            if t.ndim == len(shape):  # its first dim is 1: it repeats along the selected rows
                t = self.tensor(M.ReshapeOp(t.ssa, list(t.shape[1:])), t.weak)
            if isinstance(source, M.RampOp):
                out.append(self.repeat_rows(t, shape, source.count, node))
                continue
            mask = source.mask
            full = self.broadcast(t, (*M.shape_of(mask.type), *shape[1:]))
            out.append(self.tensor(M.CompressOp(full.ssa, mask), t.weak))
        return out

    def repeat_rows(self, t: Tensor, shape: tuple[int, ...], count: SSAValue, node: ast.AST | None) -> Tensor:
        """`t` broadcast to `shape[1:]`, repeated `count` times along a new first
        dim: a `msir.ramp` of step zero (booleans as int32 compared with 0,
        since a ramp computes)."""
        row = self.broadcast(t, shape[1:])
        if row.dtype == "bool":
            ints = self.repeat_rows(self.cast(row, "int32"), shape, count, node)
            zeros = self.repeat_rows(self.constant(0, "int32"), shape, count, node)
            return self.tensor(M.CompareOp("ne", ints.ssa, zeros.ssa), t.weak)
        zeros = self.full(row.shape, 0, row.dtype, node)
        return self.tensor(M.RampOp(row.ssa, zeros.ssa, count), t.weak)

    def subscript_value(self, t: Tensor, idx: Any, node: ast.AST) -> Tensor:
        items = list(idx) if isinstance(idx, tuple) else [idx]
        if any(_is_mask(it) for it in items):
            return self.read_mask(t, items, node)
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
        windows: list[tuple[int, Window]] = []
        axis = 0
        for it in items:
            if it is None:
                out_shape.append(("new", 1))
                continue
            dim = t.shape[axis]
            if dim == M.DYNAMIC and it != slice(None) and (isinstance(it, (slice, Window, int, np.integer))):
                raise self.error(UnsupportedSyntaxError, f"axis {axis} has a runtime length (a boolean-mask read "
                                 "or an np.arange with runtime bounds): it can be indexed only whole (`:`) or by "
                                 "an integer array", node)
            if isinstance(it, Window):
                starts.append(0)
                sizes.append(dim)
                steps.append(1)
                windows.append((axis, it))
                out_shape.append(("keep", it.length))
            elif it == slice(None) and dim == M.DYNAMIC:  # a runtime length, kept whole
                starts.append(0)
                sizes.append(dim)
                steps.append(1)
                out_shape.append(("keep", dim))
            elif isinstance(it, slice):
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
        for ax, w in windows:  # before the takes, which may drop axes
            r = self.read_window(r, ax, w, node)
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
