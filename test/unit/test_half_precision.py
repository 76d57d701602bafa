"""float16 and bfloat16 as msir dtypes, on the CPU target (which computes them in float32).

References: NumPy itself for float16 (one float32 evaluation and one rounding per
op: bit-exact for arithmetic, within one float16 ulp for transcendentals, whose
float32 results may differ from NumPy's by a float32 ulp); the same float32
evaluation rounded once for bfloat16 (what ml_dtypes' ufuncs do) and for the
accumulations (sums, means, matmuls), which NumPy rounds differently (see
`msir.lowering.widen_half`). Gradients against central differences in float64 of
the float32 function. Every compiled result is checked in GRAPH and PYNATIVE
mode.
"""

from __future__ import annotations

import numpy as np
import pytest

import msir
from msir.dialects.primitives import DTYPES
from msir.errors import DTypeError
from msir.frontend.values import promote

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
HALF = [F16, BF16]
HALF_IDS = ["f16", "bf16"]



def rand(shape, dtype, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def bits(a) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def assert_same(out, ref) -> None:
    """Equal dtypes, shapes and bits (the sign of zeros included), NaN where NaN
    (whose sign NumPy's own loops do not agree on)."""
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out.dtype, out.shape, ref.dtype, ref.shape)
    if out.dtype.itemsize == 2 and out.dtype.kind in "fV":
        nan = np.isnan(ref.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(out.astype(np.float32)), nan)
        np.testing.assert_array_equal(bits(out)[~nan], bits(ref)[~nan])
    else:
        np.testing.assert_array_equal(out, ref)


def _ordered(a) -> np.ndarray:
    """Half bits as integers in the order of the values (-0 next to +0)."""
    b = bits(a).astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def ulps(out, ref) -> int:
    """The largest distance between two half arrays in units of the last place."""
    return int(np.max(np.abs(_ordered(out) - _ordered(ref)))) if np.size(out) else 0


def per_op(fn, *xs):
    """`fn` evaluated in float32 and rounded to the operands' half dtype (ml_dtypes' ufuncs)."""
    return fn(*[x.astype(np.float32) for x in xs]).astype(xs[0].dtype)


# ---------------------------------------------------------------------------
# Promotion: NumPy's np.result_type for every pair of array dtypes
# ---------------------------------------------------------------------------


def numpy_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promotion_of_arrays_is_numpys(a, b):
    try:
        expected = np.result_type(numpy_dtype(a), numpy_dtype(b)).name
    except np.exceptions.DTypePromotionError:
        with pytest.raises(DTypeError, match=f"NumPy has no promotion rule for {a} and {b}: cast one"):
            promote(a, False, b, False)
        return
    assert promote(a, False, b, False) == (expected, False)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("weak", ["bool", "int64", "float64"])
def test_weak_python_scalars_keep_half(half, weak):
    assert promote(half, False, weak, True) == (half, False)
    assert promote(weak, True, half, False) == (half, False)


def scale_and_shift(x):
    return x * 2.5 + 1 - True


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_weak_scalars_in_compiled_code(dtype, mode):
    x = rand((7,), dtype)
    out = msir.jit(scale_and_shift)(x)
    assert out.dtype == dtype
    r = lambda v: v.astype(dtype).astype(np.float32)  # noqa: E731  (one rounding per op)
    x32 = x.astype(np.float32)
    assert_same(out, r(r(r(x32 * 2.5) + 1) - 1).astype(dtype))
    if dtype == F16:
        assert_same(out, scale_and_shift(x))


def mixed(a, b):
    return a + b


