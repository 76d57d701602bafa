"""Derivatives through control flow, against central finite differences.

Reverse mode (`msir.grad` with an argnums tuple, and `msir.value_and_grad`) and
forward mode (`msir.jvp`) through `if` (both outcomes), nested `if`, `for`
(trip counts 0, 1, 5; with respect to the initial carried value and to a value
the body reads from outside the loop), `while` with a data-dependent trip count
(Newton's square root, halving until below a tolerance; a `for` inside it),
`if` inside `for`, an RNN over time steps, a closure over arrays called in a
loop, and loops nested in loops whose inner trip count changes with the outer
iteration (for in for, Newton's `while` in a `for`, a `for` in a `while`,
`while` in `while`); then
forward-over-reverse Hessian-vector products through loops, and
reverse-over-reverse through loops (`grad(grad(f))` for a scalar x through
`for`, `while` and `if` in `for`; `grad` of the squared norm of a gradient
through loops, nested loops included; third order through a `for`; a `vjp_fn`
of a gradient run twice), against differences of the compiled lower-order
derivative; forward-over-reverse and reverse-over-forward through nested loops;
and the tape uses reverse mode still refuses (message and location).

Finite differences (`gradcheck`: float64, eps 1e-6) of the function run by plain
NumPy are the reference: rtol 1e-6, atol 1e-8 unless a case says otherwise. The
inputs keep every branch condition and loop test away from its boundary, so a
perturbation of 1e-6 never changes the path taken and the function is smooth
where it is differenced. Each gradient is also computed in PYNATIVE_MODE (the
eager engine runs the Python control flow natively) and must agree with the
compiled one to 1e-10.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative

import msir
from msir.errors import NotDifferentiableError

RTOL = 1e-6
ATOL = 1e-8


# ---------------------------------------------------------------------------
# The functions: differentiated float arguments first, then at most one fixed one
# ---------------------------------------------------------------------------


def branch(x, y):
    if np.sum(x) > 0.0:
        z = np.sin(x) * y
    else:
        z = np.exp(x) * y * y
    return np.sum(z)


def nested(x, y):
    if np.sum(x) > 0.0:
        if np.sum(y) > 0.0:
            z = x * y * y
        else:
            z = np.sin(x - y)
    else:
        if np.max(y) > 1.0:
            z = np.exp(x) * y
        else:
            z = np.tanh(x * y)
    return np.sum(z * z)


def counted(x, w, n):
    s = x
    for i in range(n):
        s = np.tanh(s * w + 0.1 * i)
    return np.sum(s * s)


def newton_sqrt(a):
    x = a
    while np.abs(x * x - a) > 1e-14 * a:
        x = 0.5 * (x + a / x)
    return x


def halving(x):
    while np.max(np.abs(x)) > 0.1:
        x = x * 0.5
    return np.sum(np.sin(3.0 * x) * x)


def if_in_for(x, w, n):
    s = x
    for i in range(n):
        if np.sum(s) > 0.0:
            s = np.sin(s * w)
        else:
            s = s * w + 1.0
    return np.sum(s * s)


def rnn_loss(W, U, h0, xs):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(h @ W + xs[t] @ U)
    return np.sum(h)


def closure_loop(x, w, n):
    b = w * 0.5

    def step(h):
        return np.tanh(h * w + b)

    h = x
    for i in range(n):
        h = step(h)
    return np.sum(h * x)


def for_in_while(x, w, m):
    while np.sum(x) < 10.0:
        for i in range(m):
            x = x * 1.2 + w
    return np.sum(np.sin(x))


def for_in_for(x, w, n):
    for j in range(n):
        for i in range(j + 1):  # the inner trip count grows with the outer index
            x = np.sin(x * 1.2 + w)
    return np.sum(x)


def reverse_scan(x, w, xs):
    n = xs.shape[0]
    for i in range(n):
        x = np.tanh(x * w + xs[n - 1 - i] * x)  # xs[n - 1 - i] is recomputed in the adjoint, not taped
    return np.sum(x)


def newton_in_for(a, w, n):
    s = a
    for j in range(n):
        x = s
        while np.abs(x * x - s) > 1e-13 * s:  # Newton's square root of s, to a tolerance
            x = 0.5 * (x + s / x)
        s = x * w + 1.0 + 0.1 * j
    return s


def ragged_for_in_while(x, w):
    k = 1
    while np.sum(x) < 10.0:
        for i in range(k):  # k grows with the (data-dependent) outer iteration
            x = x * 1.1 + w
        k = k + 1
    return np.sum(np.sin(x))


def while_in_while(x, w):
    while np.sum(x) < 8.0:
        y = x
        while np.max(y) < 2.0:
            y = y * 1.3 + w
        x = x + 0.5 * np.tanh(y)
    return np.sum(x * x)


@dataclass
class Case:
    id: str
    fn: Callable
    floats: tuple  # the differentiated arguments
    fixed: tuple = ()  # trailing arguments held fixed (trip counts, data)
    rtol: float = RTOL
    atol: float = ATOL

    @property
    def args(self):
        return self.floats + self.fixed

    @property
    def argnums(self):
        return tuple(range(len(self.floats)))

    def numpy(self, xs):
        return self.fn(*xs, *self.fixed)

    def bound(self):
        """The function of the float arguments alone (what `msir.jvp` differentiates)."""
        return bind(self.fn, len(self.floats), self.fixed)


def bind(fn, k, fixed):
    # Each fixed value is its own closure variable: a closure over a tuple holding
    # an array is not supported by the frontend (see test_closure_over_tuple_of_arrays).
    if not fixed:
        return fn
    (t,) = fixed
    if k == 1:
        def g(a):
            return fn(a, t)
    elif k == 2:
        def g(a, b):
            return fn(a, b, t)
    else:
        def g(a, b, c):
            return fn(a, b, c, t)
    return g


_rng = np.random.default_rng(42)
X3 = np.array([0.3, -0.2, 0.5])
W3 = np.array([0.8, -1.1, 0.6])
T, B, H, D = 10, 4, 8, 5
RNN = (
    _rng.standard_normal((H, H)) * 0.4,
    _rng.standard_normal((D, H)) * 0.4,
    _rng.standard_normal((B, H)) * 0.3,
)
XS = _rng.standard_normal((T, B, D))

CASES = [
    Case("if-then", branch, (X3 + 0.5, W3)),
    Case("if-else", branch, (X3 - 0.5, W3)),
    Case("nested-if-tt", nested, (X3 + 0.5, W3 + 0.5)),
    Case("nested-if-tf", nested, (X3 + 0.5, W3 - 0.5)),
    Case("nested-if-ft", nested, (X3 - 0.5, W3 + 0.6)),
    Case("nested-if-ff", nested, (X3 - 0.5, W3 - 0.5)),
    Case("for-0", counted, (X3, W3), (0,)),
    Case("for-1", counted, (X3, W3), (1,)),
    Case("for-5", counted, (X3, W3), (5,)),
    Case("while-newton", newton_sqrt, (np.array(2.0),)),
    Case("while-halving", halving, (np.array([0.7, -1.3, 2.9]),)),
    Case("if-in-for", if_in_for, (X3, W3), (6,)),
    Case("rnn", rnn_loss, RNN, (XS,), rtol=1e-5, atol=1e-7),
    Case("closure-in-loop", closure_loop, (X3, W3), (4,)),
    Case("for-in-while", for_in_while, (np.array([0.1, 0.4]), np.array([0.3, 0.2])), (3,)),
    Case("take-from-counter", reverse_scan, (X3, W3), (_rng.standard_normal((5, 3)),)),
    Case("for-in-for", for_in_for, (X3, W3), (4,)),
    Case("while-in-for", newton_in_for, (np.array(2.0), np.array(1.3)), (4,)),
    Case("ragged-for-in-while", ragged_for_in_while, (np.array([0.1, 0.4]), np.array([0.3, 0.2]))),
    Case("while-in-while", while_in_while, (np.array([0.1, 0.4]), np.array([0.3, 0.2]))),
]


def fd_grads(case: Case) -> list[np.ndarray]:
    xs = list(case.floats)
    return [numerical_vjp(case.numpy, xs, np.float64(1.0), i) for i in range(len(xs))]


def assert_grads(got, expected, case: Case, what: str):
    assert isinstance(got, tuple) and len(got) == len(expected), f"{what}: {type(got)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        assert g.shape == e.shape and g.dtype == np.float64, f"{what} {i}: {g.shape} {g.dtype}"
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, err_msg=f"{what} wrt argument {i}")


def test_inputs_stay_away_from_branch_boundaries():
    """The reference is only a derivative where the path is locally constant."""
    assert np.sum(X3 + 0.5) > 0.5 and np.sum(X3 - 0.5) < -0.5
    assert np.sum(W3 + 0.5) > 0.5 and np.sum(W3 - 0.5) < -0.5 and np.max(W3 - 0.5) < 0.9
    assert np.max(W3 + 0.6) > 1.1
    s = X3
    for _ in range(6):
        assert abs(np.sum(s)) > 1e-2
        s = np.sin(s * W3) if np.sum(s) > 0 else s * W3 + 1.0


# ---------------------------------------------------------------------------
# Reverse mode, both execution modes
# ---------------------------------------------------------------------------

_compiled: dict[str, tuple] = {}


def compiled_grad(case: Case):
    if case.id not in _compiled:
        _compiled[case.id] = msir.grad(case.fn, argnums=case.argnums)(*case.args)
    return _compiled[case.id]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_grad(case):
    assert_grads(compiled_grad(case), fd_grads(case), case, "grad")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_value_and_grad(case):
    value, grads = msir.value_and_grad(case.fn, argnums=case.argnums)(*case.args)
    np.testing.assert_allclose(value, case.numpy(case.floats), rtol=1e-12)
    assert_grads(grads, compiled_grad(case), case, "value_and_grad")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_grad_pynative_agrees_with_compiled(case):
    eager = pynative(lambda: msir.grad(case.fn, argnums=case.argnums)(*case.args))
    assert isinstance(eager, tuple) and len(eager) == len(case.floats)
    for i, (e, c) in enumerate(zip(eager, compiled_grad(case))):
        np.testing.assert_allclose(np.asarray(e), c, rtol=1e-10, atol=1e-12, err_msg=f"argument {i}")


@pytest.mark.parametrize("a", [2.0, 0.01, 900.0])
def test_newton_sqrt_gradient_is_analytic(a):
    g = msir.grad(newton_sqrt)(np.array(a))
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a), rtol=1e-9)
    g_eager = pynative(lambda: msir.grad(newton_sqrt)(np.array(a)))
    np.testing.assert_allclose(g_eager, 0.5 / np.sqrt(a), rtol=1e-9)


def test_halving_gradient_counts_the_iterations():
    # x ends as x0 / 2**N with N the trip count of the largest |x0|: d/dx0 = f'(x_N) / 2**N.
    x0 = np.array([0.7, -1.3, 2.9])
    n = int(np.ceil(np.log2(np.max(np.abs(x0)) / 0.1)))
    xn = x0 / 2.0**n
    assert np.max(np.abs(xn)) <= 0.1 < np.max(np.abs(xn)) * 2
    expected = (3.0 * np.cos(3.0 * xn) * xn + np.sin(3.0 * xn)) / 2.0**n
    np.testing.assert_allclose(msir.grad(halving)(x0), expected, rtol=1e-12)


def test_for_trip_count_zero_gives_identity_and_zero():
    # no iteration: d/dx sum(x*x) = 2x, and the weight the body reads gets an exact zero
    gx, gw = compiled_grad(CASES[6])
    np.testing.assert_array_equal(gx, 2 * X3)
    np.testing.assert_array_equal(gw, np.zeros(3))


def test_nested_loop_trip_counts_vary():
    """The nested cases really run a different inner trip count per outer iteration."""
    x, w, k, counts = np.array([0.1, 0.4]), np.array([0.3, 0.2]), 1, []
    while np.sum(x) < 10.0:
        counts.append(k)
        x = x * 1.1**k + w * sum(1.1**i for i in range(k))
        k += 1
    assert len(counts) >= 3
    x, counts = np.array([0.1, 0.4]), []
    while np.sum(x) < 8.0:
        y, m = x, 0
        while np.max(y) < 2.0:
            y, m = y * 1.3 + np.array([0.3, 0.2]), m + 1
        counts.append(m)
        x = x + 0.5 * np.tanh(y)
    assert len(set(counts)) >= 2, counts


# ---------------------------------------------------------------------------
# Forward mode
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_jvp(case):
    rng = np.random.default_rng(7)
    ts = tuple(rng.standard_normal(np.shape(x)) for x in case.floats)
    value, tangent = msir.jvp(case.bound(), case.floats, ts)
    np.testing.assert_allclose(value, case.numpy(case.floats), rtol=1e-12)
    expected = numerical_jvp(case.numpy, list(case.floats), list(ts))
    np.testing.assert_allclose(tangent, expected, rtol=case.rtol, atol=case.atol)
    # and it is the directional derivative the reverse mode gives
    via_grad = sum(np.sum(g * t) for g, t in zip(compiled_grad(case), ts))
    np.testing.assert_allclose(tangent, via_grad, rtol=1e-9, atol=1e-12)
    eager_value, eager_tangent = pynative(lambda: msir.jvp(case.bound(), case.floats, ts))
    np.testing.assert_allclose(eager_tangent, tangent, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# Second order
# ---------------------------------------------------------------------------


def hvp_for(x):
    return counted(x, W3, 5)


def hvp_if_in_for(x):
    return if_in_for(x, W3, 6)


def hvp_closure(x):
    return closure_loop(x, W3, 4)


HVP = [
    hvp_for,
    hvp_if_in_for,
    halving,
    hvp_closure,
    newton_sqrt,
]


@pytest.mark.parametrize("f", HVP, ids=lambda f: getattr(f, "__name__", None))
def test_hessian_vector_product_forward_over_reverse(f):
    x = np.array(2.0) if f is newton_sqrt else np.array([0.7, -1.3, 2.9]) if f is halving else X3
    v = np.random.default_rng(3).standard_normal(x.shape)
    gf = msir.grad(f)
    g, hv = msir.jvp(gf, (x,), (v,))
    np.testing.assert_allclose(g, gf(x), rtol=1e-12, atol=1e-14)
    eps = 1e-5
    expected = (gf(x + eps * v) - gf(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hv, expected, rtol=1e-6, atol=1e-8)


def scalar_loop(x):
    for i in range(3):
        x = np.sin(x) * 1.1 + 0.1 * i
    return x


def scalar_if(x):
    if x > 0.0:
        y = np.sin(x) * x
    else:
        y = np.exp(x)
    return y


def second_derivative_fd(f, x, eps=1e-4):
    return (f(x + eps) - 2 * f(x) + f(x - eps)) / eps**2


def scalar_while(x):
    y = x
    while y < 5.0:  # the trip count depends on x
        y = y * 1.5 + np.sin(y)
    return y * x


def scalar_if_in_for(x):
    for i in range(4):
        if x > 0.5:
            x = np.sin(x) * 1.3
        else:
            x = x * x + 0.6
    return x


SCALAR_LOOPS = [(scalar_loop, 0.3), (newton_sqrt, 2.0), (scalar_while, 0.7), (scalar_if_in_for, 0.9)]


def fd_of(g, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of a compiled derivative (gradcheck's step)."""
    return numerical_vjp(lambda a: g(a[0]), [x], np.float64(1.0), 0, eps)


