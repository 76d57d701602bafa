"""The differentiation rules of every `msir` op: one table, two modes.

Each rule is a short function written against `Builder`, a small NumPy-like
interface. `IRBuilder` implements it by emitting `msir` ops (the compiled path:
`msir-grad`, `msir-jvp`); `NumpyBuilder` by computing on NumPy arrays (the eager
PyNative path). So the same rule serves both, and a rule is checked once against
finite differences for both.

* `VJP[name](B, p, xs, y, ct) -> [ct_x or None, ...]`: reverse mode. `p` holds the
  op's parameters (see `op_params`), `xs` its operands, `y` its result, `ct` the
  result's cotangent. `None` means "no cotangent" (integer operands, indices).
  Operands and results may be lazy: `IRBuilder` makes a primal value a residual
  only when a rule actually uses it. A rule registered with `vjp_some` is also in
  `VJP_SOME[name](B, p, xs, y, ct, wanted)`, which skips the operands not wanted.
* `JVP[name](B, p, xs, y, ts) -> t_y`: forward mode, with `ts` the operands'
  tangents (`None` for a zero tangent or an integer operand).
* `NON_DIFFERENTIABLE`: ops whose results carry no derivative (compares, argmax,
  iota, integer outputs...).

Broadcasting is explicit in msir (`broadcast_to`), so elementwise rules see equal
shapes, and the adjoint of `broadcast_to` sums over the broadcast axes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from msir.dialects import primitives
from msir.passes import window_algebra
from msir.passes.einsum_algebra import distinct, einsum_spec, einsum_terms, scatter_diagonals

V = Any  # a builder value: an SSA value (IRBuilder) or an ndarray (NumpyBuilder)


class Builder(Protocol):
    """What a rule may do. All elementwise operands have equal shapes."""

    def shape(self, x: V) -> tuple[int, ...]: ...
    def dtype(self, x: V) -> str: ...
    def constant(self, value: float, dtype: str, shape: Sequence[int] = ()) -> V: ...
    def iota(self, dtype: str, shape: Sequence[int], axis: int) -> V: ...  # 0, 1, 2... along `axis`
    def unary(self, name: str, x: V) -> V: ...  # a unary primitive (msir.dialects.primitives) or stop_gradient
    def binary(self, name: str, a: V, b: V) -> V: ...  # a binary primitive (msir.dialects.primitives)
    def compare(self, pred: str, a: V, b: V) -> V: ...
    def select(self, c: V, a: V, b: V) -> V: ...
    def cast(self, x: V, dtype: str) -> V: ...
    def broadcast_to(self, x: V, shape: Sequence[int]) -> V: ...
    def reshape(self, x: V, shape: Sequence[int]) -> V: ...
    def transpose(self, x: V, perm: Sequence[int]) -> V: ...
    def reduce(self, name: str, x: V, axes: Sequence[int], keepdims: bool) -> V: ...  # sum max min prod mean
    def matmul(self, a: V, b: V) -> V: ...
    def einsum(self, spec: str, xs: Sequence[V]) -> V: ...  # an explicit spec, one or two operands
    def slice(self, x: V, starts: Sequence[int], sizes: Sequence[int], steps: Sequence[int]) -> V: ...
    def scatter_slice(self, x: V, starts: Sequence[int], steps: Sequence[int], shape: Sequence[int]) -> V: ...
    def take(self, x: V, idx: V, axis: int) -> V: ...
    def scatter_add(self, u: V, idx: V, axis: int, shape: Sequence[int]) -> V: ...
    def compress(self, x: V, mask: V) -> V: ...  # x[mask], a bool mask of x's leading dims
    def expand(self, u: V, mask: V, shape: Sequence[int]) -> V: ...  # zeros of `shape` with u's rows where mask
    def concatenate(self, xs: Sequence[V], axis: int) -> V: ...
    def apply(self, name: str, p: dict, xs: Sequence[V]) -> V: ...  # any op by name
    # tapes (rows of a `tensor<?x...>`, IRBuilder only: they appear in derivatives of loops)
    def tape_set(self, tape: V, k: V, v: V) -> V: ...
    def tape_push(self, tape: V, v: V) -> V: ...
    def tape_get(self, tape: V, k: V) -> V: ...
    def tape_add(self, tape: V, k: V, v: V) -> V: ...
    def tape_zeros(self, like: V) -> V: ...


VjpRule = Callable[[Builder, dict, list, V, V], list]
JvpRule = Callable[[Builder, dict, list, V, list], V]

VJP: dict[str, VjpRule] = {}
JVP: dict[str, JvpRule] = {}
NON_DIFFERENTIABLE: set[str] = {
    "compare", "argmax", "argmin", "iota", "constant", "tape_alloc", "tape_zeros",
    "check",  # a runtime check of user code: no results
    *(p.name for p in primitives.ELEMENTWISE if not p.differentiable),
}
"""Ops whose derivative is zero everywhere it exists (or that have integer results)."""


def vjp(*names: str):
    def register(fn: VjpRule) -> VjpRule:
        for n in names:
            VJP[n] = fn
        return fn

    return register


VJP_SOME: dict[str, Callable[..., list]] = {}
"""Rules that can skip operands: `rule(B, p, xs, y, ct, wanted)` returns None
for an operand whose `wanted` flag is False. Each is also registered in `VJP`
(every operand wanted), which the compiled path uses (its dead code
elimination drops what is unused); the eager reverse trace passes the operands
it traces, so PYNATIVE mode never computes, e.g., the input gradient of a
network's first convolution."""


