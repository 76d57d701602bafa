"""The eager (PyNative) tracer: an array type that records the msir primitives a
plain NumPy function performs on it, level by level.

* `Tracer`: a value of one transformation (a *trace*) at one perturbation
  *level*. It wraps the primal value, which is a NumPy array or a `Tracer` of an
  outer (lower) level, so transformations nest: `grad(grad(f))` runs `f` on a
  level-2 tracer whose primal is a level-1 tracer whose primal is an ndarray.
* `bind(name, p, xs)`: apply one msir primitive (names and parameters as
  `passes.ad_ir.op_params` gives them). The operand of the highest active level
  decides which trace handles it; operands of lower levels are constants to it
  (this is what keeps a gradient taken inside a gradient from confusing the
  two perturbations). Without tracers the primitive runs on NumPy
  (`NumpyBuilder`).
* `ReverseTrace` records a tape of (primitive, params, primal operands, primal
  result) and runs it backward with the `VJP` rules; `ForwardTrace` carries a
  tangent with every value and applies the `JVP` rules as it goes (dual
  numbers). Both apply the rules through `TRACING_BUILDER`, whose operations are
  `bind` again: a rule that runs on outer-level tracers is recorded by the outer
  trace, which is what makes higher order work.
* The NumPy surface (`__array_ufunc__`, `__array_function__`, operators,
  methods, indexing) decomposes every call into primitives exactly as the
  compiled frontend (`msir.frontend.translate`) does: NumPy broadcasting becomes
  `broadcast_to`, NEP 50 promotion becomes `cast`, `x[i]` becomes `slice` +
  `reshape`, so the rules see the same primitives in both modes.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from msir.dialects import primitives
from msir.eager.numpy_builder import NumpyBuilder
from msir.frontend import masks, numpy_bodies
from msir.frontend.einsum_subscripts import contract, plan_einsum
from msir.frontend.elementwise import binary_typing, check_square, unary_typing
from msir.dialects.primitives import DTYPES
from msir.frontend.values import dtype_name, kind, promote, reduces_over_nothing, weak_dtype_of
from msir.errors import DTypeError, MsirError, MsirIndexError, NotDifferentiableError, ShapeError, UnsupportedSyntaxError
from msir.passes.grad_rules import JVP, NON_DIFFERENTIABLE, VJP, VJP_SOME

FLOATS = primitives.FLOATS
_NB = NumpyBuilder()


class EagerValueError(MsirError, ValueError):
    pass


class EagerTypeError(MsirError, TypeError):
    pass


# ---------------------------------------------------------------------------
# Traces and tracers
# ---------------------------------------------------------------------------

_levels = itertools.count(1)


class Trace:
    """One transformation invocation: a fresh perturbation level."""

    def __init__(self) -> None:
        self.level = next(_levels)  # later (inner) invocations get higher levels
        self.active = True

    def process(self, name: str, p: dict, xs: list) -> Any:  # pragma: no cover
        raise NotImplementedError


class Tracer:
    """An array traced by one transformation; behaves like a NumPy array."""

    __slots__ = ("trace", "primal", "weak", "shape", "_dtype", "id", "tangent")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, primal: Any, weak: bool = False, tangent: Any = None):
        self.trace = trace
        self.primal = primal
        self.weak = weak
        self.shape = _shape(primal)
        self._dtype = _dtype(primal)
        self.id = -1
        self.tangent = tangent

    def with_weak(self, weak: bool) -> "Tracer":
        if weak == self.weak:
            return self
        t = Tracer.__new__(Tracer)
        for s in Tracer.__slots__:
            setattr(t, s, getattr(self, s))
        t.weak = weak
        return t

    # -- array attributes ----------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def T(self) -> Any:
        return transpose(self, None)

    def __repr__(self) -> str:
        return f"Tracer(level={self.trace.level}, shape={self.shape}, dtype={self._dtype}, value={base_value(self)!r})"

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise UnsupportedSyntaxError(f"array attribute '.{name}' is not supported in compiled functions")
        raise AttributeError(name)

    # -- NumPy protocols -------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = getattr(ufunc, "__name__", str(ufunc))
        if method != "__call__":
            raise UnsupportedSyntaxError(f"the NumPy function np.{name}.{method} is not supported in compiled functions")
        if kwargs:
            raise UnsupportedSyntaxError(f"np.{name}: the keyword argument '{next(iter(kwargs))}' is not supported")
        handler = _UFUNCS.get(name)
        if handler is None:
            raise UnsupportedSyntaxError(f"the NumPy function np.{name} is not supported in compiled functions")
        return handler(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        handler = _FUNCTIONS.get(func)
        if handler is None:
            raise UnsupportedSyntaxError(f"the NumPy function {_np_name(func)} is not supported in compiled functions")
        return handler(*args, **kwargs)

    def __array__(self, dtype=None, copy=None):
        raise UnsupportedSyntaxError(
            "converting a traced array to a NumPy array (np.asarray, np.array, or a NumPy function msir "
            "does not know) would drop its derivative; this is not supported in PYNATIVE_MODE"
        )

    # -- Python protocols ------------------------------------------------------

    def __bool__(self) -> bool:
        if self.size != 1:
            raise EagerValueError(
                "The truth value of an array with more than one element is ambiguous; "
                "use np.logical_and / np.logical_or"
            )
        return bool(base_value(self))

    def __float__(self) -> float:
        raise UnsupportedSyntaxError(
            "float() (and math functions) on a traced array would drop its derivative in PYNATIVE_MODE; "
            "use x.item(), x.astype(np.float64) or the NumPy function instead"
        )

    def __format__(self, spec: str) -> str:
        # f-strings in user code (an error message) show the value, as NumPy's own array would
        value = np.asarray(base_value(self))
        return format(value[()] if value.ndim == 0 else value, spec)

    def __str__(self) -> str:
        return format(self, "")

    def __int__(self) -> int:
        return int(base_value(self))

    def __index__(self) -> int:
        raise EagerTypeError("only integer arrays can be used as an index")

    def __len__(self) -> int:
        if not self.shape:
            raise EagerTypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise EagerTypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx):
        return subscript(self, idx)

    def __setitem__(self, idx, value):
        raise UnsupportedSyntaxError(
            "assigning to an array element (x[...] = ...) is not supported in compiled functions; msir "
            "arrays are immutable (use np.where or np.concatenate)"
        )

    __hash__ = object.__hash__

    # -- operators -----------------------------------------------------------

    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("rem", self, o)
    def __rmod__(self, o): return binary("rem", o, self)
    def __pow__(self, o): return binary("pow", self, o)
    def __rpow__(self, o): return binary("pow", o, self)
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __xor__(self, o): return binary("xor", self, o)
    def __rxor__(self, o): return binary("xor", o, self)
    def __lt__(self, o): return compare("lt", self, o)
    def __le__(self, o): return compare("le", self, o)
    def __gt__(self, o): return compare("gt", self, o)
    def __ge__(self, o): return compare("ge", self, o)
    def __eq__(self, o): return compare("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return compare("ne", self, o)  # type: ignore[override]
    def __neg__(self): return negative(self)
    def __pos__(self): return positive(self)
    def __abs__(self): return unary("abs", self)
    def __invert__(self): return invert(_operator_operand(self))

    # -- methods -------------------------------------------------------------

    def sum(self, axis=None, dtype=None, keepdims=False): return reduce("sum", self, axis, keepdims, dtype)
    def prod(self, axis=None, dtype=None, keepdims=False): return reduce("prod", self, axis, keepdims, dtype)
    def mean(self, axis=None, dtype=None, keepdims=False): return reduce("mean", self, axis, keepdims, dtype)
    def max(self, axis=None, keepdims=False): return reduce("max", self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return reduce("min", self, axis, keepdims)
    def argmax(self, axis=None, keepdims=False): return arg_reduce("argmax", self, axis, keepdims)
    def argmin(self, axis=None, keepdims=False): return arg_reduce("argmin", self, axis, keepdims)
    def var(self, axis=None, keepdims=False): return var(self, axis, keepdims)
    def std(self, axis=None, keepdims=False): return var(self, axis, keepdims, std=True)
    def clip(self, min=None, max=None, **kw): return clip(self, kw.get("a_min", min), kw.get("a_max", max))
    def dot(self, b): return dot(self, b)
    def cumsum(self, axis=None, dtype=None): return scan("add", self, axis, dtype)
    def any(self, axis=None, keepdims=False): return truth(self, axis, keepdims, every=False)
    def all(self, axis=None, keepdims=False): return truth(self, axis, keepdims, every=True)
    def cumprod(self, axis=None, dtype=None): return scan("mul", self, axis, dtype)
    def squeeze(self, axis=None): return squeeze(self, axis)
    def argsort(self, axis=-1, kind=None, order=None): return sort(self, axis, kind, order, argsort=True)
    def flatten(self): return reshape(self, (-1,))
    def ravel(self): return reshape(self, (-1,))

    def reshape(self, *shape, **kw):
        shape = kw.pop("shape", shape[0] if len(shape) == 1 else tuple(shape))
        return reshape(self, shape)

    def transpose(self, *axes):
        return transpose(self, None if not axes else (axes[0] if len(axes) == 1 else tuple(axes)))

    def astype(self, dtype):
        return _out(_cast(_T.of(self), dtype_name(dtype), False))

    def item(self):
        if self.size != 1:
            raise EagerValueError("can only convert an array of size 1 to a Python scalar")
        t = _reshape_to(_T.of(self), ())
        k = kind(t.dtype)
        return _out(_cast(t, "float64" if k == 2 else ("bool" if k == 0 else "int64"), True))

    def copy(self):
        return self


def base_value(x: Any) -> Any:
    """The innermost (NumPy) value of a tracer."""
    while type(x) is Tracer:
        x = x.primal
    return x


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if type(x) is Tracer else tuple(np.shape(x))


def _dtype(x: Any) -> str:
    return x._dtype if type(x) is Tracer else np.asarray(x).dtype.name


def bind(name: str, p: dict, xs: Sequence[Any]) -> Any:
    """Apply primitive `name` to `xs`, at the highest active level among them."""
    top = None
    for x in xs:
        if type(x) is Tracer:
            tr = x.trace
            if tr.active and (top is None or tr.level > top.level):
                top = tr
    if top is None:
        return _NB.apply(name, p, [base_value(x) for x in xs])
    return top.process(name, p, list(xs))


def custom_vjp_call(primal_fn, bwd, xs: Sequence[Any], what: str) -> Any:
    """`primal_fn(*xs)` (one array out) with a user-defined reverse rule:
    `bwd(xs, y, ct)` gives one cotangent per operand (None: zero). At the
    highest active trace among `xs`, which must be reverse mode: the primal
    runs on the operands' primals (lower levels record it), and the trace
    records one node whose adjoint is `bwd` (whose ops lower levels record
    in turn). `what` names the function in errors (a Cell's bprop)."""
    top = None
    for x in xs:
        if type(x) is Tracer and x.trace.active and (top is None or x.trace.level > top.level):
            top = x.trace
    if top is None:
        return primal_fn(*xs)
    if not isinstance(top, ReverseTrace):
        raise UnsupportedSyntaxError(f"{what}: a custom backward has no forward-mode (jvp) rule")
    mine = [type(x) is Tracer and x.trace is top for x in xs]
    primals = [x.primal if m else x for x, m in zip(xs, mine)]
    y = primal_fn(*primals)
    if isinstance(y, (tuple, list)) or (type(y) is Tracer and y.trace is top):
        raise UnsupportedSyntaxError(
            f"{what}: a custom backward in PYNATIVE_MODE needs one output computed from the inputs alone"
        )
    if _dtype(y) not in FLOATS:
        return y
    out = Tracer(top, y)
    out.id = next(top._ids)
    top.nodes.append(("custom_vjp", {"bwd": bwd, "what": what}, primals, y, [x.id if m else None for x, m in zip(xs, mine)], out.id))
    return out


def _custom_cotangents(p: dict, xs: list, y: Any, ct: Any) -> list:
    grads = list(p["bwd"](xs, y, ct))
    if len(grads) != len(xs):
        raise ShapeError(f"{p['what']}: the custom backward must return one gradient per input ({len(xs)}), got {len(grads)}")
    for x, g in zip(xs, grads):
        if g is not None and _shape(g) != _shape(x):
            raise ShapeError(
                f"{p['what']}: a gradient of shape {fmt_shape(_shape(g))} for an input of shape {fmt_shape(_shape(x))}"
            )
    return grads


def _record_params(p: dict, y: Any, dt: str) -> dict:
    p = dict(p)
    p.setdefault("shape", _shape(y))
    p.setdefault("dtype", dt)
    return p


class ReverseTrace(Trace):
    """Reverse mode: a tape of (name, params, primal operands, primal result,
    operand ids, result id), run backward with the VJP rules."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[tuple] = []
        self._ids = itertools.count()

    def leaf(self, primal: Any, weak: bool) -> Tracer:
        t = Tracer(self, primal, weak)
        t.id = next(self._ids)
        return t

    def process(self, name, p, xs):
        mine = [type(x) is Tracer and x.trace is self for x in xs]
        primals = [x.primal if m else x for x, m in zip(xs, mine)]
        y = bind(name, p, primals)
        dt = _dtype(y)
        if name in NON_DIFFERENTIABLE or dt not in FLOATS:
            return y
        if name not in VJP:
            raise NotDifferentiableError(f"msir.{name} has no reverse-mode derivative rule")
        out = Tracer(self, y)
        out.id = next(self._ids)
        in_ids = [x.id if m else None for x, m in zip(xs, mine)]
        self.nodes.append((name, _record_params(p, y, dt), primals, y, in_ids, out.id))
        return out

    def backward(self, seeds: list[tuple[int, Any]]) -> dict[int, Any]:
        """Cotangents of every id reached from `seeds` (id, cotangent)."""
        cts: dict[int, Any] = {}
        for i, ct in seeds:
            cts[i] = ct if i not in cts else TRACING_BUILDER.binary("add", cts[i], ct)
        B = TRACING_BUILDER
        for name, p, xs, y, in_ids, out_id in reversed(self.nodes):
            ct = cts.pop(out_id, None)
            if ct is None:
                continue
            if name == "matmul" and None in in_ids and len(_shape(xs[0])) == 2 and len(_shape(xs[1])) == 2:
                # Only one operand is traced: skip the other's (often largest) product.
                a, b = xs
                grads = (
                    [None, B.matmul(B.transpose(a, (1, 0)), ct)] if in_ids[0] is None
                    else [B.matmul(ct, B.transpose(b, (1, 0))), None]
                )
            elif name == "custom_vjp":
                grads = _custom_cotangents(p, list(xs), y, ct)
            elif name in VJP_SOME:
                grads = VJP_SOME[name](B, p, list(xs), y, ct, tuple(i is not None for i in in_ids))
            else:
                grads = VJP[name](B, p, list(xs), y, ct)
            for i, g in zip(in_ids, grads):
                if i is None or g is None:
                    continue
                cts[i] = g if i not in cts else B.binary("add", cts[i], g)
        return cts


class ForwardTrace(Trace):
    """Forward mode: every value carries a tangent (dual numbers)."""

    def process(self, name, p, xs):
        mine = [type(x) is Tracer and x.trace is self for x in xs]
        primals = [x.primal if m else x for x, m in zip(xs, mine)]
        y = bind(name, p, primals)
        dt = _dtype(y)
        if name in NON_DIFFERENTIABLE or dt not in FLOATS:
            return y
        ts = [x.tangent if m and _dtype(x) in FLOATS else None for x, m in zip(xs, mine)]
        if all(t is None for t in ts):
            return y
        if name not in JVP:
            raise NotDifferentiableError(f"msir.{name} has no forward-mode derivative rule")
        t = JVP[name](TRACING_BUILDER, _record_params(p, y, dt), primals, y, ts)
        return Tracer(self, y, tangent=t)


class TracingBuilder:
    """The rules' `Builder`, whose operations go through `bind`: on NumPy arrays it
    computes (as `NumpyBuilder`), on tracers it records on their trace."""

    def shape(self, x) -> tuple[int, ...]:
        return _shape(x)

    def dtype(self, x) -> str:
        return _dtype(x)

    def constant(self, value, dtype, shape=()):
        return np.full(tuple(shape), value, dtype=dtype)

    def iota(self, dtype, shape, axis):
        return _NB.iota(dtype, shape, axis)

    def unary(self, name, x):
        return bind(name, {}, [x])

    def binary(self, name, a, b):
        return bind(name, {}, [a, b])

    def compare(self, pred, a, b):
        return bind("compare", {"predicate": pred}, [a, b])

    def select(self, c, a, b):
        return bind("select", {}, [c, a, b])

    def cast(self, x, dtype):
        return x if _dtype(x) == dtype else bind("cast", {"dtype": dtype}, [x])

    def broadcast_to(self, x, shape):
        shape = tuple(shape)
        return x if _shape(x) == shape else bind("broadcast_to", {"shape": shape}, [x])

    def reshape(self, x, shape):
        shape = tuple(shape)
        return x if _shape(x) == shape else bind("reshape", {"shape": shape}, [x])

    def transpose(self, x, perm):
        perm = tuple(perm)
        return x if perm == tuple(range(len(perm))) else bind("transpose", {"perm": perm}, [x])

    def reduce(self, name, x, axes, keepdims):
        if not axes:
            return x
        return bind(f"reduce_{name}", {"axes": tuple(sorted(axes)), "keepdims": bool(keepdims)}, [x])

    def matmul(self, a, b):
        return bind("matmul", {}, [a, b])

    def einsum(self, spec, xs):
        return bind("einsum", {"spec": spec}, list(xs))

    def slice(self, x, starts, sizes, steps):
        if _shape(x) == tuple(sizes) and all(s == 0 for s in starts) and all(t == 1 for t in steps):
            return x
        return bind("slice", {"starts": tuple(starts), "steps": tuple(steps), "shape": tuple(sizes)}, [x])

    def scatter_slice(self, x, starts, steps, shape):
        if _shape(x) == tuple(shape) and all(s == 0 for s in starts) and all(t == 1 for t in steps):
            return x
        return bind("scatter_slice", {"starts": tuple(starts), "steps": tuple(steps), "shape": tuple(shape)}, [x])

    def take(self, x, idx, axis):
        return bind("take", {"axis": axis}, [x, idx])

    def scatter_add(self, u, idx, axis, shape):
        return bind("scatter_add", {"axis": axis, "shape": tuple(shape)}, [u, idx])

    def compress(self, x, mask):
        return bind("compress", {}, [x, mask])

    def expand(self, u, mask, shape):
        return bind("expand", {"shape": tuple(shape)}, [u, mask])

    def concatenate(self, xs, axis):
        return bind("concatenate", {"axis": axis}, list(xs))

    def stack(self, xs, axis):
        return bind("stack", {"axis": axis}, list(xs))

    def apply(self, name, p, xs):
        if name.startswith("reduce_"):
            return self.reduce(name.removeprefix("reduce_"), xs[0], p["axes"], p["keepdims"])
        match name:
            case "broadcast_to" | "reshape":
                return getattr(self, name)(xs[0], p["shape"])
            case "transpose":
                return self.transpose(xs[0], p["perm"])
            case "slice":
                return self.slice(xs[0], p["starts"], p["shape"], p["steps"])
            case "scatter_slice":
                return self.scatter_slice(xs[0], p["starts"], p["steps"], p["shape"])
        return bind(name, p, list(xs))


TRACING_BUILDER = TracingBuilder()


# ---------------------------------------------------------------------------
# The NumPy surface: the frontend's decomposition, eagerly
# ---------------------------------------------------------------------------


class _T:
    """An operand while decomposing a NumPy call (the frontend's `Tensor`)."""

    __slots__ = ("v", "dtype", "shape", "weak")

    def __init__(self, v, dtype: str, shape: tuple, weak: bool):
        self.v, self.dtype, self.shape, self.weak = v, dtype, tuple(shape), weak

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @staticmethod
    def of(x: Any) -> "_T":
        if type(x) is Tracer:
            return _T(x, x._dtype, x.shape, x.weak)
        if isinstance(x, _T):
            return x
        if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
            dt = weak_dtype_of(x)
            if dt == "int64" and not -(2**63) <= x < 2**63:
                raise OverflowError(f"Python integer {x} out of bounds for int64")
            return _T(np.asarray(x, dtype=dt), dt, (), True)
        if isinstance(x, (np.ndarray, np.generic)):
            a = np.asarray(x)
            if a.dtype.name not in DTYPES:
                raise DTypeError(f"dtype {a.dtype.name} is not supported (use one of {', '.join(DTYPES)})")
            return _T(a, a.dtype.name, a.shape, False)
        if isinstance(x, (list, tuple)) and x:
            items = [_T.of(v) for v in x]
            dtype, weak = items[0].dtype, items[0].weak
            for it in items[1:]:
                dtype, weak = promote(dtype, weak, it.dtype, it.weak)
            items = [_cast(it, dtype) for it in items]
            shape0 = items[0].shape
            if any(it.shape != shape0 for it in items):
                raise ShapeError("setting an array element with a sequence: the items have different shapes")
            all_py = all(isinstance(v, (bool, int, float)) for v in x)
            return _emit("stack", {"axis": 0}, items, weak=False if all_py else False)
        raise DTypeError(f"expected an array or a number, got a value of type {type(x).__name__}")


def _emit(name: str, p: dict, items: Sequence[_T], weak: bool) -> _T:
    y = bind(name, p, [t.v for t in items])
    return _T(y, _dtype(y), _shape(y), weak)


def _out(t: _T) -> Any:
    v = t.v
    if type(v) is Tracer:
        return v.with_weak(t.weak)
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v[()]
    return v


def fmt_shape(shape: Sequence[int]) -> str:
    dims = ", ".join(str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def _broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise ShapeError(f"shapes {fmt_shape(a)} and {fmt_shape(b)} cannot be broadcast together")
    return tuple(reversed(out))


def _normalize_axis(axis: Any, ndim: int) -> int:
    a = _static_int(axis, "an axis")
    if not -ndim <= a < ndim:
        raise MsirIndexError(f"axis {a} is out of bounds for array of dimension {ndim}")
    return a % ndim


def _static_int(v: Any, what: str) -> int:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
        return int(v)
    raise UnsupportedSyntaxError(f"{what} must be an integer known at compile time, got {type(v).__name__}")


def _static_ints(v: Any, what: str) -> tuple[int, ...]:
    if isinstance(v, (tuple, list)):
        return tuple(_static_int(x, what) for x in v)
    return (_static_int(v, what),)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(_normalize_axis(a, ndim) for a in _static_ints(axis, "an axis"))


# -- conversions ---------------------------------------------------------------


def _cast(t: _T, dtype: str, weak: bool | None = None) -> _T:
    weak = t.weak if weak is None else weak
    if t.dtype == dtype:
        return t if t.weak == weak else _T(t.v, t.dtype, t.shape, weak)
    y = TRACING_BUILDER.cast(t.v, dtype)
    return _T(y, dtype, t.shape, weak)


def _bcast(t: _T, shape: tuple[int, ...]) -> _T:
    if t.shape == tuple(shape):
        return t
    return _T(TRACING_BUILDER.broadcast_to(t.v, shape), t.dtype, shape, t.weak)


def _reshape_to(t: _T, shape: Sequence[int]) -> _T:
    shape = tuple(shape)
    if shape == t.shape:
        return t
    return _T(TRACING_BUILDER.reshape(t.v, shape), t.dtype, shape, t.weak)


# -- arithmetic ------------------------------------------------------------------

def binary(name: str, a: Any, b: Any) -> Any:
    return _out(elementwise(name, _T.of(a), _T.of(b)))


def elementwise(name: str, a: _T, b: _T) -> _T:
    prim, dtype, weak = binary_typing(name, a.dtype, a.weak, b.dtype, b.weak)
    if prim == "pow" and b.weak and type(b.v) is not Tracer and b.ndim == 0 and float(b.v) == 2:
        a2 = _cast(a, dtype, weak)
        return elementwise("mul", a2, a2)
    return _apply_binary(prim, a, b, dtype, weak)


def _apply_binary(prim: str, a: _T, b: _T, dtype: str, weak: bool) -> _T:
    shape = _broadcast_shapes(a.shape, b.shape)
    a2 = _bcast(_cast(a, dtype), shape)
    b2 = _bcast(_cast(b, dtype), shape)
    return _emit(prim, {}, [a2, b2], weak)


def unary(name: str, x: Any) -> Any:
    return _out(_unary(name, _T.of(x)))


def _unary(name: str, t: _T) -> _T:
    prim, dtype, weak = unary_typing(name, t.dtype, t.weak)
    t = _cast(t, dtype, weak) if dtype != t.dtype else t
    return t if prim is None else _emit(prim, {}, [t], weak)


def _operator_operand(x: Any) -> _T:
    """The operand of a unary operator: a Python bool acts as its int, as in
    Python (`~True == -2`, `-True == -1`, `+True == 1`)."""
    t = _T.of(x)
    return _cast(t, "int64", True) if t.dtype == "bool" and t.weak else t


def negative(x: Any) -> Any:
    return _out(_unary("neg", _operator_operand(x)))


def positive(x: Any) -> Any:
    t = _operator_operand(x)
    return x if t.v is x else _out(t)


def invert(x: Any) -> Any:
    t = _T.of(x)
    if t.dtype == "bool":
        return _out(_emit("not", {}, [t], t.weak))
    if kind(t.dtype) == 1:
        return _out(elementwise("xor", t, _T(np.asarray(-1, t.dtype), t.dtype, (), t.weak)))
    raise DTypeError(f"the operator ~ is not supported for {t.dtype}")


def compare(pred: str, a: Any, b: Any) -> Any:
    ta, tb = _T.of(a), _T.of(b)
    dtype, _ = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = _broadcast_shapes(ta.shape, tb.shape)
    a2 = _bcast(_cast(ta, dtype), shape)
    b2 = _bcast(_cast(tb, dtype), shape)
    return _out(_emit("compare", {"predicate": pred}, [a2, b2], ta.weak and tb.weak))


def matmul(a: Any, b: Any) -> Any:
    ta, tb = _T.of(a), _T.of(b)
    if ta.ndim == 0 or tb.ndim == 0:
        raise ShapeError("matmul: Input operand does not have enough dimensions (a scalar given; use * to scale)")
    dtype, weak = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
    if dtype == "bool":
        raise DTypeError("matmul of boolean arrays is not supported")
    sa, sb = ta.shape, tb.shape
    a2 = (1, *sa) if len(sa) == 1 else sa
    b2 = (*sb, 1) if len(sb) == 1 else sb
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"matmul: shapes {fmt_shape(sa)} and {fmt_shape(sb)} not aligned: "
            f"{a2[-1]} (dim {len(sa) - 1}) != {b2[-2]} (dim {max(len(sb) - 2, 0)})"
        )
    _broadcast_shapes(a2[:-2], b2[:-2])
    return _out(_emit("matmul", {}, [_cast(ta, dtype), _cast(tb, dtype)], weak))


def einsum(subscripts: Any, *operands: Any, optimize: Any = False) -> Any:
    """`np.einsum` as the compiled frontend computes it (`msir.frontend.einsum_subscripts`):
    cast, stretch, then one `einsum` primitive per contraction. `optimize` only
    chooses NumPy's contraction order: the plan's order is used."""
    if not isinstance(subscripts, str):
        raise UnsupportedSyntaxError(
            "np.einsum needs its subscripts as a string first (the interleaved operand/sublist form is not supported)"
        )
    ts = [_T.of(x) for x in operands]
    plan = plan_einsum(subscripts, [t.shape for t in ts], [t.dtype for t in ts])
    values = [_bcast(_cast(t, plan.dtype, False), shape) for t, shape in zip(ts, plan.shapes)]
    return _out(contract(plan, values, lambda spec, xs: _emit("einsum", {"spec": spec}, xs, False)))


def dot(a: Any, b: Any) -> Any:
    ta, tb = _T.of(a), _T.of(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return _out(elementwise("mul", ta, tb))
    if ta.ndim > 2 or tb.ndim > 2:
        raise UnsupportedSyntaxError(
            "np.dot of arrays with more than 2 dimensions is not supported; use np.matmul or @"
        )
    return matmul(ta, tb)


# -- reductions ------------------------------------------------------------------


def reduce(name: str, x: Any, axis: Any = None, keepdims: Any = False, dtype: Any = None) -> Any:
    return _out(_reduce(name, _T.of(x), axis, keepdims, dtype))


def _reduce(name: str, t: _T, axis: Any, keepdims: Any, dtype: Any = None) -> _T:
    axes = () if reduces_over_nothing(name, t.ndim, axis) else _axes(axis, t.ndim)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"duplicate value in axes {list(axes)}")
    keep = bool(keepdims)
    if dtype is not None:
        t = _cast(t, dtype_name(dtype))
    elif name in ("sum", "prod") and kind(t.dtype) < 2:
        t = _cast(t, "int64")
    elif name == "mean" and kind(t.dtype) < 2:
        t = _cast(t, "float64")
    if name in ("max", "min") and any(t.shape[a] == 0 for a in axes):
        raise EagerValueError(
            f"zero-size array to reduction operation {'maximum' if name == 'max' else 'minimum'} "
            "which has no identity"
        )
    if not axes:
        return _T(t.v, t.dtype, t.shape, False)
    return _emit(f"reduce_{name}", {"axes": tuple(sorted(axes)), "keepdims": keep}, [t], False)


def arg_reduce(name: str, x: Any, axis: Any = None, keepdims: Any = False) -> Any:
    t = _T.of(x)
    ax = None if axis is None else _normalize_axis(axis, t.ndim)
    return _out(_T(_NB.argreduce(name, base_value(t.v), ax, bool(keepdims)), "int64", (), False))


def var(x: Any, axis: Any = None, keepdims: Any = False, std: bool = False) -> Any:
    t = _T.of(x)
    mean = _reduce("mean", t, axis, True)
    d = elementwise("sub", t if kind(t.dtype) == 2 else _cast(t, "float64"), mean)
    v = _reduce("mean", elementwise("mul", d, d), axis, keepdims)
    return _out(_unary("sqrt", v) if std else v)


# -- shapes ----------------------------------------------------------------------


def reshape(x: Any, shape: Any) -> Any:
    t = _T.of(x)
    dims = list(_static_ints(shape, "a reshape dimension"))
    if dims.count(-1) > 1:
        raise ShapeError("can only specify one unknown dimension")
    size = math.prod(t.shape)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape array of size {size} into shape {tuple(dims)}")
        dims[dims.index(-1)] = size // known
    if math.prod(dims) != size:
        raise ShapeError(f"cannot reshape array of size {size} into shape {fmt_shape(dims)}")
    return _out(_reshape_to(t, dims))


def transpose(x: Any, axes: Any = None) -> Any:
    t = _T.of(x)
    perm = tuple(reversed(range(t.ndim))) if axes is None else tuple(
        _normalize_axis(a, t.ndim) for a in _static_ints(axes, "an axis")
    )
    if sorted(perm) != list(range(t.ndim)):
        raise EagerValueError("axes don't match array")
    if perm == tuple(range(t.ndim)):
        return _out(t)
    return _out(_emit("transpose", {"perm": perm}, [t], t.weak))


def expand_dims(a: Any, axis: Any) -> Any:
    t = _T.of(a)
    axes = _static_ints(axis, "an axis")
    nd = t.ndim + len(axes)
    shape = list(t.shape)
    for x in sorted(_normalize_axis(x, nd) for x in axes):
        shape.insert(x, 1)
    return _out(_reshape_to(t, shape))


def squeeze(a: Any, axis: Any = None) -> Any:
    t = _T.of(a)
    if axis is None:
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    else:
        axes = [_normalize_axis(x, t.ndim) for x in _static_ints(axis, "an axis")]
        if any(t.shape[x] != 1 for x in axes):
            raise EagerValueError("cannot select an axis to squeeze out which has size not equal to one")
    return _out(_reshape_to(t, [d for i, d in enumerate(t.shape) if i not in axes]))


def broadcast_to(array: Any, shape: Any) -> Any:
    t = _T.of(array)
    dims = tuple(_static_ints(shape, "a shape"))
    ok = len(t.shape) <= len(dims) and all(s == d or s == 1 for s, d in zip(reversed(t.shape), reversed(dims)))
    if not ok:
        raise ShapeError(f"shape {fmt_shape(t.shape)} cannot be broadcast to {fmt_shape(dims)}")
    return _out(_bcast(t, dims))


def concatenate(arrays: Any, axis: Any = 0, stack: bool = False) -> Any:
    if not isinstance(arrays, (tuple, list)):
        raise UnsupportedSyntaxError("expected a tuple or list of arrays")
    ts = [_T.of(a) for a in arrays]
    if not ts:
        raise EagerValueError("need at least one array to concatenate")
    dtype, weak = ts[0].dtype, ts[0].weak
    for t in ts[1:]:
        dtype, weak = promote(dtype, weak, t.dtype, t.weak)
    ts = [_cast(t, dtype, False) for t in ts]
    ndim = ts[0].ndim + (1 if stack else 0)
    if not stack and ndim == 0:
        raise EagerValueError("zero-dimensional arrays cannot be concatenated")
    ax = _normalize_axis(axis, ndim)
    first = ts[0].shape
    for t in ts:
        if stack and t.shape != first:
            raise ShapeError(f"all input arrays must have the same shape: {fmt_shape(first)} and {fmt_shape(t.shape)}")
        if not stack and (t.ndim != len(first) or any(i != ax and x != y for i, (x, y) in enumerate(zip(t.shape, first)))):
            raise ShapeError(
                "all the input array dimensions except for the concatenation axis must match exactly: "
                f"{fmt_shape(first)} and {fmt_shape(t.shape)} along axis {ax}"
            )
    return _out(_emit("stack" if stack else "concatenate", {"axis": ax}, ts, False))


def where(condition: Any, x: Any, y: Any) -> Any:
    tc = _T.of(condition)
    if tc.dtype != "bool":
        tc = _T.of(compare("ne", tc, 0))
    ta, tb = _T.of(x), _T.of(y)
    dtype, _ = promote(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = _broadcast_shapes(_broadcast_shapes(tc.shape, ta.shape), tb.shape)
    items = [_bcast(tc, shape), _bcast(_cast(ta, dtype), shape), _bcast(_cast(tb, dtype), shape)]
    return _out(_emit("select", {}, items, False))


def clip(a: Any, a_min: Any = None, a_max: Any = None) -> Any:
    r = _T.of(a)
    if a_min is not None:
        r = elementwise("maximum", r, _T.of(a_min))
    if a_max is not None:
        r = elementwise("minimum", r, _T.of(a_max))
    return _out(r)


def logical(name: str, *xs: Any) -> Any:
    ts = [_T.of(x) for x in xs]
    ts = [t if t.dtype == "bool" else _T.of(compare("ne", t, 0)) for t in ts]
    if name == "not":
        return _out(_emit("not", {}, [ts[0]], False))
    return _out(elementwise(name, ts[0], ts[1]))


def _log_base(base: float):
    def fn(x):
        lx = _unary("log", _T.of(x))
        return _out(elementwise("div", lx, _T(np.asarray(math.log(base), lx.dtype), lx.dtype, (), False)))

    return fn


def _square(x):
    t = _T.of(x)
    check_square(t.dtype)
    return _out(elementwise("mul", t, t))


# -- the composites of msir.frontend.numpy_bodies --------------------------------


def _body(v: Any) -> Any:
    return _out(_T(v, _dtype(v), _shape(v), False))


def logaddexp(a: Any, b: Any) -> Any:
    ta, tb = _T.of(a), _T.of(b)
    dtype = numpy_bodies.float_dtype(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = _broadcast_shapes(ta.shape, tb.shape)
    ta, tb = (_bcast(_cast(t, dtype, False), shape) for t in (ta, tb))
    return _body(numpy_bodies.logaddexp_body(TRACING_BUILDER, ta.v, tb.v))


def outer(a: Any, b: Any) -> Any:
    ta, tb = (_T.of(reshape(x, (-1,))) for x in (a, b))
    product, dtype, _ = binary_typing("mul", ta.dtype, ta.weak, tb.dtype, tb.weak)
    ta, tb = _cast(ta, dtype, False), _cast(tb, dtype, False)
    return _body(numpy_bodies.outer_body(TRACING_BUILDER, ta.v, tb.v, product))


def triangle(m: Any, k: Any, upper: bool) -> Any:
    t = _T.of(m)
    diagonal = _static_int(k, f"the diagonal of {'np.triu' if upper else 'np.tril'}")
    return _body(numpy_bodies.triangle_body(TRACING_BUILDER, t.v, diagonal, upper))


def scan(combine: str, a: Any, axis: Any = None, dtype: Any = None) -> Any:
    t = _T.of(a)
    if axis is None:
        t, ax = _T.of(reshape(t, (-1,))), 0
    else:
        ax = _normalize_axis(axis, t.ndim)
    t = _cast(t, dtype_name(dtype) if dtype is not None else numpy_bodies.scan_dtype(t.dtype), False)
    return _body(numpy_bodies.scan_body(TRACING_BUILDER, t.v, ax, combine))


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: Any = False) -> Any:
    t = _T.of(x)
    if type(ord) is Tracer:
        raise UnsupportedSyntaxError("np.linalg.norm: ord must be known at compile time")
    t = _cast(t, t.dtype if kind(t.dtype) == 2 else "float64", False)
    if axis is not None:
        axis = _static_ints(axis, "an axis") if isinstance(axis, (tuple, list)) else _static_int(axis, "an axis")
    axes = numpy_bodies.norm_axes(t.ndim, ord, axis)
    return _body(numpy_bodies.norm_body(TRACING_BUILDER, t.v, axes, ord, bool(keepdims)))


def truth(a: Any, axis: Any = None, keepdims: Any = False, every: bool = False) -> Any:
    t = _T.of(a)
    return _body(numpy_bodies.truth_body(TRACING_BUILDER, t.v, _axes(axis, t.ndim), bool(keepdims), every))


def take_along_axis(arr: Any, indices: Any, axis: Any) -> Any:
    a, i = _T.of(arr), _T.of(indices)
    if kind(i.dtype) != 1:
        raise MsirIndexError(f"np.take_along_axis: `indices` must be an integer array, got {i.dtype}")
    if axis is None:
        a, ax = _T.of(reshape(a, (-1,))), 0
    else:
        ax = _normalize_axis(axis, a.ndim)
    i = _cast(i, "int64", False)
    return _body(numpy_bodies.take_along_axis_body(TRACING_BUILDER, a.v, i.v, ax))


def linspace(start: Any, stop: Any, num: Any = 50, endpoint: Any = True, dtype: Any = None) -> Any:
    lo, hi = _T.of(start), _T.of(stop)
    if lo.ndim or hi.ndim:
        raise UnsupportedSyntaxError("np.linspace: start and stop must be scalars (array bounds are not supported)")
    count = _static_int(num, "the number of samples of np.linspace")
    if count < 0:
        raise EagerValueError("negative dimensions are not allowed")
    compute = numpy_bodies.float_dtype(lo.dtype, lo.weak, hi.dtype, hi.weak)
    lo, hi = _cast(lo, compute, False), _cast(hi, compute, False)
    y = _T.of(_body(numpy_bodies.linspace_body(TRACING_BUILDER, lo.v, hi.v, count, bool(endpoint))))
    if dtype is None:
        return _out(y)
    target = dtype_name(dtype)
    return _out(_cast(y if target in FLOATS else _unary("floor", y), target, False))


def float_unary(which: str, x: Any) -> Any:
    """np.tan / np.sinh / np.cosh (`numpy_bodies`), typed as np.sin."""
    t = _T.of(x)
    _, dtype, _ = unary_typing("sin", t.dtype, t.weak)
    body = {"tan": numpy_bodies.tan_body, "sinh": numpy_bodies.sinh_body, "cosh": numpy_bodies.cosh_body}[which]
    return _body(body(TRACING_BUILDER, _cast(t, dtype, False).v))


def round_(a: Any, decimals: Any = 0, out: Any = None) -> Any:
    t = _T.of(a)
    d = _static_int(decimals, "the decimals of np.round")
    if kind(t.dtype) != 2:
        if t.dtype == "bool":
            raise DTypeError("np.round of a bool array is not supported")
        if d < 0:
            raise UnsupportedSyntaxError("np.round of an integer array to negative decimals is not supported "
                                         "(NumPy rounds it in integer arithmetic)")
        return _out(_T(t.v, t.dtype, t.shape, False))
    return _body(numpy_bodies.round_body(TRACING_BUILDER, t.v, d))


def diff(a: Any, n: Any = 1, axis: Any = -1) -> Any:
    t = _T.of(a)
    order = _static_int(n, "the order of np.diff")
    numpy_bodies.check_diff(t.ndim, order)
    return _body(numpy_bodies.diff_body(TRACING_BUILDER, t.v, order, _normalize_axis(axis, t.ndim)))


def stack_along(which: str, tup: Any) -> Any:
    """np.hstack / np.vstack, as the compiled frontend builds them."""
    if not isinstance(tup, (tuple, list)):
        raise UnsupportedSyntaxError(f"np.{which} takes a tuple or list of arrays")
    ts = [_T.of(x) for x in tup]
    if which == "vstack":
        return concatenate([reshape(t, (1, 1) if t.ndim == 0 else (1, *t.shape)) if t.ndim < 2 else _out(t)
                            for t in ts], 0)
    ts = [_T.of(reshape(t, (1,))) if t.ndim == 0 else t for t in ts]
    return concatenate([_out(t) for t in ts], 0 if ts and ts[0].ndim == 1 else 1)


def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: Any = False, every: bool = False) -> Any:
    ta, tb = _T.of(a), _T.of(b)
    dtype = numpy_bodies.float_dtype(ta.dtype, ta.weak, tb.dtype, tb.weak)
    shape = _broadcast_shapes(ta.shape, tb.shape)
    ta, tb = (_bcast(_cast(t, dtype, False), shape) for t in (ta, tb))
    close = numpy_bodies.isclose_body(TRACING_BUILDER, ta.v, tb.v, float(rtol), float(atol), bool(equal_nan))
    if every:
        close = numpy_bodies.truth_body(TRACING_BUILDER, close, tuple(range(len(shape))), False, True)
    return _body(close)


def count_nonzero(a: Any, axis: Any = None, keepdims: Any = False) -> Any:
    t = _T.of(a)
    nonzero = t if t.dtype == "bool" else _T.of(compare("ne", t, 0))
    return reduce("sum", _out(_cast(nonzero, "int64", False)), axis, keepdims)


def average(a: Any, axis: Any = None, weights: Any = None, returned: Any = False, keepdims: Any = False) -> Any:
    t = _T.of(a)
    if weights is None:
        avg = _T.of(reduce("mean", t, axis, keepdims))
        if not returned:
            return _out(avg)
        size = math.prod(avg.shape)
        count = math.prod(t.shape) // max(size, 1) if size else 0
        return _out(avg), np.full(avg.shape, count, avg.dtype)[()]
    w = _T.of(weights)
    if w.shape != t.shape:
        if axis is None or w.ndim != 1:
            raise ShapeError("Axis must be specified when shapes of a and weights differ.")
        ax = _normalize_axis(axis, t.ndim)
        if w.shape[0] != t.shape[ax]:
            raise ShapeError("Length of weights not compatible with specified axis.")
        w = _T.of(reshape(w, tuple(w.shape[0] if i == ax else 1 for i in range(t.ndim))))
    dtype = numpy_bodies.float_dtype(t.dtype, t.weak, w.dtype, w.weak)
    t, w = _cast(t, dtype, False), _cast(w, dtype, False)
    total = reduce("sum", _out(_bcast(w, t.shape)), axis, keepdims)
    avg = binary("div", reduce("sum", binary("mul", _out(t), _out(w)), axis, keepdims), total)
    return (avg, total) if returned else avg


def atleast(ndim: int, *arrays: Any) -> Any:
    out = []
    for x in arrays:
        t = _T.of(x)
        out.append(_out(t) if t.ndim >= ndim else reshape(t, (1,) * (ndim - t.ndim) + t.shape))
    return out[0] if len(out) == 1 else tuple(out)


_NUMPY_ARANGE = np.arange


@functools.wraps(_NUMPY_ARANGE)  # NumPy's name and docstring (numpy.ma reads it)
def arange(*args: Any, **kwargs: Any) -> np.ndarray:
    """np.arange while a transformation runs (`numpy_functions_on_tracers`):
    NumPy's own, with traced bounds replaced by their values, since the
    result has no derivative with respect to its bounds (NumPy would ask a
    tracer for an array, which a tracer refuses: it would drop a derivative
    anywhere else)."""
    return _NUMPY_ARANGE(*(base_value(a) for a in args), **{k: base_value(v) for k, v in kwargs.items()})


arange.msir_stands_for = _NUMPY_ARANGE  # code compiled meanwhile takes it for np.arange (frontend `_handler_for`)



_installed = 0


@contextlib.contextmanager
def numpy_functions_on_tracers():
    """While a user function runs on tracers, `numpy.arange` (which NumPy
    does not dispatch to `__array_function__`) is `arange` above. Nested
    transformations install it once; it is NumPy's again when the outermost
    one returns. Code that bound `arange` itself (`from numpy import arange`)
    keeps NumPy's, whose traced bounds are refused as before."""
    global _installed
    if _installed == 0:
        import numpy.ma  # noqa: F401  (NumPy's lazily imported modules wrap np.arange: let them take NumPy's)

        np.arange = arange
    _installed += 1
    try:
        yield
    finally:
        _installed -= 1
        if _installed == 0:
            np.arange = _NUMPY_ARANGE


def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, argsort: bool = False) -> Any:
    t = _T.of(a)
    numpy_bodies.check_sort_kind(kind, order, "np.argsort" if argsort else "np.sort")
    if axis is None:
        t, ax = _T.of(reshape(t, (-1,))), 0
    else:
        ax = _normalize_axis(axis, t.ndim)
    body = numpy_bodies.argsort_body if argsort else numpy_bodies.sort_body
    return _body(body(TRACING_BUILDER, t.v, ax))


def diag(v: Any, k: Any = 0) -> Any:
    t = _T.of(v)
    diagonal = _static_int(k, "the diagonal of np.diag")
    numpy_bodies.check_diag_rank(t.ndim)
    if t.ndim == 1:
        return _body(numpy_bodies.diag_from_vector_body(TRACING_BUILDER, t.v, diagonal))
    return _body(numpy_bodies.diag_of_matrix_body(TRACING_BUILDER, t.v, diagonal))


# -- indexing ------------------------------------------------------------------


def _is_mask(it: Any) -> bool:
    """Whether the index item `it` is a boolean array of rank >= 1 (a mask)."""
    if type(it) is Tracer:
        return it._dtype == "bool" and it.ndim > 0
    if isinstance(it, (np.ndarray, list, tuple)):
        a = np.asarray(it)
        return a.dtype == bool and a.ndim > 0
    return False


def _mask_read(t: _T, items: list) -> _T:
    """`x[mask]` (also `x[mask, ...]`, `x[mask, :]`): the rows of x where the
    mask, of x's leading dims, is true; their number is the result's first dim."""
    if not _is_mask(items[0]) or not all(it is Ellipsis or it == slice(None) for it in items[1:]):
        raise UnsupportedSyntaxError(masks.MIXED_INDEX)
    mask = _T.of(items[0])
    problem = masks.mask_shape_error(t.shape, mask.shape)
    if problem is not None:
        raise MsirIndexError(problem)
    return _emit("compress", {}, [t, mask], t.weak)


def subscript(x: Any, idx: Any) -> Any:
    t = _T.of(x)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(_is_mask(it) for it in items):
        return _out(_mask_read(t, items))
    n_ellipsis = sum(1 for it in items if it is Ellipsis)
    if n_ellipsis > 1:
        raise MsirIndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    if consumed > t.ndim:
        raise MsirIndexError(
            f"too many indices for array: array is {t.ndim}-dimensional, but {consumed} were indexed"
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
            bounds = [None if q is None else _static_int(q, "a slice bound") for q in (it.start, it.stop, it.step)]
            if bounds[2] == 0:
                raise EagerValueError("slice step cannot be zero")
            r = range(*slice(*bounds).indices(dim))
            starts.append(r.start if len(r) else 0)
            sizes.append(len(r))
            steps.append(r.step)
            out_shape.append(("keep", len(r)))
        elif isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)):
            k = int(it)
            if not -dim <= k < dim:
                raise MsirIndexError(f"index {k} is out of bounds for axis {axis} with size {dim}")
            starts.append(k % dim)
            sizes.append(1)
            steps.append(1)
            out_shape.append(("drop", 0))
        else:
            if type(it) is Tracer:
                raise MsirIndexError("only integer arrays can be used as an index (got a traced float array)")
            if isinstance(it, (bool, np.bool_)) or (
                isinstance(it, (np.ndarray, list, tuple)) and np.asarray(it).dtype == bool
            ):
                raise UnsupportedSyntaxError(
                    "boolean mask indexing gives a data-dependent shape and is not supported; "
                    "use np.where(mask, x, 0) instead"
                )
            ix = _T.of(it)
            if kind(ix.dtype) != 1:
                raise MsirIndexError(
                    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
                    f"integer or boolean arrays are valid indices (got {ix.dtype})"
                )
            bad = np.asarray(ix.v)
            if bad.size and (bad.min() < -dim or bad.max() >= dim):
                raise MsirIndexError(f"index out of bounds for axis {axis} with size {dim}")
            starts.append(0)
            sizes.append(dim)
            steps.append(1)
            takes.append((axis, ix))
            out_shape.append(("take", ix.shape))
        axis += 1
    if sum(1 for _, ix in takes if ix.ndim > 0) > 1:
        raise UnsupportedSyntaxError("indexing with more than one integer array is not supported yet")
    r = t
    if (starts, steps, sizes) != ([0] * t.ndim, [1] * t.ndim, list(t.shape)):
        r = _emit("slice", {"starts": tuple(starts), "steps": tuple(steps), "shape": tuple(sizes)}, [t], t.weak)
    for ax, ix in sorted(takes, key=lambda q: -q[0]):
        r = _emit("take", {"axis": ax}, [r, ix], t.weak)
    final: list[int] = []
    for what, v in out_shape:
        if what in ("new", "keep"):
            final.append(v)
        elif what == "take":
            final.extend(v)
    return _out(_reshape_to(r, final))


