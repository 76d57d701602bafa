"""Wrong answers fixed at their mechanism: the `msir.vjp` cache key, Python bools
read as signed i1 constants, and the derivatives of `0 ** 0` and of
`np.maximum`/`np.minimum` at a NaN operand.

Values are compared with NumPy (exactly, for the integer and constant cases)
and with JAX's conventions for the derivatives, in GRAPH and PYNATIVE mode.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from gradcheck import pynative

import msir

# -- the vjp cache ----------------------------------------------------------


def test_vjp_of_a_new_function_at_a_freed_address_is_its_own():
    """A cache keyed by `id(fn)` hands a new function the code of a freed one
    that had the same address; each of these must get its own gradient."""
    x = np.array([1.0, 2.0, 3.0])
    for k in range(1, 7):
        # a new function object each time; the previous one is freed first
        fn = (lambda x: x * k) if k % 2 else (lambda x: x * x + k)
        _, vjp_fn = msir.vjp(fn, x)
        (g,) = vjp_fn(np.ones(3))
        np.testing.assert_array_equal(g, np.full(3, float(k)) if k % 2 else 2 * x)
        del fn, vjp_fn
        gc.collect()


# -- bool constants -----------------------------------------------------------


def _with_bools(x):
    return (
        x + True, True + x, x - True, x * True, x - False, x * False,
        np.where(x > 1, True, x),
        x + np.array([True, False, True, False]),
    )


def _bool_ops(x):
    return np.logical_and(x > 1, True), np.logical_or(x > 1, False), (x > 1) == True  # noqa: E712


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64, np.float32])
@pytest.mark.parametrize("pynative_mode", [False, True])
@pytest.mark.parametrize("fn", [_with_bools, _bool_ops])
def test_python_true_is_one_with_arrays(fn, dtype, pynative_mode):
    x = np.arange(4).astype(dtype)
    run = lambda: msir.jit(fn)(x)  # noqa: E731
    got = pynative(run) if pynative_mode else run()
    for g, e in zip(got, fn(x), strict=True):
        g = np.asarray(g)
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


# -- derivatives at special points ----------------------------------------------


def _pow(a, b):
    return a ** b


def _pow_sum(a, b):
    return np.sum(a ** b)


def _weighted(op):
    w = np.array([1.0, 2.0, 3.0, 4.0])
    return lambda a, b: np.sum(op(a, b) * w)


def _both(thunk):
    return [thunk(), pynative(thunk)]


def test_pow_gradient_at_zero_to_the_zero_is_zero():
    """d/da a**b at b == 0 is 0 (a**0 is constant), also at a == 0 (JAX)."""
    a = np.array([0.0, 0.0, 2.0, 0.0])
    b = np.array([0.0, 2.0, 3.0, 1.0])
    expected_a = np.array([0.0, 0.0, 12.0, 1.0])
    expected_b = np.array([0.0, 0.0, 8.0 * np.log(2.0), 0.0])
    for ga, gb in _both(lambda: msir.grad(_pow_sum, argnums=(0, 1))(a, b)):
        np.testing.assert_allclose(ga, expected_a, rtol=1e-12)
        np.testing.assert_allclose(gb, expected_b, rtol=1e-12)


def test_pow_tangent_at_zero_to_the_zero_is_zero():
    a, b = np.array([0.0, 2.0]), np.array([0.0, 3.0])
    for _, t in _both(lambda: msir.jvp(_pow, (a, b), (np.ones(2), np.zeros(2)))):
        np.testing.assert_allclose(t, [0.0, 12.0], rtol=1e-12)


@pytest.mark.parametrize("op", [np.maximum, np.minimum], ids=["maximum", "minimum"])
def test_max_min_cotangent_goes_to_the_nan_operand(op):
    """NaN propagates, so the NaN operand is the one selected and gets the
    cotangent (both NaN: the first, as NumPy returns it)."""
    a = np.array([np.nan, 1.0, np.nan, 2.0])
    b = np.array([1.0, np.nan, np.nan, 2.0])
    for ga, gb in _both(lambda: msir.grad(_weighted(op), argnums=(0, 1))(a, b)):
        np.testing.assert_array_equal(ga, [1.0, 0.0, 3.0, 2.0])
        np.testing.assert_array_equal(gb, [0.0, 2.0, 0.0, 2.0])
    assert np.isnan(op(a, b)[:3]).all()