def vjp_some(*names: str):
    def register(fn: Callable[..., list]) -> Callable[..., list]:
        for n in names:
            VJP_SOME[n] = fn
            VJP[n] = lambda B, p, xs, y, ct, fn=fn: fn(B, p, xs, y, ct, (True,) * len(xs))
        return fn

    return register


def jvp(*names: str):
    def register(fn: JvpRule) -> JvpRule:
        for n in names:
            JVP[n] = fn
        return fn

    return register


def is_float(dtype: str) -> bool:
    return dtype in primitives.FLOATS


# -- helpers -----------------------------------------------------------------


def _scalar(B: Builder, value: float, like: V) -> V:
    shape = B.shape(like)
    if any(d < 0 for d in shape):
        # a runtime length (a mask read) sizes no constant: spread a 0-d one over it
        return B.broadcast_to(B.constant(value, B.dtype(like), ()), shape)
    return B.constant(value, B.dtype(like), shape)


def _sq(B: Builder, x: V) -> V:
    return B.binary("mul", x, x)


def unbroadcast(B: Builder, ct: V, shape: Sequence[int]) -> V:
    """Sum `ct` (of a broadcast shape) back to `shape` (NumPy's broadcasting rule)."""
    out_shape = B.shape(ct)
    lead = len(out_shape) - len(shape)
    axes = list(range(lead)) + [
        lead + i for i, d in enumerate(shape) if d == 1 and out_shape[lead + i] != 1
    ]
    if not axes:
        return ct
    summed = B.reduce("sum", ct, axes, False)
    return B.reshape(summed, shape) if B.shape(summed) != tuple(shape) else summed


