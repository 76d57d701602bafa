"""Control flow compiled by `msir.jit`, against the same Python run by NumPy.

Runtime `if`/`elif`/`else` (`msir.if`), `for` over a range with static or
runtime bounds, over an array's rows and over a tuple (`msir.for`, or unrolled),
`while` with a data-dependent trip count (`msir.while`), loop-carried tuples,
dtype promotion of carried variables, early returns, lists built with `append`,
and an RNN over time steps. Each function is jitted once (module level) and
called on several inputs, so that both outcomes of a branch and several trip
counts run through the same compiled code. Results must match NumPy to 1e-12
(float64) or 1e-5 (float32) and keep NumPy's dtype; errors must name the
offending variable and point at its line.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import msir
from msir.errors import ShapeError, UnsupportedSyntaxError

F64 = np.float64
F32 = np.float32


def check(jitted, fn, *args, rtol=1e-12, atol=1e-12):
    """The compiled result equals NumPy's, in value, shape and dtype."""
    got = jitted(*args)
    expected = fn(*args)
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e, rtol, atol)
    else:
        _same(got, expected, rtol, atol)
    return got


def _same(got, expected, rtol, atol):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    assert got.dtype == expected.dtype, f"dtype {got.dtype}, expected {expected.dtype}"
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def line_of(fn, snippet: str) -> int:
    """The file line of the first line of `fn` containing `snippet`."""
    lines, start = inspect.getsourcelines(fn)
    for k, text in enumerate(lines):
        if snippet in text:
            return start + k
    raise AssertionError(f"{snippet!r} not in {fn.__name__}")


# ---------------------------------------------------------------------------
# if / elif / else
# ---------------------------------------------------------------------------


def nested_if(x, y):
    if np.sum(x) > 0:
        if np.sum(y) > 0:
            z = x * y
        else:
            z = x - y
    else:
        if np.max(y) > 1.0:
            z = np.exp(x)
        else:
            z = -x
    return z * 2.0


def test_nested_if_all_four_paths():
    j = msir.jit(nested_if)
    pos, neg, big = np.array([1.0, 2.0, 0.5]), np.array([-1.0, -3.0, 0.5]), np.array([-1.0, 2.0, -3.0])
    outs = [check(j, nested_if, a, b) for a, b in ((pos, pos), (pos, neg), (neg, big), (neg, neg))]
    # four different paths, four different results
    assert len({tuple(np.round(o, 9)) for o in outs}) == 4


def elif_chain(x):
    s = np.sum(x)
    if s < -1.0:
        y = x * 10.0
    elif s < 0.0:
        y = x + 100.0
    elif s < 1.0:
        y = np.sin(x)
    else:
        y = x * x
    return y


@pytest.mark.parametrize("total", [-3.0, -0.5, 0.5, 3.0])
def test_elif_chain(total):
    x = np.full(4, total / 4)
    check(msir.jit(elif_chain), elif_chain, x)


_elif_jit = msir.jit(elif_chain)


def test_elif_chain_one_compile_every_branch():
    for total in (-3.0, -0.5, 0.5, 3.0):
        check(_elif_jit, elif_chain, np.full(4, total / 4))


def if_on_float(x, t):
    if t > 0.5:
        r = x * t
    else:
        r = x - t
    return r


def test_if_on_python_float_argument():
    j = msir.jit(if_on_float)
    x = np.arange(3.0)
    check(j, if_on_float, x, 0.75)
    check(j, if_on_float, x, 0.25)


def bool_ops(x, a, b):
    s = np.sum(x)
    if s > a and s < b:
        r = x + 1.0
    elif s < a or not s < b * 2.0:
        r = x - 1.0
    else:
        r = x * 0.0
    return r


@pytest.mark.parametrize("total", [0.5, -1.0, 5.0, 1.5])
def test_and_or_not_in_conditions(total):
    # a=0, b=1: inside (0,1) -> +1; below 0 or >= 2 -> -1; in [1, 2) -> 0
    check(msir.jit(bool_ops), bool_ops, np.full(2, total / 2), 0.0, 1.0)