@pytest.mark.parametrize("f,x", SCALAR_LOOPS, ids=lambda v: getattr(v, "__name__", ""))
def test_reverse_over_reverse_through_loops(f, x):
    """grad(grad(f)) through for, while and if-in-for, compiled (the tape ops'
    reverse rules) and eager, against differences of the compiled gradient."""
    x = np.array(x)
    got = msir.grad(msir.grad(f))(x)
    np.testing.assert_allclose(got, fd_of(msir.grad(f), x), rtol=1e-6, atol=1e-9)
    eager = pynative(lambda: msir.grad(msir.grad(f))(x))
    np.testing.assert_allclose(eager, got, rtol=1e-10, atol=1e-12)


def test_reverse_over_reverse_through_loop_matches_second_differences():
    x = 0.3
    got = msir.grad(msir.grad(scalar_loop))(np.array(x))
    np.testing.assert_allclose(got, second_derivative_fd(scalar_loop, x), rtol=1e-5)
    eager = pynative(lambda: msir.grad(msir.grad(scalar_loop))(np.array(x)))
    np.testing.assert_allclose(eager, got, rtol=1e-10)


def grad_norm(f):
    """x -> sum(grad(f)(x) ** 2): a scalar function of a gradient through loops."""
    g = msir.grad(f)

    def h(x):
        return np.sum(g(x) ** 2)

    return h


