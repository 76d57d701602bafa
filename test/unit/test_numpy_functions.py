"""NumPy functions users reach for (issue 17), compiled and differentiated.

Each function is checked the same way (`_check`): its value against NumPy in
GRAPH and PYNATIVE mode, its gradient (reverse mode) against central
differences in both modes, and its forward-mode tangent against central
differences. Inputs are float64 so that the differences are exact to ~1e-9.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp, pynative

import msir
from msir.errors import MsirValueError, MsirZeroDivisionError, ShapeError, UnsupportedSyntaxError


def _check(loss, *args, argnums=0, rtol=1e-6, atol=1e-8):
    """`loss(*args)` (a scalar) against NumPy; d loss / d args[argnums] against
    finite differences in both modes; the JVP along a random direction (when
    every argument is a float: msir.jvp takes a tangent for each)."""
    args = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
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
    if not all(np.asarray(a).dtype.kind == "f" for a in args):
        return
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


# -- np.logaddexp ------------------------------------------------------------------


def _logaddexp(a, b):
    return np.logaddexp(a, b)


def _logaddexp_loss(a, b):
    return np.sum(np.logaddexp(a, b) * b)


def test_logaddexp_values_follow_numpy_where_exp_overflows():
    a = np.array([1.0, -800.0, 800.0, 0.5, np.inf, -np.inf, np.inf, np.nan])
    b = np.array([2.0, -801.0, 799.0, 0.5, np.inf, -np.inf, -np.inf, 1.0])
    with np.errstate(invalid="ignore"):  # NumPy warns of inf - inf inside logaddexp
        expected = np.logaddexp(a, b)
        # to an ulp: NumPy's own ufuncs round differently per machine (SIMD exp / log1p on AVX-512)
        np.testing.assert_allclose(pynative(lambda: msir.jit(_logaddexp)(a, b)), expected, rtol=4e-16, atol=0)
    np.testing.assert_allclose(msir.jit(_logaddexp)(a, b), expected, rtol=4e-16, atol=0)
    got32 = msir.jit(_logaddexp)(a.astype(np.float32)[:4], 1.0)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, np.logaddexp(a.astype(np.float32)[:4], 1.0), rtol=1e-6)
    ints = np.array([1, 2, 3])
    np.testing.assert_allclose(msir.jit(_logaddexp)(ints, ints[::-1].copy()), np.logaddexp(ints, ints[::-1]))


@pytest.mark.parametrize("argnums", [0, 1])
def test_logaddexp_gradients(argnums):
    _check(_logaddexp_loss, A, B, argnums=argnums)


def test_logaddexp_gradient_at_a_tie_is_one_half_each():
    x = np.array([0.25, -3.0])
    for ga, gb in (msir.grad(_logaddexp_sum, argnums=(0, 1))(x, x.copy()),
                   pynative(lambda: msir.grad(_logaddexp_sum, argnums=(0, 1))(x, x.copy()))):
        np.testing.assert_allclose(ga, [0.5, 0.5])
        np.testing.assert_allclose(gb, [0.5, 0.5])


def _logaddexp_sum(a, b):
    return np.sum(np.logaddexp(a, b))


# -- np.outer ------------------------------------------------------------------------


def _outer_loss(a, b):
    return np.sum(np.outer(a, b) * np.arange(20.0).reshape(5, 4))


def _outer(a, b):
    return np.outer(a, b)


@pytest.mark.parametrize("argnums", [0, 1])
def test_outer_gradients(argnums):
    _check(_outer_loss, V, A[0], argnums=argnums)


def test_outer_flattens_and_types_as_numpy():
    m = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(msir.jit(_outer)(m, np.array([1, -1])), np.outer(m, [1, -1]))
    bools = np.array([True, False])
    got = msir.jit(_outer)(bools, bools)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.outer(bools, bools))
    assert msir.jit(_outer)(V.astype(np.float32), V.astype(np.float32)).dtype == np.float32


# -- np.eye, np.identity -------------------------------------------------------------


def _eye_products(x):
    return x @ np.eye(4), np.eye(3, 4, 1, dtype=np.int32), np.eye(4, 3, k=-2), np.identity(3, dtype=bool)


def _eye_loss(x):
    return np.sum((x + 2.0 * np.eye(3, 4, k=1)) ** 2)


def test_eye_and_identity_follow_numpy():
    expected = (A @ np.eye(4), np.eye(3, 4, 1, dtype=np.int32), np.eye(4, 3, k=-2), np.identity(3, dtype=bool))
    for got in (msir.jit(_eye_products)(A), pynative(lambda: msir.jit(_eye_products)(A))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)


def test_eye_gradients():
    _check(_eye_loss, A)


# -- np.tril, np.triu -----------------------------------------------------------------


def _triangles(x):
    return np.tril(x), np.triu(x), np.tril(x, -1), np.triu(x, k=2), np.tril(x[0]), np.triu(x > 0)


def _triangle_loss(x):
    return np.sum(np.tril(x, 1) * np.triu(x, -1) * np.arange(12.0).reshape(3, 4))


def test_triangles_follow_numpy():
    x = np.stack([A, B])  # a batch: the triangles are those of the last two axes
    expected = _triangles(x)
    for got in (msir.jit(_triangles)(x), pynative(lambda: msir.jit(_triangles)(x))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def test_triangle_gradients():
    _check(_triangle_loss, A)


# -- np.diag ---------------------------------------------------------------------------


def _diags(m, v):
    return np.diag(m), np.diag(m, 1), np.diag(m, k=-2), np.diag(m, 7), np.diag(v), np.diag(v, 2), np.diag(v, -1)


def _diag_loss(v):
    d = np.diag(v, 1)
    return np.sum(np.diag(d @ d.T + np.diag(v * v, -1) ** 2) * np.arange(6.0))


def test_diag_follows_numpy():
    expected = _diags(A, V)
    for got in (msir.jit(_diags)(A, V), pynative(lambda: msir.jit(_diags)(A, V))):
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def test_diag_gradients_through_both_directions():
    _check(_diag_loss, V)


def _diag_of_3d(x):
    return np.diag(x)


def test_diag_of_a_3d_array_is_a_shape_error_at_the_call():
    with pytest.raises(msir.errors.ShapeError, match=r"np.diag: the input must be 1-d or 2-d, got a 3-d array") as e:
        msir.jit(_diag_of_3d)(np.zeros((2, 2, 2)))
    assert f":{_diag_of_3d.__code__.co_firstlineno + 1}:" in str(e.value)


# -- np.cumsum, np.cumprod -----------------------------------------------------------


def _scans(x):
    return (np.cumsum(x), np.cumsum(x, axis=0), np.cumsum(x, 1), x.cumsum(axis=-1), np.cumprod(x, axis=1),
            x.cumprod(0), np.cumprod(x))


def _scans_of_ints(m, b):
    return np.cumsum(m, axis=1), np.cumprod(m, 0), np.cumsum(b), np.cumsum(m, axis=1, dtype=np.float32)


def _cumsum_loss(x):
    return np.sum(np.cumsum(x, axis=1) ** 2) + np.sum(np.cumsum(x) * np.arange(12.0))


def _cumprod_loss(x):
    return np.sum(np.cumprod(x, axis=0) * np.arange(12.0).reshape(3, 4)) + np.sum(np.cumprod(x[0]))


def test_scans_follow_numpy():
    x = np.linspace(-1.5, 2.0, 7 * 5).reshape(7, 5)  # 7 and 5: not powers of two
    expected = _scans(x)
    for got in (msir.jit(_scans)(x), pynative(lambda: msir.jit(_scans)(x))):
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-13, atol=1e-14)
    m, b = np.arange(-4, 8, dtype=np.int32).reshape(3, 4), np.array([True, False, True])
    for g, e in zip(msir.jit(_scans_of_ints)(m, b), _scans_of_ints(m, b)):
        assert g.dtype == e.dtype  # int32 and bool accumulate in int64, as in NumPy
        np.testing.assert_array_equal(g, e)


def test_cumsum_gradients():
    _check(_cumsum_loss, A)


def test_cumprod_gradients_also_through_zeros():
    _check(_cumprod_loss, A)
    x = A.copy()
    x[1, 2] = 0.0  # a zero: the gradient of the products after it is not a division by it
    np.testing.assert_allclose(msir.grad(_cumprod_loss)(x), numerical_vjp(lambda xs: _cumprod_loss(xs[0]), [x],
                                                                          np.float64(1.0), 0), rtol=1e-5, atol=1e-7)


# -- np.linalg.norm -----------------------------------------------------------------


def _vector_norms(v, m):
    inf = np.inf
    return (np.linalg.norm(v), np.linalg.norm(v, 1), np.linalg.norm(v, 2), np.linalg.norm(v, np.inf),
            np.linalg.norm(v, -inf), np.linalg.norm(v, 3), np.linalg.norm(v, ord=0.5),
            np.linalg.norm(m, axis=1), np.linalg.norm(m, 1, axis=0), np.linalg.norm(m, inf, axis=-1, keepdims=True))


def _matrix_norms(m, t):
    inf = np.inf
    return (np.linalg.norm(m), np.linalg.norm(m, "fro"), np.linalg.norm(m, 1), np.linalg.norm(m, -1),
            np.linalg.norm(m, inf), np.linalg.norm(m, ord=-inf), np.linalg.norm(t), np.linalg.norm(t, axis=(0, 2)),
            np.linalg.norm(t, 1, axis=(2, 1)), np.linalg.norm(m, keepdims=True))


def test_norms_follow_numpy():
    t = np.stack([A, B])
    for fn, args in ((_vector_norms, (V, A)), (_matrix_norms, (A, t))):
        expected = fn(*args)
        for got in (msir.jit(fn)(*args), pynative(lambda: msir.jit(fn)(*args))):
            for g, e in zip(got, expected):
                assert np.shape(g) == np.shape(e)
                np.testing.assert_allclose(g, e, rtol=1e-13)
    assert msir.jit(_vector_norms)(V.astype(np.float32), A.astype(np.float32))[0].dtype == np.float32
    np.testing.assert_allclose(msir.jit(_vector_norms)(np.arange(5), np.arange(12).reshape(3, 4))[5],
                               np.linalg.norm(np.arange(5), 3))  # integers in float64


def _norm_loss(m):
    return (np.linalg.norm(m) + np.linalg.norm(m, 1) + 2.0 * np.linalg.norm(m, np.inf)
            + np.sum(np.linalg.norm(m, 3, axis=1)) + np.sum(np.linalg.norm(m, axis=0)))


def test_norm_gradients():
    _check(_norm_loss, A)


def _spectral(m):
    return np.linalg.norm(m, 2)


def test_the_spectral_norm_of_a_matrix_is_refused_at_the_call():
    with pytest.raises(msir.errors.UnsupportedSyntaxError, match=r"spectral norm \(ord=2\) of a matrix") as e:
        msir.jit(_spectral)(A)
    assert f":{_spectral.__code__.co_firstlineno + 1}:" in str(e.value)
    with pytest.raises(msir.errors.UnsupportedSyntaxError, match=r"spectral norm"):
        pynative(lambda: msir.jit(_spectral)(A))


# -- np.any, np.all --------------------------------------------------------------------


def _truths(x, m, b):
    return (np.any(x > 1.0), np.all(x > -3.0), np.any(m, axis=0), np.all(m, axis=1, keepdims=True), x.any(),
            (x > 0).all(axis=-1), np.any(b), np.all(b), np.any(x[:, :0]), np.all(x[:, :0], axis=1))


def _gated_loss(x):
    # the gate is boolean, so it carries no derivative; the branches do
    return np.sum(np.where(np.all(x > -3.0, axis=1, keepdims=True), x * x, -x))


def test_any_and_all_follow_numpy():
    m = np.array([[0, 2, 0], [0, 0, 0]], np.int32)
    b = np.array([True, False, True])
    x = A.copy()
    x[2, 1] = np.nan  # NaN is nonzero, so true
    expected = _truths(x, m, b)
    for got in (msir.jit(_truths)(x, m, b), pynative(lambda: msir.jit(_truths)(x, m, b))):
        for g, e in zip(got, expected):
            assert np.asarray(g).dtype == np.bool_ and np.shape(g) == np.shape(e)
            np.testing.assert_array_equal(g, e)


def test_a_gate_of_all_is_differentiated_through_its_branches():
    x = A.copy()
    x[1, 0] = -4.0  # row 1 takes -x
    _check(_gated_loss, x)


# -- np.take_along_axis ----------------------------------------------------------------


def _take_along(x, i, j):
    return (np.take_along_axis(x, i, axis=1), np.take_along_axis(x, j, 0), np.take_along_axis(x, i[:1], axis=-1),
            np.take_along_axis(x[0], i[0], axis=None))


def _take_along_loss(x, i):
    picked = np.take_along_axis(x, i, axis=1)  # repeated and negative indices
    return np.sum(picked * np.arange(9.0).reshape(3, 3)) + np.sum(np.take_along_axis(x, np.argmax(x, 0)[None], 0))


I = np.array([[0, 3, 3], [-1, 1, 0], [2, 2, -4]])


def test_take_along_axis_follows_numpy():
    j = np.array([[2, 0, 1, 1]])  # broadcast along axis 1: no, along the other axes
    expected = _take_along(A, I, j)
    for got in (msir.jit(_take_along)(A, I, j), pynative(lambda: msir.jit(_take_along)(A, I, j))):
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def _take_along_of_x(x):
    return np.sum(np.take_along_axis(x, I, axis=1) ** 2)


def test_take_along_axis_gradients():
    _check(_take_along_loss, A, I)
    _check(_take_along_of_x, A)  # the indices a global: forward mode too


def test_take_along_axis_out_of_range_is_an_index_error_at_run_time():
    with pytest.raises(IndexError):
        msir.jit(_take_along_loss)(A, np.array([[0, 4, 0], [0, 0, 0], [0, 0, 0]]))


# -- np.linspace, np.arange ----------------------------------------------------------


def _ranges(a, b):
    return (np.linspace(0.0, 1.0, 7), np.linspace(-2, 3, num=6, endpoint=False), np.linspace(a, b, 5),
            np.linspace(b, a, 1), np.linspace(0, 10, 4, dtype=np.int64), np.linspace(a, 2.0, 0),
            np.arange(5), np.arange(1.0, 2.0, 0.25), np.arange(7, 1, -2, dtype=np.float32))


def _linspace_loss(a, b):
    return np.sum(np.linspace(a, b, 9) ** 3) + np.sum(np.linspace(b, a * a, 4, endpoint=False))


def test_linspace_and_arange_follow_numpy():
    a, b = np.float64(-0.3), 2.5
    expected = _ranges(a, b)
    for got in (msir.jit(_ranges)(a, b), pynative(lambda: msir.jit(_ranges)(a, b))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-15, atol=1e-15)
    f32 = msir.jit(_ranges)(np.float32(-0.3), np.float32(2.5))[2]
    assert f32.dtype == np.linspace(np.float32(-0.3), np.float32(2.5), 5).dtype


@pytest.mark.parametrize("argnums", [0, 1])
def test_linspace_gradients_with_runtime_bounds(argnums):
    _check(_linspace_loss, np.float64(0.7), np.float64(-1.2), argnums=argnums)


# -- np.arange and np.linspace with runtime bounds: a result of runtime length --------------


def _arange1(stop):
    return np.arange(stop)


def _arange3(start, stop, step):
    return np.arange(start, stop, step)


def _arange_typed(start, stop, step):
    return (np.arange(start, stop, step, dtype=np.float32), np.arange(start, stop, step, dtype=np.int32),
            np.arange(start, stop, dtype=np.float64), np.arange(stop, dtype=np.int64))


def _arange_mixed(stop):
    return np.arange(1, stop), np.arange(0.5, stop), np.arange(stop, 0, -3), np.arange(1.5, 2.0, stop)


_ARANGES = [
    (np.int64(5), np.int64(7), np.int64(1)),
    (np.int64(2), np.int64(9), np.int64(3)),
    (np.int64(9), np.int64(2), np.int64(1)),  # empty
    (np.int64(9), np.int64(2), np.int64(-2)),  # a negative step
    (np.int32(-3), np.int32(4), np.int32(3)),
    (np.float64(0.5), np.float64(3.2), np.float64(0.7)),
    (np.float64(3.0), np.float64(-1.0), np.float64(-0.25)),
    (np.float64(1.0), np.float64(1.0), np.float64(0.5)),  # empty
    (np.float32(0.1), np.float32(1.0), np.float32(0.3)),  # float64, as NumPy gives for scalar bounds
    (np.float64(0.5), np.float64(5.0), np.float64(1.5)),  # dtype=int truncates first and first + step
    (np.int64(0), np.int64(5), np.float64(0.5)),
]


def _same(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("bounds", _ARANGES, ids=lambda b: ",".join(map(str, b)))
def test_arange_with_runtime_bounds_follows_numpy(bounds):
    for run in (lambda f, *a: msir.jit(f)(*a), lambda f, *a: pynative(lambda: msir.jit(f)(*a))):
        _same(run(_arange3, *bounds), np.arange(*bounds))
        _same(run(_arange1, bounds[1]), np.arange(bounds[1]))
        for got, expected in zip(run(_arange_typed, *bounds), _arange_typed(*bounds)):
            _same(got, expected)


def test_arange_mixes_runtime_and_python_bounds():
    for stop in (np.int64(7), np.int64(-1), np.float64(4.5)):
        for got, expected in zip(msir.jit(_arange_mixed)(stop), _arange_mixed(stop)):
            _same(got, expected)


def _arange_uses(n, x, w):
    r = np.arange(n)
    squares = r ** 2
    table = np.arange(n)[:, None] * x  # a static row along the other axis
    total = 0.0
    for i in range(3):  # a runtime length inside a loop body, new each iteration
        total = total + np.sum(np.arange(n + i) * w)
    return (np.sum(squares), np.mean(r * 1.5), np.max(r - w), np.min(r), r * 2 + squares, table,
            np.sum(table, axis=0), total)


def test_arange_results_combine_reduce_return_and_loop():
    x = np.array([1.0, -2.0, 0.5])
    for n in (np.int64(6), np.int64(1)):
        expected = _arange_uses(n, x, 0.25)
        for got in (msir.jit(_arange_uses)(n, x, 0.25), pynative(lambda: msir.jit(_arange_uses)(n, x, 0.25))):
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=1e-15)
                assert np.shape(g) == np.shape(e) and np.asarray(g).dtype == np.asarray(e).dtype


def _empty_max(n):
    return np.max(np.arange(n) * 1.0)


def _arange_step(a, step):
    return np.arange(a, 10.0, step)


def _arange_int_step(step):
    return np.sum(np.arange(0, 10, step))


def _two_lengths(n):
    return np.arange(n) * np.arange(n + 1)


def test_runtime_arange_errors_are_numpy_s_at_the_users_line(mode):
    with pytest.raises(MsirZeroDivisionError) as e:
        msir.jit(_arange_step)(1.0, 0.0)
    assert e.value.message == "float division by zero"  # NumPy's (Python's) words for float bounds
    assert e.value.loc.line == _arange_step.__code__.co_firstlineno + 1
    with pytest.raises(MsirZeroDivisionError) as e:
        msir.jit(_arange_int_step)(np.int64(0))
    assert e.value.message == "division by zero"
    assert e.value.loc.line == _arange_int_step.__code__.co_firstlineno + 1
    with pytest.raises(MsirValueError, match="arange: cannot compute length") as e:
        msir.jit(_arange_step)(np.nan, 1.0)
    with pytest.raises(MsirValueError, match="Maximum allowed size exceeded"):
        msir.jit(_arange_step)(-np.inf, 1.0)
    with pytest.raises(MsirValueError, match="zero-size array to reduction operation maximum") as e:
        msir.jit(_empty_max)(np.int64(0))
    assert e.value.loc.line == _empty_max.__code__.co_firstlineno + 1
    assert msir.jit(_arange_step)(1.0, 4.0).tolist() == [1.0, 5.0, 9.0]  # the errors left nothing behind
    with pytest.raises(ShapeError, match="runtime lengths come from different np.arange calls") as e:
        msir.jit(_two_lengths)(np.int64(3))
    assert e.value.loc.line == _two_lengths.__code__.co_firstlineno + 1


def _sin_ramp(a, b, w):
    return np.sum(np.sin(np.arange(a, b, 0.5) * w))


def _arange_loss(a, w):
    return np.sum(np.cos(np.arange(a, 4.3, 0.4) * w) * np.arange(a, 4.3, 0.4)) + np.mean(np.arange(a, 4.3, 0.4) ** 2)


def test_arange_gradient_through_a_float_function_of_it():
    _check(lambda w: _sin_ramp(0.3, 3.1, w), np.float64(1.7))
    _check(lambda w: _arange_loss(-0.7, w), np.float64(0.9))
    _check(lambda w: _sin_ramp(5.0, 4.0, w), np.float64(0.9))  # empty


def test_arange_has_no_gradient_with_respect_to_its_bounds(mode):
    g = msir.grad(_sin_ramp, argnums=(0, 1, 2))(0.3, 3.1, 1.7)
    assert g[0] == 0.0 and g[1] == 0.0
    h = 1e-6
    np.testing.assert_allclose(g[2], (_sin_ramp(0.3, 3.1, 1.7 + h) - _sin_ramp(0.3, 3.1, 1.7 - h)) / (2 * h),
                               rtol=1e-6)
    # away from a change of length, the values do not vary with the bounds either
    assert (_sin_ramp(0.3 + h, 3.1 + h, 1.7) - _sin_ramp(0.3 - h, 3.1 - h, 1.7)) != 0.0
    _, t = msir.jvp(_sin_ramp, (0.3, 3.1, 1.7), (1.0, 1.0, 0.0))
    assert t == 0.0


def _arange_with_numpy(n, m):
    r = np.arange(n)
    return (np.where(r > 2, r, -r), np.where(m, r[:, None], -1), np.zeros_like(r), np.full_like(r * 0.5, 2.5),
            len(r), r.shape, (r[:, None] * np.ones(3)).size, np.arange(n, dtype=np.float16) * np.float16(0.5))


def test_arange_results_in_where_like_len_shape_and_half():
    m = np.array([True, False])
    for n in (np.int64(5), np.int64(0)):
        expected = _arange_with_numpy(n, m)
        got = msir.jit(_arange_with_numpy)(n, m)
        for g, e in zip(got, expected):
            assert np.shape(g) == np.shape(e) and np.asarray(g).dtype == np.asarray(e).dtype, (g, e)
            np.testing.assert_array_equal(g, e)


def _through_if(n, x):
    if x > 0:
        r = np.arange(n)
    else:
        r = np.arange(n) * 2
    return r


def _carried(n):
    r = np.arange(n)
    for i in range(3):
        r = np.arange(n + i)
    return r


def _iterated(n):
    return sum(np.arange(n))


def _sliced(n):
    return np.arange(n)[1:]


def _scanned(n):
    return np.cumsum(np.arange(n))


@pytest.mark.parametrize("fn, error, message, text", [
    (_through_if, ShapeError, "variable 'r' has a runtime length .* cannot leave an if", "if x > 0"),
    (_carried, ShapeError, "variable 'r' has a runtime length .* cross loop iterations", "for i in range"),
    (_iterated, UnsupportedSyntaxError, "cannot iterate over an array of shape \\(\\?,\\)", "sum("),
    (_sliced, UnsupportedSyntaxError, "axis 0 has a runtime length .* only whole", "[1:]"),
    (_scanned, UnsupportedSyntaxError, "does not take an array of runtime length", "np.cumsum"),
], ids=["if", "loop", "iterate", "slice", "numpy-body"])
def test_what_runtime_lengths_cannot_do_is_refused_at_the_users_line(fn, error, message, text):
    args = (np.int64(3), 1.0) if fn is _through_if else (np.int64(3),)
    with pytest.raises(error, match=message) as e:
        msir.jit(fn)(*args)
    lines, first = inspect.getsourcelines(fn)
    assert e.value.loc.line == first + next(i for i, line in enumerate(lines) if text in line)


def _arange_sum(n):
    return np.sum(np.arange(n) * 1.0)


def _compiles_inside(w):
    return w * msir.jit(_arange_sum)(np.int64(4))  # compiled while the eager transformation runs


def _raises_inside(w):
    raise ValueError("from user code")


def test_pynative_transformations_give_np_arange_back_to_numpy():
    original = np.arange
    msir.set_context(mode=msir.PYNATIVE_MODE)
    try:
        assert msir.grad(_compiles_inside)(1.5) == 6.0
        with pytest.raises(ValueError, match="from user code"):
            msir.grad(_raises_inside)(1.5)
    finally:
        msir.set_context(mode=msir.GRAPH_MODE)
    assert np.arange is original


def _linspaces(a, b, n):
    return (np.linspace(a, b, n), np.linspace(a, b, n, endpoint=False), np.linspace(a, b, n, dtype=np.int64),
            np.linspace(b, a, num=n) * np.arange(n))


def _linspace_runtime_loss(a, b, n):
    return np.sum(np.linspace(a, b, n) ** 3) + np.sum(np.linspace(b, a * a, n, endpoint=False) * np.arange(n))


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_linspace_with_a_runtime_num_follows_numpy(n):
    expected = _linspaces(-0.3, 2.5, n)
    for got in (msir.jit(_linspaces)(-0.3, 2.5, np.int64(n)),
                pynative(lambda: msir.jit(_linspaces)(-0.3, 2.5, np.int64(n)))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("argnums", [0, 1])
def test_linspace_with_a_runtime_num_gradients(argnums):
    _check(_linspace_runtime_loss, np.float64(0.7), np.float64(-1.2), np.int64(6), argnums=argnums)


def test_linspace_with_a_negative_runtime_num_is_numpy_s_error_at_the_call():
    with pytest.raises(MsirValueError) as e:
        msir.jit(_linspaces)(-0.3, 2.5, np.int64(-2))
    assert e.value.message == "Number of samples, -2, must be non-negative."
    assert e.value.loc.line == _linspaces.__code__.co_firstlineno + 1


# -- enumerate and zip in compiled code -------------------------------------------------


def _weighted(x, ws):
    total = 0.0
    for i, w in enumerate(ws):  # a tuple of arrays: the loop unrolls
        total = total + (i + 1) * np.sum(w * x)
    for k, (a, b) in enumerate(zip(ws, (2.0, 3.0, 4.0)), start=1):
        total = total + k * b * np.sum(a * x * x)
    for i, row in enumerate(x):
        total = total + i * np.sum(row)
    for j, (p, q) in zip(range(2), zip(x, ws)):
        total = total + j * np.sum(p * q[0])
    return total


def _weighted_x(x):
    return _weighted(x, WS)


WS = (_RNG.standard_normal(4), _RNG.standard_normal(4), _RNG.standard_normal(4))


def test_enumerate_and_zip_unroll_in_both_modes():
    _check(_weighted_x, A)
    np.testing.assert_allclose(msir.grad(_weighted, argnums=1)(A, WS)[2], pynative(
        lambda: msir.grad(_weighted, argnums=1)(A, WS))[2], rtol=1e-12)


def _zip_strict(x, ws):
    return [a * b for a, b in zip(x, ws, strict=True)]


def test_zip_strict_with_different_lengths_is_a_value_error_at_the_call():
    with pytest.raises(ValueError, match=r"zip\(\) arguments have different lengths") as e:
        msir.jit(_zip_strict)(A, WS[:2])
    assert f":{_zip_strict.__code__.co_firstlineno + 1}:" in str(e.value)


# -- the derivative of a function whose output does not depend on its inputs ---------------


def _constant(x, y):
    return 2.5


def _constant_with_aux(x):
    return 1.0, np.sum(x)


def _ignores_x(x, y):
    return np.sum(y * 0.0) + np.sum(np.floor(x)) + 4.0


@pytest.mark.parametrize("mode", ["graph", "pynative"])
def test_the_gradient_of_a_constant_is_zeros_of_the_inputs_shapes(mode):
    def run(thunk):
        return pynative(thunk) if mode == "pynative" else thunk()

    x, y = A.astype(np.float32), V
    gx, gy = run(lambda: msir.grad(_constant, argnums=(0, 1))(x, y))
    assert gx.dtype == np.float32 and gy.dtype == np.float64
    np.testing.assert_array_equal(gx, np.zeros_like(x))
    np.testing.assert_array_equal(gy, np.zeros_like(y))
    value, g = run(lambda: msir.value_and_grad(_ignores_x)(x, y))
    np.testing.assert_allclose(value, _ignores_x(x, y))
    np.testing.assert_array_equal(g, np.zeros_like(x))
    g, aux = run(lambda: msir.grad(_constant_with_aux, has_aux=True)(V))
    np.testing.assert_array_equal(g, np.zeros_like(V))
    np.testing.assert_allclose(aux, np.sum(V))
    out, tangent = run(lambda: msir.jvp(_constant, (x, y), (np.ones_like(x), np.ones_like(y))))
    assert out == 2.5 and tangent == 0.0
    out, vjp_fn = run(lambda: msir.vjp(_constant, x, y))
    np.testing.assert_array_equal(vjp_fn(np.float64(1.0))[0], np.zeros_like(x))


# -- float32 throughout, and long arrays (the vectorised code paths) ---------------------


@pytest.mark.parametrize("loss", [_arctan2_loss, _logaddexp_loss, _triangle_loss, _cumsum_loss, _cumprod_loss,
                                  _norm_loss, _eye_loss], ids=lambda f: f.__name__)
def test_float32_gradients_stay_float32(loss):
    args = (A.astype(np.float32), B.astype(np.float32))[: loss.__code__.co_argcount]
    reference = msir.grad(loss)(*(a.astype(np.float64) for a in args))
    for g in (msir.grad(loss)(*args), pynative(lambda: msir.grad(loss)(*args))):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, reference, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_arrays_follow_numpy(dtype):
    rng = np.random.default_rng(5)
    y, x = (rng.standard_normal(4099).astype(dtype) * 3 for _ in range(2))
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(msir.jit(_arctan2)(y, x), np.arctan2(y, x), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(msir.jit(_logaddexp)(y, x), np.logaddexp(y, x), rtol=rtol, atol=rtol)


# -- np.sort, np.argsort -------------------------------------------------------------

SORTED_INPUT = np.array([[0.3, -1.2, 0.3, np.nan, 2.0, -0.0, 0.0],
                         [5.0, 4.0, 3.0, 2.0, 1.0, 0.0, -1.0],
                         [1.0, np.nan, 1.0, -np.inf, np.inf, 1.0, np.nan]])


def _sorts(x, i3):
    return (np.sort(x), np.sort(x, axis=0), np.sort(x, axis=None), np.argsort(x), np.argsort(x, axis=0),
            np.argsort(x, axis=None, kind="stable"), np.argsort(i3, axis=1), np.sort(i3, axis=-1),
            np.argsort(x[0] > 0))


def test_sort_and_argsort_follow_numpy_stable_with_ties_and_nans():
    """Stable (kind='stable') order: ties keep their positions, NaN sorts last, -0.0 == 0.0."""
    i3 = np.random.default_rng(5).integers(0, 3, (2, 4, 5))
    expected = (np.sort(SORTED_INPUT), np.sort(SORTED_INPUT, axis=0), np.sort(SORTED_INPUT, axis=None),
                *(np.argsort(SORTED_INPUT, axis=a, kind="stable") for a in (-1, 0, None)),
                np.argsort(i3, axis=1, kind="stable"), np.sort(i3), np.argsort(SORTED_INPUT[0] > 0, kind="stable"))
    for got in (msir.jit(_sorts)(SORTED_INPUT, i3), pynative(lambda: msir.jit(_sorts)(SORTED_INPUT, i3))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def _sort_loss(x):
    top = np.sort(x, axis=1)[:, -2:]  # the two largest of each row
    return np.sum(top * np.array([1.0, 3.0])) + np.sum(np.sort(x, axis=0)[0] ** 2)


def _median_of_rows(x):
    return np.sum(np.take_along_axis(x, np.argsort(x, axis=-1), axis=-1)[:, 1] * np.arange(1.0, 4.0))


def test_sort_gradients_scatter_back_through_the_permutation():
    x = np.random.default_rng(6).standard_normal((3, 4))
    _check(_sort_loss, x)
    _check(_median_of_rows, x)


def test_sort_refuses_structured_order_and_unknown_kinds_at_the_call():
    def by_order(x):
        return np.sort(x, order="f")

    def bad_kind(x):
        return np.argsort(x, kind="bogo")

    with pytest.raises(msir.errors.UnsupportedSyntaxError, match="`order`") as info:
        msir.jit(by_order)(A)
    assert info.value.loc.line == by_order.__code__.co_firstlineno + 1
    with pytest.raises(ValueError, match="sort kind must be one of") as info:
        msir.jit(bad_kind)(A)
    assert info.value.loc.line == bad_kind.__code__.co_firstlineno + 1
    with pytest.raises(ValueError, match="sort kind must be one of"):
        pynative(lambda: msir.grad(lambda x: np.sum(np.sort(x, kind="bogo")))(A))


# -- np.isnan, np.isinf, np.isfinite -------------------------------------------------


def _float_classes(x, i):
    return np.isnan(x), np.isinf(x), np.isfinite(x), np.isnan(i), np.isinf(i), np.isfinite(i), np.isnan(2.5)


def _masked_mean(x):
    ok = np.isfinite(x)
    return np.sum(np.where(ok, x, 0.0) ** 2) / np.sum(ok)


def test_float_classes_follow_numpy():
    x = np.array([0.0, -np.inf, np.nan, 1.5, np.inf, -0.0]).astype(np.float32)
    i = np.array([1, -3, 0])
    expected = _float_classes(x, i)
    for got in (msir.jit(_float_classes)(x, i), pynative(lambda: msir.jit(_float_classes)(x, i))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def test_a_mean_over_the_finite_elements_differentiates():
    x = np.array([0.5, np.inf, -1.25, np.nan, 2.0])
    expected = _masked_mean(x)
    np.testing.assert_allclose(msir.jit(_masked_mean)(x), expected, rtol=1e-12)
    grad = np.where(np.isfinite(x), 2 * np.where(np.isfinite(x), x, 0.0) / 3, 0.0)
    np.testing.assert_allclose(msir.grad(_masked_mean)(x), grad, rtol=1e-12)
    np.testing.assert_allclose(pynative(lambda: msir.grad(_masked_mean)(x)), grad, rtol=1e-12)


def _argsort_method(x):
    return x.argsort(), x.argsort(axis=0), np.take_along_axis(x, x.argsort(), axis=-1).sum()


def test_the_argsort_method_follows_numpy():
    expected = _argsort_method(A)
    for got in (msir.jit(_argsort_method)(A), pynative(lambda: msir.jit(_argsort_method)(A))):
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(pynative(lambda: msir.grad(lambda x: _argsort_method(x)[2])(A)), np.ones_like(A))


# -- np.tan, np.sinh, np.cosh, np.round, np.diff, np.hstack / np.vstack, comparisons ----------------
# Functions that were missing and are common in scientific code (counted in scikit-learn,
# SciPy and Matplotlib): each a composite of existing primitives, in both modes.

HYPER_X = np.array([-705.0, -3.2, -1.0, -0.999, -1e-10, -0.0, 0.0, 1e-12, 0.3, 0.999, 1.0, 2.5, 709.0])


def _hyper(x):
    return np.tan(x), np.sinh(x), np.cosh(x)


def _hyper_loss(x):
    return np.sum(np.tan(x) * np.sinh(x) + np.cosh(x) ** 2)


def test_tan_sinh_cosh_follow_numpy():
    for x in (HYPER_X, HYPER_X.astype(np.float32)[1:-1], np.array([0, 1, -2])):
        expected = _hyper(x)
        for got in (msir.jit(_hyper)(x), pynative(lambda: msir.jit(_hyper)(x))):
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype
                np.testing.assert_allclose(g, e, rtol=4e-6 if e.dtype == np.float32 else 2e-13, atol=0)
                assert np.array_equal(np.signbit(g), np.signbit(e))  # sinh(-0.0) is -0.0


def test_tan_sinh_cosh_gradients():
    _check(_hyper_loss, np.array([-1.3, -0.9, -0.2, 0.4, 0.95, 1.1, 2.0]))


def test_sinh_gradient_stays_finite_where_its_other_branch_would_overflow(mode):
    x = np.array([-705.0, 705.0, 0.5])
    np.testing.assert_allclose(msir.grad(lambda v: np.sum(np.sinh(v)))(x), np.cosh(x), rtol=1e-12)


ROUND_X = np.array([-2.5, -1.5, -0.5, -0.4, 0.5, 1.5, 2.5, 2.675, 1.005, 1234.5678, -0.0, 0.04, np.nan, np.inf,
                    -np.inf, 4.5e15 + 0.5, 2.0 ** 60])


def _rounds(x, i):
    return np.round(x), np.round(x, 2), np.around(x, -2), np.round(x * 0.1, 1), np.round(i), np.round(i, 3)


def test_round_follows_numpy_half_to_even():
    i = np.array([15, -25, 7], np.int32)
    for x in (ROUND_X, ROUND_X.astype(np.float32)):
        expected = _rounds(x, i)
        for got in (msir.jit(_rounds)(x, i), pynative(lambda: msir.jit(_rounds)(x, i))):
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype
                np.testing.assert_array_equal(g, e)
                assert np.array_equal(np.signbit(g), np.signbit(e))


def test_round_has_zero_gradient():
    # away from the jumps, d/dx sum(round(x, 1) * x) is round(x, 1)
    _check(lambda x: np.sum(np.round(x, 1) * x + np.round(x) ** 2), np.array([-1.33, -0.52, 0.18, 0.77, 2.61]))


def _round_ints_negative(i):
    return np.round(i, -1)


def test_round_of_integers_to_negative_decimals_is_refused_at_the_call():
    with pytest.raises(UnsupportedSyntaxError, match="integer array to negative decimals") as e:
        msir.jit(_round_ints_negative)(np.array([15, 25]))
    assert e.value.loc.line == _round_ints_negative.__code__.co_firstlineno + 1


def _diffs(x, i, b):
    return (np.diff(x), np.diff(x, 2), np.diff(x, axis=0), np.diff(x, n=3, axis=1), np.diff(x, 0), np.diff(x, 9),
            np.diff(i), np.diff(b))


def test_diff_follows_numpy():
    x = np.arange(12.0).reshape(3, 4) ** 2
    i, b = np.array([3, -1, 4, 4], np.int32), np.array([True, True, False, True])
    expected = _diffs(x, i, b)
    for got in (msir.jit(_diffs)(x, i, b), pynative(lambda: msir.jit(_diffs)(x, i, b))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)


def test_diff_gradients():
    _check(lambda x: np.sum(np.diff(x, 2, axis=1) ** 2) + np.sum(np.sin(np.diff(x, axis=0))), A)


def _diff_negative(x):
    return np.diff(x, -1)


def _diff_scalar(x):
    return np.diff(x[0, 0])


def test_diff_errors_are_numpy_s_at_the_call():
    for fn, message in ((_diff_negative, "order must be non-negative but got -1"),
                        (_diff_scalar, "diff requires input that is at least one dimensional")):
        with pytest.raises(MsirValueError, match=message) as e:
            msir.jit(fn)(A)
        assert e.value.loc.line == fn.__code__.co_firstlineno + 1


def _stacks(x, v, s):
    return (np.hstack([x, x]), np.hstack((v, v * 2, s)), np.hstack([s, 1.5]), np.vstack([x, v[:4]]),
            np.vstack((v, v)), np.vstack([s, s]), np.hstack([np.ones(2, np.int32), v[:1]]))


def _stack_loss(x, v):
    return np.sum(np.hstack([x, x * x]) ** 2) + np.sum(np.vstack([v, np.sin(v)]) * np.arange(10.0).reshape(2, 5))


def test_hstack_and_vstack_follow_numpy():
    s = np.float64(0.5)
    expected = _stacks(A, V, s)
    for got in (msir.jit(_stacks)(A, V, s), pynative(lambda: msir.jit(_stacks)(A, V, s))):
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("argnums", [0, 1])
def test_hstack_and_vstack_gradients(argnums):
    _check(_stack_loss, A, V, argnums=argnums)


def _comparisons_and_shapes(x, y):
    return (np.equal(x, y), np.not_equal(x, 0.5), np.less(x, y), np.less_equal(x, y), np.greater(y, x),
            np.greater_equal(x, 1), np.shape(x), np.size(x), np.ndim(x), np.ravel(x), np.copy(x) * 2)


def test_comparison_functions_and_shape_utilities_follow_numpy():
    x, y = A.copy(), A.copy()
    y[0, 0], y[1, 2] = 9.0, -9.0
    expected = _comparisons_and_shapes(x, y)
    for got in (msir.jit(_comparisons_and_shapes)(x, y), pynative(lambda: msir.jit(_comparisons_and_shapes)(x, y))):
        for g, e in zip(got, expected):
            assert np.shape(g) == np.shape(e) and np.asarray(g).dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(g, e)
    _check(lambda x: np.sum(np.ravel(x) * np.arange(12.0)) + np.sum(np.copy(x) ** 2) / np.size(x), A)


def _closeness(x, y, i):
    return (np.isclose(x, y), np.isclose(x, y, rtol=0.1, atol=0.0, equal_nan=True), np.allclose(x, x + 1e-9),
            np.allclose(x, y), np.isclose(i, 3), np.count_nonzero(x), np.count_nonzero(x > 0.5, axis=0),
            np.count_nonzero(i, keepdims=True))


def test_isclose_allclose_and_count_nonzero_follow_numpy():
    x = np.array([[1.0, np.nan, np.inf, -np.inf], [0.0, 1e-9, 2.0, 5.0]])
    y = np.array([[1.0 + 1e-6, np.nan, np.inf, np.inf], [1e-8, 0.0, 2.15, 5.4]])
    i = np.array([3, 0, 4], np.int32)
    expected = _closeness(x, y, i)
    for got in (msir.jit(_closeness)(x, y, i), pynative(lambda: msir.jit(_closeness)(x, y, i))):
        for g, e in zip(got, expected):
            assert np.shape(g) == np.shape(e) and np.asarray(g).dtype == np.asarray(e).dtype, (g, e)
            np.testing.assert_array_equal(g, e)


def _averages(x, w, v):
    return (np.average(x), np.average(x, axis=1), np.average(x, axis=0, weights=v[:3]),
            np.average(x, weights=w, returned=True), np.average(x, axis=1, keepdims=True, returned=True),
            np.atleast_1d(v[0]), np.atleast_2d(v), np.atleast_2d(x), np.atleast_1d(v[0], x))


def _average_loss(x, v):
    return np.sum(np.average(x, axis=0, weights=v[:3] ** 2) ** 2) + np.average(x, weights=np.abs(x) + 1.0)


def test_average_and_atleast_follow_numpy():
    w = np.abs(B) + 0.5
    expected = _averages(A, w, V)
    for got in (msir.jit(_averages)(A, w, V), pynative(lambda: msir.jit(_averages)(A, w, V))):
        for g, e in zip(got, expected):
            for gg, ee in zip(g, e) if isinstance(e, tuple) else ((g, e),):
                assert np.shape(gg) == np.shape(ee) and np.asarray(gg).dtype == np.asarray(ee).dtype, (gg, ee)
                np.testing.assert_allclose(gg, ee, rtol=1e-14)


@pytest.mark.parametrize("argnums", [0, 1])
def test_average_gradients_through_values_and_weights(argnums):
    _check(_average_loss, A, V, argnums=argnums)
