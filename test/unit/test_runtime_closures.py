"""A function chosen at run time, then called (issue 17): `g if c else h`, an
`if` assigning or returning functions. Compiled as a defunctionalised choice
(each option called in a branch of one msir.if); values against NumPy and
gradients against finite differences in GRAPH and PYNATIVE mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative

import msir
from msir.errors import UnsupportedSyntaxError


def _conditional_expression(x, a):
    g = lambda v: np.sin(v) * a  # noqa: E731
    def h(v):
        return np.exp(v) + a
    f = g if x.sum() < 0 else h
    return np.sum(f(x))


def _assigned_in_an_if(x):
    if x[0] > 0:
        f = np.tanh
    else:
        f = np.cos
    return np.sum(f(x) * x)


def _returned_then_called(x):
    def choose(v):  # a closure, inlined where it is called
        if np.max(v) > 0.4:
            scale = np.max(v)
            return lambda u: u * scale
        return lambda u: u ** 2

    return np.sum(choose(x)(x) * np.arange(1.0, 4.0))


def _square(v):
    return v * v


def _three_way(x):
    """A chain of choices: one of three known functions, tagged by two conditions."""
    s = np.sum(x)
    f = np.sin if s < -0.5 else (_square if s < 0.5 else np.exp)
    return np.sum(f(x))


X = np.array([0.3, -0.2, 0.5])


@pytest.mark.parametrize("fn, args", [
    (_conditional_expression, (2.0,)),
    (_assigned_in_an_if, ()),
    (_returned_then_called, ()),
    (_three_way, ()),
])
@pytest.mark.parametrize("x", [X, -X, X - 0.6, X + 0.5], ids=["x", "-x", "x-0.6", "x+0.5"])
def test_a_function_chosen_at_run_time_computes_and_differentiates(fn, args, x):
    expected = fn(x, *args)
    np.testing.assert_allclose(msir.jit(fn)(x, *args), expected, rtol=1e-12)
    np.testing.assert_allclose(pynative(lambda: msir.jit(fn)(x, *args)), expected, rtol=1e-12)
    fd = numerical_vjp(lambda xs: fn(xs[0], *args), [x], np.float64(1.0), 0)
    np.testing.assert_allclose(msir.grad(fn)(x, *args), fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(pynative(lambda: msir.grad(fn)(x, *args)), fd, rtol=1e-6, atol=1e-9)
    direction = np.array([0.7, -0.1, 0.4])
    tangents = (direction, *(0.0 for _ in args))
    _, t = msir.jvp(fn, (x, *args), tangents)
    np.testing.assert_allclose(t, numerical_jvp(lambda xs: fn(xs[0], *args), [x], [direction]), rtol=1e-6, atol=1e-9)


def test_the_choice_is_one_runtime_if_per_call():
    ir = str(msir.jit(_assigned_in_an_if).lower(X))
    assert "msir.tanh" in ir and "msir.cos" in ir
    assert ir.count("-> (tensor<3xf64>)") == 1  # one msir.if yields the called function's result


def test_options_with_different_result_structures_are_a_located_error():
    def pair(v):
        return v, v

    def mismatched(x):
        f = pair if x[0] > 0 else np.sin
        return f(x)

    with pytest.raises(UnsupportedSyntaxError, match="return results of different structures") as info:
        msir.jit(mismatched)(X)
    assert info.value.loc.line == mismatched.__code__.co_firstlineno + 2
