"""`return` inside loops: compiled, eager, and differentiated in both modes.

The frontend lowers a `return` inside a `for`/`while` (directly, inside an `if`,
or inside a nested loop; `while True:` left only by a return) into a carried `returned` flag and a carried return
value, leaving every loop of the nest through `break`; after the loop an early
return selects the returned value or continues with the code after the loop.
Values must match the same Python run by NumPy (1e-12, same dtype), for inputs
that return from the loop at different iterations and that never return from
it. Derivatives (reverse and forward) match central finite differences of the
NumPy function (`gradcheck`, rtol 1e-6, atol 1e-8) at inputs whose branch
conditions are away from their boundaries, and the eager (PYNATIVE) gradient
agrees with the compiled one to 1e-10. Return values whose shapes differ
between paths are refused at the line of a `return`.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp

import msir
from msir.errors import ShapeError, UnsupportedSyntaxError


def search(x, w, n):
    for i in range(n):
        x = np.sin(x * w) + 0.7
        if np.sum(x) > 2.5:
            return np.sum(x * x) * i
        x = x * 1.1
    return np.sum(x)


def in_while(x, w):
    k = 0
    while k < 100:
        x = np.sin(x * 3.0) * w
        if np.sum(x) < 0.0:
            return np.sum(x * x)
        k += 1
    return np.sum(x)


def over_rows(a, w):
    for r in a:
        if np.sum(r * w) > 1.0:
            return np.tanh(r * w)
    return a[0] * 0.0


def nested(x, w, n):
    for i in range(n):
        for j in range(3):
            x = np.sin(x * w) * 1.5 + 0.5
            if np.max(x) > 1.9:
                return np.sum(x * x) + i + j
        x = x * 0.9
    return np.sum(x)


def returns_a_tuple(x, n):
    acc = x * 0.0
    for i in range(n):
        acc = acc + x * i
        if np.sum(acc) > 4.0:
            return acc, i
    return acc, -1


def endless(x, w):
    while True:  # only the return leaves the loop
        x = x * w + 0.1
        if np.sum(x) > 3.0:
            return np.sum(x * x)


def unconditional(x, n):
    for i in range(n):
        x = x + 1.0
        return x * 2.0
    return x


X = np.array([0.3, 0.2])
W = np.array([0.9, 1.2])

VALUE_CASES = [
    ("search-returns", search, (X, W, 4)),
    ("search-falls-through", search, (X * 0.01, W * 0.2, 3)),
    ("search-zero-trips", search, (X, W, 0)),
    ("while-returns", in_while, (X, W * 2.0)),
    ("while-falls-through", in_while, (np.array([0.1, 0.1]), np.array([0.5, 0.5]))),
    ("rows-returns", over_rows, (np.array([[0.1, 0.2], [0.7, 0.8], [3.0, 3.0]]), W)),
    ("rows-falls-through", over_rows, (np.array([[0.1, 0.2], [0.1, 0.1]]), W)),
    ("nested-returns", nested, (X, W, 4)),
    ("nested-falls-through", nested, (X * 0.1, W * 0.1, 2)),
    ("tuple-returns", returns_a_tuple, (np.array([1.0, 0.5]), 6)),
    ("tuple-falls-through", returns_a_tuple, (np.array([0.1, 0.1]), 3)),
    ("while-true", endless, (X, W + 0.5)),
    ("unconditional", unconditional, (X, 3)),
    ("unconditional-zero-trips", unconditional, (X, 0)),
]


@pytest.mark.parametrize("fn,args", [c[1:] for c in VALUE_CASES], ids=[c[0] for c in VALUE_CASES])
def test_value_matches_numpy(fn, args):
    got, expected = msir.jit(fn)(*args), fn(*args)
    got_t = got if isinstance(got, tuple) else (got,)
    exp_t = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_t) == len(exp_t)
    for g, e in zip(got_t, exp_t):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_the_paths_taken_differ():
    """The value cases do exercise both outcomes (return from the loop or not)."""
    x = X
    returned = False
    for i in range(4):
        x = np.sin(x * W) + 0.7
        if np.sum(x) > 2.5:
            returned = True
            break
        x = x * 1.1
    assert returned
    assert returns_a_tuple(np.array([1.0, 0.5]), 6)[1] >= 0
    assert returns_a_tuple(np.array([0.1, 0.1]), 3)[1] == -1


GRAD_CASES = [
    ("search-returns", search, (X, W), (4,)),
    ("search-falls-through", search, (X * 0.01, W * 0.2), (3,)),
    ("while-returns", in_while, (X, W * 2.0), ()),
    ("while-falls-through", in_while, (np.array([0.1, 0.1]), np.array([0.5, 0.5])), ()),
    ("rows-returns", over_rows, (np.array([[0.1, 0.2], [0.7, 0.8], [3.0, 3.0]]), W), ()),
    ("while-true", endless, (X, W + 0.5), ()),
]


def _scalar(fn, fixed):
    """The function of the two float arguments (compiled functions take no *args)."""

    def f(x, w):
        return np.sum(fn(x, w, *fixed))

    return f


@pytest.mark.parametrize("fn,floats,fixed", [c[1:] for c in GRAD_CASES], ids=[c[0] for c in GRAD_CASES])
def test_grad_matches_finite_differences(fn, floats, fixed):
    f = _scalar(fn, fixed)
    argnums = tuple(range(len(floats)))
    got = msir.grad(f, argnums=argnums)(*floats)
    for i in argnums:
        fd = numerical_vjp(lambda xs: f(*xs), list(floats), np.float64(1.0), i)
        np.testing.assert_allclose(got[i], fd, rtol=1e-6, atol=1e-8, err_msg=f"argument {i}")
    msir.set_context(mode=msir.PYNATIVE_MODE)
    eager = msir.grad(f, argnums=argnums)(*floats)
    msir.set_context(mode=msir.GRAPH_MODE)
    for e, c in zip(eager, got):
        np.testing.assert_allclose(np.asarray(e), c, rtol=1e-10, atol=1e-12)


JVP_CASES = GRAD_CASES + [
    ("nested-returns", nested, (X, W), (4,)),
    ("nested-falls-through", nested, (X * 0.1, W * 0.1), (2,)),
]


@pytest.mark.parametrize("fn,floats,fixed", [c[1:] for c in JVP_CASES], ids=[c[0] for c in JVP_CASES])
def test_jvp_matches_finite_differences(fn, floats, fixed):
    f = _scalar(fn, fixed)
    rng = np.random.default_rng(0)
    tangents = tuple(rng.standard_normal(np.shape(x)) for x in floats)
    value, tangent = msir.jvp(f, floats, tangents)
    np.testing.assert_allclose(value, f(*floats), rtol=1e-12)
    fd = numerical_jvp(lambda xs: f(*xs), list(floats), list(tangents))
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)


def line_of(fn, snippet: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, text in enumerate(lines) if snippet in text)


def shape_in_loop(x, n):
    for i in range(n):
        if np.sum(x) > 1.0:
            return x
        if np.sum(x) < -1.0:
            return x[:1]
        x = x + 1.0
    return x


def shape_after_loop(x, n):
    for i in range(n):
        if np.sum(x) > 1.0:
            return x
        x = x + 1.0
    return x[:1]


def bare_return(x, n):
    for i in range(n):
        if np.sum(x) > 1.0:
            return
        x = x + 1.0
    return x


def test_returns_of_different_shapes_in_the_loop_are_refused_at_the_return():
    with pytest.raises(ShapeError, match=r"this return gives shape \(1,\) where the return at line \d+ gives \(2,\)") as e:
        msir.jit(shape_in_loop)(np.ones(2), 3)
    assert e.value.loc.line == line_of(shape_in_loop, "return x[:1]")


def test_a_return_after_the_loop_of_another_shape_is_refused():
    with pytest.raises(ShapeError, match=r"shape \(2,\) on one path and \(1,\) on the other") as e:
        msir.jit(shape_after_loop)(np.ones(2), 3)
    assert e.value.loc.line == line_of(shape_after_loop, "return x\n")


def test_a_bare_return_in_a_loop_is_refused():
    with pytest.raises(UnsupportedSyntaxError, match="a bare 'return' inside a loop") as e:
        msir.jit(bare_return)(np.ones(2), 3)
    assert e.value.loc.line == line_of(bare_return, "return\n")