def hvp_for_in_for(x):
    return for_in_for(x, W3, 3)


def hvp_while_in_for(a):
    return newton_in_for(a, np.array(1.3), 3)


W2 = np.array([0.3, 0.2])


def hvp_for_in_while(x):
    return for_in_while(x, W2, 3)


def hvp_while_in_while(x):
    return while_in_while(x, W2)


GRAD_NORM = [
    (hvp_for, X3),
    (hvp_if_in_for, X3),
    (halving, np.array([0.7, -1.3, 2.9])),
    (hvp_closure, X3),
    (hvp_for_in_for, X3),  # checkpointed outer body, at both levels
    (hvp_while_in_for, np.array(2.0)),
    # a while (one pass, tape_push) differentiated again: outer body checkpointed
    (hvp_for_in_while, np.array([0.1, 0.4])),
    (hvp_while_in_while, np.array([0.1, 0.4])),
]


@pytest.mark.parametrize("f,x", GRAD_NORM, ids=lambda v: getattr(v, "__name__", ""))
def test_grad_of_gradient_norm_through_loops(f, x):
    h = grad_norm(f)
    got = msir.grad(h)(x)
    assert np.shape(got) == np.shape(x)
    np.testing.assert_allclose(got, numerical_vjp(lambda a: h(a[0]), [x], np.float64(1.0), 0),
                               rtol=1e-6, atol=1e-9)
    eager = pynative(lambda: msir.grad(grad_norm(f))(x))
    np.testing.assert_allclose(eager, got, rtol=1e-9, atol=1e-12)