def chained(x):
    s = np.sum(x)
    if -1.0 < s <= 1.0 < np.max(x) + 2.0:
        r = x * 3.0
    else:
        r = x
    return r


@pytest.mark.parametrize("total", [0.0, 1.0, 1.5, -1.0])
def test_chained_comparison(total):
    check(msir.jit(chained), chained, np.full(3, total / 3))


def conditional_expression(x):
    return x * 2.0 if np.mean(x) > 0 else x / 2.0


def test_conditional_expression():
    j = msir.jit(conditional_expression)
    check(j, conditional_expression, np.ones(3))
    check(j, conditional_expression, -np.ones(3))


def one_branch_only(x):
    if np.sum(x) > 0:
        w = x * 2.0
    return x + w  # use of w


def test_variable_assigned_in_one_branch_is_an_error_at_its_use():
    with pytest.raises(UnsupportedSyntaxError) as info:
        msir.jit(one_branch_only)(np.ones(3))
    err = info.value
    assert "'w'" in err.message and "only one branch" in err.message
    assert err.loc is not None and err.loc.line == line_of(one_branch_only, "# use of w")


def one_branch_unused(x):
    if np.sum(x) > 0:
        w = x * 2.0  # noqa: F841
    return x + 1.0


def test_variable_assigned_in_one_branch_but_unused_is_fine():
    check(msir.jit(one_branch_unused), one_branch_unused, np.ones(3))


# ---------------------------------------------------------------------------
# Early returns
# ---------------------------------------------------------------------------


def early_return(x):
    if np.sum(x) > 0:
        return x * 2.0
    y = x - 1.0
    return y * y


def both_return(x):
    if np.max(x) > 1.0:
        return np.tanh(x), np.sum(x)
    else:
        return x * 0.5, np.prod(x)


def test_early_return_in_a_branch():
    j = msir.jit(early_return)
    check(j, early_return, np.ones(3))
    check(j, early_return, -np.ones(3))


def test_both_branches_return():
    j = msir.jit(both_return)
    check(j, both_return, np.array([0.5, 2.0]))
    check(j, both_return, np.array([0.5, 0.25]))


# ---------------------------------------------------------------------------
# for
# ---------------------------------------------------------------------------


def for_runtime(x, n):
    s = x
    for i in range(n):
        s = np.sin(s) + i * 0.1
    return s


_for_runtime = msir.jit(for_runtime)


@pytest.mark.parametrize("n", [0, 1, 7])
def test_for_runtime_int_bound(n):
    check(_for_runtime, for_runtime, np.linspace(-1.0, 1.0, 4), n)


def for_negative_step(x, n):
    s = x * 0.0
    for i in range(n, -1, -2):
        s = s * 0.5 + i
    return s


_for_negative = msir.jit(for_negative_step)


@pytest.mark.parametrize("n", [-3, 0, 1, 6, 7])
def test_for_negative_step_runtime_start(n):
    check(_for_negative, for_negative_step, np.ones(2), n)


def for_static_negative(x):
    s = x
    for i in range(10, 2, -3):
        s = s * i - 1.0
    return s


def test_for_static_bounds_negative_step():
    check(msir.jit(for_static_negative), for_static_negative, np.array([0.5, 1.0]))


def for_computed_bound(x):
    s = x
    n = int(np.sum(x > 0))  # runtime int computed in the function
    for i in range(1, n + 1):
        s = s + i
    return s


def test_for_bound_computed_in_function():
    j = msir.jit(for_computed_bound)
    check(j, for_computed_bound, np.array([1.0, -1.0, 2.0]))
    check(j, for_computed_bound, np.array([-1.0, -1.0, -2.0]))


def for_rows(m):
    acc = np.zeros(m.shape[1])
    for row in m:
        acc = acc * 0.5 + row * row
    return acc


