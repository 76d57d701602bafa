"""Recursion with a depth known only at run time, as native recursive calls.

A function calling itself with arguments of the same types becomes a `func.func`
that calls itself; its result type is the one its base cases return (the frontend
builds it once with the recursive paths left out, then to a fixed point). The
cases: a runtime int depth (0-d int array), a data-dependent condition, non-tail
recursion, mutual recursion reading a global array, tuple results whose base case
returns a Python float, a function argument (`compose(f, x, n)`), a nested `def`
calling itself, float32 promotion of a base case's Python float, and a Python int
depth too deep to unroll at compile time.

Values match the same Python run by NumPy (1e-12, same dtype) or, beyond
Python's recursion limit, the same recurrence computed by a loop; a recursion
deeper than the native stack allows raises MsirRecursionError at its call. Derivatives,
reverse mode (the adjoint recomputes each recursive call's augmented forward
from its saved arguments) and forward mode (a recursive `__jvp`), match central
finite differences (`gradcheck`, rtol 1e-6, atol 1e-8), and PYNATIVE_MODE (the
Python recursion run eagerly) agrees with the compiled gradient to 1e-10.
Second order (forward over reverse, reverse over reverse) is checked against
finite differences of the compiled gradient. A recursion without a base case,
or whose argument shapes change at each level, is refused at the call.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative

import msir
from msir.errors import MsirRecursionError, ShapeError, UnsupportedSyntaxError

RTOL, ATOL = 1e-6, 1e-8


# ---------------------------------------------------------------------------
# The functions
# ---------------------------------------------------------------------------


def sin_n(x, n):
    return x if n <= 0 else sin_n(np.sin(x) * 1.5, n - 1)


def halve(x):
    if np.max(np.abs(x)) < 1:
        return x
    return 2.0 * halve(x / 2)


def nontail(x, n):
    if n <= 0:
        return x
    return np.sin(nontail(x * 1.01, n - 1)) + x


W = np.array([0.5, -0.3])


def even(x, n):
    if n == 0:
        return np.sum(x * x)
    return odd(np.sin(x) * 1.1 + W, n - 1)


def odd(x, n):
    if n == 0:
        return np.sum(np.cos(x))
    return even(x * 0.9, n - 1)


def pair(x, n):
    if n <= 0:
        return x, 0.0
    y, s = pair(np.tanh(x) * 2.0, n - 1)
    return y * 0.5, s + np.sum(y)


def compose(f, x, n):
    if n <= 0:
        return x
    return compose(f, f(x), n - 1)


def with_function_argument(x, n):
    g = lambda y: np.cos(y) * x  # noqa: E731
    return compose(g, x, n)


def nested_def(x, w, n):
    def rec(y, m):
        if m <= 0:
            return y
        return rec(np.tanh(y * w), m - 1)

    return rec(x, n)


def product(x, n):
    if n <= 0:
        return 1.0
    return product(x, n - 1) * np.sum(x)


# Scalar losses of the float arguments, the depth fixed: what is differentiated.


def loss_sin_n(x, n):
    return np.sum(sin_n(x, n) ** 2)


def loss_halve(x):
    return np.sum(np.sin(halve(x)))


def loss_nontail(x, n):
    return np.sum(nontail(x, n) * np.array([1.0, -2.0]))


def loss_pair(x, n):
    y, s = pair(x, n)
    return np.sum(y) * s


def loss_compose(x, n):
    return np.sum(with_function_argument(x, n))


def loss_nested(x, w, n):
    return np.sum(nested_def(x, w, n))


X = np.array([0.3, -0.2])
BIG = np.array([5.0, -13.0])
WN = np.array([1.5, 0.7])


def same(got, expected, rtol=1e-12, atol=1e-12):
    got_t = got if isinstance(got, tuple) else (got,)
    exp_t = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_t) == len(exp_t)
    for g, e in zip(got_t, exp_t):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 5, 40])
def test_runtime_depth(n):
    same(msir.jit(sin_n)(X, np.array(n)), sin_n(X, n))
    same(msir.jit(nontail)(X, np.array(n)), nontail(X, n))
    same(msir.jit(pair)(X, np.array(n)), pair(X, n))


@pytest.mark.parametrize("x", [X, BIG, np.array([0.9, 1e6])])
def test_data_dependent_depth(x):
    same(msir.jit(halve)(x), halve(x))


@pytest.mark.parametrize("n", [0, 3, 8])
def test_mutual_recursion_reading_a_global(n):
    same(msir.jit(even)(X, np.array(n)), even(X, n))


@pytest.mark.parametrize("n", [0, 4, 20])
def test_function_argument_and_nested_def(n):
    same(msir.jit(with_function_argument)(X, np.array(n)), with_function_argument(X, n))
    same(msir.jit(nested_def)(X, WN, np.array(n)), nested_def(X, WN, n))
    same(msir.jit(nested_def)(X, WN, n), nested_def(X, WN, n))  # a Python int depth


def test_base_case_python_float_is_promoted_with_float32():
    x = np.array([1.5, 0.25], np.float32)
    same(msir.jit(product)(x, np.array(3)), product(x, 3), rtol=1e-6)
    # one result type for every depth: the base case's 1.0 comes back as float32
    same(msir.jit(product)(x, np.array(0)), np.float32(1.0))


def sin_n_loop(x, n):
    for _ in range(n):
        x = np.sin(x) * 1.5
    return x


def nontail_loop(x, n):
    v = x * 1.01**n
    for k in range(n - 1, -1, -1):
        v = np.sin(v) + x * 1.01**k
    return v


@pytest.mark.parametrize("n", [3000, 20000])
def test_deep_recursion(n):
    """Deeper than Python's own recursion limit: the native stack bounds it."""
    same(msir.jit(sin_n)(X, np.array(n)), sin_n_loop(X, n))
    same(msir.jit(nontail)(X * 0.001, np.array(n)), nontail_loop(X * 0.001, n), rtol=1e-10)