@pytest.mark.parametrize("other", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_float16_with_other_arrays_is_numpys(other, mode):
    a, b = rand((5,), F16, 1), rand((5,), np.float64, 2).astype(other)
    assert_same(msir.jit(mixed)(a, b), a + b)


@pytest.mark.parametrize("other", [np.float16, np.int32, np.int64])
def test_bfloat16_without_a_numpy_rule_is_refused_at_the_users_line(other, mode):
    a, b = rand((5,), BF16, 1), rand((5,), np.float32, 2).astype(other)
    with pytest.raises(DTypeError, match=f"NumPy has no promotion rule for bfloat16 and {np.dtype(other).name}") as e:
        msir.jit(mixed)(a, b)
    if mode == msir.GRAPH_MODE:
        assert e.value.loc is not None and e.value.loc.line == mixed.__code__.co_firstlineno + 1


@pytest.mark.parametrize("other", [np.float32, np.float64, np.bool_])
def test_bfloat16_with_other_arrays_is_ml_dtypes(other, mode):
    a, b = rand((5,), BF16, 1), rand((5,), np.float64, 2).astype(other)
    assert_same(msir.jit(mixed)(a, b), a + b)


# ---------------------------------------------------------------------------
# Elementwise values
# ---------------------------------------------------------------------------

EXACT_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "floor_divide": np.floor_divide, "remainder": np.remainder,
}
EXACT_UNARY = {"negative": np.negative, "abs": np.abs, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil,
               "sign": np.sign}
TRANSCENDENTAL = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
                  "log1p": np.log1p, "expm1": np.expm1, "arctan": np.arctan}


def binary_op(fn):
    def f(a, b):
        return fn(a, b)
    return f


def unary_op(fn):
    def f(a):
        return fn(a)
    return f


@pytest.mark.parametrize("name", EXACT_BINARY)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_binary_ops_are_bit_exact(name, dtype, mode):
    fn = EXACT_BINARY[name]
    a, b = rand((9, 33), dtype, 1, -60, 60), rand((9, 33), dtype, 2, 0.01, 3)
    b[0, :4] = [0, -0.0, np.inf, np.nan]
    a[1, :3] = [np.inf, -np.inf, np.nan]
    with np.errstate(all="ignore"):
        ref = fn(a, b) if dtype == F16 else per_op(fn, a, b)
        out = msir.jit(binary_op(fn))(a, b)
    assert_same(out, ref)


@pytest.mark.parametrize("name", EXACT_UNARY)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_exact_unary_ops_are_bit_exact(name, dtype, mode):
    fn = EXACT_UNARY[name]
    x = rand((257,), dtype, 3, -300, 300)
    if name == "sqrt":
        x = np.abs(x)
    x[:3] = [0, np.inf, np.nan]
    ref = fn(x) if dtype == F16 else per_op(fn, x)
    assert_same(msir.jit(unary_op(fn))(x), ref)


@pytest.mark.parametrize("name", TRANSCENDENTAL)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_transcendentals_within_one_half_ulp_of_numpy(name, dtype, mode):
    fn = TRANSCENDENTAL[name]
    x = rand((4096,), dtype, 4, {"log": 0.05, "log1p": -0.9}.get(name, -4), 4)
    out = msir.jit(unary_op(fn))(x)
    ref = fn(x) if dtype == F16 else per_op(fn, x)
    assert out.dtype == dtype
    assert ulps(out, ref) <= 1
    assert np.mean(bits(out) == bits(ref)) > 0.99


def chain(x, y):
    return np.tanh(x * y + 0.5) / (x - 3.0) + np.exp(-x * x) * y


def chain_per_op_f16(x, y):
    """`chain` rounding to float16 after every op, as NumPy's float16 does."""
    r = lambda v: v.astype(np.float16).astype(np.float32)  # noqa: E731
    x, y = x.astype(np.float32), y.astype(np.float32)
    return r(r(r(np.tanh(r(r(x * y) + 0.5))) / r(x - 3.0)) + r(r(np.exp(r(-r(x * x)))) * y)).astype(np.float16)


def test_an_elementwise_chain_rounds_after_every_op_as_numpy(mode):
    x, y = rand((64, 130), F16, 5), rand((64, 130), F16, 6)
    out = msir.jit(chain)(x, y)
    assert out.dtype == F16
    assert ulps(out, chain(x, y)) <= 1
    assert ulps(out, chain_per_op_f16(x, y)) <= 1
    # rounding once at the end would be further from NumPy than per-op rounding
    once = chain(x.astype(np.float32), y.astype(np.float32)).astype(np.float16)
    assert np.mean(bits(out) == bits(chain(x, y))) > np.mean(bits(once) == bits(chain(x, y)))


# ---------------------------------------------------------------------------
# Casts, comparisons, where
# ---------------------------------------------------------------------------


def to(dtype):
    def f(x):
        return x.astype(dtype)
    return f