def test_for_row_in_matrix():
    m = np.arange(12.0).reshape(4, 3) / 7.0
    check(msir.jit(for_rows), for_rows, m)


def for_tuple(a, b, c):
    out = a * 0.0
    for t in (a, b, c):
        out = out * 2.0 + t
    return out


def test_for_over_tuple_unrolled():
    check(msir.jit(for_tuple), for_tuple, np.ones(3), np.arange(3.0), np.full(3, -2.0))


def nested_for(x, n, m):
    s = x
    for i in range(n):
        for j in range(m):
            s = s + (i - j) * 0.25
        s = np.tanh(s)
    return s


@pytest.mark.parametrize("n,m", [(0, 3), (3, 0), (3, 4)])
def test_nested_for_runtime_bounds(n, m):
    check(msir.jit(nested_for), nested_for, np.linspace(-1, 1, 3), n, m)


def if_in_for(x, n):
    s = x
    for i in range(n):
        if np.sum(s) > 1.0:
            s = s * 0.5
        else:
            s = s + 1.0 + i
    return s


def test_if_inside_for():
    j = msir.jit(if_in_for)
    x = np.array([0.25, -0.5])
    for n in (0, 1, 2, 9):
        check(j, if_in_for, x, n)


def tuple_carry(x, y, n):
    pair = (x, y)
    for i in range(n):
        a, b = pair
        pair = (a + np.sin(b), b * 0.9 - a * 0.1)
    return pair


def test_loop_carried_tuple_of_arrays():
    j = msir.jit(tuple_carry)
    x, y = np.linspace(0.0, 1.0, 3), np.linspace(1.0, -1.0, 3)
    for n in (0, 4):
        check(j, tuple_carry, x, y, n)


def promote_f32(x, n):
    s = 0.0
    for i in range(n):
        s = s + x.sum()
    return s


@pytest.mark.parametrize("n", [1, 3])
def test_loop_carried_dtype_promotion_python_float_meets_float32(n):
    # `s` starts as a (weak) Python float and meets a float32 sum: NumPy 2 (NEP 50)
    # keeps float32, and so must the carried value.
    x = np.arange(4, dtype=F32) / 3
    check(msir.jit(promote_f32), promote_f32, x, n, rtol=1e-6)


def promote_f64(x, y, n):
    s = x
    for i in range(n):
        s = s + y  # float32 carried value meets float64: promoted to float64
    return s


def test_loop_carried_dtype_promotion_float32_meets_float64():
    x, y = np.arange(3, dtype=F32), np.full(3, 0.1)
    check(msir.jit(promote_f64), promote_f64, x, y, 4)


def shape_change(x, n):
    s = x
    for i in range(n):
        s = np.concatenate([s, x])  # grows
    return s


def test_loop_carried_shape_change_is_a_shape_error_naming_it():
    with pytest.raises(ShapeError) as info:
        msir.jit(shape_change)(np.ones(2), 2)
    err = info.value
    assert "'s'" in err.message and "(2,)" in err.message and "(4,)" in err.message
    assert err.loc is not None
    assert line_of(shape_change, "for i in range(n)") <= err.loc.line <= line_of(shape_change, "# grows")


def append_stack(x):
    out = []
    for i in range(4):
        x = np.tanh(x + i)
        out.append(x * i)
    return np.stack(out)


def test_list_built_with_append_then_stack():
    check(msir.jit(append_stack), append_stack, np.linspace(-1, 1, 3))


def append_runtime(x, n):
    out = []
    for i in range(n):
        out.append(x)
    return np.stack(out)


def test_append_with_runtime_trip_count_is_refused():
    with pytest.raises(UnsupportedSyntaxError, match="compile time"):
        msir.jit(append_runtime)(np.ones(2), 3)


def break_in_loop(x, n):
    for i in range(n):
        if np.sum(x) > 3.0:
            break
        x = x + 1.0
    return x


def continue_in_loop(x, n):
    for i in range(n):
        if np.sum(x) > 3.0:
            continue
        x = x * 2.0 + i
    return x