def test_recursion_deeper_than_the_stack_raises():
    """Native code checks the stack before each recursive call: beyond 4 MiB it
    stops and reports the call, then the function works again."""
    with pytest.raises(MsirRecursionError, match="recursion too deep") as e:
        msir.jit(nontail)(X * 1e-6, np.array(10**6))
    assert e.value.loc.line == line_of(nontail, "return np.sin(nontail(")
    with pytest.raises(RecursionError):
        msir.grad(loss_sin_n)(X, np.array(10**6))
    same(msir.jit(nontail)(X, np.array(5)), nontail(X, 5))


def test_deep_python_int_depth_continues_natively():
    # unrolled at compile time for a few levels, then native recursive calls
    same(msir.jit(sin_n)(X, 3000), sin_n_loop(X, 3000))


def test_pynative_values_agree():
    for fn, args in ((sin_n, (X, np.array(5))), (halve, (BIG,)), (pair, (X, np.array(3)))):
        same(pynative(lambda: msir.jit(fn)(*args)), msir.jit(fn)(*args))


# ---------------------------------------------------------------------------
# Derivatives
# ---------------------------------------------------------------------------

GRAD_CASES = [
    ("sin_n-0", loss_sin_n, (X,), (np.array(0),)),
    ("sin_n-5", loss_sin_n, (X,), (np.array(5),)),
    ("halve", loss_halve, (BIG,), ()),
    ("nontail-6", loss_nontail, (X,), (np.array(6),)),
    ("even-odd-7", even, (X,), (np.array(7),)),
    ("even-odd-4", even, (X,), (np.array(4),)),
    ("pair-3", loss_pair, (X,), (np.array(3),)),
    ("compose-6", loss_compose, (X,), (np.array(6),)),
    ("nested-def-9", loss_nested, (X, WN), (np.array(9),)),
]


def fd(fn, floats, fixed, i):
    return numerical_vjp(lambda xs: fn(*xs, *(int(f) for f in fixed)), list(floats), np.float64(1.0), i)