# -- creation --------------------------------------------------------------------


def _like(value: Any):
    def fn(a, dtype=None, **kw):
        t = _T.of(a)
        return np.full(t.shape, value, dtype_name(dtype) if dtype is not None else t.dtype)

    return fn


def _full_like(a, fill_value, dtype=None, **kw):
    t = _T.of(a)
    dt = dtype_name(dtype) if dtype is not None else t.dtype
    return _out(_bcast(_cast(_T.of(fill_value), dt, False), t.shape))


def _np_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None) or ""
    sub = module.removeprefix("numpy").strip(".").split(".")
    public = [q for q in sub if q and not q.startswith("_")]
    return ".".join(["np", *public, name])


def _kw(fname: str, names: Sequence[str], defaults: dict):
    """Bind a library call's arguments like the frontend's `_params`."""

    def bind_args(args, kwargs):
        if len(args) > len(names):
            raise EagerTypeError(f"{fname} takes at most {len(names)} positional arguments")
        out = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise UnsupportedSyntaxError(f"{fname}: the keyword argument '{k}' is not supported")
            out[k] = v
        missing = [n for n in names if n not in out and n not in defaults]
        if missing:
            raise EagerTypeError(f"{fname} is missing the argument '{missing[0]}'")
        return [out.get(n, defaults.get(n)) for n in names]

    return bind_args