def _expand_reduced(B: Builder, ct: V, in_shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> V:
    """Broadcast a reduction's cotangent back to the input shape."""
    if not keepdims and B.shape(ct) != ():
        kept = [1 if i in axes else d for i, d in enumerate(in_shape)]
        ct = B.reshape(ct, kept)
    return B.broadcast_to(ct, in_shape)


# -- reverse rules: elementwise ------------------------------------------------


@vjp("add")
def _(B, p, xs, y, ct):
    return [ct, ct]


@vjp("sub")
def _(B, p, xs, y, ct):
    return [ct, B.unary("neg", ct)]


@vjp("mul")
def _(B, p, xs, y, ct):
    a, b = xs
    return [B.binary("mul", ct, b), B.binary("mul", ct, a)]


@vjp("div")
def _(B, p, xs, y, ct):
    a, b = xs
    ga = B.binary("div", ct, b)
    return [ga, B.unary("neg", B.binary("mul", ga, y))]


@vjp("pow")
def _(B, p, xs, y, ct):
    a, b = xs
    if not is_float(B.dtype(a)):
        return [None, None]
    # d/da a**b = b * a**(b-1); d/db = log(a) * a**b
    bm1 = B.binary("sub", b, _scalar(B, 1.0, b))
    # a**0 is the constant 1, so its derivative is 0 even at a == 0, where
    # b * a**(b-1) is 0 * inf (JAX's rule)
    db = B.binary("mul", b, B.binary("pow", a, bm1))
    db = B.select(B.compare("eq", b, _scalar(B, 0.0, b)), _scalar(B, 0.0, db), db)
    ga = B.binary("mul", ct, db)
    zero = _scalar(B, 0.0, a)
    # log(a) is only real for a > 0; elsewhere the exponent's derivative is taken
    # as 0 (it does not exist in the reals), so no NaN leaks into the gradient.
    positive = B.compare("gt", a, zero)
    safe_log = B.select(positive, B.unary("log", B.select(positive, a, _scalar(B, 1.0, a))), zero)
    gb = B.binary("mul", ct, B.binary("mul", safe_log, y))
    return [ga, gb]


def _pick(B, a, b, ct, pred):
    """The cotangent goes to the operand the max/min chose; ties split it evenly.
    NaN propagates (NumPy's maximum/minimum), so a NaN operand is the one chosen:
    every comparison with it is false, so `a` is tested for NaN explicitly and
    otherwise a NaN `b` falls through to `b`."""
    zero = _scalar(B, 0.0, ct)
    half = B.binary("mul", ct, _scalar(B, 0.5, ct))
    eq = B.compare("eq", a, b)
    a_nan = B.compare("ne", a, a)
    a_wins = B.select(a_nan, a_nan, B.compare(pred, a, b))  # a_nan or pred(a, b)
    ga = B.select(eq, half, B.select(a_wins, ct, zero))
    gb = B.select(eq, half, B.select(a_wins, zero, ct))
    return [ga, gb]


@vjp("maximum")
def _(B, p, xs, y, ct):
    if not is_float(B.dtype(ct)):
        return [None, None]
    return _pick(B, xs[0], xs[1], ct, "gt")


@vjp("minimum")
def _(B, p, xs, y, ct):
    if not is_float(B.dtype(ct)):
        return [None, None]
    return _pick(B, xs[0], xs[1], ct, "lt")


@vjp("rem")
def _(B, p, xs, y, ct):
    a, b = xs
    if not is_float(B.dtype(a)):
        return [None, None]
    # a % b = a - floor(a / b) * b
    q = B.unary("floor", B.binary("div", a, b))
    return [ct, B.unary("neg", B.binary("mul", ct, q))]


@vjp("neg")
def _(B, p, xs, y, ct):
    return [B.unary("neg", ct)]


@vjp("exp")
def _(B, p, xs, y, ct):
    return [B.binary("mul", ct, y)]


@vjp("expm1")
def _(B, p, xs, y, ct):
    return [B.binary("mul", ct, B.binary("add", y, _scalar(B, 1.0, y)))]


@vjp("log")
def _(B, p, xs, y, ct):
    return [B.binary("div", ct, xs[0])]


@vjp("log1p")
def _(B, p, xs, y, ct):
    return [B.binary("div", ct, B.binary("add", xs[0], _scalar(B, 1.0, ct)))]


@vjp("sin")
def _(B, p, xs, y, ct):
    return [B.binary("mul", ct, B.unary("cos", xs[0]))]


@vjp("cos")
def _(B, p, xs, y, ct):
    return [B.unary("neg", B.binary("mul", ct, B.unary("sin", xs[0])))]


@vjp("tanh")
def _(B, p, xs, y, ct):
    return [B.binary("mul", ct, B.binary("sub", _scalar(B, 1.0, y), _sq(B, y)))]


@vjp("sqrt")
def _(B, p, xs, y, ct):
    return [B.binary("div", ct, B.binary("mul", y, _scalar(B, 2.0, y)))]


@vjp("arctan")
def _(B, p, xs, y, ct):
    return [B.binary("div", ct, B.binary("add", _scalar(B, 1.0, ct), _sq(B, xs[0])))]


@vjp("arctan2")
def _(B, p, xs, y, ct):
    # d atan2(a, b) = (b da - a db) / (a^2 + b^2)
    a, b = xs
    scaled = B.binary("div", ct, B.binary("add", _sq(B, a), _sq(B, b)))
    return [B.binary("mul", scaled, b), B.unary("neg", B.binary("mul", scaled, a))]


@vjp("abs")
def _(B, p, xs, y, ct):
    if not is_float(B.dtype(ct)):
        return [None]
    return [B.binary("mul", ct, B.unary("sign", xs[0]))]


@vjp("select")
def _(B, p, xs, y, ct):
    c = xs[0]
    zero = _scalar(B, 0.0, ct)
    return [None, B.select(c, ct, zero), B.select(c, zero, ct)]


@vjp("cast")
def _(B, p, xs, y, ct):
    src = B.dtype(xs[0])
    if not is_float(src):
        return [None]
    return [B.cast(ct, src)]


@vjp("stop_gradient")
def _(B, p, xs, y, ct):
    return [None]


# -- reverse rules: shapes -----------------------------------------------------


@vjp("broadcast_to")
def _(B, p, xs, y, ct):
    return [unbroadcast(B, ct, B.shape(xs[0]))]


@vjp("reshape")
def _(B, p, xs, y, ct):
    return [B.reshape(ct, B.shape(xs[0]))]


@vjp("transpose")
def _(B, p, xs, y, ct):
    perm = p["perm"]
    inverse = [0] * len(perm)
    for i, q in enumerate(perm):
        inverse[q] = i
    return [B.transpose(ct, inverse)]


@vjp("slice")
def _(B, p, xs, y, ct):
    return [B.scatter_slice(ct, p["starts"], p["steps"], B.shape(xs[0]))]


@vjp("scatter_slice")
def _(B, p, xs, y, ct):
    return [B.slice(ct, p["starts"], B.shape(xs[0]), p["steps"])]


@vjp("take")
def _(B, p, xs, y, ct):
    return [B.scatter_add(ct, xs[1], p["axis"], B.shape(xs[0])), None]


@vjp("scatter_add")
def _(B, p, xs, y, ct):
    return [B.take(ct, xs[1], p["axis"]), None]


@vjp("compress")
def _(B, p, xs, y, ct):
    return [B.expand(ct, xs[1], B.shape(xs[0])), None]


@vjp("expand")
def _(B, p, xs, y, ct):
    return [B.compress(ct, xs[1]), None]


@vjp("ramp")
def _(B, p, xs, y, ct):
    # row i is start + i * step: start gets every row, step each row times i
    start, step, count = xs
    counts = B.apply("ramp", {}, [B.constant(0, B.dtype(step), B.shape(step)),
                                  B.constant(1, B.dtype(step), B.shape(step)), count])
    return [B.reduce("sum", ct, [0], False), B.reduce("sum", B.binary("mul", ct, counts), [0], False), None]


@vjp("concatenate")
def _(B, p, xs, y, ct):
    axis, out, start = p["axis"], [], 0
    full = B.shape(ct)
    for x in xs:
        shape = B.shape(x)
        starts = [start if i == axis else 0 for i in range(len(full))]
        out.append(B.slice(ct, starts, shape, [1] * len(full)))
        start += shape[axis]
    return out


@vjp("stack")
def _(B, p, xs, y, ct):
    axis, full, out = p["axis"], B.shape(ct), []
    for k, x in enumerate(xs):
        starts = [k if i == axis else 0 for i in range(len(full))]
        sizes = [1 if i == axis else d for i, d in enumerate(full)]
        out.append(B.reshape(B.slice(ct, starts, sizes, [1] * len(full)), B.shape(x)))
    return out


# -- reverse rules: reductions and contractions --------------------------------


@vjp("reduce_sum")
def _(B, p, xs, y, ct):
    return [_expand_reduced(B, ct, B.shape(xs[0]), p["axes"], p["keepdims"])]


@vjp("reduce_mean")
def _(B, p, xs, y, ct):
    shape = B.shape(xs[0])
    count = 1
    for a in p["axes"]:
        count *= shape[a]
    scaled = B.binary("div", ct, _scalar(B, float(count), ct))
    return [_expand_reduced(B, scaled, shape, p["axes"], p["keepdims"])]


@vjp("reduce_max", "reduce_min")
def _(B, p, xs, y, ct):
    x = xs[0]
    if not is_float(B.dtype(x)):
        return [None]
    shape, axes, keep = B.shape(x), p["axes"], p["keepdims"]
    y_full = _expand_reduced(B, y, shape, axes, keep)
    mask = B.cast(B.compare("eq", x, y_full), B.dtype(x))
    count = _expand_reduced(B, B.reduce("sum", mask, axes, keep), shape, axes, keep)
    return [B.binary("div", B.binary("mul", mask, _expand_reduced(B, ct, shape, axes, keep)), count)]


@vjp("reduce_prod")
def _(B, p, xs, y, ct):
    # d prod / d x_i is the product of the others: prod / x_i without zeros in the
    # window; with one zero, the product of the non-zeros at the zero and 0
    # elsewhere; with more zeros, 0.
    x = xs[0]
    shape, axes, keep = B.shape(x), p["axes"], p["keepdims"]
    zero, one = _scalar(B, 0.0, x), _scalar(B, 1.0, x)
    is_zero = B.compare("eq", x, zero)
    n_zero = _expand_reduced(B, B.reduce("sum", B.cast(is_zero, B.dtype(x)), axes, keep), shape, axes, keep)
    p_nonzero = _expand_reduced(B, B.reduce("prod", B.select(is_zero, one, x), axes, keep), shape, axes, keep)
    safe_x = B.select(is_zero, one, x)
    at_nonzero = B.select(B.compare("eq", n_zero, zero), B.binary("div", p_nonzero, safe_x), zero)
    at_zero = B.select(B.compare("eq", n_zero, one), p_nonzero, zero)
    others = B.select(is_zero, at_zero, at_nonzero)
    return [B.binary("mul", _expand_reduced(B, ct, shape, axes, keep), others)]


def _matmul_vjp(B: Builder, a: V, b: V, ct: V) -> list:
    """Cotangents of np.matmul, including 1-D promotion and batch broadcasting."""
    sa, sb = B.shape(a), B.shape(b)
    a2 = B.reshape(a, (1, *sa)) if len(sa) == 1 else a
    b2 = B.reshape(b, (*sb, 1)) if len(sb) == 1 else b
    s2a, s2b = B.shape(a2), B.shape(b2)
    out_shape = (*_batch_of(s2a, s2b), s2a[-2], s2b[-1])
    ct2 = B.reshape(ct, out_shape) if B.shape(ct) != out_shape else ct
    bt = B.transpose(b2, _swap_last(len(s2b)))
    at = B.transpose(a2, _swap_last(len(s2a)))
    ga = B.matmul(ct2, bt)
    gb = B.matmul(at, ct2)
    ga = unbroadcast(B, ga, s2a)
    gb = unbroadcast(B, gb, s2b)
    if len(sa) == 1:
        ga = B.reshape(ga, sa)
    if len(sb) == 1:
        gb = B.reshape(gb, sb)
    return [ga, gb]


def _swap_last(n: int) -> list[int]:
    return [*range(n - 2), n - 1, n - 2]


def _batch_of(sa: Sequence[int], sb: Sequence[int]) -> tuple[int, ...]:
    a, b = list(sa[:-2]), list(sb[:-2])
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + a
    b = [1] * (n - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b))


