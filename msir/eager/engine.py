"""PyNative mode: `grad`, `value_and_grad`, `vjp` and `jvp` run eagerly.

`call_transformed(t, args, kwargs)` (`t` a `msir.transforms.Transform`) is what `msir.api.Transformed.__call__`,
`msir.vjp` and `msir.jvp` call in `PYNATIVE_MODE`. It wraps the differentiated
arguments in tracers of a fresh trace (a new perturbation level, see
`msir.eager.tracer`), runs the user's plain NumPy function on them op by op,
then runs the tape backward (reverse mode) or reads the tangents (forward mode)
with the same rule table as the compiled path. Results, errors and messages
mirror the compiled path (`msir.frontend.translate.Translator.call_transformed`
and the runtime's result conversion): gradients have their argument's structure,
shape and dtype, rank-0 results are NumPy scalars (Python floats for Python
float arguments and weak outputs).
"""

from __future__ import annotations

import inspect
import os
import traceback
from typing import Any

import numpy as np

from msir.tree import leaves as _leaves
from msir.tree import rebuild_leaves as _rebuild

from msir.eager.tracer import (
    FLOATS,
    TRACING_BUILDER,
    EagerValueError,
    ForwardTrace,
    ReverseTrace,
    Trace,
    Tracer,
    _T,
    _out,
    bind,
    fmt_shape,
    numpy_functions_on_tracers,
)
from msir.errors import MsirError, NotDifferentiableError, ShapeError, SourceLoc, UnsupportedSyntaxError

__all__ = ["call_transformed", "stop_gradient", "Tracer"]


def stop_gradient(x: Any) -> Any:
    """`x` with a zero derivative at every level (the eager `msir.stop_gradient`)."""
    if isinstance(x, (tuple, list)):
        return type(x)(stop_gradient(v) for v in x)
    if type(x) is not Tracer:
        return x
    return _out(_T(bind("stop_gradient", {}, [x]), x._dtype, x.shape, x.weak))


# ---------------------------------------------------------------------------
# Arguments and results
# ---------------------------------------------------------------------------


def _leaf_info(v: Any) -> tuple[Any, str, tuple, bool]:
    """(primal value, dtype, shape, weak) of an argument leaf."""
    if type(v) is Tracer:
        return v, v._dtype, v.shape, v.weak
    t = _T.of(v)
    return t.v, t.dtype, t.shape, t.weak


def _lower(v: Any, trace: Trace) -> Any:
    """`v` seen from outside `trace`: its primal if it is traced at `trace`'s level or above."""
    while type(v) is Tracer and v.trace.level >= trace.level:
        v = v.primal
    return v


def _user(v: Any, weak: bool) -> Any:
    """A result as the compiled path returns it."""
    if type(v) is Tracer:
        return v.with_weak(weak)
    if isinstance(v, np.generic):
        v = np.asarray(v)
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item() if weak else v[()]
    return v


def _weak_of(v: Any) -> bool:
    if type(v) is Tracer:
        return v.weak
    return isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)


def _result(v: Any, trace: Trace) -> Any:
    """A (structured) function result, with `trace`'s level removed."""
    if isinstance(v, tuple):
        return tuple(_result(x, trace) for x in v)
    if isinstance(v, list):
        return [_result(x, trace) for x in v]
    if v is None or isinstance(v, (str, bool, int, float, np.dtype)):
        return v
    if type(v) is not Tracer and not isinstance(v, (np.ndarray, np.generic)):
        raise UnsupportedSyntaxError(
            f"returning a value of type {type(v).__name__} from a compiled function is not supported"
        )
    return _user(_lower(v, trace), _weak_of(v))


def _bind_args(t: Any, args: tuple, kwargs: dict) -> tuple:
    if not kwargs:
        return tuple(args)
    try:
        sig = inspect.signature(t)
    except (TypeError, ValueError):
        raise UnsupportedSyntaxError("keyword arguments to a differentiated function") from None
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.arguments.values())


def _argnums(t: Any, n: int) -> tuple[int, ...]:
    nums = (t.argnums,) if isinstance(t.argnums, int) else tuple(t.argnums)
    for a in nums:
        if not -n <= a < n:
            raise EagerValueError(f"argnums {t.argnums} out of range for {n} arguments")
    return tuple(a % n for a in nums)


