"""NumPy functions composed of msir primitives, written once for both modes.

Each `*_body(B, ...)` builds one NumPy function out of existing primitives
through the differentiation rules' `Builder` (`msir.passes.grad_rules.Builder`):
the compiled frontend runs it on an `IRBuilder` (`msir.frontend.numpy_handlers`),
the eager tracer on its `TracingBuilder` (`msir.eager.tracer`). So both modes
compute, and differentiate, the same primitives, and no function here needs an
op, a rule or a lowering of its own. Operands arrive typed: cast to the dtype
NumPy computes in and broadcast where the function broadcasts.

The `*_shape`/`check_*` helpers are the argument checks both modes share; they
raise msir errors without a location, which the frontend puts at the call.

Decisions:

* `logaddexp(a, b)` is `max(a, b) + log1p(exp(-|a - b|))`, with `a - b` taken as
  0 where `a == b`: equal infinities then give the infinity (not NaN, as
  `inf - inf` would), and at ties the gradient is NumPy's `exp(a) / (exp(a) +
  exp(b)) = 1/2` for each operand (the maximum splits its cotangent evenly).
* Triangles, `eye` and `diag` of a vector are masks of `iota` columns minus
  rows compared with `k`, then `select`: no constant of the matrix's size
  enters the IR, and the gradient of `tril`/`triu` is the same mask.
* `diag` of a matrix reads the diagonal as one strided `slice` of the
  flattened matrix (step `columns + 1`): it touches only the diagonal, and
  its adjoint is one `scatter_slice`.
* `cumsum`/`cumprod` are a Hillis-Steele scan: ceil(log2 n) steps, each
  combining the running result with itself shifted by 1, 2, 4... along the
  axis (`slice` + `scatter_slice`, the identity shifted in). That is
  O(n log n) work in whole-array ops that fuse, against the O(n^2) of a
  product with a triangular matrix; its derivative follows from the rules
  of those ops, so cumprod's gradient is exact where elements are zero (no
  division by the input). A sequential scan op would do O(n) work: the
  place to go if scans of long axes matter.
* `np.any`/`np.all` count (in int64) the elements that are nonzero (zero) and
  compare the count with 0: msir reductions take no booleans, and a sum is
  right for empty axes too (any: False, all: True), where max/min are not.
* `np.take_along_axis` is one `take` from the flattened array, at the flat
  position of every element (iota of each other axis times its stride, plus
  the index times the axis's stride), so its adjoint is one `scatter_add`
  (right for repeated indices). An index out of range along the axis is made
  out of range of the flattened array, so `take` still reports it at run time
  ("index out of range", an IndexError at the call).
* `np.linspace` computes as NumPy does, `start + iota * ((stop - start) / div)`
  with the last element `stop` exactly; start and stop may be runtime
  scalars (and are differentiable), the count is static (it is a shape).
* `np.tan` is sin / cos; `np.cosh` and `np.sinh` go through exp(|x| - log 2),
  so they stay finite up to where the result overflows, and sinh uses
  expm1 below |x| = 1 (no cancellation near 0); their derivatives follow.
* `np.round` / `np.around` are NumPy's `rint(x * 10**d) / 10**d`, rint being
  floor plus a step (half to even, signed zeros kept): zero derivative.
  Integers are returned as they are for d >= 0; negative d on integers is
  refused (NumPy rounds them in integer arithmetic).
* `np.diff` subtracts two slices per order (booleans: not_equal).
* `np.linalg.norm` supports what reductions compute: for vectors ord None, 2,
  1, inf, -inf and any other nonzero number p (`sum(|x|**p)**(1/p)`), for
  matrices None/'fro', 1, -1, inf, -inf. The spectral and nuclear norms
  (ord 2, -2, 'nuc' of a matrix) need singular values and are refused by name.
* `np.argsort` is stable (NumPy's kind='stable'; any other `kind` gives the
  same order, since NumPy's default quicksort differs only in how ties are
  ordered): element i's position is the number of elements that sort before
  it (smaller, or equal at a smaller index; NaN after every number, as NumPy
  sorts it), counted with one comparison of the axis against itself, and the
  permutation is that rank inverted by one `scatter_add` of the indices. That
  is O(n^2) work and memory per row, in whole-array ops that fuse: right for
  the short axes sorted inside models (top-k, medians of small windows), not
  for sorting a million elements, which wants a sort op of its own.
  `np.sort` is `take_along_axis` of the argsort, so its gradient scatters the
  cotangent back through the permutation (ties: to the element placed there).
"""