def test_forward_over_reverse_and_reverse_over_forward_through_nested_loops():
    v = np.array([0.5, -1.0, 0.3])
    gf = msir.grad(hvp_for_in_for)
    g, hv = msir.jvp(gf, (X3,), (v,))
    eps = 1e-5
    np.testing.assert_allclose(hv, (gf(X3 + eps * v) - gf(X3 - eps * v)) / (2 * eps), rtol=1e-6, atol=1e-9)

    def directional(x):
        return msir.jvp(hvp_for_in_for, (x,), (v,))[1]

    np.testing.assert_allclose(msir.grad(directional)(X3), hv, rtol=1e-9, atol=1e-12)  # the Hessian is symmetric


def test_third_order_through_loop():
    x = np.array(0.3)
    got = msir.grad(msir.grad(msir.grad(scalar_loop)))(x)
    np.testing.assert_allclose(got, fd_of(msir.grad(msir.grad(scalar_loop)), x), rtol=1e-6, atol=1e-9)
    eager = pynative(lambda: msir.grad(msir.grad(msir.grad(scalar_loop)))(x))
    np.testing.assert_allclose(eager, got, rtol=1e-10)


def vector_while(x):
    y = x
    while np.sum(y) < 6.0:  # several residuals per iteration: several tape_push per row
        y = np.sin(y) * W3 + y * 1.4 + 0.3
    return np.sum(np.sin(y) * x)