@vjp("matmul")
def _(B, p, xs, y, ct):
    if not is_float(B.dtype(ct)):
        return [None, None]
    return _matmul_vjp(B, xs[0], xs[1], ct)


def _einsum_cotangent(B: Builder, terms: Sequence[str], out: str, xs: list, ct: V, i: int) -> V:
    """d<ct, einsum(terms -> out)(xs)> / d xs[i]: the einsum of the cotangent with
    the other operand onto operand i's distinct subscripts that the cotangent or
    the other operand has; then broadcast along those only operand i has (the
    forward summed them, so each element gets the same cotangent) and placed on
    the diagonals of its repeated subscripts (zeros off them)."""
    term, shape = terms[i], B.shape(xs[i])
    others = [j for j in range(len(xs)) if j != i]
    letters = distinct(term)
    reached = "".join(c for c in letters if c in out + "".join(terms[j] for j in others))
    g = B.einsum(einsum_spec([out, *(terms[j] for j in others)], reached), [ct, *(xs[j] for j in others)])
    size = dict(zip(term, shape))
    g = B.reshape(g, [size[c] if c in reached else 1 for c in letters])
    g = B.broadcast_to(g, [size[c] for c in letters])
    return scatter_diagonals(B, g, term, shape)


@vjp("einsum")
def _(B, p, xs, y, ct):
    if not is_float(B.dtype(ct)):
        return [None] * len(xs)
    terms, out = einsum_terms(p["spec"])
    return [_einsum_cotangent(B, terms, out, xs, ct, i) for i in range(len(xs))]