from __future__ import annotations

import math
from typing import Any

from msir.errors import MsirValueError, ShapeError, UnsupportedSyntaxError
from msir.frontend.values import kind, promote

V = Any  # a builder value


def float_dtype(a_dtype: str, a_weak: bool, b_dtype: str, b_weak: bool) -> str:
    """The dtype a float-valued binary NumPy function computes in: the
    operands' promotion (NEP 50), float64 if that is not a float."""
    dtype, _ = promote(a_dtype, a_weak, b_dtype, b_weak)
    return dtype if kind(dtype) == 2 else "float64"


def _full(B, value: float, dtype: str, shape: tuple[int, ...]) -> V:
    """A constant of `shape`; an empty one is a broadcast scalar (a dense
    attribute of no elements does not print or parse)."""
    if 0 in shape:
        return B.broadcast_to(B.constant(value, dtype, ()), shape)
    return B.constant(value, dtype, shape)


def logaddexp_body(B, a: V, b: V) -> V:
    """log(exp(a) + exp(b)) without overflow; `a`, `b` of one float dtype and shape."""
    shape, dtype = B.shape(a), B.dtype(a)
    zero = _full(B, 0.0, dtype, shape)
    gap = B.select(B.compare("eq", a, b), zero, B.binary("sub", a, b))
    softplus = B.unary("log1p", B.unary("exp", B.unary("neg", B.unary("abs", gap))))
    return B.binary("add", B.binary("maximum", a, b), softplus)


def outer_body(B, a: V, b: V, product: str) -> V:
    """`a[:, None] * b[None, :]` of two vectors of one dtype; `product` is the
    primitive NumPy multiplies that dtype with (`mul`, `and` for booleans)."""
    (n,), (m,) = B.shape(a), B.shape(b)
    rows = B.broadcast_to(B.reshape(a, (n, 1)), (n, m))
    cols = B.broadcast_to(B.reshape(b, (1, m)), (n, m))
    return B.binary(product, rows, cols)


def _offsets(B, rows: int, cols: int) -> V:
    """column - row of every element of a rows x cols matrix (int64)."""
    shape = (rows, cols)
    return B.binary("sub", B.iota("int64", shape, 1), B.iota("int64", shape, 0))


def _offset_is(B, rows: int, cols: int, pred: str, k: int) -> V:
    return B.compare(pred, _offsets(B, rows, cols), _full(B, k, "int64", (rows, cols)))


def eye_body(B, rows: int, cols: int, k: int, dtype: str) -> V:
    """np.eye(rows, cols, k, dtype): ones where column - row == k."""
    return B.cast(_offset_is(B, rows, cols, "eq", k), dtype)


def triangle_shape(shape: tuple[int, ...], fname: str) -> tuple[int, ...]:
    """The result shape of np.tril/np.triu: a 1-D array is broadcast to a square
    matrix first, as NumPy does."""
    if len(shape) == 0:
        raise ShapeError(f"{fname}: the input must have at least 1 dimension, got a 0-d array")
    return (shape[0], shape[0]) if len(shape) == 1 else shape