@pytest.mark.parametrize("f,x", [(scalar_while, np.array(0.7)), (vector_while, X3 + 0.5)],
                         ids=["scalar_while", "vector_while"])
def test_third_order_through_while(f, x):
    """Three reverse passes through a while whose first-level forward appends
    with `msir.tape_push`: the pushes' adjoints (level 2 and 3) read rows of
    the cotangent tapes of the level below."""
    g1 = grad_norm(f)
    g1_grad = msir.grad(g1)

    def g2(a):  # two reverse passes inside, a third outside
        return np.sum(g1_grad(a) ** 2)

    got = msir.grad(g2)(x)
    np.testing.assert_allclose(got, numerical_vjp(lambda a: g2(a[0]), [x], np.float64(1.0), 0),
                               rtol=1e-6, atol=1e-9)


def test_vjp_of_gradient_through_loop_runs_twice():
    """vjp_fn owns the residuals (level-2 tapes among them) and can run again."""
    x = np.array(0.3)
    g, vjp_fn = msir.vjp(msir.grad(scalar_loop), x)
    np.testing.assert_allclose(g, msir.grad(scalar_loop)(x), rtol=1e-14)
    (a,) = vjp_fn(np.array(1.0))
    (b,) = vjp_fn(np.array(-2.5))
    expected = msir.grad(msir.grad(scalar_loop))(x)
    np.testing.assert_allclose(a, expected, rtol=1e-12)
    np.testing.assert_allclose(b, -2.5 * expected, rtol=1e-12)