# -- window ops: derivatives as convolutions and strided slices (msir.passes.window_algebra)


@vjp_some("conv2d")
def _(B, p, xs, y, ct, wanted):
    x, w = xs
    return [window_algebra.conv2d_input_grad(B, ct, w, B.shape(x), p) if wanted[0] else None,
            window_algebra.conv2d_weight_grad(B, x, ct, B.shape(w), p) if wanted[1] else None]


@vjp("max_pool2d")
def _(B, p, xs, y, ct):
    return [window_algebra.max_pool2d_vjp(B, xs[0], y, ct, p)]


@vjp("avg_pool2d")
def _(B, p, xs, y, ct):
    return [window_algebra.avg_pool2d_vjp(B, xs[0], ct, p)]

# -- forward rules -------------------------------------------------------------


def _t(B: Builder, t: V | None, like: V) -> V:
    """A tangent, with None (zero) made explicit."""
    return t if t is not None else _scalar(B, 0.0, like)


def _lin(B: Builder, p: dict, xs: list, y: V, ts: list, name: str) -> V:
    """Forward rule of a linear op: apply the op to the tangents."""
    return B.apply(name, p, [_t(B, t, x) if is_float(B.dtype(x)) else x for t, x in zip(ts, xs)])


for _name in (
    *(p.name for p in primitives.ELEMENTWISE if p.linear), "broadcast_to", "reshape", "transpose", "slice",
    "scatter_slice", "concatenate", "stack", "reduce_sum", "reduce_mean", "avg_pool2d",
):
    JVP[_name] = (lambda n: lambda B, p, xs, y, ts: _lin(B, p, xs, y, ts, n))(_name)