@pytest.mark.parametrize("fn,floats,fixed", [c[1:] for c in GRAD_CASES], ids=[c[0] for c in GRAD_CASES])
def test_grad(fn, floats, fixed):
    argnums = tuple(range(len(floats)))
    got = msir.grad(fn, argnums=argnums)(*floats, *fixed)
    for i in argnums:
        np.testing.assert_allclose(got[i], fd(fn, floats, fixed, i), rtol=RTOL, atol=ATOL, err_msg=f"argument {i}")
    eager = pynative(lambda: msir.grad(fn, argnums=argnums)(*floats, *fixed))
    for e, c in zip(eager, got):
        np.testing.assert_allclose(np.asarray(e), c, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fn,floats,fixed", [c[1:] for c in GRAD_CASES], ids=[c[0] for c in GRAD_CASES])
def test_jvp(fn, floats, fixed):
    rng = np.random.default_rng(1)
    tangents = tuple(rng.standard_normal(np.shape(x)) for x in floats)
    if len(floats) == 1:
        def f(a):
            return fn(a, *fixed)
    else:
        def f(a, b):
            return fn(a, b, *fixed)
    value, tangent = msir.jvp(f, floats, tangents)
    np.testing.assert_allclose(value, fn(*floats, *(int(k) for k in fixed)), rtol=1e-12)
    expected = numerical_jvp(lambda xs: fn(*xs, *(int(k) for k in fixed)), list(floats), list(tangents))
    np.testing.assert_allclose(tangent, expected, rtol=RTOL, atol=ATOL)


def test_deep_gradient_reverse_equals_forward():
    """At depth 1000 (no Python reference can recurse that deep by default), the
    reverse-mode gradient equals the forward-mode derivatives along each axis."""
    n = np.array(1000)
    x = X * 0.001
    g = msir.grad(loss_nontail)(x, n)

    def f(a):
        return loss_nontail(a, n)

    columns = [msir.jvp(f, (x,), (e,))[1] for e in np.eye(2)]
    np.testing.assert_allclose(g, columns, rtol=1e-10, atol=1e-12)
    # and the gradient of the recurrence computed by a loop, by finite differences
    ref = numerical_vjp(lambda xs: np.sum(nontail_loop(xs[0], 1000) * np.array([1.0, -2.0])), [x], 1.0, 0)
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-7)


def drift(x, n):
    return x if n <= 0 else drift(x + 0.0002 * np.sin(x), n - 1)


def loss_drift(x, n):
    return np.sum(drift(x, n) ** 2)


def drift_loop(x, n):
    for _ in range(n):
        x = x + 0.0002 * np.sin(x)
    return x


def test_deep_tail_recursion_gradient():
    """Depth 5000: the adjoint recomputes only each level's residuals (no primal
    recursion below it). Reverse mode equals forward mode and the finite
    differences of the same recurrence run by a loop."""
    n = np.array(5000)
    x = np.array([0.3, -2.0])
    g = msir.grad(loss_drift)(x, n)

    def f(a):
        return loss_drift(a, n)

    columns = [msir.jvp(f, (x,), (e,))[1] for e in np.eye(2)]
    np.testing.assert_allclose(g, columns, rtol=1e-10)
    ref = numerical_vjp(lambda xs: np.sum(drift_loop(xs[0], 5000) ** 2), [x], 1.0, 0)
    np.testing.assert_allclose(g, ref, rtol=1e-6)
    assert np.all(np.abs(g) > 0.1)


def test_forward_over_reverse():
    n = np.array(4)
    t = np.array([0.7, -1.1])

    def grad_of(a):
        return msir.grad(loss_nontail)(a, n)

    hv = msir.jvp(grad_of, (X,), (t,))[1]
    np.testing.assert_allclose(hv, numerical_jvp(lambda xs: grad_of(xs[0]), [X], [t]), rtol=1e-5, atol=1e-7)


def weighted_gradient(a, n):
    return np.sum(msir.grad(loss_nontail)(a, n) * np.array([1.0, 2.0]))


def test_reverse_over_reverse():
    n = np.array(4)
    got = msir.grad(weighted_gradient)(X, n)
    expected = numerical_vjp(lambda xs: weighted_gradient(xs[0], n), [X], 1.0, 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------
# Refused
# ---------------------------------------------------------------------------


def line_of(fn, snippet: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, text in enumerate(lines) if snippet in text)


def no_base_case(x):
    return no_base_case(x * 2.0)


def growing(x):
    if np.sum(x) > 1e9:
        return x
    return growing(np.concatenate([x, x]))


def base_of_another_shape(x, n):
    if n <= 0:
        return np.sum(x)
    return base_of_another_shape(x * 0.5, n - 1) * x


def test_recursion_without_a_base_case_is_refused():
    with pytest.raises(UnsupportedSyntaxError, match="every path through it calls it again") as e:
        msir.jit(no_base_case)(X)
    assert e.value.loc.line == line_of(no_base_case, "return no_base_case(")


def test_recursion_whose_argument_shapes_change_is_refused():
    with pytest.raises(UnsupportedSyntaxError, match="recursion whose argument shapes change at every level") as e:
        msir.jit(growing)(X)
    assert e.value.loc.line == line_of(growing, "return growing(")


def test_a_base_case_of_another_shape_is_refused():
    with pytest.raises(ShapeError, match=r"the returned value has shape \(\) on one path and \(2,\)") as e:
        msir.jit(base_of_another_shape)(X, np.array(3))
    assert e.value.loc.line == line_of(base_of_another_shape, "if n <= 0")