CAST_SOURCES = {
    "float64": np.array([1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40, np.nan, -np.inf, 1e10, 7e-8,
                         -3.3e-5, 65519.99, 65520.0, 1e-300, -0.0]),
    "float32": np.array([1 + 2.0**-11 + 2.0**-20, 3.4e38, 1e-40, np.nan, -2.5, 65504], np.float32),
    "int64": np.array([2**24 + 2**16 + 1, -7, 70000, 0, 2049], np.int64),
    "int32": np.array([2**24 + 2**16 + 1, -7, 70000, 0, 2049], np.int32),
    "bool": np.array([True, False]),
}


@pytest.mark.parametrize("source", CAST_SOURCES)
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_casts_to_half_round_as_numpy(source, dtype, mode):
    x = CAST_SOURCES[source]
    with np.errstate(all="ignore"):
        assert_same(msir.jit(to(dtype))(x), x.astype(dtype))


@pytest.mark.parametrize("target", ["float64", "float32", "int64", "int32", "bool", "float16", "bfloat16"])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_casts_from_half_are_numpys(target, dtype, mode):
    x = np.array([1.5, -2.5, 0.0, -0.0, 65504, 3.0e-5, 1e-7, 255.9], dtype)
    t = numpy_dtype(target)
    with np.errstate(all="ignore"):
        assert_same(msir.jit(to(t))(x), x.astype(t))


def compare_and_select(x, y):
    return x < y, x == y, x != y, np.where(x > 0, x, 0.5 * x), np.maximum(x, 0.0)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_comparisons_and_where(dtype, mode):
    x, y = rand((40,), dtype, 7), rand((40,), dtype, 8)
    x[:3], y[:3] = [np.nan, 1.0, 2.0], [np.nan, 1.0, 2.0]
    out = msir.jit(compare_and_select)(x, y)
    if dtype == F16:
        ref = compare_and_select(x, y)
    else:
        with np.errstate(invalid="ignore"):  # ml_dtypes warns on comparing NaN
            ref = (x < y, x == y, x != y, np.where(x > 0, x, per_op(lambda v: 0.5 * v, x)),
                   np.maximum(x, BF16.type(0)))
    for o, r in zip(out, ref):
        assert_same(o, r)


# ---------------------------------------------------------------------------
# Reductions and matmul: accumulated in float32, rounded once
# ---------------------------------------------------------------------------


def reductions(x):
    return (np.sum(x, axis=1), np.mean(x, axis=1), np.max(x, axis=1), np.min(x), np.prod(x[:, :8], axis=1),
            np.argmax(x, axis=1), np.sum(x))


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_reductions_accumulate_in_float32(dtype, mode):
    x = rand((6, 1000), dtype, 9, -1, 1)
    out = msir.jit(reductions)(x)
    x32 = x.astype(np.float32)
    ref = [r.astype(dtype) for r in reductions(x32)[:5]] + [np.argmax(x32, axis=1), np.sum(x32).astype(dtype)]
    for o, r in zip(out, ref):
        o, r = np.asarray(o), np.asarray(r)
        assert o.dtype == r.dtype
        # float32 sums in another order differ in float32's last bits, rarely in half's
        assert ulps(o, r) <= 1 if o.dtype.itemsize == 2 else np.array_equal(o, r)
    if dtype == F16:  # along the contiguous axis NumPy's float16 sum does the same
        assert_same(out[0], np.sum(x, axis=1))
        assert_same(out[1], np.mean(x, axis=1))


def column_sums(x):
    return np.sum(x, axis=0)


def test_a_float16_sum_across_rows_is_closer_than_numpys_per_add_rounding(mode):
    x = rand((512, 16), F16, 10, 0, 1)
    out = msir.jit(column_sums)(x)
    exact = np.sum(x.astype(np.float64), axis=0)
    assert out.dtype == F16
    assert np.all(np.abs(out - exact) <= np.abs(np.sum(x, axis=0) - exact) + 0.125)
    np.testing.assert_allclose(out.astype(np.float64), exact, rtol=2**-10)


def product(a, b):
    return a @ b