def triangle_body(B, x: V, k: int, upper: bool) -> V:
    """np.tril(x, k) (or np.triu): elements on and below (above) the k-th
    diagonal of the last two axes, zeros elsewhere."""
    shape = triangle_shape(B.shape(x), "np.triu" if upper else "np.tril")
    x = B.broadcast_to(x, shape)
    rows, cols = shape[-2:]
    keep = B.broadcast_to(_offset_is(B, rows, cols, "ge" if upper else "le", k), shape)
    return B.select(keep, x, _full(B, 0, B.dtype(x), shape))


def diag_from_vector_body(B, v: V, k: int) -> V:
    """np.diag of a vector: a square matrix with `v` on its k-th diagonal."""
    (n,) = B.shape(v)
    size = n + abs(k)
    padded = B.scatter_slice(v, (0,), (1,), (size,))
    # for k >= 0, element (r, r + k) is v[r]: v runs down the rows; for k < 0,
    # element (c - k, c) is v[c]: v runs along the columns
    line = B.reshape(padded, (size, 1) if k >= 0 else (1, size))
    on_diagonal = _offset_is(B, size, size, "eq", k)
    return B.select(on_diagonal, B.broadcast_to(line, (size, size)), _full(B, 0, B.dtype(v), (size, size)))


def diagonal_length(rows: int, cols: int, k: int) -> int:
    return max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))


def diag_of_matrix_body(B, x: V, k: int) -> V:
    """np.diag of a matrix: its k-th diagonal, a vector."""
    rows, cols = B.shape(x)
    length = diagonal_length(rows, cols, k)
    start = k if k >= 0 else -k * cols
    flat = B.reshape(x, (rows * cols,))
    return B.slice(flat, (start if length else 0,), (length,), (cols + 1,))


def _shifted(B, y: V, axis: int, by: int, identity: float) -> V:
    """`y` moved `by` places along `axis`, `identity` in the places it left."""
    shape, rank = B.shape(y), len(B.shape(y))
    kept = list(shape)
    kept[axis] -= by
    starts = [0] * rank
    starts[axis] = by
    moved = B.scatter_slice(B.slice(y, [0] * rank, kept, [1] * rank), starts, [1] * rank, shape)
    if identity == 0:
        return moved
    vacated = B.compare("lt", B.iota("int64", shape, axis), _full(B, by, "int64", shape))
    return B.select(vacated, _full(B, identity, B.dtype(y), shape), moved)


def scan_body(B, x: V, axis: int, combine: str) -> V:
    """The inclusive scan of `x` along `axis` with `combine` (`add`: np.cumsum,
    `mul`: np.cumprod)."""
    identity = 0 if combine == "add" else 1
    y, by = x, 1
    while by < B.shape(x)[axis]:
        y = B.binary(combine, y, _shifted(B, y, axis, by, identity))
        by *= 2
    return y


def scan_dtype(dtype: str) -> str:
    """The dtype np.cumsum/np.cumprod accumulate in without `dtype=`: booleans and
    integers narrower than int64 in int64, as NumPy does on 64-bit Linux."""
    return dtype if kind(dtype) == 2 else "int64"


def norm_axes(ndim: int, ord: Any, axis: Any) -> tuple[int, ...]:
    """The axes np.linalg.norm reduces (normalised), checked against `ord` as
    NumPy checks them; `axis` is None, an int or a tuple of ints."""
    if axis is None:
        if ord is not None and ndim not in (1, 2):
            raise ShapeError(f"np.linalg.norm: ord={ord!r} needs a 1-d or 2-d array (or axis), got a {ndim}-d array")
        axes = tuple(range(ndim))
    else:
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        if len(axes) not in (1, 2):
            raise ShapeError(f"np.linalg.norm: axis must name 1 or 2 axes, got {len(axes)}")
        for a in axes:
            if not -ndim <= a < ndim:
                raise ShapeError(f"np.linalg.norm: axis {a} is out of bounds for array of dimension {ndim}")
        axes = tuple(a % ndim for a in axes)
        if len(set(axes)) != len(axes):
            raise ShapeError("np.linalg.norm: duplicate axes given")
    if ord is None:
        return axes
    if isinstance(ord, str) or isinstance(ord, bool) or not isinstance(ord, (int, float)):
        if len(axes) == 2 and ord == "fro":
            return axes
        if len(axes) == 2 and ord == "nuc":
            raise UnsupportedSyntaxError("np.linalg.norm: the nuclear norm (ord='nuc') needs singular values, "
                                         "which msir does not compute")
        raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for {'matrices' if len(axes) == 2 else 'vectors'}")
    if len(axes) == 2 and ord not in (1, -1, float("inf"), float("-inf")):
        if ord in (2, -2):
            raise UnsupportedSyntaxError(f"np.linalg.norm: the spectral norm (ord={ord}) of a matrix needs singular "
                                         "values, which msir does not compute")
        raise ShapeError(f"np.linalg.norm: invalid norm order {ord!r} for matrices")
    if len(axes) == 1 and ord == 0:
        raise UnsupportedSyntaxError("np.linalg.norm: ord=0 (the count of nonzero elements) is not supported")
    return axes