@jvp("take")
def _(B, p, xs, y, ts):
    return B.take(_t(B, ts[0], xs[0]), xs[1], p["axis"])


@jvp("scatter_add")
def _(B, p, xs, y, ts):
    return B.scatter_add(_t(B, ts[0], xs[0]), xs[1], p["axis"], B.shape(y))


@jvp("compress")
def _(B, p, xs, y, ts):
    return B.compress(_t(B, ts[0], xs[0]), xs[1])


@jvp("ramp")
def _(B, p, xs, y, ts):
    return B.apply("ramp", {}, [_t(B, ts[0], xs[0]), _t(B, ts[1], xs[1]), xs[2]])


@jvp("expand")
def _(B, p, xs, y, ts):
    # a missing tangent is zero rows: expand zeros of the static result instead
    return B.expand(ts[0], xs[1], B.shape(y)) if ts[0] is not None else _scalar(B, 0.0, y)


@jvp("cast")
def _(B, p, xs, y, ts):
    return B.cast(_t(B, ts[0], xs[0]), B.dtype(y)) if is_float(B.dtype(xs[0])) else _scalar(B, 0.0, y)


@jvp("stop_gradient")
def _(B, p, xs, y, ts):
    return _scalar(B, 0.0, y)


@jvp("einsum")
def _(B, p, xs, y, ts):
    # multilinear: one term per operand with a tangent, the others held
    out = None
    for i, t in enumerate(ts):
        if t is None:
            continue
        term = B.einsum(p["spec"], [t if j == i else x for j, x in enumerate(xs)])
        out = term if out is None else B.binary("add", out, term)
    return out if out is not None else _scalar(B, 0.0, y)


