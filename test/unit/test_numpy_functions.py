"""NumPy functions users reach for (issue 17), compiled and differentiated.

Each function is checked the same way (`_check`): its value against NumPy in
GRAPH and PYNATIVE mode, its gradient (reverse mode) against central
differences in both modes, and its forward-mode tangent against central
differences. Inputs are float64 so that the differences are exact to ~1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative

import msir


def _check(loss, *args, argnums=0, rtol=1e-6, atol=1e-8):
    """`loss(*args)` (a scalar) against NumPy; d loss / d args[argnums] against
    finite differences in both modes; the JVP along a random direction."""
    args = [np.asarray(a, np.float64) if isinstance(a, np.ndarray) else a for a in args]
    expected = loss(*args)
    np.testing.assert_allclose(msir.jit(loss)(*args), expected, rtol=rtol, atol=atol)
    np.testing.assert_allclose(pynative(lambda: msir.jit(loss)(*args)), expected, rtol=rtol, atol=atol)

    def at(xs):
        full = list(args)
        full[argnums] = xs[0]
        return loss(*full)

    fd = numerical_vjp(at, [args[argnums]], np.float64(1.0), 0)
    g = msir.grad(loss, argnums=argnums)(*args)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(pynative(lambda: msir.grad(loss, argnums=argnums)(*args)), fd, rtol=1e-5, atol=1e-7)
    direction = np.random.default_rng(3).standard_normal(np.shape(args[argnums]))
    tangents = tuple(direction if i == argnums else np.zeros_like(a) for i, a in enumerate(args))
    _, t = msir.jvp(loss, tuple(args), tangents)
    np.testing.assert_allclose(t, numerical_jvp(at, [args[argnums]], [direction]), rtol=1e-5, atol=1e-7)


_RNG = np.random.default_rng(0)
A = _RNG.standard_normal((3, 4))
B = _RNG.standard_normal((3, 4))
V = _RNG.standard_normal(5)


# -- np.arctan2: a row of the primitive table and its rule -----------------------


def _arctan2(y, x):
    return np.arctan2(y, x)


def _arctan2_loss(y, x):
    return np.sum(np.arctan2(y, x) * y)


def test_arctan2_values_follow_numpy_in_every_quadrant():
    y = np.array([1.0, -1.0, 0.0, 2.0, -3.0, 0.0, -0.5])
    x = np.array([1.0, -2.0, -1.0, 0.0, 0.5, 0.0, -0.5])
    np.testing.assert_allclose(msir.jit(_arctan2)(y, x), np.arctan2(y, x), rtol=1e-15)
    got32 = msir.jit(_arctan2)(y.astype(np.float32), x.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, np.arctan2(y, x).astype(np.float32), rtol=1e-6)
    ints = np.array([1, -2, 3])
    np.testing.assert_allclose(msir.jit(_arctan2)(ints, 2), np.arctan2(ints, 2), rtol=1e-15)  # float64, as NumPy
    assert msir.jit(_arctan2)(y.astype(np.float32), 2.0).dtype == np.float32  # a Python float stays weak


@pytest.mark.parametrize("argnums", [0, 1])
def test_arctan2_gradients(argnums):
    _check(_arctan2_loss, A, B, argnums=argnums)