def norm_body(B, x: V, axes: tuple[int, ...], ord: Any, keepdims: bool) -> V:
    """np.linalg.norm(x, ord, axes, keepdims) of a float `x`, `axes` from `norm_axes`."""
    shape, dtype = B.shape(x), B.dtype(x)
    inf = float("inf")
    if ord is None or ord == "fro" or (len(axes) == 1 and ord == 2):
        y = B.unary("sqrt", B.reduce("sum", B.binary("mul", x, x), axes, True))
    elif len(axes) == 1 and ord in (inf, -inf):
        y = B.reduce("max" if ord == inf else "min", B.unary("abs", x), axes, True)
    elif len(axes) == 1 and ord == 1:
        y = B.reduce("sum", B.unary("abs", x), axes, True)
    elif len(axes) == 1:
        powered = B.binary("pow", B.unary("abs", x), _full(B, ord, dtype, shape))
        total = B.reduce("sum", powered, axes, True)
        y = B.binary("pow", total, _full(B, 1.0 / ord, dtype, B.shape(total)))
    else:
        # ord +-1: the max (min) over columns of the column sums; ord +-inf: over rows of the row sums
        rows, cols = axes
        summed, across = (rows, cols) if ord in (1, -1) else (cols, rows)
        sums = B.reduce("sum", B.unary("abs", x), [summed], True)
        y = B.reduce("max" if ord in (1, inf) else "min", sums, [across], True)
    if keepdims:
        return y
    return B.reshape(y, tuple(d for i, d in enumerate(shape) if i not in axes))


def truth_body(B, x: V, axes: tuple[int, ...], keepdims: bool, every: bool) -> V:
    """np.all(x, axes) if `every`, else np.any(x, axes): booleans."""
    shape, dtype = B.shape(x), B.dtype(x)
    pred = "eq" if every else "ne"
    if dtype == "bool":
        hits = B.unary("not", x) if every else x
    else:
        hits = B.compare(pred, x, _full(B, 0, dtype, shape))
    count = B.reduce("sum", B.cast(hits, "int64"), axes, keepdims)
    return B.compare(pred, count, _full(B, 0, "int64", B.shape(count)))


def take_along_axis_shapes(arr: tuple[int, ...], idx: tuple[int, ...], axis: int):
    """(arr's broadcast shape, the result's shape) of np.take_along_axis."""
    if len(arr) != len(idx):
        raise ShapeError(f"np.take_along_axis: `indices` and `arr` must have the same number of dimensions, "
                         f"got {len(idx)} and {len(arr)}")
    out, source = list(idx), list(arr)
    for d, (a, i) in enumerate(zip(arr, idx)):
        if d == axis:
            continue
        if a != i and 1 not in (a, i):
            raise ShapeError(f"np.take_along_axis: shape mismatch: `arr` {arr} and `indices` {idx} cannot be "
                             f"broadcast together (axis {d})")
        out[d] = source[d] = i if a == 1 else a
    return tuple(source), tuple(out)


