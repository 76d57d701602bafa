"""Symbolic zero cotangents (`msir.passes.grad_zeros`): an output nobody
differentiates, `has_aux`'s aux, an unused result of a call, a branch or a
loop, and a `stop_gradient`, never pass their zero cotangent through a rule.

Each function has `sqrt` (whose rule divides by `2 * sqrt(x)`) on an output
that is not differentiated, at x = 0: a zero cotangent pushed through it gives
0 / 0 = NaN. The gradients are compared with finite differences at points away
from 0 and with the closed form at 0, in GRAPH and PYNATIVE mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import numerical_vjp, pynative

import msir

X = np.array([0.0, 1.0, 4.0])
AWAY = np.array([0.5, 1.0, 4.0])


def stats(x):
    return np.sum(x * x), np.sqrt(x)


def unused_call_result(x):
    total, _roots = stats(x)
    return total


def unused_branch_result(x):
    if np.sum(x) > 1.0:
        a, r = np.sum(x * x), np.sqrt(x)
    else:
        a, r = np.sum(x), np.sqrt(x + 1.0)
    return a


def unused_for_carry(x):
    a = x
    r = x
    for _ in range(2):
        a = a * 1.5
        r = np.sqrt(r)
    return np.sum(a * x)


def unused_while_carry(x):
    a = x
    r = x
    n = 0
    while n < 3:
        a = a + x
        r = np.sqrt(r)
        n += 1
    return np.sum(a)


def unused_closure_result(x):
    helper = lambda v: (np.sum(v * v), np.sqrt(v))  # noqa: E731
    return helper(x)[0]


def stopped(x):
    return np.sum(x * x) + np.sum(msir.stop_gradient(np.sqrt(x)))


CASES = [
    (unused_call_result, lambda x: 2 * x),
    (unused_branch_result, lambda x: 2 * x),
    (unused_for_carry, lambda x: 2 * 2.25 * x),
    (unused_while_carry, lambda x: np.full_like(x, 4.0)),
    (unused_closure_result, lambda x: 2 * x),
    (stopped, lambda x: 2 * x),
]


@pytest.mark.parametrize("pynative_mode", [False, True], ids=["graph", "pynative"])
@pytest.mark.parametrize("fn,expected", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_gradient_ignores_the_zero_cotangent_of_an_unused_value(fn, expected, pynative_mode):
    run = (lambda thunk: pynative(thunk)) if pynative_mode else (lambda thunk: thunk())
    at_zero = run(lambda: msir.grad(fn)(X))
    np.testing.assert_allclose(at_zero, expected(X), rtol=1e-12)
    away = run(lambda: msir.grad(fn)(AWAY))
    np.testing.assert_allclose(away, expected(AWAY), rtol=1e-12)
    if fn is not stopped:  # finite differences see through stop_gradient
        np.testing.assert_allclose(away, numerical_vjp(lambda a: fn(a[0]), [AWAY], np.float64(1.0), 0), rtol=1e-6)


@pytest.mark.parametrize("pynative_mode", [False, True], ids=["graph", "pynative"])
def test_has_aux_takes_no_cotangent(pynative_mode):
    run = (lambda thunk: pynative(thunk)) if pynative_mode else (lambda thunk: thunk())
    g, aux = run(lambda: msir.grad(stats, has_aux=True)(X))
    np.testing.assert_allclose(g, 2 * X, rtol=1e-12)
    np.testing.assert_array_equal(aux, np.sqrt(X))
    (value, aux), g = run(lambda: msir.value_and_grad(stats, has_aux=True)(X))
    assert value == np.sum(X * X)
    np.testing.assert_allclose(g, 2 * X, rtol=1e-12)

    def pull():
        value, vjp_fn, aux = msir.vjp(stats, X, has_aux=True)
        return value, vjp_fn(2.0), aux

    value, (g,), aux = run(pull)
    np.testing.assert_allclose(g, 4 * X, rtol=1e-12)
    np.testing.assert_array_equal(aux, np.sqrt(X))


def unused_carry_second_order(x):
    def f(x):
        a = x
        r = x
        for _ in range(2):
            a = a * np.sin(x)
            r = np.sqrt(r)
        return np.sum(a)

    return np.sum(msir.grad(f)(x) ** 2)


def test_second_order_through_a_loop_keeping_tape_ops():
    """The first derivative's loop keeps its tape writes around the body call;
    the unused carry `r` still takes no cotangent at the second level."""
    got = msir.grad(unused_carry_second_order)(X)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, pynative(lambda: msir.grad(unused_carry_second_order)(X)), rtol=1e-12)
    np.testing.assert_allclose(msir.grad(unused_carry_second_order)(AWAY),
                               numerical_vjp(lambda a: unused_carry_second_order(a[0]), [AWAY], np.float64(1.0), 0),
                               rtol=1e-6)