@jvp("matmul")
def _(B, p, xs, y, ts):
    a, b = xs
    ta, tb = ts
    out = None
    if ta is not None:
        out = B.matmul(ta, b)
    if tb is not None:
        term = B.matmul(a, tb)
        out = term if out is None else B.binary("add", out, term)
    return out if out is not None else _scalar(B, 0.0, y)



@jvp("conv2d")
def _(B, p, xs, y, ts):
    # bilinear: one convolution per operand with a tangent
    (x, w), (tx, tw) = xs, ts
    out = None if tx is None else window_algebra.conv2d(B, tx, w, p)
    if tw is not None:
        term = window_algebra.conv2d(B, x, tw, p)
        out = term if out is None else B.binary("add", out, term)
    return out if out is not None else _scalar(B, 0.0, y)


@jvp("max_pool2d")
def _(B, p, xs, y, ts):
    return window_algebra.max_pool2d_jvp(B, xs[0], y, ts[0], p) if ts[0] is not None else _scalar(B, 0.0, y)

def _jvp_from_vjp_elementwise(name: str) -> JvpRule:
    """Elementwise ops are diagonal: the tangent is the sum over operands of the
    reverse rule applied to each operand's tangent."""

    def rule(B, p, xs, y, ts):
        out = None
        for i, t in enumerate(ts):
            if t is None or not is_float(B.dtype(xs[i])):
                continue
            cts = VJP[name](B, p, xs, y, t)
            # For a diagonal op, the vjp of tangent t w.r.t. operand i equals the
            # jvp contribution of operand i only when the others' partials are
            # dropped: recompute with the other cotangents ignored.
            term = cts[i]
            if term is None:
                continue
            out = term if out is None else B.binary("add", out, term)
        return out if out is not None else _scalar(B, 0.0, y)

    return rule


for _name in (*(p.name for p in primitives.ELEMENTWISE if p.differentiable and not p.linear), "select"):
    JVP[_name] = _jvp_from_vjp_elementwise(_name)


def _window_jvp(name: str) -> JvpRule:
    """Max/min/prod reductions: the tangent is the window sum of the gradient
    (the reverse rule with a unit cotangent) times the input tangent."""

    def rule(B, p, xs, y, ts):
        (g,) = VJP[name](B, p, xs, y, _scalar(B, 1.0, y))
        return B.reduce("sum", B.binary("mul", g, _t(B, ts[0], xs[0])), p["axes"], p["keepdims"])

    return rule


for _name in ("reduce_max", "reduce_min", "reduce_prod"):
    JVP[_name] = _window_jvp(_name)


# -- tapes (they appear in derivatives of loops, so derivatives of derivatives
# meet them). Every row of a tape is written once (tape_alloc/tape_zeros, then
# tape_set/tape_add/tape_push), so the cotangent of the tape a write consumes is that of
# the tape it returns. In a loop, `grad_control` applies these rules in place,
# accumulating a read's row cotangent into a loop-carried cotangent tape
# (`tape_add`) instead of materialising the whole-tape cotangent below. -------


@vjp("tape_set", "tape_add")
def _(B, p, xs, y, ct):
    return [ct, None, B.tape_get(ct, xs[1])]


@vjp("tape_get")
def _(B, p, xs, y, ct):
    return [B.tape_add(B.tape_zeros(xs[0]), xs[1], ct), None]


@jvp("tape_set")
def _(B, p, xs, y, ts):
    if ts[0] is None:
        raise KeyError("tape_set: the tape's tangent must come from the loop")
    return B.tape_set(ts[0], xs[1], _t(B, ts[2], xs[2]))


@jvp("tape_push")
def _(B, p, xs, y, ts):
    base = ts[0] if ts[0] is not None else B.tape_zeros(xs[0])
    return B.tape_push(base, _t(B, ts[1], xs[1]))


@jvp("tape_add")
def _(B, p, xs, y, ts):
    base = ts[0] if ts[0] is not None else B.tape_zeros(xs[0])
    return B.tape_add(base, xs[1], _t(B, ts[2], xs[2]))