def take_along_axis_body(B, arr: V, idx: V, axis: int) -> V:
    """np.take_along_axis(arr, idx, axis), `idx` int64 of arr's rank."""
    source, out = take_along_axis_shapes(B.shape(arr), B.shape(idx), axis)
    arr, idx = B.broadcast_to(arr, source), B.broadcast_to(idx, out)
    n = source[axis]
    negative = B.compare("lt", idx, _full(B, 0, "int64", out))
    idx = B.select(negative, B.binary("add", idx, _full(B, n, "int64", out)), idx)
    outside = B.binary("or", B.compare("lt", idx, _full(B, 0, "int64", out)),
                       B.compare("ge", idx, _full(B, n, "int64", out)))
    strides = [1] * len(source)
    for d in range(len(source) - 2, -1, -1):
        strides[d] = strides[d + 1] * source[d + 1]
    flat = B.binary("mul", idx, _full(B, strides[axis], "int64", out))
    for d in range(len(source)):
        if d != axis and source[d] != 1:
            flat = B.binary("add", flat, B.binary("mul", B.iota("int64", out, d), _full(B, strides[d], "int64", out)))
    size = 1
    for d in source:
        size *= d
    flat = B.select(outside, _full(B, size, "int64", out), flat)
    return B.take(B.reshape(arr, (size,)), flat, 0)


def linspace_body(B, start: V, stop: V, num: int, endpoint: bool) -> V:
    """np.linspace of rank-0 `start`, `stop` of one float dtype, `num` >= 0 elements."""
    dtype, shape = B.dtype(start), (num,)
    first, last = B.broadcast_to(start, shape), B.broadcast_to(stop, shape)
    delta = B.binary("sub", last, first)
    steps = B.iota(dtype, shape, 0)
    div = num - 1 if endpoint else num
    # NumPy: with no interval to divide (num == 1 with the endpoint), the
    # element is start (`0 * delta + start`)
    step = B.binary("div", delta, _full(B, div, dtype, shape)) if div > 0 else delta
    y = B.binary("add", B.binary("mul", steps, step), first)
    if endpoint and num > 1:
        is_last = B.compare("eq", B.iota("int64", shape, 0), _full(B, num - 1, "int64", shape))
        y = B.select(is_last, last, y)
    return y


def check_diag_rank(ndim: int) -> None:
    if ndim not in (1, 2):
        raise ShapeError(f"np.diag: the input must be 1-d or 2-d, got a {ndim}-d array")


def _sorts_before(B, a: V, b: V) -> V:
    """Elementwise: does `a` sort strictly before `b` (NaN after every number)?"""
    less = B.compare("lt", a, b)
    if kind(B.dtype(a)) != 2:
        return less
    a_nan, b_nan = B.compare("ne", a, a), B.compare("ne", b, b)
    return B.binary("or", less, B.binary("and", b_nan, B.unary("not", a_nan)))


def _sorts_equal(B, a: V, b: V) -> V:
    same = B.compare("eq", a, b)
    if kind(B.dtype(a)) != 2:
        return same
    return B.binary("or", same, B.binary("and", B.compare("ne", a, a), B.compare("ne", b, b)))