@pytest.mark.parametrize("shape", [(3, 5, 4), (64, 300, 48)])
@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_matmul_accumulates_in_float32_and_rounds_once(shape, dtype, mode):
    m, k, n = shape
    a, b = rand((m, k), dtype, 11, -1, 1), rand((k, n), dtype, 12, -1, 1)
    out = msir.jit(product)(a, b)
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype)
    assert out.dtype == dtype
    assert ulps(out, ref) <= 1
    if dtype == F16:
        assert ulps(out, a @ b) <= 1


def einsum_bmm(a, b):
    return np.einsum("bij,bjk->bik", a, b)


def test_einsum_in_float16(mode):
    a, b = rand((2, 3, 4), F16, 13), rand((2, 4, 5), F16, 14)
    out = msir.jit(einsum_bmm)(a, b)
    assert out.dtype == F16
    assert ulps(out, (a.astype(np.float32) @ b.astype(np.float32)).astype(F16)) <= 1


# ---------------------------------------------------------------------------
# Control flow, calling convention, caches
# ---------------------------------------------------------------------------


def loop(x, n):
    acc = x
    for _ in range(n):
        acc = acc * 0.5 + x
    if np.sum(acc) > 0:
        acc = acc - 1.0
    return acc


def loop_per_op(x, n):
    r = lambda v: v.astype(x.dtype).astype(np.float32)  # noqa: E731  (one rounding per op)
    acc = x32 = x.astype(np.float32)
    for _ in range(n):
        acc = r(r(acc * 0.5) + x32)
    if np.sum(acc) > 0:
        acc = r(acc - 1)
    return acc.astype(x.dtype)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_loops_and_branches_carry_half(dtype, mode):
    for x in (rand((17,), dtype, 15, 0, 1), rand((17,), dtype, 16, -1, 0)):
        out = msir.jit(loop)(x, 5)
        assert_same(out, loop_per_op(x, 5))


def identity_and_double(x):
    return x, x * 2


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_arguments_and_results(dtype):
    f = msir.jit(identity_and_double)
    x = rand((300, 70), dtype, 17)  # above the allocator's cached size: a native buffer as result
    same, doubled = f(x)
    assert_same(same, x)
    assert_same(doubled, per_op(lambda v: v * 2, x))
    strided = x[:, ::2]
    assert_same(f(strided)[0], strided)
    s = f(dtype.type(1.5))[1]
    assert s.dtype == dtype and float(s) == 3.0


def test_the_dtype_selects_the_compiled_version():
    f = msir.jit(identity_and_double)
    for dtype in (np.float32, F16, BF16, F16):
        out = f(np.ones(4, dtype))[1]
        assert out.dtype == dtype and np.all(out.astype(np.float32) == 2)


def half_constants(x):
    return x + np.float16(0.1) + ml_dtypes.bfloat16(0.1).astype(np.float32)


def test_half_scalar_constructors_in_compiled_code(mode):
    x = rand((5,), np.float32, 18)
    assert_same(msir.jit(half_constants)(x), half_constants(x))


# ---------------------------------------------------------------------------
# Differentiation
# ---------------------------------------------------------------------------


def loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2) * 0.1 + np.mean(w * w)


def central_differences(f, w, x, eps=1e-4):
    g = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        up, down = w.copy(), w.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up, x) - f(down, x)) / (2 * eps)
    return g


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_grad_of_a_half_function_is_half_and_matches_finite_differences(dtype, mode):
    w, x = rand((6, 3), dtype, 19, -0.5, 0.5), rand((4, 6), dtype, 20, -1, 1)
    g = msir.grad(loss)(w, x)
    assert g.dtype == dtype and g.shape == w.shape
    reference = central_differences(loss, w.astype(np.float64), x.astype(np.float64))
    eps = 2.0**-10 if dtype == F16 else 2.0**-7
    np.testing.assert_allclose(g.astype(np.float64), reference, rtol=8 * eps, atol=8 * eps * np.abs(reference).max())


def test_value_and_grad_in_both_modes_agree():
    w, x = rand((6, 3), F16, 21, -0.5, 0.5), rand((4, 6), F16, 22, -1, 1)
    results = []
    for m in (msir.GRAPH_MODE, msir.PYNATIVE_MODE):
        msir.set_context(mode=m)
        try:
            results.append(msir.value_and_grad(loss)(w, x))
        finally:
            msir.set_context(mode=msir.GRAPH_MODE)
    (v0, g0), (v1, g1) = results
    assert np.asarray(v0).dtype == np.asarray(v1).dtype == F16
    assert ulps(np.asarray(v0), np.asarray(v1)) <= 2 and ulps(g0, g1) <= 2