def loop_after_sin(x):
    return scalar_loop(np.sin(x)) * 2.0


def test_vjp_with_tapes_before_static_residuals():
    """The forward returns tapes (dynamic shape) before static residuals; the
    native function returns its static outputs first: vjp_fn must pair them up."""
    x = np.array(0.4)
    y, vjp_fn = msir.vjp(loop_after_sin, x)
    np.testing.assert_allclose(y, loop_after_sin(x), rtol=1e-14)
    (a,) = vjp_fn(np.array(1.0))
    (b,) = vjp_fn(np.array(3.0))
    np.testing.assert_allclose(a, fd_of(loop_after_sin, x), rtol=1e-7)
    np.testing.assert_allclose(b, 3.0 * a, rtol=1e-14)


@pytest.mark.parametrize("x", [0.7, -0.7])
def test_reverse_over_reverse_through_if(x):
    got = msir.grad(msir.grad(scalar_if))(np.array(x))
    np.testing.assert_allclose(got, second_derivative_fd(scalar_if, x), rtol=1e-5)
    eager = pynative(lambda: msir.grad(msir.grad(scalar_if))(np.array(x)))
    np.testing.assert_allclose(eager, got, rtol=1e-10)


# ---------------------------------------------------------------------------
# A closure over a tuple of arrays
# ---------------------------------------------------------------------------

_PAIR = (np.array([0.5, 1.5, -0.7]),)


def over_tuple(x):
    s = x
    for i in range(2):
        s = s * _PAIR[0]
    return np.sum(s)


def test_closure_over_tuple_of_arrays():
    np.testing.assert_allclose(msir.grad(over_tuple)(X3), _PAIR[0] ** 2, rtol=1e-12)


def damped(x, w):
    while np.max(np.abs(x)) > 1e-3:
        x = np.tanh(x * w) * 0.8
    return np.sum(x * x)