def _split_aux(out: Any, has_aux: bool, aux_tuple: bool = False) -> tuple[Any, Any]:
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) < 2:
        raise EagerValueError("with has_aux=True the function must return a pair (output, aux)")
    # MindSpore's has_aux: the first output is differentiated, the others come back as they are.
    return out[0], (out[1] if len(out) == 2 and not aux_tuple else tuple(out[1:]))


class _Inputs:
    """The differentiated arguments, wrapped in tracers of `trace`."""

    def __init__(self, trace: Trace, args: tuple, argnums: tuple[int, ...], make):
        self.args = list(args)
        self.leaves: list[list[tuple[Tracer, str, tuple, bool]]] = []
        for a in argnums:
            leaves: list = []
            _leaves(args[a], leaves)
            infos = []
            for v in leaves:
                primal, dt, shape, weak = _leaf_info(v)
                if dt not in FLOATS:
                    raise NotDifferentiableError(
                        f"cannot differentiate with respect to argument {a}: it holds a value of dtype "
                        f"{dt}; only float arguments have derivatives"
                    )
                infos.append((make(primal, weak, len(self.leaves), len(infos)), dt, shape, weak))
            self.leaves.append(infos)
            self.args[a] = _rebuild(args[a], iter([i[0] for i in infos]))


def _check_scalar_output(main: Any) -> None:
    if isinstance(main, (tuple, list)):
        raise ShapeError("grad needs a function returning one scalar (rank-0) float value")
    if main is None or isinstance(main, str):
        raise ShapeError("grad needs a function returning one scalar (rank-0) float value")
    shape = main.shape if type(main) is Tracer else np.shape(main)
    if shape != ():
        raise ShapeError(
            f"grad needs a scalar output, but the function returns an array of shape "
            f"{fmt_shape(shape)}; reduce it (e.g. .sum()) or use msir.vjp"
        )
    dt = main._dtype if type(main) is Tracer else _T.of(main).dtype
    if dt not in FLOATS:
        raise NotDifferentiableError(f"cannot differentiate a function whose output has dtype {dt}")


def _cotangents(trace: ReverseTrace, inputs: _Inputs, seeds: list) -> list:
    cts = trace.backward(seeds)
    per_arg = []
    for infos in inputs.leaves:
        grads = []
        for tr, dt, shape, weak in infos:
            g = cts.get(tr.id)
            if g is None:
                g = np.zeros(shape, dt)
            g = TRACING_BUILDER.cast(g, dt)
            grads.append(_user(g, weak))
        per_arg.append(grads)
    return per_arg


# ---------------------------------------------------------------------------
# The transformations
# ---------------------------------------------------------------------------


def call_transformed(t: Any, args: tuple, kwargs: dict) -> Any:
    """Run `msir.grad`/`value_and_grad`/`vjp`/`jvp` transformation `t` eagerly."""
    args = _bind_args(t, args, kwargs)
    if t.kind in ("grad", "value_and_grad"):
        return _grad(t, args)
    if t.kind == "vjp":
        return _vjp(t, args)
    if t.kind == "jvp":
        return _jvp(t, args)
    if t.kind in ("jacrev", "jacfwd"):
        return _jacobian(t, args)
    raise ValueError(f"unknown transformation kind {t.kind!r}")


class _Restricted:
    """`t.fn` as a function of its differentiated arguments only (the others
    held at `args`), for the eager vjp/jvp a Jacobian is built from."""

    def __init__(self, t: Any, args: tuple, argnums: tuple[int, ...], tangents: tuple = ()):
        self.has_aux, self.aux_tuple, self.tangents = t.has_aux, False, tangents
        self._fn, self._args, self._argnums = t.fn, args, argnums

    def fn(self, *diff: Any) -> Any:
        full = list(self._args)
        for a, v in zip(self._argnums, diff):
            full[a] = v
        return self._fn(*full)


def _shape_and_dtype(v: Any) -> tuple[tuple[int, ...], str]:
    if type(v) is Tracer:
        return tuple(v.shape), v._dtype
    return tuple(np.shape(v)), _T.of(v).dtype


def _basis(k: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    e = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype)
    e[k] = 1
    return e.reshape(shape)


