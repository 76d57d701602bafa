"""`NumpyBuilder`: the rules' `Builder` interface (`msir.passes.grad_rules`)
computed on NumPy arrays, for the eager path and for checking the rules.

Semantics are those the compiled code has (see `convert-msir-to-loops`), which
are NumPy's: floor division and remainder round toward -inf, maximum/minimum
propagate NaN, `take` and `scatter_add` wrap negative indices. Every result is an
`ndarray` of the operands' dtype (rank 0 gives a 0-d array, never a NumPy
scalar), so float32 code stays float32 as it does in compiled code.

Half precision (float16, bfloat16) computes as the CPU target does
(`msir.lowering.widen_half`): ufuncs are NumPy's (one float32 evaluation and
one rounding each); sums, products, means, matmuls and einsums accumulate in
float32 and round once, where NumPy would round after every addition along a
non-contiguous axis and ml_dtypes' bfloat16 after every one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from msir.dialects import primitives
from msir.lowering import blas
from msir.passes import window_algebra


def _arr(x) -> np.ndarray:
    """Ufuncs return NumPy scalars for 0-d inputs; the builder's values are arrays."""
    return np.asarray(x)


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer power as compiled code computes it: a negative exponent (an error in
    NumPy) gives the integer part of the real power: 1 for base 1, +-1 for base -1,
    else 0."""
    neg = b < 0
    out = np.power(a, np.where(neg, 0, b))
    if not neg.any():
        return out
    odd = (b % 2) != 0
    at_neg = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
    return np.where(neg, at_neg, out)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a, b) if a.dtype.kind == "f" else _int_pow(a, b)


def _strided(starts: Sequence[int], sizes: Sequence[int], steps: Sequence[int]) -> tuple[slice, ...]:
    """Python slices selecting `start + k*step` for `k < size` (a negative stop
    would mean "from the end" to Python, so it becomes None)."""
    out = []
    for start, size, step in zip(starts, sizes, steps):
        stop = start + size * step
        out.append(slice(start, stop if stop >= 0 else None, step))
    return tuple(out)


MAX_SCATTER_ROWS = 1024
"""`scatter_add` adds row by row (see `_distinct_rows`) up to this many rows of
its index table; more rows, each a Python-level step, go to `np.add.at`."""


def _distinct_rows(idx: np.ndarray, size: int) -> np.ndarray | None:
    """`idx` (rank >= 1) as rows along its last axis, negative indices wrapped,
    when every row holds distinct indices (im2col's tables: one row per tap)
    and there are at most `MAX_SCATTER_ROWS` rows; else None."""
    if idx.ndim == 0 or idx.size == 0 or idx.dtype.kind not in "iu":
        return None
    rows = idx.reshape(-1, idx.shape[-1])
    if len(rows) > MAX_SCATTER_ROWS:
        return None
    rows = np.where(rows < 0, rows + size, rows)
    ordered = np.sort(rows, axis=1)
    return None if (ordered[:, 1:] == ordered[:, :-1]).any() else rows


class NumpyBuilder:
    """Implements `grad_rules.Builder` by computing on NumPy arrays."""

    # -- types ----------------------------------------------------------------

    def shape(self, x) -> tuple[int, ...]:
        return tuple(np.shape(x))

    def dtype(self, x) -> str:
        return np.asarray(x).dtype.name

    # -- ops ------------------------------------------------------------------

    def constant(self, value: float, dtype: str, shape: Sequence[int] = ()) -> np.ndarray:
        return np.full(tuple(shape), value, dtype=dtype)

    def iota(self, dtype: str, shape: Sequence[int], axis: int) -> np.ndarray:
        along = [1] * len(shape)
        along[axis] = shape[axis]
        return np.array(np.broadcast_to(np.arange(shape[axis], dtype=dtype).reshape(along), tuple(shape)))

    _UNARY = {**{p.name: p.numpy for p in primitives.UNARY}, "stop_gradient": np.copy}
    _BINARY = {**{p.name: p.numpy for p in primitives.BINARY if p.numpy is not None}, "pow": _pow}
    _COMPARE = {
        "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal,
    }
    _REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod, "mean": np.mean}

    # Rules compute both sides of a select (log(a) where a may be 0, then masked),
    # as compiled code does, so NumPy's floating-point warnings are only noise.

    def unary(self, name: str, x) -> np.ndarray:
        with np.errstate(all="ignore"):
            return _arr(self._UNARY[name](_arr(x)))

    def binary(self, name: str, a, b) -> np.ndarray:
        a, b = _arr(a), _arr(b)
        with np.errstate(all="ignore"):
            return _arr(self._BINARY[name](a, b)).astype(a.dtype, copy=False)

    def compare(self, pred: str, a, b) -> np.ndarray:
        a, b = _arr(a), _arr(b)
        if a.dtype.name == "bfloat16":  # ml_dtypes warns on NaN, which NumPy's own floats do not
            with np.errstate(invalid="ignore"):
                return _arr(self._COMPARE[pred](a, b))
        return _arr(self._COMPARE[pred](a, b))

    def select(self, c, a, b) -> np.ndarray:
        return _arr(np.where(c, a, b))

    def cast(self, x, dtype: str) -> np.ndarray:
        x = _arr(x)
        if dtype == "bool":
            return x != 0
        return x.astype(dtype)

    def broadcast_to(self, x, shape: Sequence[int]) -> np.ndarray:
        # A copy, not NumPy's read-only view, so that results are ordinary arrays.
        return np.array(np.broadcast_to(_arr(x), tuple(shape)))

    def reshape(self, x, shape: Sequence[int]) -> np.ndarray:
        return np.reshape(_arr(x), tuple(shape))

    def transpose(self, x, perm: Sequence[int]) -> np.ndarray:
        return np.transpose(_arr(x), tuple(perm))

    def reduce(self, name: str, x, axes: Sequence[int], keepdims: bool) -> np.ndarray:
        x = _arr(x)
        if not axes:
            return x
        accumulate = np.float32 if x.dtype.name in primitives.HALF else x.dtype
        kwargs = {"dtype": accumulate} if name in ("sum", "prod", "mean") else {}
        return _arr(self._REDUCE[name](x, axis=tuple(axes), keepdims=keepdims, **kwargs)).astype(x.dtype, copy=False)

    def matmul(self, a, b) -> np.ndarray:
        a, b = _arr(a), _arr(b)
        if a.dtype.name in primitives.HALF:
            return _arr(np.matmul(a.astype(np.float32), b.astype(np.float32))).astype(a.dtype)
        out = blas.matmul(a, b)
        return _arr(np.matmul(a, b)) if out is None else out

    def einsum(self, spec: str, xs: Sequence) -> np.ndarray:
        xs = [_arr(x) for x in xs]
        half = xs[0].dtype if xs[0].dtype.name in primitives.HALF else None
        if half is not None:
            xs = [x.astype(np.float32) for x in xs]
        # optimize=True contracts through BLAS (tensordot) instead of NumPy's
        # element loop; a transpose or diagonal comes back as a view, copied so
        # that results are ordinary arrays.
        out = _arr(np.einsum(spec, *xs, optimize=True))
        if half is not None:
            return out.astype(half)
        return out.copy() if any(np.may_share_memory(out, x) for x in xs) else out

    def slice(self, x, starts: Sequence[int], sizes: Sequence[int], steps: Sequence[int]) -> np.ndarray:
        return _arr(x)[_strided(starts, sizes, steps)].copy()

    def scatter_slice(self, x, starts: Sequence[int], steps: Sequence[int], shape: Sequence[int]) -> np.ndarray:
        x = _arr(x)
        out = np.zeros(tuple(shape), x.dtype)
        out[_strided(starts, x.shape, steps)] = x
        return out

    def take(self, x, idx, axis: int) -> np.ndarray:
        return _arr(np.take(_arr(x), _arr(idx), axis=axis))

    def scatter_add(self, u, idx, axis: int, shape: Sequence[int]) -> np.ndarray:
        u, idx = _arr(u), _arr(idx)
        out = np.zeros(tuple(shape), u.dtype)
        lead = (slice(None),) * axis
        rows = _distinct_rows(idx, shape[axis])
        if rows is None:
            np.add.at(out, lead + (idx,), u)
            return out
        # each row's indices are distinct, so a buffered `+=` adds every element once,
        # in the order np.add.at would (same bits), an order of magnitude faster
        parts = u.reshape(tuple(shape[:axis]) + rows.shape + tuple(shape[axis + 1:]))
        for r, row in enumerate(rows):
            out[lead + (row,)] += parts[lead + (r,)]
        return out

    def compress(self, x, mask) -> np.ndarray:
        return _arr(x)[_arr(mask)]

    def expand(self, u, mask, shape: Sequence[int]) -> np.ndarray:
        u = _arr(u)
        out = np.zeros(tuple(shape), u.dtype)
        out[_arr(mask)] = u
        return out

    def concatenate(self, xs: Sequence, axis: int) -> np.ndarray:
        return np.concatenate([_arr(x) for x in xs], axis=axis)

    def stack(self, xs: Sequence, axis: int) -> np.ndarray:
        return np.stack([_arr(x) for x in xs], axis=axis)

    def argreduce(self, name: str, x, axis: int | None, keepdims: bool) -> np.ndarray:
        fn = np.argmax if name == "argmax" else np.argmin
        return _arr(fn(_arr(x), axis=axis, keepdims=keepdims)).astype(np.int64)

    def apply(self, name: str, p: dict, xs: Sequence) -> np.ndarray:
        """Apply a primitive by name with the parameters `op_params` gives: the
        dispatch of `IRBuilder.apply`, and every other op with operands."""
        if name in self._UNARY:
            return self.unary(name, xs[0])
        if name in self._BINARY:
            return self.binary(name, xs[0], xs[1])
        if name.startswith("reduce_"):
            return self.reduce(name.removeprefix("reduce_"), xs[0], p["axes"], p["keepdims"])
        match name:
            case "broadcast_to":
                return self.broadcast_to(xs[0], p["shape"])
            case "reshape":
                return self.reshape(xs[0], p["shape"])
            case "transpose":
                return self.transpose(xs[0], p["perm"])
            case "slice":
                return self.slice(xs[0], p["starts"], p["shape"], p["steps"])
            case "scatter_slice":
                return self.scatter_slice(xs[0], p["starts"], p["steps"], p["shape"])
            case "concatenate":
                return self.concatenate(xs, p["axis"])
            case "stack":
                return self.stack(xs, p["axis"])
            case "take":
                return self.take(xs[0], xs[1], p["axis"])
            case "scatter_add":
                return self.scatter_add(xs[0], xs[1], p["axis"], p["shape"])
            case "compress":
                return self.compress(xs[0], xs[1])
            case "expand":
                return self.expand(xs[0], xs[1], p["shape"])
            case "ramp":
                start, step = _arr(xs[0]), _arr(xs[1])
                rows = np.arange(max(int(_arr(xs[2])), 0)).reshape((-1,) + (1,) * start.ndim)
                return (start + rows.astype(start.dtype) * step).astype(start.dtype)
            case "matmul":
                return self.matmul(xs[0], xs[1])
            case "einsum":
                return self.einsum(p["spec"], xs)
            case "conv2d":
                return window_algebra.decompose_conv2d(self, xs[0], xs[1], p)
            case "max_pool2d":
                return window_algebra.decompose_max_pool2d(self, xs[0], p)
            case "avg_pool2d":
                return window_algebra.decompose_avg_pool2d(self, xs[0], p)
            case "select":
                return self.select(xs[0], xs[1], xs[2])
            case "cast":
                return self.cast(xs[0], p["dtype"])
            case "compare":
                return self.compare(p["predicate"], xs[0], xs[1])
            case "argmax" | "argmin":
                shape = p.get("shape")
                keep = shape is not None and len(shape) == np.ndim(xs[0]) and np.ndim(xs[0]) > 0
                return self.argreduce(name, xs[0], p["axis"], keep)
        raise KeyError(f"NumpyBuilder.apply: no builder for '{name}'")
