"""The grad API family, compiled (GRAPH_MODE), against finite differences.

`msir.grad`, `msir.value_and_grad`, `msir.jvp` (and `msir.vjp`) of straight-line
NumPy functions, compiled through the frontend, `msir-grad`/`msir-jvp` and the
native lowering, are compared with central differences of the same function run
by plain NumPy (`gradcheck.check_grads`: float64, eps 1e-6, rtol 1e-6, atol 1e-8
unless a case says otherwise). Each case differentiates with respect to all its
float arguments at once (an argnums tuple), so a cotangent lost for one operand
cannot hide; gradients must have the dtype and shape of their argument.

Also here: Python float, tuple and list arguments, argnums, has_aux,
value_and_grad, calls and closures, stop_gradient, float32, higher order (up to
third derivatives, Hessian-vector products, grad inside grad, jit inside and
outside), the errors, and memory over 1,000 calls of a compiled gradient.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from gradcheck import check_grads, numerical_jvp, numerical_vjp

import msir
from msir.errors import NotDifferentiableError, ShapeError

F64 = np.float64
F32 = np.float32


def rand(rng, *shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(F64)


def pos(rng, *shape):
    """Away from zero, where log/sqrt/div/abs are smooth."""
    return rand(rng, *shape, lo=0.5, hi=2.0)


def distinct(rng, *shape):
    """Well-separated values: max/min/sort-like ops have no near-ties."""
    n = math.prod(shape)
    return (rng.permutation(n).astype(F64) * 0.37 + 0.1).reshape(shape)


# ---------------------------------------------------------------------------
# Straight-line cases
# ---------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    fn: Callable
    args: Callable[[np.random.Generator], tuple]
    tol: dict = field(default_factory=dict)
    jvp: bool = True  # msir.jvp differentiates every primal: only all-float cases


def helper_sq_sum(a, b):
    return np.sum(a * a * b)


def helper_two(a):
    return np.exp(a) * 0.5, np.sin(a)


def helper_outer(a, b):
    return helper_sq_sum(np.tanh(a), b) + helper_sq_sum(b, b)


CASES = [
    # elementwise unary
    Case("exp", lambda x: np.sum(np.exp(x)), lambda r: (rand(r, 3, 2),)),
    Case("log", lambda x: np.sum(np.log(x)), lambda r: (pos(r, 4),)),
    Case("log1p_expm1", lambda x: np.sum(np.log1p(x) + np.expm1(x)), lambda r: (pos(r, 4),)),
    Case("log2_log10", lambda x: np.sum(np.log2(x) * np.log10(x)), lambda r: (pos(r, 4),)),
    Case("sin_cos_tanh", lambda x: np.sum(np.sin(x) * np.cos(x) + np.tanh(x)), lambda r: (rand(r, 2, 3),)),
    Case("sqrt", lambda x: np.sum(np.sqrt(x)), lambda r: (pos(r, 5),)),
    Case("abs_negative", lambda x: np.sum(np.abs(x) * np.negative(x)), lambda r: (pos(r, 3) * np.array([1, -1, 1]),)),
    Case("square", lambda x: np.sum(np.square(x)), lambda r: (rand(r, 4),)),
    Case("math_scalar", lambda x: math.exp(x) + math.sin(x) * math.sqrt(x), lambda r: (pos(r),)),
    # binary operators and ufuncs
    Case("add_sub", lambda x, y: np.sum((x + y) * (x - y)), lambda r: (rand(r, 3), rand(r, 3))),
    Case("mul_div", lambda x, y: np.sum(x * y / (y + x * x + 3.0)), lambda r: (rand(r, 2, 2), pos(r, 2, 2))),
    Case("rdiv", lambda x: np.sum(1.0 / x), lambda r: (pos(r, 3),)),
    Case("pow_const", lambda x: np.sum(x ** 3 + x ** 0.5 + np.power(x, 2)), lambda r: (pos(r, 4),)),
    Case("pow_both", lambda x, y: np.sum(x ** y), lambda r: (pos(r, 4), rand(r, 4))),
    Case("rpow", lambda y: np.sum(2.0 ** y), lambda r: (rand(r, 4),)),
    Case("ufuncs", lambda x, y: np.sum(np.divide(np.multiply(np.add(x, y), np.subtract(x, y)), y)),
         lambda r: (rand(r, 3), pos(r, 3))),
    Case("mod", lambda x, y: np.sum(np.mod(x, y) * x), lambda r: (rand(r, 4, lo=2.1, hi=2.9), pos(r, 4) * 0 + 1.3)),
    Case("neg_unary", lambda x: np.sum(-x * x), lambda r: (rand(r, 3),)),
    # broadcasting, both ways
    Case("bcast_row", lambda x, b: np.sum(np.tanh(x + b)), lambda r: (rand(r, 3, 4), rand(r, 4))),
    Case("bcast_row_left", lambda b, x: np.sum(np.tanh(b - x)), lambda r: (rand(r, 4), rand(r, 3, 4))),
    Case("bcast_outer", lambda c, rw: np.sum(np.sin(c * rw)), lambda r: (rand(r, 3, 1), rand(r, 1, 4))),
    Case("bcast_3d", lambda x, y: np.sum(x * y), lambda r: (rand(r, 2, 1, 4), rand(r, 3, 1))),
    Case("bcast_scalar_array", lambda s, x: np.sum(s * x + x / s), lambda r: (pos(r), rand(r, 2, 3))),
    Case("bcast_python_const", lambda x: np.sum(2.0 * x - 1.0) + np.sum(x * x), lambda r: (rand(r, 3),)),
    # reductions
    Case("sum_axis0", lambda x: np.sum(np.sin(np.sum(x, axis=0))), lambda r: (rand(r, 3, 4),)),
    Case("sum_axis1_keepdims", lambda x: np.sum(x / np.sum(x, axis=1, keepdims=True)), lambda r: (pos(r, 3, 4),)),
    Case("sum_axes_tuple", lambda x: np.sum(np.cos(x.sum(axis=(0, 2)))), lambda r: (rand(r, 2, 3, 4),)),
    Case("sum_neg_axis", lambda x: np.sum(np.exp(np.sum(x, axis=-1))), lambda r: (rand(r, 2, 3),)),
    Case("mean", lambda x: np.mean(x * x) + np.sum(np.sin(np.mean(x, axis=1))), lambda r: (rand(r, 3, 4),)),
    Case("mean_keepdims", lambda x: np.sum((x - x.mean(axis=0, keepdims=True)) ** 2), lambda r: (rand(r, 3, 4),)),
    Case("max_all", lambda x: np.max(x) * 2.0, lambda r: (distinct(r, 3, 4),)),
    Case("max_axis", lambda x: np.sum(np.sin(np.max(x, axis=0))), lambda r: (distinct(r, 3, 4),)),
    Case("min_axis_keepdims", lambda x: np.sum(x * np.min(x, axis=1, keepdims=True)), lambda r: (distinct(r, 3, 4),)),
    Case("max_method", lambda x: x.max() - x.min(), lambda r: (distinct(r, 5),)),
    Case("prod", lambda x: np.prod(x), lambda r: (pos(r, 5),)),
    Case("prod_axis", lambda x: np.sum(np.prod(x, axis=1)), lambda r: (rand(r, 3, 4),)),
    Case("prod_keepdims", lambda x: np.sum(x.prod(axis=0, keepdims=True) * x), lambda r: (rand(r, 3, 2),)),
    Case("var_std", lambda x: np.var(x) + np.std(x), lambda r: (rand(r, 6),)),
    Case("var_axis", lambda x: np.sum(np.var(x, axis=0)) + np.sum(x.std(axis=1) ** 2), lambda r: (rand(r, 3, 4),)),
    Case("var_keepdims", lambda x: np.sum(np.std(x, axis=1, keepdims=True) * x), lambda r: (rand(r, 3, 4),)),
    # linear algebra
    Case("matmul_vv", lambda a, b: np.tanh(a @ b), lambda r: (rand(r, 4), rand(r, 4))),
    Case("matmul_mv", lambda a, b: np.sum(np.sin(a @ b)), lambda r: (rand(r, 3, 4), rand(r, 4))),
    Case("matmul_vm", lambda a, b: np.sum(np.sin(a @ b)), lambda r: (rand(r, 3), rand(r, 3, 4))),
    Case("matmul_mm", lambda a, b: np.sum(np.sin(np.matmul(a, b))), lambda r: (rand(r, 2, 3), rand(r, 3, 4))),
    Case("matmul_batched", lambda a, b: np.sum(np.sin(a @ b)), lambda r: (rand(r, 2, 3, 4), rand(r, 2, 4, 2))),
    Case("matmul_batch_bcast", lambda a, b: np.sum(np.sin(a @ b)), lambda r: (rand(r, 2, 3, 4), rand(r, 4, 2))),
    Case("matmul_batch_bcast_left", lambda a, b: np.sum(np.sin(a @ b)), lambda r: (rand(r, 3, 4), rand(r, 2, 4, 2))),
    Case("dot", lambda a, b: np.sum(np.dot(a, b) ** 2) + np.dot(a[0], b[:, 0]), lambda r: (rand(r, 2, 3), rand(r, 3, 2))),
    Case("dot_method", lambda a, b: a.dot(b) * a.dot(a), lambda r: (rand(r, 3), rand(r, 3))),
    # shapes
    Case("transpose", lambda x, y: np.sum(np.sin(x.T) * y), lambda r: (rand(r, 3, 2), rand(r, 2, 3))),
    Case("transpose_axes", lambda x: np.sum(np.transpose(x, (2, 0, 1)) * np.arange(24.0).reshape(4, 2, 3)),
         lambda r: (rand(r, 2, 3, 4),)),
    Case("reshape", lambda x: np.sum(np.sin(x.reshape(3, 4)) * np.arange(12.0).reshape(3, 4)), lambda r: (rand(r, 2, 6),)),
    Case("reshape_flatten", lambda x: np.sum(np.reshape(x, (-1,)) * np.arange(6.0) + x.ravel() ** 2),
         lambda r: (rand(r, 2, 3),)),
    Case("expand_squeeze", lambda x: np.sum(np.squeeze(np.expand_dims(x, 1) * x[None]) ** 2), lambda r: (rand(r, 3),)),
    Case("broadcast_to", lambda x: np.sum(np.sin(np.broadcast_to(x, (3, 4)))), lambda r: (rand(r, 4),)),
    # slicing and indexing
    Case("slice", lambda x: np.sum(np.sin(x[1:3]) * x[0:2]), lambda r: (rand(r, 5),)),
    Case("slice_steps", lambda x: np.sum(x[::2] * x[1::2] ** 2), lambda r: (rand(r, 6),)),
    Case("slice_negative_step", lambda x: np.sum(x[::-1] * np.arange(5.0)) + np.sum(x[4:0:-2] ** 3), lambda r: (rand(r, 5),)),
    Case("slice_2d", lambda x: np.sum(np.exp(x[1:, ::2]) + x[:, -1] ** 2), lambda r: (rand(r, 3, 5),)),
    Case("int_index", lambda x: x[1, 2] * x[-1, 0] + np.sum(x[0] ** 2), lambda r: (rand(r, 3, 4),)),
    Case("list_index", lambda x: np.sum(np.sin(x[[0, 2, 2]]) * np.arange(3.0)), lambda r: (rand(r, 4),)),
    Case("list_index_2d", lambda x: np.sum(x[[1, 0, 1]] ** 2 * np.arange(6.0).reshape(3, 2)), lambda r: (rand(r, 3, 2),)),
    Case("runtime_int_index", lambda x, i: np.sum(np.sin(x[i])) + x[i + 1, 0] ** 2, lambda r: (rand(r, 4, 3), 1),
         jvp=False),
    Case("runtime_int_arg_scale", lambda x, n: np.sum(x * n) ** 2, lambda r: (rand(r, 3), 3), jvp=False),
    # joining
    Case("concatenate", lambda x, y: np.sum(np.sin(np.concatenate([x, y])) * np.arange(7.0)), lambda r: (rand(r, 3), rand(r, 4))),
    Case("concatenate_axis1", lambda x, y: np.sum(np.concatenate((x, y, x), axis=1) ** 2), lambda r: (rand(r, 2, 1), rand(r, 2, 3))),
    Case("stack", lambda x, y: np.sum(np.stack([x, y, x * y]) * np.arange(6.0).reshape(3, 2)), lambda r: (rand(r, 2), rand(r, 2))),
    Case("stack_axis1", lambda x, y: np.sum(np.tanh(np.stack((x, y), axis=1))), lambda r: (rand(r, 3, 2), rand(r, 3, 2))),
    # selection
    Case("where", lambda x, y: np.sum(np.where(x > 0, x * y, y * y)), lambda r: (rand(r, 6), rand(r, 6))),
    Case("where_bcast", lambda x, y: np.sum(np.where(x > 0.5, x, y)), lambda r: (rand(r, 2, 3), rand(r, 3))),
    Case("maximum_minimum", lambda x, y: np.sum(np.maximum(x, y) * 2.0 + np.minimum(x, y) ** 2), lambda r: (distinct(r, 5), distinct(r, 5)[::-1].copy() + 0.05)),
    Case("maximum_scalar", lambda x: np.sum(np.maximum(x, 0.0) ** 2), lambda r: (rand(r, 6) + np.array([0.1, -0.1] * 3),)),
    Case("relu_where", lambda x: np.sum(np.where(x > 0, x, 0.01 * x)), lambda r: (rand(r, 5) + 0.05,)),
    Case("clip", lambda x: np.sum(np.clip(x, -0.5, 0.5) * x), lambda r: (np.array([-0.9, -0.2, 0.1, 0.7, 0.3]),)),
    Case("clip_method", lambda x: np.sum(x.clip(0.0, 1.0) ** 2), lambda r: (np.array([-0.4, 0.3, 1.4, 0.6]),)),
    # dtype casts (float64 -> float32 -> float64 loses precision: looser tolerance)
    Case("astype_roundtrip", lambda x: np.sum(np.sin(x.astype(np.float32)).astype(np.float64) * x),
         lambda r: (rand(r, 3),), tol=dict(rtol=1e-3, atol=1e-3, eps=1e-3)),
    Case("astype_f64", lambda x: np.sum(x.astype(np.float64) ** 2), lambda r: (rand(r, 3),)),
    # calls
    Case("call", lambda x, y: helper_sq_sum(np.sin(x), y) * 2.0, lambda r: (rand(r, 3), rand(r, 3))),
    Case("call_twice", lambda x, y: helper_sq_sum(x, y) + helper_sq_sum(y, x), lambda r: (rand(r, 3), rand(r, 3))),
    Case("call_tuple_result", lambda x: np.sum(helper_two(x)[0] * helper_two(x)[1]), lambda r: (rand(r, 3),)),
    Case("call_nested", lambda x, y: helper_outer(x, y), lambda r: (rand(r, 2), rand(r, 2))),
    Case("fan_out", lambda x: np.sum(x * x * x + np.sin(x) * x), lambda r: (rand(r, 4),)),
]


def _float_positions(args: tuple) -> list[int]:
    return [i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]


def _tol(case: Case) -> dict:
    return {"rtol": 1e-6, "atol": 1e-8, **case.tol}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_grad(case: Case):
    args = case.args(np.random.default_rng(0))
    argnums = tuple(_float_positions(args))
    g = msir.grad(case.fn, argnums=argnums)

    def vjp(xs, y, ct):
        grads = g(*args)
        assert isinstance(grads, tuple) and len(grads) == len(argnums)
        by_pos = dict(zip(argnums, grads))
        for i, gi in by_pos.items():
            # a 0-d result comes back as a NumPy scalar, like every msir.jit result
            assert isinstance(gi, (np.ndarray, np.generic)) and gi.shape == np.shape(args[i]), f"gradient {i}: {gi!r}"
        return [ct * by_pos[i] if i in by_pos else None for i in range(len(xs))]

    check_grads(lambda xs: case.fn(*xs), list(args), vjp=vjp, **_tol(case))


@pytest.mark.parametrize("case", [c for c in CASES if c.jvp], ids=lambda c: c.id)
def test_jvp(case: Case):
    args = case.args(np.random.default_rng(0))

    def jvp(xs, y, ts):
        ts = [np.zeros_like(x) if t is None else t for x, t in zip(xs, ts)]
        out, tangent = msir.jvp(case.fn, tuple(args), tuple(ts))
        np.testing.assert_allclose(out, y, rtol=1e-12, atol=1e-12, err_msg="primal output of jvp")
        return tangent

    check_grads(lambda xs: case.fn(*xs), list(args), jvp=jvp, **_tol(case))


# ---------------------------------------------------------------------------
# API semantics
# ---------------------------------------------------------------------------


def loss3(x, y, s):
    return np.sum(np.sin(x) * y) * s


def _fd(fn, args, i, eps=1e-6):
    return numerical_vjp(lambda xs: fn(*xs), list(args), 1.0, i, eps)


def test_argnums_int_and_tuple_and_value_and_grad():
    rng = np.random.default_rng(1)
    x, y, s = rand(rng, 3), rand(rng, 3), pos(rng)
    gx = msir.grad(loss3)(x, y, s)
    assert isinstance(gx, np.ndarray) and gx.dtype == F64 and gx.shape == (3,)
    np.testing.assert_allclose(gx, np.cos(x) * y * s, rtol=1e-13)
    gy = msir.grad(loss3, argnums=1)(x, y, s)
    np.testing.assert_allclose(gy, np.sin(x) * s, rtol=1e-13)
    g = msir.grad(loss3, argnums=(2, 0))(x, y, s)
    assert isinstance(g, tuple) and len(g) == 2
    np.testing.assert_allclose(g[0], np.sum(np.sin(x) * y), rtol=1e-13)
    np.testing.assert_allclose(g[1], np.cos(x) * y * s, rtol=1e-13)
    g1 = msir.grad(loss3, argnums=(1,))(x, y, s)
    assert isinstance(g1, tuple) and len(g1) == 1
    gneg = msir.grad(loss3, argnums=-2)(x, y, s)
    np.testing.assert_allclose(gneg, np.sin(x) * s, rtol=1e-13)
    v, (g0, g1) = msir.value_and_grad(loss3, argnums=(0, 1))(x, y, s)
    np.testing.assert_allclose(v, loss3(x, y, s), rtol=1e-13)
    np.testing.assert_allclose(g0, np.cos(x) * y * s, rtol=1e-13)
    np.testing.assert_allclose(g1, np.sin(x) * s, rtol=1e-13)


def with_aux(x, y):
    z = np.sin(x) * y
    return np.sum(z), (z, np.max(x))


def test_has_aux():
    rng = np.random.default_rng(2)
    x, y = rand(rng, 4), rand(rng, 4)
    g, (z, m) = msir.grad(with_aux, has_aux=True)(x, y)
    np.testing.assert_allclose(g, np.cos(x) * y, rtol=1e-13)
    np.testing.assert_allclose(z, np.sin(x) * y, rtol=1e-13)
    np.testing.assert_allclose(m, np.max(x))
    (v, (z2, _)), (gx, gy) = msir.value_and_grad(with_aux, argnums=(0, 1), has_aux=True)(x, y)
    np.testing.assert_allclose(v, np.sum(np.sin(x) * y), rtol=1e-13)
    np.testing.assert_allclose(z2, z)
    np.testing.assert_allclose(gx, g, rtol=1e-13)
    np.testing.assert_allclose(gy, np.sin(x), rtol=1e-13)


def py_float_fn(x, a, k):
    return np.sum(np.sin(a * x)) * a + k * a * a


def test_python_float_argument():
    rng = np.random.default_rng(3)
    x, a = rand(rng, 3), 0.7
    ga, gx = msir.grad(py_float_fn, argnums=(1, 0))(x, a, 2)
    assert isinstance(ga, float), f"gradient w.r.t. a Python float is {type(ga).__name__}"
    expected_a = (_fd(lambda a_: py_float_fn(x, a_, 2), [np.float64(a)], 0))
    np.testing.assert_allclose(ga, expected_a, rtol=1e-6)
    np.testing.assert_allclose(gx, _fd(lambda x_: py_float_fn(x_, a, 2), [x], 0), rtol=1e-6, atol=1e-8)
    # a scalar function of Python floats only
    v, g = msir.value_and_grad(lambda t: t * t * t - 2.0 * t)(1.5)
    assert v == pytest.approx(1.5 ** 3 - 3.0, rel=1e-14)
    assert isinstance(g, float) and g == pytest.approx(3 * 1.5 ** 2 - 2.0, rel=1e-14)


def tuple_fn(p, x):
    w, b = p
    return np.sum(np.tanh(x @ w + b))


def list_fn(ps, x):
    return np.sum(np.sin(ps[0] * x) * ps[1][0]) + ps[1][1] * np.sum(x)


def test_tuple_argument_gradient_has_same_structure():
    rng = np.random.default_rng(4)
    w, b, x = rand(rng, 3, 2), rand(rng, 2), rand(rng, 4, 3)
    gw, gb = g = msir.grad(tuple_fn)((w, b), x)
    assert type(g) is tuple and len(g) == 2
    assert gw.shape == w.shape and gb.shape == b.shape
    np.testing.assert_allclose(gw, _fd(lambda w_: tuple_fn((w_, b), x), [w], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, _fd(lambda b_: tuple_fn((w, b_), x), [b], 0), rtol=1e-6, atol=1e-8)


def test_list_argument_gradient_has_same_structure():
    rng = np.random.default_rng(5)
    a, c, x = rand(rng, 3), rand(rng, 3), rand(rng, 3)
    g = msir.grad(list_fn)([a, [c, 1.5]], x)
    assert type(g) is list and len(g) == 2 and type(g[1]) is list and len(g[1]) == 2
    np.testing.assert_allclose(g[0], _fd(lambda a_: list_fn([a_, [c, 1.5]], x), [a], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g[1][0], np.sin(a * x), rtol=1e-13)
    assert isinstance(g[1][1], float) and g[1][1] == pytest.approx(np.sum(x), rel=1e-13)


def closure_lambda(w, x):
    g = lambda v: np.sum(np.tanh(v * w))  # noqa: E731
    return g(x)


def closure_def(w, x):
    b = np.sin(w)

    def inner(v):
        return np.sum(np.exp(v * w) * b)

    return inner(x) + inner(2.0 * x)


def closure_nested(w, x):
    def outer(v):
        def inner(u):
            return np.sum(u * w * w)

        return inner(v * w) + np.sum(w)

    return outer(x)


@pytest.mark.parametrize("fn", [closure_lambda, closure_def, closure_nested], ids=lambda f: f.__name__)
def test_closure_captures_get_gradients(fn):
    rng = np.random.default_rng(6)
    w, x = rand(rng, 3), rand(rng, 3)
    gw, gx = msir.grad(fn, argnums=(0, 1))(w, x)
    np.testing.assert_allclose(gw, _fd(fn, (w, x), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx, _fd(fn, (w, x), 1), rtol=1e-6, atol=1e-8)


def stopped(x, y):
    return np.sum(x * msir.stop_gradient(x * y)) + np.sum(msir.stop_gradient(np.sin(y)))


def test_stop_gradient():
    rng = np.random.default_rng(7)
    x, y = rand(rng, 4), rand(rng, 4)
    gx, gy = msir.grad(stopped, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, x * y, rtol=1e-13)  # not 2*x*y
    np.testing.assert_allclose(gy, np.zeros(4))
    _, ty = msir.jvp(stopped, (x, y), (np.ones(4), np.ones(4)))
    np.testing.assert_allclose(ty, np.sum(x * y), rtol=1e-13)


def f32_fn(x, y):
    return np.sum(np.tanh(x @ y) * x[:, :1])


def test_float32_gradients_keep_float32():
    rng = np.random.default_rng(8)
    x, y = rand(rng, 3, 2).astype(F32), rand(rng, 2, 4).astype(F32)
    gx, gy = msir.grad(f32_fn, argnums=(0, 1))(x, y)
    assert gx.dtype == F32 and gy.dtype == F32
    x64, y64 = x.astype(F64), y.astype(F64)
    np.testing.assert_allclose(gx, _fd(f32_fn, (x64, y64), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gy, _fd(f32_fn, (x64, y64), 1), rtol=1e-5, atol=1e-6)
    v, t = msir.jvp(f32_fn, (x, y), (np.ones_like(x), np.ones_like(y)))
    assert np.asarray(v).dtype == F32 and np.asarray(t).dtype == F32
    expected_t = numerical_jvp(lambda xs: f32_fn(*xs), [x64, y64], [np.ones_like(x64), np.ones_like(y64)])
    np.testing.assert_allclose(t, expected_t, rtol=1e-5, atol=1e-6)


def mixed_precision(x32, y64):
    return np.sum(np.sin(x32.astype(np.float64)) * y64) + np.sum(y64.astype(np.float32) * x32).astype(np.float64)


def test_astype_float32_float64_gradients_keep_argument_dtype():
    rng = np.random.default_rng(9)
    x, y = rand(rng, 4).astype(F32), rand(rng, 4)
    gx, gy = msir.grad(mixed_precision, argnums=(0, 1))(x, y)
    assert gx.dtype == F32 and gy.dtype == F64
    x64 = x.astype(F64)
    np.testing.assert_allclose(gx, np.cos(x64) * y + y, rtol=1e-6)
    np.testing.assert_allclose(gy, np.sin(x64) + x64, rtol=1e-6)


# ---------------------------------------------------------------------------
# vjp at the API level
# ---------------------------------------------------------------------------


def vec_fn(x, w):
    return np.tanh(w @ x)


def test_vjp_api():
    rng = np.random.default_rng(10)
    x, w = rand(rng, 3), rand(rng, 2, 3)
    out, vjp_fn = msir.vjp(vec_fn, x, w)
    np.testing.assert_allclose(out, vec_fn(x, w), rtol=1e-13)
    for _ in range(2):  # vjp_fn owns its residuals: callable many times
        ct = rand(rng, 2)
        gx, gw = vjp_fn(ct)
        np.testing.assert_allclose(gx, numerical_vjp(lambda xs: vec_fn(*xs), [x, w], ct, 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gw, numerical_vjp(lambda xs: vec_fn(*xs), [x, w], ct, 1), rtol=1e-6, atol=1e-8)


def vjp_inside_user(x, w, ct):
    out, pullback = msir.vjp(vec_fn, x, w)
    gx, gw = pullback(ct)
    return out, gx, gw


def test_vjp_inside_jit():
    rng = np.random.default_rng(11)
    x, w, ct = rand(rng, 3), rand(rng, 2, 3), rand(rng, 2)
    out, gx, gw = msir.jit(vjp_inside_user)(x, w, ct)
    np.testing.assert_allclose(out, vec_fn(x, w), rtol=1e-13)
    np.testing.assert_allclose(gx, numerical_vjp(lambda xs: vec_fn(*xs), [x, w], ct, 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, numerical_vjp(lambda xs: vec_fn(*xs), [x, w], ct, 1), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------
# Higher order and composition with jit
# ---------------------------------------------------------------------------


def scalar_fn(x):
    return np.sin(x) * x * x


def d1(x):
    return np.cos(x) * x * x + 2 * x * np.sin(x)


def d2(x):
    return -np.sin(x) * x * x + 4 * x * np.cos(x) + 2 * np.sin(x)


def d3(x):
    return -np.cos(x) * x * x - 6 * x * np.sin(x) + 6 * np.cos(x)


@pytest.mark.parametrize("x", [0.7, np.float64(-1.3), np.array(0.4)], ids=["pyfloat", "npfloat64", "0d"])
def test_second_and_third_derivatives(x):
    g2 = msir.grad(msir.grad(scalar_fn))(x)
    g3 = msir.grad(msir.grad(msir.grad(scalar_fn)))(x)
    xv = float(x)
    np.testing.assert_allclose(g2, d2(xv), rtol=1e-12)
    np.testing.assert_allclose(g3, d3(xv), rtol=1e-12)
    np.testing.assert_allclose(msir.grad(scalar_fn)(x), d1(xv), rtol=1e-12)


def vec_loss(x, w):
    return np.sum(np.tanh(x * w) ** 2) + np.sum(x ** 3) * 0.1


def test_second_order_of_array_function_by_grad_of_grad():
    """grad of (x -> sum(grad(f)(x) * v)) is H v."""
    rng = np.random.default_rng(12)
    x, w, v = rand(rng, 3), rand(rng, 3), rand(rng, 3)

    def gv(x_, w_, v_):
        return np.sum(msir.grad(vec_loss)(x_, w_) * v_)

    hv = msir.grad(gv)(x, w, v)
    gfn = msir.jit(msir.grad(vec_loss))
    expected = numerical_jvp(lambda xs: gfn(xs[0], w), [x], [v])
    np.testing.assert_allclose(hv, expected, rtol=1e-6, atol=1e-8)



def hvp_loss(x, w):
    return np.sum(np.tanh(x * w) * np.sin(x)) + np.prod(x) + np.sum(np.exp(x) * x * x * w)


def test_hessian_vector_product_by_jvp_of_grad():
    rng = np.random.default_rng(13)
    x, w, v = rand(rng, 4), rand(rng, 4), rand(rng, 4)
    g, hv = msir.jvp(msir.grad(hvp_loss), (x, w), (v, np.zeros(4)))
    gfn = msir.jit(msir.grad(hvp_loss))
    np.testing.assert_allclose(g, gfn(x, w), rtol=1e-13)
    np.testing.assert_allclose(hv, numerical_jvp(lambda xs: gfn(xs[0], w), [x], [v]), rtol=1e-6, atol=1e-8)


def test_hessian_vector_product_two_arguments():
    """The tangent of grad wrt x along (v, u) is H_xx v + H_xw u."""
    rng = np.random.default_rng(13)
    x, w, v, u = rand(rng, 4), rand(rng, 4), rand(rng, 4), rand(rng, 4)
    g, hv = msir.jvp(msir.grad(hvp_loss), (x, w), (v, u))
    gfn = msir.jit(msir.grad(hvp_loss))
    np.testing.assert_allclose(hv, numerical_jvp(lambda xs: gfn(*xs), [x, w], [v, u]), rtol=1e-6, atol=1e-8)


def cube_sum(x):
    return np.sum(x ** 3)


def test_hessian_vector_product_of_power_at_negative_inputs():
    x, v = np.array([0.5, -0.5, -1.5]), np.array([1.0, 2.0, 3.0])
    g, hv = msir.jvp(msir.grad(cube_sum), (x,), (v,))
    np.testing.assert_allclose(g, 3 * x ** 2, rtol=1e-14)
    np.testing.assert_allclose(hv, 6 * x * v, rtol=1e-14)


def test_jvp_of_closure_capturing_an_array():
    x, w, v = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0]), np.array([5.0, 6.0, 7.0])
    out, t = msir.jvp(lambda y: y * w, (x,), (v,))
    np.testing.assert_allclose(out, x * w, rtol=1e-15)
    np.testing.assert_allclose(t, v * w, rtol=1e-15)


def test_hessian_vector_product_by_jvp_of_grad_closure():
    rng = np.random.default_rng(13)
    x, w, v = rand(rng, 4), rand(rng, 4), rand(rng, 4)
    g, hv = msir.jvp(lambda x_: msir.grad(vec_loss)(x_, w), (x,), (v,))
    gfn = msir.jit(msir.grad(vec_loss))
    np.testing.assert_allclose(g, gfn(x, w), rtol=1e-13)
    np.testing.assert_allclose(hv, numerical_jvp(lambda xs: gfn(xs[0], w), [x], [v]), rtol=1e-6, atol=1e-8)


def test_hessian_vector_product_of_closure_over_arguments():
    rng = np.random.default_rng(14)
    x, w, v = rand(rng, 4), rand(rng, 4), rand(rng, 4)

    def hvp(x_, w_, v_):
        return msir.jvp(lambda y: msir.grad(vec_loss)(y, w_), (x_,), (v_,))[1]

    hv = msir.jit(hvp)(x, w, v)
    gfn = msir.jit(msir.grad(vec_loss))
    np.testing.assert_allclose(hv, numerical_jvp(lambda xs: gfn(xs[0], w), [x], [v]), rtol=1e-6, atol=1e-8)


def grad_in_body(x, w):
    g = msir.grad(vec_loss, argnums=1)(x, w)
    return np.sum(np.sin(g) * x)


def test_grad_of_function_that_calls_grad():
    rng = np.random.default_rng(15)
    x, w = rand(rng, 3), rand(rng, 3)
    jitted = msir.jit(grad_in_body)
    gx, gw = msir.grad(grad_in_body, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, _fd(jitted, (x, w), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, _fd(jitted, (x, w), 1), rtol=1e-6, atol=1e-8)


def mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = np.tanh(x @ w1 + b1)
    return np.mean((h @ w2 - y) ** 2)


@msir.jit
def sgd_step(params, x, y):
    loss, grads = msir.value_and_grad(mlp_loss)(params, x, y)
    w1, b1, w2 = params
    g1, gb, g2 = grads
    return loss, (w1 - 0.1 * g1, b1 - 0.1 * gb, w2 - 0.1 * g2)


def _mlp_data(seed):
    rng = np.random.default_rng(seed)
    params = (rand(rng, 3, 4), rand(rng, 4), rand(rng, 4))
    return params, rand(rng, 5, 3), rand(rng, 5)


def test_jit_of_function_calling_value_and_grad():
    params, x, y = _mlp_data(16)
    loss, new = sgd_step(params, x, y)
    np.testing.assert_allclose(loss, mlp_loss(params, x, y), rtol=1e-13)
    assert type(new) is tuple and len(new) == 3
    for k, p in enumerate(params):
        fd = _fd(lambda q: mlp_loss(tuple(q if j == k else params[j] for j in range(3)), x, y), [p], 0)
        np.testing.assert_allclose(new[k], p - 0.1 * fd, rtol=1e-6, atol=1e-8)
    loss2, _ = sgd_step(new, x, y)
    assert loss2 < loss


def test_grad_of_jit_and_jit_of_grad():
    params, x, y = _mlp_data(17)
    g_of_jit = msir.grad(msir.jit(mlp_loss))(params, x, y)
    jit_of_g = msir.jit(msir.grad(mlp_loss))(params, x, y)
    assert type(g_of_jit) is tuple and type(jit_of_g) is tuple
    w1 = params[0]
    fd = _fd(lambda q: mlp_loss((q, params[1], params[2]), x, y), [w1], 0)
    np.testing.assert_allclose(g_of_jit[0], fd, rtol=1e-6, atol=1e-8)
    for a, b in zip(g_of_jit, jit_of_g):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


@msir.jit
def decorated(x):
    return np.sum(np.exp(x) * x)


def test_grad_of_decorated_function():
    x = np.linspace(-1, 1, 4)
    np.testing.assert_allclose(msir.grad(decorated)(x), np.exp(x) * (x + 1), rtol=1e-13)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def int_arg_fn(x, n):
    return np.sum(x) * n


def vector_out(x):
    return np.sin(x)


def int_out(x):
    return np.argmax(x)


def test_gradient_wrt_int_argument_is_not_differentiable():
    with pytest.raises(NotDifferentiableError, match="argument 1"):
        msir.grad(int_arg_fn, argnums=1)(np.ones(3), 2)
    with pytest.raises(NotDifferentiableError, match="int"):
        msir.grad(lambda x: np.sum(x * 1.5))(np.arange(3))


def test_grad_of_non_scalar_output_is_a_shape_error_naming_the_shape():
    with pytest.raises(ShapeError, match=r"scalar output.*shape \(3, 2\)"):
        msir.grad(vector_out)(np.ones((3, 2)))


def test_grad_of_int_output_is_not_differentiable():
    with pytest.raises(NotDifferentiableError, match="argmax.*int64"):
        msir.grad(int_out)(np.ones(3))


def test_grad_inside_jit_errors_too():
    @msir.jit
    def f(x, n):
        return msir.grad(int_arg_fn, argnums=1)(x, n)

    with pytest.raises(NotDifferentiableError):
        f(np.ones(3), 2)


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm")
def test_memory_flat_over_1000_gradient_calls():
    # Large enough that leaking one set of buffers per call (~40 KiB) would show.
    rng = np.random.default_rng(18)
    params, x, y = (rand(rng, 32, 64), rand(rng, 64), rand(rng, 64)), rand(rng, 16, 32), rand(rng, 16)
    vg = msir.value_and_grad(mlp_loss)
    for _ in range(20):  # compile and warm up allocators
        vg(params, x, y)
    before = _rss_bytes()
    for _ in range(1000):
        vg(params, x, y)
    grown = _rss_bytes() - before
    assert grown < 4 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 1000 calls"