def _wrap(fname: str, names: Sequence[str], defaults: dict, impl):
    b = _kw(fname, names, defaults)
    return lambda *args, **kwargs: impl(*b(args, kwargs))


def _reduction(name: str):
    if name in ("sum", "prod", "mean"):
        return _wrap(f"np.{name}", ["a", "axis", "dtype", "keepdims"], {"axis": None, "dtype": None, "keepdims": False},
                     lambda a, axis, dtype, keepdims: reduce(name, a, axis, keepdims, dtype))
    return _wrap(f"np.{name}", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                 lambda a, axis, keepdims: reduce(name, a, axis, keepdims))


def _clip_fn(*args, **kwargs):
    kwargs = {{"min": "a_min", "max": "a_max"}.get(k, k): v for k, v in kwargs.items()}
    return _wrap("np.clip", ["a", "a_min", "a_max"], {"a_min": None, "a_max": None}, clip)(*args, **kwargs)


_UFUNCS: dict[str, Any] = {
    # the elementwise primitives NumPy spells as ufuncs (`not` is np.logical_not, below)
    **{p.numpy.__name__: (lambda n: lambda x: unary(n, x))(p.name) for p in primitives.UNARY if p.name != "not"},
    **{p.numpy.__name__: (lambda n: lambda a, b: binary(n, a, b))(p.name) for p in primitives.BINARY if p.numpy},
    "positive": lambda x: _out(_T.of(x)),
    "power": lambda a, b: binary("pow", a, b),
    "invert": invert,
    "matmul": matmul,
    "square": _square,
    "log2": _log_base(2.0),
    "log10": _log_base(10.0),
    "less": lambda a, b: compare("lt", a, b),
    "less_equal": lambda a, b: compare("le", a, b),
    "greater": lambda a, b: compare("gt", a, b),
    "greater_equal": lambda a, b: compare("ge", a, b),
    "equal": lambda a, b: compare("eq", a, b),
    "not_equal": lambda a, b: compare("ne", a, b),
    "logical_and": lambda a, b: logical("and", a, b),
    "logical_or": lambda a, b: logical("or", a, b),
    "logical_xor": lambda a, b: logical("xor", a, b),
    "logical_not": lambda a: logical("not", a),
    "logaddexp": logaddexp,
    **{which: (lambda w: lambda x: float_unary(w, x))(which) for which in ("tan", "sinh", "cosh")},
    **{which: (lambda w: lambda x: _body(numpy_bodies.float_class_body(TRACING_BUILDER, _T.of(x).v, w)))(which)
       for which in ("isnan", "isinf", "isfinite")},
}