@pytest.mark.parametrize("scale", [0.05, 2.0])
def test_while_vjp_many_iterations_runs_twice(scale):
    """A while whose trip count (28 and 49 here) crosses several doublings of its
    tapes; the compiled vjp_fn owns the tapes and gives the same cotangents on
    every call, matching finite differences."""
    x = np.array([0.3, -0.7, 0.5]) * scale
    w = np.array([0.9, 1.1, 0.7])
    out, vjp_fn = msir.vjp(damped, x, w)
    np.testing.assert_allclose(out, damped(x, w), rtol=1e-12)
    first = vjp_fn(np.float64(1.0))
    second = vjp_fn(np.float64(2.0))
    for i, g in enumerate(first):
        expected = numerical_vjp(lambda xs: damped(*xs), [x, w], np.float64(1.0), i)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(second[i], 2.0 * g, rtol=1e-12)


# ---------------------------------------------------------------------------
# What reverse mode through loops still refuses (tape uses msir-grad itself
# never generates), with the loop's location
# ---------------------------------------------------------------------------

_TAPE_LOOP = """
func.func @f(%x0: tensor<f64>, %t0: tensor<?xf64>, %n: tensor<i64>) -> tensor<f64> {{
  %zero = msir.constant dense<0> : tensor<i64>
  %one = msir.constant dense<1> : tensor<i64>
  %r, %c = msir.for %zero to %n step %one (%x0, {init}) : (tensor<f64>, {carried}) {{
  ^bb0(%i: tensor<i64>, %x: tensor<f64>, %tt: {carried}):
{body}
  }} loc("m.py":3:5)
  func.return %r : tensor<f64>
}}
func.func @g(%x: tensor<f64>, %t: tensor<?xf64>, %n: tensor<i64>) -> tensor<f64> {{
  %0 = msir.closure @f() : (tensor<f64>, tensor<?xf64>, tensor<i64>) -> tensor<f64>
  %1 = msir.grad %0 argnums array<i64: 0> : (tensor<f64>, tensor<?xf64>, tensor<i64>) -> tensor<f64> to (tensor<f64>, tensor<?xf64>, tensor<i64>) -> tensor<f64>
  %2 = msir.apply %1(%x, %t, %n) : (tensor<f64>, tensor<?xf64>, tensor<i64>) -> tensor<f64>
  func.return %2 : tensor<f64>
}}
"""

_READS_CARRIED_TAPE = """\
    %row = msir.tape_get %tt[%i] : tensor<?xf64>, tensor<i64> to tensor<f64>
    %y = msir.mul %x, %row : tensor<f64>
    %t2 = msir.tape_set %tt[%i], %y : tensor<?xf64>, tensor<i64>, tensor<f64>
    msir.yield %y, %t2 : tensor<f64>, tensor<?xf64>"""

_CARRIED_INDEX = """\
    %row = msir.tape_get %t0[%tt] : tensor<?xf64>, tensor<i64> to tensor<f64>
    %y = msir.mul %x, %row : tensor<f64>
    %c2 = msir.add %tt, %one : tensor<i64>
    msir.yield %y, %c2 : tensor<f64>, tensor<i64>"""


@pytest.mark.parametrize("init,carried,body,message", [
    ("%t0", "tensor<?xf64>", _READS_CARRIED_TAPE, "reverse mode through a loop reading a tape it carries"),
    ("%zero", "tensor<i64>", _CARRIED_INDEX,
     "reverse mode through a loop whose tape rows are indexed by a carried value"),
], ids=["reads-carried-tape", "row-index-carried"])
def test_refused_tape_loops(init, carried, body, message):
    from xdsl.parser import Parser

    from msir.compiler import make_context
    from msir.passes.grad import differentiate

    module = Parser(make_context(), _TAPE_LOOP.format(init=init, carried=carried, body=body)).parse_module()
    with pytest.raises(NotDifferentiableError) as info:
        differentiate(module)
    assert info.value.message == message
    loc = info.value.loc
    assert loc is not None and (loc.file, loc.line, loc.col) == ("m.py", 3, 5)