def _jacobian(t: Any, args: tuple) -> Any:
    """`jacrev` / `jacfwd` eagerly, as the compiled path builds them
    (msir.frontend.differentiation): one vjp and an adjoint per output
    element, or one jvp per input element; each Jacobian has the output's
    shape followed by its argument's."""
    argnums = _argnums(t, len(args))
    diff = tuple(args[a] for a in argnums)
    for a, x in zip(argnums, diff):
        if isinstance(x, (tuple, list, dict)) or x is None:
            raise UnsupportedSyntaxError(f"{t.kind} needs array (or float) arguments at argnums, got {type(x).__name__}")
    aux = None
    if t.kind == "jacrev":
        res = _vjp(_Restricted(t, args, argnums), diff)
        out, pullback = res[0], res[1]
        aux = res[2] if t.has_aux else None
        if isinstance(out, (tuple, list)):
            raise UnsupportedSyntaxError("jacrev needs a function returning one array")
        shape, dtype = _shape_and_dtype(out)
        rows = [pullback(_basis(k, shape, dtype)) for k in range(int(np.prod(shape, dtype=np.int64)))]
        jac = [np.reshape(np.stack([r[i] for r in rows]), shape + _shape_and_dtype(x)[0]) for i, x in enumerate(diff)]
    else:
        jac = []
        for i, x in enumerate(diff):
            x_shape, x_dtype = _shape_and_dtype(x)
            zeros = tuple(np.zeros(*_shape_and_dtype(v)) for v in diff)
            cols, out = [], None
            for j in range(int(np.prod(x_shape, dtype=np.int64))):
                tangents = zeros[:i] + (_basis(j, x_shape, x_dtype),) + zeros[i + 1:]
                res = _jvp(_Restricted(t, args, argnums, tangents), diff)
                out, tangent = res[0], res[1]
                aux = res[2] if t.has_aux else aux
                if isinstance(tangent, (tuple, list)):
                    raise UnsupportedSyntaxError("jacfwd needs a function returning one array")
                cols.append(tangent)
            out_shape = _shape_and_dtype(out)[0]
            jac.append(np.reshape(np.stack(cols, axis=len(out_shape)), out_shape + x_shape))
    result = jac[0] if isinstance(t.argnums, int) else tuple(jac)
    return (result, aux) if t.has_aux else result


_MSIR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def _user_location(tb) -> SourceLoc | None:
    """The innermost frame of `tb` outside msir and NumPy: the user's line."""
    for frame in reversed(traceback.extract_tb(tb)):
        path = os.path.abspath(frame.filename)
        if not path.startswith((_MSIR_DIR + os.sep, _NUMPY_DIR + os.sep)) and frame.lineno is not None:
            return SourceLoc(frame.filename, frame.lineno, (frame.colno or 0) + 1)
    return None


def _run_user_function(fn: Any, args: tuple) -> Any:
    """`fn(*args)` on tracers; an msir error raised inside the tracer gets the
    user's line that called the operation, as the compiled path reports it.
    NumPy functions that tracers cannot intercept are wrapped meanwhile
    (`msir.eager.tracer.numpy_functions_on_tracers`)."""
    try:
        with numpy_functions_on_tracers():
            return fn(*args)
    except MsirError as e:
        if e.loc is None:
            e.loc = _user_location(e.__traceback__)
        raise


def _grad(t: Any, args: tuple) -> Any:
    argnums = _argnums(t, len(args))
    trace = ReverseTrace()
    try:
        inputs = _Inputs(trace, args, argnums, lambda primal, weak, i, j: trace.leaf(primal, weak))
        out = _run_user_function(t.fn, inputs.args)
        main, aux = _split_aux(out, t.has_aux, t.aux_tuple)
        _check_scalar_output(main)
        seeds = []
        if type(main) is Tracer and main.trace is trace:
            seeds.append((main.id, np.ones((), main._dtype)))
        per_arg = _cotangents(trace, inputs, seeds)
    finally:
        trace.active = False
    grads = [_rebuild(args[a], iter(g)) for a, g in zip(argnums, per_arg)]
    grads = grads[0] if isinstance(t.argnums, int) else tuple(grads)
    if t.kind == "grad":
        return (grads, _result(aux, trace)) if t.has_aux else grads
    value = _result(out if t.has_aux else main, trace)
    return value, grads