_FUNCTIONS: dict[Any, Any] = {
    np.sum: _reduction("sum"),
    np.prod: _reduction("prod"),
    np.mean: _reduction("mean"),
    np.max: _reduction("max"),
    np.min: _reduction("min"),
    np.amax: _reduction("max"),
    np.amin: _reduction("min"),
    np.argmax: _wrap("np.argmax", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                     lambda a, axis, keepdims: arg_reduce("argmax", a, axis, keepdims)),
    np.argmin: _wrap("np.argmin", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                     lambda a, axis, keepdims: arg_reduce("argmin", a, axis, keepdims)),
    np.var: _wrap("np.var", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                  lambda a, axis, keepdims: var(a, axis, keepdims)),
    np.std: _wrap("np.std", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                  lambda a, axis, keepdims: var(a, axis, keepdims, std=True)),
    np.where: _wrap("np.where", ["condition", "x", "y"], {}, where),
    np.dot: _wrap("np.dot", ["a", "b"], {}, dot),
    np.einsum: einsum,
    np.transpose: _wrap("np.transpose", ["a", "axes"], {"axes": None}, transpose),
    np.reshape: _wrap("np.reshape", ["a", "shape"], {}, reshape),
    np.concatenate: _wrap("np.concatenate", ["arrays", "axis"], {"axis": 0}, concatenate),
    np.stack: _wrap("np.stack", ["arrays", "axis"], {"axis": 0}, lambda a, axis: concatenate(a, axis, stack=True)),
    np.broadcast_to: _wrap("np.broadcast_to", ["array", "shape"], {}, broadcast_to),
    np.expand_dims: _wrap("np.expand_dims", ["a", "axis"], {}, expand_dims),
    np.squeeze: _wrap("np.squeeze", ["a", "axis"], {"axis": None}, squeeze),
    np.clip: _clip_fn,
    np.zeros_like: _like(0),
    np.ones_like: _like(1),
    np.full_like: _full_like,
    np.shape: lambda a: _T.of(a).shape,
    np.ndim: lambda a: _T.of(a).ndim,
    np.size: lambda a: math.prod(_T.of(a).shape),
    np.outer: _wrap("np.outer", ["a", "b"], {}, outer),
    np.tril: _wrap("np.tril", ["m", "k"], {"k": 0}, lambda m, k: triangle(m, k, upper=False)),
    np.triu: _wrap("np.triu", ["m", "k"], {"k": 0}, lambda m, k: triangle(m, k, upper=True)),
    np.diag: _wrap("np.diag", ["v", "k"], {"k": 0}, diag),
    np.linalg.norm: _wrap("np.linalg.norm", ["x", "ord", "axis", "keepdims"],
                          {"ord": None, "axis": None, "keepdims": False}, norm),
    np.take_along_axis: _wrap("np.take_along_axis", ["arr", "indices", "axis"], {}, take_along_axis),
    np.linspace: _wrap("np.linspace", ["start", "stop", "num", "endpoint", "dtype"],
                       {"num": 50, "endpoint": True, "dtype": None}, linspace),
    np.any: _wrap("np.any", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                  lambda a, axis, keepdims: truth(a, axis, keepdims, every=False)),
    np.all: _wrap("np.all", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                  lambda a, axis, keepdims: truth(a, axis, keepdims, every=True)),
    np.sort: _wrap("np.sort", ["a", "axis", "kind", "order"], {"axis": -1, "kind": None, "order": None}, sort),
    np.argsort: _wrap("np.argsort", ["a", "axis", "kind", "order"], {"axis": -1, "kind": None, "order": None},
                      lambda a, axis, kind, order: sort(a, axis, kind, order, argsort=True)),
    np.round: _wrap("np.round", ["a", "decimals"], {"decimals": 0}, round_),
    np.around: _wrap("np.around", ["a", "decimals"], {"decimals": 0}, round_),
    np.diff: _wrap("np.diff", ["a", "n", "axis"], {"n": 1, "axis": -1}, diff),
    np.hstack: _wrap("np.hstack", ["tup"], {}, lambda tup: stack_along("hstack", tup)),
    np.vstack: _wrap("np.vstack", ["tup"], {}, lambda tup: stack_along("vstack", tup)),
    np.ravel: _wrap("np.ravel", ["a"], {}, lambda a: reshape(a, (-1,))),
    np.isclose: _wrap("np.isclose", ["a", "b", "rtol", "atol", "equal_nan"],
                      {"rtol": 1e-05, "atol": 1e-08, "equal_nan": False}, isclose),
    np.allclose: _wrap("np.allclose", ["a", "b", "rtol", "atol", "equal_nan"],
                       {"rtol": 1e-05, "atol": 1e-08, "equal_nan": False},
                       lambda a, b, rtol, atol, equal_nan: isclose(a, b, rtol, atol, equal_nan, every=True)),
    np.count_nonzero: _wrap("np.count_nonzero", ["a", "axis", "keepdims"], {"axis": None, "keepdims": False},
                            count_nonzero),
    np.average: _wrap("np.average", ["a", "axis", "weights", "returned", "keepdims"],
                      {"axis": None, "weights": None, "returned": False, "keepdims": False}, average),
    np.atleast_1d: lambda *arrays: atleast(1, *arrays),
    np.atleast_2d: lambda *arrays: atleast(2, *arrays),
    np.copy: _wrap("np.copy", ["a"], {}, lambda a: _out(_T.of(a))),
    np.cumsum: _wrap("np.cumsum", ["a", "axis", "dtype"], {"axis": None, "dtype": None},
                     lambda a, axis, dtype: scan("add", a, axis, dtype)),
    np.cumprod: _wrap("np.cumprod", ["a", "axis", "dtype"], {"axis": None, "dtype": None},
                      lambda a, axis, dtype: scan("mul", a, axis, dtype)),
}
