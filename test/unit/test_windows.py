"""Slices with a runtime start and a static length (issue 17): `x[i:i + k]`.

The frontend proves the length static from the bounds' shared expression and
reads the window with `msir.take` (JAX's dynamic_slice); a start outside the
axis is an IndexError at the subscript's line at run time. Values against
NumPy and gradients against finite differences, in GRAPH and PYNATIVE mode.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import numerical_vjp, pynative

import msir
from msir.errors import MsirIndexError, UnsupportedSyntaxError

WEIGHTS = np.array([1.0, -2.0, 0.5])


def _moving_dot(x, n):
    """A window of 3 in a runtime loop (`n` an array scalar: msir.for), and the row x[i]."""
    total = 0.0
    for i in range(n):
        total = total + np.sum(x[i:i + 3] * WEIGHTS) * x[i]
    return total


def _centred(x, i):
    return np.sum(np.tanh(x[i - 1:i + 2, 1:]) * x[i + 1:i + 3, :2].sum())


def _rows(x, i):
    return x[i:2 + i], x[i + 1:i + 1]


X = np.random.default_rng(0).standard_normal(7)
M2 = np.random.default_rng(1).standard_normal((6, 3))


def _check(fn, x, *rest):
    expected = fn(x, *rest)
    np.testing.assert_allclose(msir.jit(fn)(x, *rest), expected, rtol=1e-12)
    np.testing.assert_allclose(pynative(lambda: msir.jit(fn)(x, *rest)), expected, rtol=1e-12)
    fd = numerical_vjp(lambda xs: fn(xs[0], *rest), [x], np.float64(1.0), 0)
    np.testing.assert_allclose(msir.grad(fn)(x, *rest), fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(pynative(lambda: msir.grad(fn)(x, *rest)), fd, rtol=1e-6, atol=1e-9)


def test_a_window_in_a_runtime_loop():
    _check(_moving_dot, X, np.int64(5))
    assert "msir.for" in str(msir.jit(_moving_dot).lower(X, np.int64(5)))


def test_windows_on_two_axes_with_offsets():
    _check(_centred, M2, np.int64(2))
    ir = str(msir.jit(_centred).lower(M2, np.int64(2)))
    assert ir.count("msir.take") == 2 and ir.count("msir.check") == 2


def test_window_shapes_follow_numpy():
    i = np.int64(3)
    for got in (msir.jit(_rows)(M2, i), pynative(lambda: msir.jit(_rows)(M2, i))):
        for g, e in zip(got, _rows(M2, 3)):
            assert g.shape == e.shape
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("start", [np.int64(5), np.int64(0)])
def test_a_window_outside_the_axis_is_an_index_error_at_its_line(start):
    """Rows start - 1 .. start + 1 of an axis of 6: start 5 runs past the end,
    start 0 begins at -1; both a located IndexError, not a clamped or shorter window."""
    with pytest.raises(MsirIndexError) as info:
        msir.jit(_centred)(M2, start)
    assert isinstance(info.value, IndexError)
    assert info.value.message == (f"slice start {int(start) - 1} is out of bounds for a window of 3 on axis 0 "
                                  "with size 6")
    assert info.value.loc.line == _centred.__code__.co_firstlineno + 1
    assert info.value.loc.col == info.value.loc.source_line().index("x[i - 1:i + 2, 1:]") + 1


def test_a_runtime_slice_needs_a_static_length_and_step_one():
    def unknown_length(x, i, j):
        return x[i:j]

    def stepped(x, i):
        return x[i:i + 4:2]

    with pytest.raises(UnsupportedSyntaxError, match=r"needs a length known at compile time") as info:
        msir.jit(unknown_length)(X, np.int64(1), np.int64(3))
    assert info.value.loc.line == unknown_length.__code__.co_firstlineno + 1
    with pytest.raises(UnsupportedSyntaxError, match="takes step 1"):
        msir.jit(stepped)(X, np.int64(1))
