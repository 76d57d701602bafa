"""NumPy's ufuncs and functions and Python's builtins are functions to
transform and compile as they are (`msir.grad(np.sin)`, the README's
`msir.vjp(np.sin, x)`), in GRAPH and PYNATIVE mode."""

import math

import numpy as np
import pytest

import msir
from gradcheck import numerical_vjp

X = np.array([0.3, -1.2, 2.0])



def test_vjp_of_a_ufunc(mode):
    out, vjp_fn = msir.vjp(np.sin, X)
    np.testing.assert_allclose(out, np.sin(X), rtol=1e-14)
    (cotangent,) = vjp_fn(np.ones(3))
    np.testing.assert_allclose(cotangent, np.cos(X), rtol=1e-14)


def test_second_derivative_of_a_ufunc(mode):
    assert msir.grad(msir.grad(np.sin))(1.0) == pytest.approx(-np.sin(1.0), rel=1e-14)


def test_binary_ufunc_and_numpy_functions(mode):
    assert msir.grad(np.arctan2, argnums=(0, 1))(1.0, 2.0) == pytest.approx((0.4, -0.2))
    np.testing.assert_allclose(msir.grad(np.sum)(X), np.ones(3))
    value, g = msir.value_and_grad(np.linalg.norm)(X)
    assert value == pytest.approx(np.linalg.norm(X))
    np.testing.assert_allclose(g, numerical_vjp(lambda xs: np.linalg.norm(*xs), [X], np.float64(1.0), 0), rtol=1e-6)


def test_builtins(mode):
    assert msir.grad(abs)(-2.0) == -1.0
    assert msir.grad(np.abs)(-2.0) == -1.0


def test_math_functions_compiled():
    # GRAPH mode only: PYNATIVE's tracer refuses math functions on traced
    # values (they would drop the derivative), with its own clear error
    assert msir.grad(math.sin)(1.0) == pytest.approx(math.cos(1.0))
    assert msir.jit(math.exp)(0.5) == pytest.approx(math.exp(0.5))


def test_jit_and_jvp_of_a_ufunc():
    np.testing.assert_allclose(msir.jit(np.tanh)(X), np.tanh(X), rtol=1e-14)
    _, tangent = msir.jvp(np.exp, (X,), (np.ones(3),))
    np.testing.assert_allclose(tangent, np.exp(X), rtol=1e-14)


def test_a_library_function_without_a_signature_is_a_clear_error():
    with pytest.raises(TypeError, match=r"cannot tell which arguments builtins\.max takes.*lambda x"):
        msir.grad(max)
