"""PyNative (eager) differentiation: `msir.eager.engine`.

Every gradient is checked against central finite differences in float64 and,
where the compiled path supports it, against GRAPH_MODE. Also: higher order up
to third derivatives, perturbation confusion, vjp/jvp, result types and errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import msir
from msir.eager import engine
from msir.errors import NotDifferentiableError, ShapeError, UnsupportedSyntaxError

EPS = 1e-6


@pytest.fixture(autouse=True)
def pynative():
    msir.set_context(mode=msir.PYNATIVE_MODE)
    yield
    msir.set_context(mode=msir.GRAPH_MODE)


def in_graph(thunk):
    msir.set_context(mode=msir.GRAPH_MODE)
    try:
        return thunk()
    finally:
        msir.set_context(mode=msir.PYNATIVE_MODE)


def numeric_grad(f, args, argnum):
    """Central differences of scalar f w.r.t. args[argnum] (array, float, or tuple/list of arrays)."""
    a = args[argnum]

    def call_with(v):
        new = list(args)
        new[argnum] = v
        return float(f(*new))

    if isinstance(a, float):
        return (call_with(a + EPS) - call_with(a - EPS)) / (2 * EPS)
    if isinstance(a, (tuple, list)):
        out = []
        for k, item in enumerate(a):
            def sub(v, k=k):
                items = list(a)
                items[k] = v
                return type(a)(items)

            g = np.zeros(item.shape)
            for j in np.ndindex(item.shape):
                e = np.zeros(item.shape)
                e[j] = EPS
                g[j] = (call_with(sub(item + e)) - call_with(sub(item - e))) / (2 * EPS)
            out.append(g)
        return type(a)(out)
    g = np.zeros(np.shape(a))
    for j in np.ndindex(np.shape(a)):
        e = np.zeros(np.shape(a))
        e[j] = EPS
        g[j] = (call_with(a + e) - call_with(a - e)) / (2 * EPS)
    return g


def assert_tree_close(got, expected, rtol=1e-6, atol=1e-8):
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), (got, expected)
        for g, e in zip(got, expected):
            assert_tree_close(g, e, rtol, atol)
        return
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64), rtol=rtol, atol=atol)


def assert_same_types(got, expected):
    """Same structure, Python/NumPy types, dtypes and shapes."""
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same_types(g, e)
        return
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(expected, (np.ndarray, np.generic)):
        assert got.dtype == expected.dtype and got.shape == expected.shape


# ---------------------------------------------------------------------------
# Functions (defined in this file so GRAPH_MODE can read their source)
# ---------------------------------------------------------------------------


def f_chain(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.sin(x) / (1.0 + x * x) + np.log1p(x * x) - np.sqrt(x * x + 1.0))


def f_broadcast(x, y):
    return np.sum((x + y) * x - y / 2.0 + x * 3.0)


def f_reduce(x):
    m = np.mean(x, axis=1, keepdims=True)
    return np.sum(m * x) + np.max(x, axis=0).sum() + x.sum(axis=(0, 1)) + np.min(x, axis=1).mean() + np.prod(x[0])


def f_matmul(w, x):
    h = np.tanh(w @ x)
    return np.sum(h * h) + np.dot(w[0], x[:, 0])


def f_index(x):
    return x[0].sum() + (x[1:, ::2] ** 2).sum() + x[np.array([0, 2, 2])].sum() * 0.5 + x[..., None][1, -1, 0] + x.T[1].sum()


def f_where(x):
    return np.sum(np.where(x > 0, x * x, -x) + np.maximum(x, 0.1 * x) + np.minimum(x, 0.3) + np.abs(x))


def f_tuple(p):
    w, b = p
    return np.sum((w * b + b) ** 2)


def f_list(p):
    return np.sum(p[0] * np.exp(p[1]))


def f_pyfloat(x, s):
    return np.sum(x * s) * s + s * s


def make_closure(c):
    def f(x):
        return np.sum(c * x * x) + np.sum(np.sin(c) * x)

    return f


f_closure = make_closure(np.array([1.0, 2.0, 3.0]))


def helper(a):
    return np.sin(a) * a


def f_calls(x):
    return helper(x).sum() + helper(x * 2.0).sum()


def f_shapes(x):
    y = np.concatenate([x, x * 2.0], axis=0)
    z = np.stack([x, np.cos(x)], axis=1)
    r = np.reshape(x, (-1,))
    return np.sum(y * y) + np.sum(z[:, 1] * 3.0) + np.var(x) + np.std(x, axis=0).sum() + np.sum(r[::2]) + np.clip(x, -0.5, 0.5).sum() + np.sum(np.expand_dims(x, 0) * x)


def f_matmul_const(w):
    return np.sum(np.tanh(A34 @ w)) + np.sum((w.T @ X42) ** 2)


def f_aux(x):
    y = np.sum(x * x)
    return y, x * 2.0


def f_vector(x, y):
    return np.sin(x) * y, x + y


RNG = np.random.default_rng(0)
A34 = RNG.standard_normal((3, 4))
B4 = RNG.standard_normal(4)
X42 = RNG.standard_normal((4, 2))

CASES = [
    ("chain", f_chain, (A34,), 0),
    ("broadcast", f_broadcast, (A34, B4), (0, 1)),
    ("reduce", f_reduce, (A34 + 2.0,), 0),
    ("matmul", f_matmul, (A34, X42), (0, 1)),
    ("matmul_const", f_matmul_const, (X42,), 0),
    ("index", f_index, (A34,), 0),
    ("where", f_where, (A34,), 0),
    ("tuple", f_tuple, ((A34, B4),), 0),
    ("list", f_list, ([B4, B4 * 0.5],), 0),
    ("pyfloat", f_pyfloat, (B4, 1.5), 1),
    ("pyfloat_both", f_pyfloat, (B4, 1.5), (0, 1)),
    ("closure", f_closure, (B4[:3],), 0),
    ("calls", f_calls, (A34,), 0),
    ("shapes", f_shapes, (A34,), 0),
]


@pytest.mark.parametrize("name,f,args,argnums", CASES, ids=[c[0] for c in CASES])
def test_grad_matches_finite_differences_and_graph(name, f, args, argnums):
    g = msir.grad(f, argnums=argnums)(*args)
    nums = (argnums,) if isinstance(argnums, int) else argnums
    expected = [numeric_grad(f, args, a) for a in nums]
    assert_tree_close(g, expected[0] if isinstance(argnums, int) else tuple(expected), rtol=1e-5, atol=1e-7)
    g_graph = in_graph(lambda: msir.grad(f, argnums=argnums)(*args))
    assert_tree_close(g, g_graph, rtol=1e-10, atol=1e-12)
    assert_same_types(g, g_graph)


@pytest.mark.parametrize("name,f,args,argnums", CASES[:4] + CASES[8:9], ids=[c[0] for c in CASES[:4] + CASES[8:9]])
def test_value_and_grad_matches_graph(name, f, args, argnums):
    vg = msir.value_and_grad(f, argnums=argnums)(*args)
    vg_graph = in_graph(lambda: msir.value_and_grad(f, argnums=argnums)(*args))
    assert_tree_close(vg, vg_graph, rtol=1e-10, atol=1e-12)
    assert_same_types(vg, vg_graph)


def test_float32_stays_float32():
    x = A34.astype(np.float32)
    g = msir.grad(f_chain)(x)
    assert g.dtype == np.float32 and g.shape == x.shape
    np.testing.assert_allclose(g, msir.grad(f_chain)(A34), rtol=1e-4, atol=1e-5)
    # a float32 array times a Python float argument stays float32; the gradient of the float is a float
    gs = msir.grad(f_pyfloat, argnums=(0, 1))(x[0], 1.5)
    assert gs[0].dtype == np.float32 and type(gs[1]) is float
    assert_same_types(gs, in_graph(lambda: msir.grad(f_pyfloat, argnums=(0, 1))(x[0], 1.5)))


def square(x):
    return x * x


def test_scalar_result_types_match_graph():
    for arg in (3.0, np.float32(3.0), np.float64(3.0), np.array(3.0, np.float32)):
        got = msir.value_and_grad(square)(arg)
        expected = in_graph(lambda: msir.value_and_grad(square)(arg))
        assert_same_types(got, expected)
        assert_tree_close(got, expected)


def test_has_aux():
    g, aux = msir.grad(f_aux, has_aux=True)(B4)
    np.testing.assert_allclose(g, 2 * B4)
    np.testing.assert_allclose(aux, 2 * B4)
    (v, aux2), g2 = msir.value_and_grad(f_aux, has_aux=True)(B4)
    np.testing.assert_allclose(v, np.sum(B4 * B4))
    expected = in_graph(lambda: msir.value_and_grad(f_aux, has_aux=True)(B4))
    assert_tree_close(((v, aux2), g2), expected)
    assert_same_types(((v, aux2), g2), expected)


# ---------------------------------------------------------------------------
# Higher order and nesting
# ---------------------------------------------------------------------------


def quartic(x):
    return x * x * x * x + np.sin(x)


def test_higher_order_scalar():
    x = 0.7
    d1 = msir.grad(quartic)(x)
    d2 = msir.grad(msir.grad(quartic))(x)
    d3 = msir.grad(msir.grad(msir.grad(quartic)))(x)
    assert type(d3) is float
    np.testing.assert_allclose(d1, 4 * x**3 + np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(d2, 12 * x**2 - np.sin(x), rtol=1e-12)
    np.testing.assert_allclose(d3, 24 * x - np.cos(x), rtol=1e-12)
    graph = in_graph(lambda: (msir.grad(msir.grad(quartic))(x), msir.grad(msir.grad(msir.grad(quartic)))(x)))
    np.testing.assert_allclose((d2, d3), graph, rtol=1e-10)


def test_third_order_matches_finite_differences_of_second():
    f = lambda x: np.sum(np.tanh(x) * np.exp(x * 0.3))  # noqa: E731
    d2 = msir.grad(msir.grad(f))
    d3 = msir.grad(msir.grad(msir.grad(f)))
    x = 0.4
    np.testing.assert_allclose(d3(x), (d2(x + EPS) - d2(x - EPS)) / (2 * EPS), rtol=1e-6)


def hvp_target(x):
    return np.sum(np.sin(x) * x * x) + np.sum(x) ** 2


def test_hessian_vector_products():
    x, v = B4, B4[::-1].copy()
    g = msir.grad(hvp_target)
    # forward over reverse
    _, hv_fr = msir.jvp(g, (x,), (v,))
    # reverse over reverse
    hv_rr = msir.grad(lambda y: np.sum(g(y) * v))(x)
    # reverse over forward
    hv_rf = msir.grad(lambda y: msir.jvp(hvp_target, (y,), (v,))[1])(x)
    num = (g(x + EPS * v) - g(x - EPS * v)) / (2 * EPS)
    for hv in (hv_fr, hv_rr, hv_rf):
        np.testing.assert_allclose(hv, num, rtol=1e-6, atol=1e-8)


def test_grad_of_function_calling_grad():
    def f(x):
        inner = msir.grad(lambda y: np.sum(np.sin(y) * y))(x)
        return np.sum(inner * inner)

    g = msir.grad(f)(B4)
    np.testing.assert_allclose(g, numeric_grad(f, (B4,), 0), rtol=1e-6, atol=1e-8)


def test_perturbation_confusion():
    # The classic example (Siskind & Pearlmutter): d/dx [x * (d/dy (x + y))] = 1,
    # wrong (2) if the inner derivative also perturbs the outer x.
    def outer(x):
        def inner(y):
            return x + y

        return x * msir.grad(inner)(2.0)

    assert msir.grad(outer)(3.0) == 1.0
    # d/dx [x * d/dy (x * y)] = d/dx x^2 = 2x
    def outer2(x):
        return x * msir.grad(lambda y: x * y)(2.0)

    assert msir.grad(outer2)(3.0) == 6.0
    # and the same in forward over reverse and forward over forward
    assert msir.jvp(outer, (3.0,), (1.0,))[1] == 1.0

    def outer_fwd(x):
        return x * msir.jvp(lambda y: x + y, (2.0,), (1.0,))[1]

    assert msir.jvp(outer_fwd, (3.0,), (1.0,))[1] == 1.0
    assert msir.grad(outer_fwd)(3.0) == 1.0


def test_perturbation_confusion_arrays():
    def outer(x):
        return np.sum(x * msir.grad(lambda y: np.sum(x * y + y))(B4))

    # inner grad = x + 1, so outer = sum(x * (x + 1)), gradient 2x + 1
    np.testing.assert_allclose(msir.grad(outer)(A34[0]), 2 * A34[0] + 1, rtol=1e-12)


def test_forward_over_forward_and_reverse_through_vjp():
    cube = lambda x: x * x * x  # noqa: E731
    assert msir.jvp(lambda x: msir.jvp(cube, (x,), (1.0,))[1], (2.0,), (1.0,)) == (12.0, 12.0)

    def g(x):
        _, pullback = msir.vjp(lambda y: np.sin(y) * y, x)
        return np.sum(pullback(np.ones_like(x))[0])

    x = np.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(msir.grad(g)(x), 2 * np.cos(x) - x * np.sin(x), rtol=1e-12)


@msir.jit
def jitted_sq(x):
    return np.sum(x * x)


def calls_jitted(x):
    return jitted_sq(x) * 2.0


def test_jit_inside_pynative_grad():
    np.testing.assert_allclose(msir.grad(calls_jitted)(B4), 4 * B4)


# ---------------------------------------------------------------------------
# vjp and jvp
# ---------------------------------------------------------------------------


def test_vjp_callable_twice():
    x, y = B4, B4 * 2.0
    out, vjp_fn = msir.vjp(f_vector, x, y)
    np.testing.assert_allclose(out[0], np.sin(x) * y)
    np.testing.assert_allclose(out[1], x + y)
    ct = (np.ones(4), np.arange(4.0))
    for _ in range(2):
        gx, gy = vjp_fn(ct)
        np.testing.assert_allclose(gx, np.cos(x) * y + np.arange(4.0), rtol=1e-12)
        np.testing.assert_allclose(gy, np.sin(x) + np.arange(4.0), rtol=1e-12)
    gx2, _ = vjp_fn((np.zeros(4), np.ones(4)))
    np.testing.assert_allclose(gx2, np.ones(4))


def test_vjp_has_aux_and_pytrees():
    out, vjp_fn, aux = msir.vjp(f_aux, B4, has_aux=True)
    np.testing.assert_allclose(aux, 2 * B4)
    (g,) = vjp_fn(2.0)
    np.testing.assert_allclose(g, 4 * B4)
    out, vjp_fn = msir.vjp(f_tuple, (A34, B4))
    ((gw, gb),) = vjp_fn(1.0)
    expected = numeric_grad(f_tuple, ((A34, B4),), 0)
    assert_tree_close((gw, gb), expected, rtol=1e-6)


def test_jvp_matches_finite_differences():
    x, y = A34[0], B4
    tx, ty = B4[::-1].copy(), np.ones(4)
    out, t_out = msir.jvp(f_vector, (x, y), (tx, ty))
    plus = f_vector(x + EPS * tx, y + EPS * ty)
    minus = f_vector(x - EPS * tx, y - EPS * ty)
    for t, p, m in zip(t_out, plus, minus):
        np.testing.assert_allclose(t, (p - m) / (2 * EPS), rtol=1e-6, atol=1e-8)
    assert_tree_close(out, f_vector(x, y))


def test_jvp_types_match_graph():
    for primals, tangents in (((3.0,), (1.0,)), ((np.float32(3.0),), (1.0,)), ((B4,), (np.ones(4),))):
        got = msir.jvp(square, primals, tangents)
        expected = in_graph(lambda: msir.jvp(square, primals, tangents))
        assert_same_types(got, expected)
        assert_tree_close(got, expected)


def test_jvp_of_reductions_and_indexing():
    for f in (f_reduce, f_index, f_shapes, f_where):
        t = np.cos(A34)
        _, got = msir.jvp(f, (A34 + 2.0,), (t,))
        np.testing.assert_allclose(got, np.sum(numeric_grad(f, (A34 + 2.0,), 0) * t), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------
# stop_gradient
# ---------------------------------------------------------------------------


def test_eager_stop_gradient():
    f = lambda x: engine.stop_gradient(x * x) * x  # noqa: E731
    assert msir.grad(f)(3.0) == 9.0
    assert msir.jvp(f, (3.0,), (1.0,))[1] == 9.0
    assert msir.grad(msir.grad(f))(3.0) == 0.0


def sg_user(x):
    return msir.stop_gradient(x * x) * x


def test_msir_stop_gradient_pynative():
    assert msir.grad(sg_user)(3.0) == in_graph(lambda: msir.grad(sg_user)(3.0)) == 9.0


# ---------------------------------------------------------------------------
# Errors (both modes refuse the same things)
# ---------------------------------------------------------------------------


def times2(x):
    return x * 2.0


def int_output(x):
    return (x > 1).sum()


def uses_median(x):
    return np.median(x).sum()


def scale(x, n):
    return x * n


def both_modes(thunk):
    results = []
    for mode in (msir.PYNATIVE_MODE, msir.GRAPH_MODE):
        msir.set_context(mode=mode)
        try:
            thunk()
        except Exception as e:  # noqa: BLE001
            results.append(e)
        else:
            results.append(None)
    msir.set_context(mode=msir.PYNATIVE_MODE)
    return results


@pytest.mark.parametrize(
    "thunk,cls,text",
    [
        (lambda: msir.grad(times2)(B4), ShapeError, "grad needs a scalar output, but the function returns an array of shape (4,)"),
        (lambda: msir.grad(times2)(3), NotDifferentiableError, "argument 0: it holds a value of dtype int64"),
        (lambda: msir.grad(scale, argnums=1)(3.0, 2), NotDifferentiableError, "argument 1"),
        (lambda: msir.grad(int_output)(B4), NotDifferentiableError, "int64"),
        (lambda: msir.grad(uses_median)(B4), UnsupportedSyntaxError, "np.median"),
        (lambda: msir.grad(times2, argnums=1)(B4), ValueError, "argnums 1 out of range"),
        (lambda: msir.grad(times2, has_aux=True)(3.0), ValueError, "must return a pair"),
    ],
    ids=["non-scalar", "int-arg", "int-argnum", "int-output", "unsupported-np", "argnums-range", "has-aux"],
)
def test_errors_same_in_both_modes(thunk, cls, text):
    eager, graph = both_modes(thunk)
    for e in (eager, graph):
        assert isinstance(e, cls), repr(e)
        assert text in str(e)


def test_grad_wrt_int_eagerly_names_argument():
    with pytest.raises(NotDifferentiableError, match="only float arguments have derivatives"):
        msir.grad(scale, argnums=(0, 1))(B4, 3)


def test_unsupported_conversions_are_refused():
    with pytest.raises(UnsupportedSyntaxError, match="drop its derivative"):
        msir.grad(lambda x: np.asarray(x).sum())(B4)
    with pytest.raises(UnsupportedSyntaxError, match="np.fft.fft"):
        msir.grad(lambda x: np.fft.fft(x).real.sum())(B4)
    with pytest.raises(UnsupportedSyntaxError, match="a boolean mask index is supported alone"):
        msir.grad(lambda x: x[x > 0, None].sum())(B4)


def test_constant_function_has_zero_gradient():
    g = msir.grad(lambda x: np.sum(B4))(A34)
    assert g.shape == A34.shape and not g.any()