def argsort_body(B, x: V, axis: int) -> V:
    """np.argsort(x, axis, kind='stable') as int64 (see the module docstring)."""
    shape = B.shape(x)
    nd = len(shape)
    last = [d for d in range(nd) if d != axis] + [axis]
    rows = tuple(shape[d] for d in last[:-1])
    n = shape[axis]
    x = B.transpose(x, last) if last != list(range(nd)) else x
    if B.dtype(x) == "bool":
        x = B.cast(x, "int64")
    pairs = (*rows, n, n)  # [..., i, j]: element i of a row against element j
    mine = B.broadcast_to(B.reshape(x, (*rows, n, 1)), pairs)
    other = B.broadcast_to(B.reshape(x, (*rows, 1, n)), pairs)
    earlier = B.compare("lt", B.iota("int64", pairs, nd), B.iota("int64", pairs, nd - 1))
    before = B.binary("or", _sorts_before(B, other, mine), B.binary("and", _sorts_equal(B, other, mine), earlier))
    rank = B.reduce("sum", B.cast(before, "int64"), [nd], False)  # (*rows, n): where each element goes
    # the flat position rank[r, i] + n * (row r) of each element, where scatter_add puts its index i
    size, flat = n, rank
    for d in range(len(rows) - 1, -1, -1):
        row_stride = _full(B, size, "int64", (*rows, n))
        flat = B.binary("add", flat, B.binary("mul", B.iota("int64", (*rows, n), d), row_stride))
        size *= rows[d]
    index = B.iota("int64", (*rows, n), len(rows))
    perm = B.scatter_add(B.reshape(index, (size,)), B.reshape(flat, (size,)), 0, (size,))
    perm = B.reshape(perm, (*rows, n))
    inverse = [last.index(d) for d in range(nd)]
    return B.transpose(perm, inverse) if last != list(range(nd)) else perm


def sort_body(B, x: V, axis: int) -> V:
    """np.sort(x, axis, kind='stable'): x gathered by its argsort, so it differentiates."""
    return take_along_axis_body(B, x, argsort_body(B, x, axis), axis)


SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def check_sort_kind(kind_: Any, order: Any, fname: str) -> None:
    """NumPy's `kind` names (each sorts stably here) and no structured `order`."""
    if order is not None:
        raise UnsupportedSyntaxError(f"{fname}: `order` (fields of a structured array) is not supported")
    if kind_ not in SORT_KINDS:
        raise ShapeError(f"{fname}: sort kind must be one of 'quicksort', 'mergesort', 'heapsort' or 'stable', "
                         f"got {kind_!r}")


def float_class_body(B, x: V, which: str) -> V:
    """np.isnan / np.isinf / np.isfinite (`which`) as bool: NaN is the value unequal
    to itself, and |x| < inf is false for NaN and the infinities. Integers and
    bools are never NaN or infinite."""
    if kind(B.dtype(x)) != 2:
        return B.compare("ne" if which in ("isnan", "isinf") else "eq", x, x)
    if which == "isnan":
        return B.compare("ne", x, x)
    magnitude, inf = B.unary("abs", x), _full(B, float("inf"), B.dtype(x), B.shape(x))
    return B.compare("eq" if which == "isinf" else "lt", magnitude, inf)


def tan_body(B, x: V) -> V:
    """np.tan of a float array: sin / cos (its derivative 1 / cos**2 follows)."""
    return B.binary("div", B.unary("sin", x), B.unary("cos", x))


def _half_exp(B, a: V) -> V:
    """exp(a) / 2 for a >= 0, finite up to where the result itself overflows."""
    return B.unary("exp", B.binary("sub", a, _full(B, math.log(2.0), B.dtype(a), B.shape(a))))


def cosh_body(B, x: V) -> V:
    """np.cosh of a float array: e/2 + 1/(4 * (e/2)) with e/2 = exp(|x| - log 2),
    finite wherever cosh is (plain exp(|x|) would overflow first)."""
    half = _half_exp(B, B.unary("abs", x))
    quarter = _full(B, 0.25, B.dtype(x), B.shape(x))
    return B.binary("add", half, B.binary("div", quarter, half))