def _vjp(t: Any, primals: tuple) -> Any:
    argnums = tuple(range(len(primals)))
    trace = ReverseTrace()
    try:
        inputs = _Inputs(trace, primals, argnums, lambda primal, weak, i, j: trace.leaf(primal, weak))
        out = _run_user_function(t.fn, inputs.args)
        main, aux = _split_aux(out, t.has_aux)
        out_leaves: list = []
        _leaves(main, out_leaves)
        result = _result(main, trace)
        aux_result = _result(aux, trace) if t.has_aux else None
    finally:
        trace.active = False

    def vjp_fn(ct: Any) -> tuple:
        ct_leaves: list = []
        _leaves(ct, ct_leaves)
        if len(ct_leaves) != len(out_leaves):
            raise ShapeError(
                f"vjp_fn expects a cotangent with the structure of the output "
                f"({len(out_leaves)} arrays), got {len(ct_leaves)}"
            )
        seeds = []
        for y, c in zip(out_leaves, ct_leaves):
            y_shape = y.shape if type(y) is Tracer else np.shape(y)
            y_dt = y._dtype if type(y) is Tracer else _T.of(y).dtype
            c_shape = c.shape if type(c) is Tracer else np.shape(c)
            if tuple(c_shape) != tuple(y_shape):
                raise ShapeError(
                    f"cotangent of shape {fmt_shape(c_shape)} does not match the output's shape {fmt_shape(y_shape)}"
                )
            if type(y) is Tracer and y.trace is trace and y_dt in FLOATS:
                cv = c if type(c) is Tracer else np.asarray(c)
                seeds.append((y.id, TRACING_BUILDER.cast(cv, y_dt)))
        return tuple(_rebuild(primals[a], iter(g)) for a, g in zip(argnums, _cotangents(trace, inputs, seeds)))

    if t.has_aux:
        return result, vjp_fn, aux_result
    return result, vjp_fn


def _jvp(t: Any, primals: tuple) -> Any:
    argnums = tuple(range(len(primals)))
    tangents = list(t.tangents)
    trace = ForwardTrace()

    def make(primal, weak, i, j):
        t_leaves: list = []
        _leaves(tangents[i], t_leaves)
        if j >= len(t_leaves):
            raise ShapeError("jvp needs one tangent per primal")
        tv = t_leaves[j]
        tv = tv if type(tv) is Tracer else _T.of(tv).v
        p_shape = primal.shape if type(primal) is Tracer else np.shape(primal)
        t_shape = tv.shape if type(tv) is Tracer else np.shape(tv)
        if tuple(t_shape) != tuple(p_shape):
            raise ShapeError(
                f"tangent of shape {fmt_shape(t_shape)} does not match its primal's shape {fmt_shape(p_shape)}"
            )
        p_dt = primal._dtype if type(primal) is Tracer else np.asarray(primal).dtype.name
        return Tracer(trace, primal, weak, tangent=TRACING_BUILDER.cast(tv, p_dt))

    try:
        inputs = _Inputs(trace, primals, argnums, make)
        for i, a in enumerate(argnums):
            t_leaves: list = []
            _leaves(tangents[a], t_leaves)
            if len(t_leaves) != len(inputs.leaves[i]):
                raise ShapeError("jvp needs one tangent per primal")
        out = _run_user_function(t.fn, inputs.args)
        main, aux = _split_aux(out, t.has_aux)

        def tangent_of(v):
            if isinstance(v, tuple):
                return tuple(tangent_of(x) for x in v)
            if isinstance(v, list):
                return [tangent_of(x) for x in v]
            if v is None or isinstance(v, str):
                return v
            weak = _weak_of(v)
            info = _T.of(_lower(v, trace)) if type(v) is not Tracer else None
            shape = v.shape if type(v) is Tracer else info.shape
            dt = v._dtype if type(v) is Tracer else info.dtype
            if dt in FLOATS and type(v) is Tracer and v.trace is trace:
                return _user(v.tangent, weak)
            # no tangent, or an integer or boolean result: a zero of its own
            # dtype, as the compiled path returns (msir.passes.jvp)
            return _user(np.zeros(shape, dt), weak)

        tangent_out = tangent_of(main)
        primal_out = _result(out, trace)
    finally:
        trace.active = False
    if t.has_aux:
        return primal_out[0], tangent_out, primal_out[1]
    return primal_out, tangent_out