# ---------------------------------------------------------------------------
# Cotangents of arrays a `for` reads by rows (`xs[i]`, i from the counter):
# accumulated one row per iteration in place (msir.tape_add into one carried
# cotangent), not as a whole array per iteration.
# ---------------------------------------------------------------------------


def rnn_inputs(xs, W, U, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(h @ W + xs[t] @ U)
    return np.sum(h * h)


def strided_rows(xs, w):
    s = w
    for t in range(xs.shape[0] // 2):
        s = np.sin(s * xs[2 * t] + xs[xs.shape[0] - 1 - t])  # two rows, both from the counter
    return np.sum(s * s)


def same_row_twice(xs, w):
    s = w
    for t in range(2 * xs.shape[0]):
        s = np.tanh(s + w * xs[t // 2])  # every row is read in two iterations
    return np.sum(s)


def rows_and_whole(xs, w):
    s = w
    for t in range(xs.shape[0]):
        s = np.tanh(s * xs[t] + 0.1 * np.sum(xs, axis=0))  # a row and the whole array
    return np.sum(s)


def carried_index(xs, w):
    i = 0
    s = w
    while i < xs.shape[0]:  # the index is carried, not a counter: the old path
        s = np.sin(s * xs[i])
        i = i + 1
    return np.sum(s)


_r = np.random.default_rng(7)
ROW_CASES = [
    (rnn_inputs, (_r.standard_normal((6, 3, 4)) * 0.5, _r.standard_normal((5, 5)) * 0.4,
                  _r.standard_normal((4, 5)) * 0.4, _r.standard_normal((3, 5)) * 0.5)),
    (strided_rows, (_r.standard_normal((8, 3)) * 0.5, _r.standard_normal(3))),
    (same_row_twice, (_r.standard_normal((4, 3)) * 0.5, _r.standard_normal(3))),
    (rows_and_whole, (_r.standard_normal((5, 3)) * 0.5, _r.standard_normal(3))),
    (carried_index, (_r.standard_normal((5, 3)) * 0.5, _r.standard_normal(3))),
]


@pytest.mark.parametrize("f,args", ROW_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_cotangent_of_an_array_read_by_rows_in_a_loop(f, args):
    argnums = tuple(range(len(args)))
    got = msir.grad(f, argnums=argnums)(*args)
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, numerical_vjp(lambda a: f(*a), list(args), np.float64(1.0), i),
                                   rtol=1e-6, atol=1e-8, err_msg=f"argument {i}")
    eager = pynative(lambda: msir.grad(f, argnums=argnums)(*args))
    for g, e in zip(got, eager):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("f,args", ROW_CASES[:3], ids=lambda v: getattr(v, "__name__", ""))
def test_second_order_through_rows_read_in_a_loop(f, args):
    """grad of the squared norm of d f / d xs (the row cotangents' own adjoint:
    reading rows of the cotangent tape), against differences of the compiled
    first-order gradient."""
    xs, rest = args[0], args[1:]

    def norm(a):
        return np.sum(msir.grad(f)(a, *rest) ** 2)

    got = msir.grad(norm)(xs)
    first = msir.jit(msir.grad(f))
    fd = numerical_vjp(lambda a: np.sum(first(a[0], *rest) ** 2), [xs], np.float64(1.0), 0)
    np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("f,args", ROW_CASES[:3], ids=lambda v: getattr(v, "__name__", ""))
def test_forward_mode_through_rows_read_in_a_loop(f, args):
    tangents = tuple(np.random.default_rng(3).standard_normal(a.shape) for a in args)
    _, got = msir.jvp(f, args, tangents)
    expected = numerical_jvp(lambda a: f(*a), list(args), list(tangents))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