def sinh_body(B, x: V) -> V:
    """np.sinh of a float array: (expm1(x) - expm1(-x)) / 2 where |x| < 1 (no
    cancellation near 0; keeps -0.0), else ±(e/2 - 1/(4 * (e/2))) as cosh.
    Each branch reads only the inputs it is chosen for (the other gets a
    harmless 0 or 1), so the unchosen one gives no inf or NaN to the derivative."""
    dtype, shape = B.dtype(x), B.shape(x)
    zero, one, half_ = (_full(B, v, dtype, shape) for v in (0.0, 1.0, 0.5))
    a = B.unary("abs", x)
    small = B.compare("lt", a, one)
    xs = B.select(small, x, zero)
    near = B.binary("mul", half_, B.binary("sub", B.unary("expm1", xs), B.unary("expm1", B.unary("neg", xs))))
    e = _half_exp(B, B.select(small, one, a))
    far = B.binary("sub", e, B.binary("div", _full(B, 0.25, dtype, shape), e))
    far = B.select(B.compare("lt", x, zero), B.unary("neg", far), far)
    return B.select(small, near, far)


def round_body(B, x: V, decimals: int) -> V:
    """np.round / np.around of a float array to `decimals` places, as NumPy:
    `rint(x * 10**d) / 10**d` (for d < 0, `rint(x / 10**-d) * 10**-d`), with
    rint rounding half to even and keeping the sign of a zero. rint is
    floor plus a step, so the derivative is zero, as NumPy's is."""
    dtype, shape = B.dtype(x), B.shape(x)
    scale = _full(B, 10.0 ** abs(decimals), dtype, shape)
    y = x if decimals == 0 else B.binary("mul" if decimals > 0 else "div", x, scale)
    f = B.unary("floor", y)
    frac = B.binary("sub", y, f)
    half_, one, two = (_full(B, v, dtype, shape) for v in (0.5, 1.0, 2.0))
    odd = B.compare("ne", B.binary("sub", f, B.binary("mul", two, B.unary("floor", B.binary("div", f, two)))),
                    _full(B, 0.0, dtype, shape))
    tie_up = B.binary("and", B.compare("eq", frac, half_), odd)
    up = B.binary("or", B.compare("gt", frac, half_), tie_up)
    r = B.select(up, B.binary("add", f, one), f)
    r = B.select(B.compare("eq", r, _full(B, 0.0, dtype, shape)), B.binary("mul", y, _full(B, 0.0, dtype, shape)), r)
    return r if decimals == 0 else B.binary("div" if decimals > 0 else "mul", r, scale)


def check_diff(ndim: int, n: int) -> None:
    if n < 0:
        raise MsirValueError(f"order must be non-negative but got {n}")
    if ndim == 0:
        raise MsirValueError("diff requires input that is at least one dimensional")


def diff_body(B, x: V, n: int, axis: int) -> V:
    """np.diff: `n` times the differences of neighbours along `axis` (two
    slices subtracted, so the adjoint scatters back; booleans as not_equal)."""
    for _ in range(n):
        shape = B.shape(x)
        size = max(shape[axis] - 1, 0)
        sizes = tuple(size if i == axis else d for i, d in enumerate(shape))
        starts = [0] * len(shape)
        steps = [1] * len(shape)
        lo = B.slice(x, starts, sizes, steps)
        starts[axis] = 1 if size else 0
        hi = B.slice(x, starts, sizes, steps)
        x = B.compare("ne", hi, lo) if B.dtype(x) == "bool" else B.binary("sub", hi, lo)
    return x


def isclose_body(B, a: V, b: V, rtol: float, atol: float, equal_nan: bool) -> V:
    """np.isclose of `a`, `b` of one float dtype and shape, as NumPy computes it:
    `|a - b| <= atol + rtol * |b|` where b is finite, or `a == b` (equal
    infinities), or both NaN with `equal_nan`."""
    dtype, shape = B.dtype(a), B.shape(a)
    bound = B.binary("add", _full(B, atol, dtype, shape), B.binary("mul", _full(B, rtol, dtype, shape), B.unary("abs", b)))
    close = B.binary("and", B.compare("le", B.unary("abs", B.binary("sub", a, b)), bound),
                     float_class_body(B, b, "isfinite"))
    close = B.binary("or", close, B.compare("eq", a, b))
    if equal_nan:
        close = B.binary("or", close, B.binary("and", B.compare("ne", a, a), B.compare("ne", b, b)))
    return close