@jvp("tape_get")
def _(B, p, xs, y, ts):
    return B.tape_get(ts[0], xs[1]) if ts[0] is not None else _scalar(B, 0.0, y)


# -- collectives (`msir_shard`, in the per-device functions msir-shard makes).
# They act on the devices of a mesh, which the eager NumpyBuilder has not: their
# rules are IRBuilder-only, in tables of their own that msir-grad and msir-jvp
# read after VJP and JVP, and are checked end to end, against the serial
# gradient and finite differences (test/unit/test_parallel_device_grad.py). Per device, the cotangent of a value replicated along a mesh
# axis is the whole cotangent (every device holds it), that of a value split
# or partial along the axis the device's own part. So (`../shared/parallel.md`
# §1) all_reduce(sum)'s adjoint is the identity on the replicated cotangent;
# all_gather and reduce_scatter are each other's adjoints; all_slice's is an
# all_gather (shared among the devices' equal copies of a varying input, which
# msir-grad's `input_varying` and `axis_size` parameters say); all_to_all's is the all_to_all moving the split back. The sum a
# replicated operand of a split computation needs is added by msir-grad
# (`msir.passes.grad_shard`). -------------------------------------------------

NON_DIFFERENTIABLE.add("msir_shard.process_index")
COLLECTIVE_VJP: dict[str, VjpRule] = {}
COLLECTIVE_JVP: dict[str, JvpRule] = {}


def collective_vjp(*names: str):
    def register(fn: VjpRule) -> VjpRule:
        COLLECTIVE_VJP.update(dict.fromkeys(names, fn))
        return fn

    return register


def collective_jvp(*names: str):
    def register(fn: JvpRule) -> JvpRule:
        COLLECTIVE_JVP.update(dict.fromkeys(names, fn))
        return fn

    return register


def _max_share(B, p, x, y):
    """Per device, its share of all_reduce(max)'s derivative: 1/k on the k devices holding the maximum
    (ties split evenly, as reduce_max splits them)."""
    mask = B.cast(B.compare("eq", x, y), B.dtype(x))
    return B.binary("div", mask, B.collective("all_reduce", mask, {**p, "kind": "sum"}))


@collective_vjp("msir_shard.all_reduce")
def _(B, p, xs, y, ct):
    if p["kind"] == "sum":
        return [ct]
    return [B.binary("mul", _max_share(B, p, xs[0], y), ct)]


@collective_vjp("msir_shard.all_gather")
def _(B, p, xs, y, ct):
    return [B.collective("reduce_scatter", ct, p, B.shape(xs[0]))]


@collective_vjp("msir_shard.reduce_scatter")
def _(B, p, xs, y, ct):
    return [B.collective("all_gather", ct, p, B.shape(xs[0]))]


@collective_vjp("msir_shard.all_slice")
def _(B, p, xs, y, ct):
    whole = B.collective("all_gather", ct, p, B.shape(xs[0]))
    if not p.get("input_varying"):
        return [whole]
    # the devices' equal copies of a varying value each take 1/n of its cotangent (msir.passes.grad_shard)
    return [B.binary("mul", whole, _scalar(B, 1.0 / p["axis_size"], whole))]


@collective_vjp("msir_shard.all_to_all")
def _(B, p, xs, y, ct):
    back = {**p, "dim": p["to_dim"], "to_dim": p["dim"]}
    return [B.collective("all_to_all", ct, back, B.shape(xs[0]))]


@collective_jvp("msir_shard.all_reduce")
def _(B, p, xs, y, ts):
    t = _t(B, ts[0], xs[0])
    if p["kind"] == "sum":
        return B.collective("all_reduce", t, p)
    return B.collective("all_reduce", B.binary("mul", _max_share(B, p, xs[0], y), t), {**p, "kind": "sum"})


for _kind in ("all_gather", "reduce_scatter", "all_slice", "all_to_all"):  # linear: the same op on the tangent
    COLLECTIVE_JVP[f"msir_shard.{_kind}"] = (
        lambda kind: lambda B, p, xs, y, ts: B.collective(kind, _t(B, ts[0], xs[0]), p, B.shape(y)))(_kind)