def break_in_while(x):
    k = 0
    while np.max(x) < 100.0:
        x = x * 3.0
        k = k + 1
        if k >= 3:
            break
    return x, k


@pytest.mark.parametrize("n", [0, 1, 5])
def test_break_and_continue_in_for(n):
    for fn in (break_in_loop, continue_in_loop):
        check(msir.jit(fn), fn, np.array([0.5, 0.25]), n)


def test_break_in_while():
    j = msir.jit(break_in_while)
    check(j, break_in_while, np.array([0.5, 1.0]))  # stops at k == 3
    check(j, break_in_while, np.array([50.0, 1.0]))  # condition ends it first


def return_in_loop(x, n):
    for i in range(n):
        if np.sum(x) > 3.0:
            return x
        x = x + 1.0
    return x


def return_directly_in_loop(x, n):
    for i in range(n):
        x = x + 1.0
        return x
    return x


@pytest.mark.parametrize("n", [0, 1, 3])
def test_return_inside_loop(n):
    # more cases, and their derivatives, in test_loop_return.py
    for fn in (return_directly_in_loop, return_in_loop):
        check(msir.jit(fn), fn, np.ones(2), n)
    check(msir.jit(return_in_loop), return_in_loop, np.full(2, 2.5), n)


# ---------------------------------------------------------------------------
# while
# ---------------------------------------------------------------------------


def newton_sqrt(a):
    x = a
    while np.abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


@pytest.mark.parametrize("a", [1.0, 2.0, 1e-4, 1e6])
def test_while_newton_sqrt(a):
    got = check(msir.jit(newton_sqrt), newton_sqrt, np.array(a))
    np.testing.assert_allclose(got, np.sqrt(a), rtol=1e-12)


def double_until(x, bound):
    n = 0
    while np.max(x) < bound:
        x = x * 2.0
        n = n + 1
    return x, n


_double = msir.jit(double_until)


@pytest.mark.parametrize("bound", [0.1, 1.0, 1000.0])
def test_while_doubling_until_bound(bound):
    x = np.array([0.3, 0.2])
    (xs, n) = check(_double, double_until, x, bound)
    assert int(n) == double_until(x, bound)[1]


def for_in_while(x):
    k = 0
    while np.sum(x) < 10.0:
        for i in range(3):
            x = x + 0.5 * i
        k = k + 1
    return x, k


def test_for_inside_while():
    j = msir.jit(for_in_while)
    check(j, for_in_while, np.array([0.0, 1.0]))
    check(j, for_in_while, np.array([20.0, 1.0]))  # zero iterations


def while_vector_state(x, tol):
    it = 0
    while np.sqrt(np.sum(x * x)) > tol:
        x = x * 0.5
        it = it + 1
    return x, it


def test_while_with_float_tolerance_argument():
    j = msir.jit(while_vector_state)
    x = np.array([3.0, 4.0])
    for tol in (10.0, 1.0, 1e-3):
        check(j, while_vector_state, x, tol)


# ---------------------------------------------------------------------------
# An RNN over time steps
# ---------------------------------------------------------------------------


def rnn(W, U, h0, xs):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(h @ W + xs[t] @ U)
    return h


def test_rnn_forward():
    rng = np.random.default_rng(0)
    T, B, H, D = 10, 4, 8, 5
    W = rng.standard_normal((H, H)) * 0.4
    U = rng.standard_normal((D, H)) * 0.4
    h0 = rng.standard_normal((B, H)) * 0.1
    xs = rng.standard_normal((T, B, D))
    check(msir.jit(rnn), rnn, W, U, h0, xs, rtol=1e-11)


def test_rnn_forward_float32():
    rng = np.random.default_rng(1)
    T, B, H, D = 10, 4, 8, 5
    args = [rng.standard_normal(s).astype(F32) * 0.4 for s in ((H, H), (D, H), (B, H), (T, B, D))]
    check(msir.jit(rnn), rnn, *args, rtol=1e-5, atol=1e-6)