# ---------------------------------------------------------------------------
# Compositions the frontend builds from primitives
# ---------------------------------------------------------------------------


def compositions(x):
    return (np.var(x, axis=1), np.std(x), msir.ops.softmax(x), x ** 2, x ** 0.5, np.clip(x, -0.5, 0.5),
            np.square(x), x.T @ x)


def test_float16_compositions_are_numpys(mode):
    x = rand((4, 6), F16, 23, 0.1, 2)
    out = msir.jit(compositions)(x)
    ref = (np.var(x, axis=1), np.std(x), None, x ** 2, x ** 0.5, np.clip(x, -0.5, 0.5), np.square(x), x.T @ x)
    for o, r in zip(out, ref):
        if r is not None:
            assert ulps(o, r) <= 1 and o.dtype == F16
    softmax = np.exp(x - x.max(axis=-1, keepdims=True))
    softmax = softmax / softmax.sum(axis=-1, keepdims=True)
    assert out[2].dtype == F16 and ulps(out[2], softmax) <= 1


def test_bfloat16_scalars_in_and_out(mode):
    out = msir.jit(identity_and_double)(ml_dtypes.bfloat16(1.5))
    assert all(np.asarray(o).dtype == BF16 for o in out)
    assert float(out[0]) == 1.5 and float(out[1]) == 3.0


def recurrent(w, n):
    h = w
    for _ in range(n):
        h = np.tanh(h * w + 0.1)
    while np.sum(h) > 100.0:
        h = h * 0.5
    return np.sum(h * h)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_grad_through_loops_is_the_same_in_both_modes_and_matches_finite_differences(dtype):
    w = rand((5,), dtype, 24, -1, 1)
    grads = []
    for m in (msir.GRAPH_MODE, msir.PYNATIVE_MODE):
        msir.set_context(mode=m)
        try:
            grads.append(msir.grad(recurrent)(w, 4))
        finally:
            msir.set_context(mode=msir.GRAPH_MODE)
    assert grads[0].dtype == grads[1].dtype == dtype
    assert_same(grads[0], grads[1])
    w64, eps = w.astype(np.float64), 1e-5
    reference = np.array([(recurrent(w64 + eps * e, 4) - recurrent(w64 - eps * e, 4)) / (2 * eps) for e in np.eye(5)])
    tol = 2.0**-10 if dtype == F16 else 2.0**-7
    np.testing.assert_allclose(grads[0].astype(np.float64), reference, rtol=8 * tol, atol=8 * tol * np.abs(reference).max())


# ---------------------------------------------------------------------------
# Large arrays (msir's threads) and donation
# ---------------------------------------------------------------------------


def row_sums(x):
    return np.sum(x, axis=1)


def test_large_half_arrays_split_across_threads_keep_numpys_bits():
    x, y = rand((512, 1024), F16, 25), rand((512, 1024), F16, 26)
    assert ulps(msir.jit(chain)(x, y), chain(x, y)) <= 1
    b = rand((512, 1024), BF16, 27, -1, 1)
    assert ulps(msir.jit(row_sums)(b), np.sum(b.astype(np.float32), axis=1).astype(BF16)) <= 1


def sgd_loss(w, x):
    return np.mean(np.tanh(x @ w) ** 2)


@msir.jit(donate_argnums=(0,))
def sgd_step(w, x):
    return w - 0.1 * msir.grad(sgd_loss)(w, x)


@pytest.mark.parametrize("dtype", HALF, ids=HALF_IDS)
def test_a_donated_half_array_is_updated_in_place(dtype):
    w, x = np.full((4, 3), 0.5, dtype), rand((2, 4), dtype, 28)
    expected = w.astype(np.float32) - 0.1 * msir.grad(sgd_loss)(w.astype(np.float32), x.astype(np.float32))
    address = w.ctypes.data
    updated = sgd_step(w, x)
    assert updated.dtype == dtype and updated.ctypes.data == address
    np.testing.assert_allclose(updated.astype(np.float32), expected, rtol=2.0**-7 if dtype == BF16 else 2.0**-10)
