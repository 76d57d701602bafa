"""msir.matmul through `msir.jit` against NumPy: every np.matmul shape class
(vector/matrix/batched, broadcast batches, 1x1, odd and zero sizes), float32,
float64 and int64, transposed operands read in place, np.dot, and a matmul
inside a gradient.

Each case runs in three lowerings of `_matmul` (convert-msir-to-loops):
"default" (BLAS above the small-size cut-off), "blas" (the cut-off at 0, so every
float product calls `__msir_gemm_*`) and "loops" (`blas.enabled = False`, msir's
own loop kernel, as when scipy-openblas32 is missing). The persistent compile
cache is off in this file so each mode really lowers.

Tolerances: int64 exact; float64 rtol 1e-12; float32 rtol 2e-5 with an absolute
floor of 2e-6 * sqrt(k) * max|a| * max|b| (the BLAS and the loops sum in other
orders than NumPy; a dot product of k terms differs by a few ulp of the terms'
magnitude).
"""

import ctypes
import warnings

import numpy as np
import pytest

import msir
from msir.errors import DonationWarning
from msir.lowering import blas, to_loops

MODES = ["default", "blas", "loops"]


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("MSIR_CACHE", "0")


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    if request.param == "blas":
        if not blas.available():
            pytest.skip(f"no BLAS: {blas.load_error()}")
        monkeypatch.setattr(to_loops, "_BLAS_MIN_MNK", 0)
    elif request.param == "loops":
        monkeypatch.setattr(blas, "enabled", False)
    return request.param


def data(shape, dt, rng):
    if np.dtype(dt).kind == "i":
        return rng.integers(-9, 10, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def close(got, a, b, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype, expected.shape)
    if expected.dtype.kind == "i":
        np.testing.assert_array_equal(got, expected)
    elif expected.dtype == np.float64:
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * max(1, a.shape[-1]))
    else:
        k = a.shape[-1]
        scale = (np.abs(a).max(initial=0) * np.abs(b).max(initial=0)) or 1.0
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6 * np.sqrt(max(k, 1)) * scale)


def mm(a, b):
    return a @ b


def mm_fn(a, b):
    return np.matmul(a, b)


def dot(a, b):
    return np.dot(a, b)


def tn(a, b):
    return a.T @ b


def nt(a, b):
    return a @ b.T


def tt(a, b):
    return a.T @ b.T


def batched_tn(a, b):
    return np.matmul(np.transpose(a, (0, 2, 1)), b)


def t_used_twice(a, b):
    at = a.T
    return at @ b + at @ (b * 2.0)


def t_also_returned(a, b):
    at = a.T
    return at @ b, at


SHAPES = [
    ((7,), (7,)),  # vector . vector -> scalar
    ((7,), (7, 5)),  # vector . matrix
    ((3, 7), (7,)),  # matrix . vector
    ((3, 7), (7, 5)),
    ((1, 1), (1, 1)),
    ((3, 5), (5, 7)),
    ((4, 3, 5), (4, 5, 7)),  # batched
    ((2, 1, 3, 5), (4, 5, 7)),  # broadcast batch on both sides
    ((4, 3, 5), (5, 7)),  # lhs batch folds into the rows of one call
    ((3, 5), (2, 5, 7)),  # rhs batch
    ((7,), (2, 7, 5)),
    ((2, 3, 7), (7,)),
    ((0, 5), (5, 7)),  # zero sizes: m, n, k, batch
    ((3, 5), (5, 0)),
    ((3, 0), (0, 7)),
    ((0,), (0,)),
    ((0, 3, 5), (5, 7)),
    ((65, 130), (130, 33)),  # big enough for the default mode to call the BLAS
    ((3, 40, 50), (3, 50, 60)),
    ((2, 1, 40, 50), (3, 50, 60)),
    ((3, 40, 50), (50,)),
    ((5000,), (5000, 9)),
    ((40000,), (40000,)),
]


@pytest.mark.parametrize("a_shape,b_shape", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64], ids=["f32", "f64", "i64"])
def test_matmul_shapes(mode, a_shape, b_shape, dt):
    rng = np.random.default_rng(len(a_shape) * 100 + len(b_shape))
    a, b = data(a_shape, dt, rng), data(b_shape, dt, rng)
    close(msir.jit(mm)(a, b), a, b, np.matmul(a, b))


def test_np_matmul_spelling(mode):
    rng = np.random.default_rng(7)
    a, b = data((2, 1, 40, 50), np.float32, rng), data((3, 50, 60), np.float32, rng)
    close(msir.jit(mm_fn)(a, b), a, b, np.matmul(a, b))


@pytest.mark.parametrize("fn,a_shape,b_shape", [
    (tn, (7, 3), (7, 5)),
    (nt, (3, 7), (5, 7)),
    (tt, (7, 3), (5, 7)),
    (tn, (130, 65), (130, 33)),
    (nt, (65, 130), (33, 130)),
    (tt, (130, 65), (33, 130)),
    (tn, (130, 65), (130,)),
    (nt, (130,), (33, 130)),
    (batched_tn, (3, 50, 40), (50, 60)),
    (batched_tn, (3, 50, 40), (3, 50, 60)),
    (tn, (0, 3), (0, 5)),
    (t_used_twice, (50, 40), (50, 60)),
    (t_also_returned, (50, 40), (50, 60)),
], ids=lambda x: getattr(x, "__name__", str(x)))
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64], ids=["f32", "f64", "i64"])
def test_transposed_operands(mode, fn, a_shape, b_shape, dt):
    rng = np.random.default_rng(1)
    a, b = data(a_shape, dt, rng), data(b_shape, dt, rng)
    got, expected = msir.jit(fn)(a, b), fn(a, b)
    if isinstance(expected, tuple):
        close(got[0], a.T, b, expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    else:
        close(got, a.T if fn in (tn, tt, t_used_twice) else a, b, expected)


@pytest.mark.parametrize("a_shape,b_shape", [((7,), (7,)), ((3, 7), (7,)), ((7,), (7, 5)), ((64, 70), (70, 50))])
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_np_dot(mode, a_shape, b_shape, dt):
    rng = np.random.default_rng(2)
    a, b = data(a_shape, dt, rng), data(b_shape, dt, rng)
    close(msir.jit(dot)(a, b), a, b, np.dot(a, b))


X32 = np.random.default_rng(3).standard_normal((64, 48)).astype(np.float32)
X64 = X32.astype(np.float64)


def loss32(w):
    return np.sum((X32 @ w) ** 2)


def loss64(w):
    return np.sum((X64 @ w) ** 2)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
def test_matmul_in_gradient(mode, dt):
    """d/dw sum((x @ w)^2) = 2 x^T (x w): the adjoint multiplies by transposes,
    which the lowering reads in place."""
    x, loss = (X32, loss32) if dt == np.float32 else (X64, loss64)
    w = np.random.default_rng(4).standard_normal((48, 40)).astype(dt)
    g = msir.jit(msir.grad(loss))(w)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    expected = 2 * x64.T @ (x64 @ w64)
    assert g.dtype == dt and g.shape == w.shape
    rtol = 1e-4 if dt == np.float32 else 1e-11
    np.testing.assert_allclose(g, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    # and against central finite differences (float64) in a few entries
    if dt == np.float64:
        for i, j in ((0, 0), (17, 5), (47, 39)):
            e = np.zeros_like(w)
            e[i, j] = 1e-6
            fd = (loss64(w + e) - loss64(w - e)) / 2e-6
            assert abs(fd - g[i, j]) <= 1e-5 * max(1.0, abs(fd))


# -- the lowering itself --------------------------------------------------------


def lowered(fn, *args) -> str:
    """The loops-level IR of `fn` traced at `args` (no grad, no fusion)."""
    from msir.frontend.driver import spec_of, trace

    traced = trace(fn, [spec_of(a) for a in args])
    to_loops.lower_module(traced.module)
    return str(traced.module)


def test_blas_call_and_no_transpose_copy():
    if not blas.available():
        pytest.skip(f"no BLAS: {blas.load_error()}")
    a = np.ones((130, 65), np.float32)
    b = np.ones((33, 130), np.float32)
    ir = lowered(tt, a, b)
    assert ir.count("func.call @__msir_gemm_f32(") == 1
    assert "func.func private @__msir_gemm_f32" in ir
    assert "scf.for" not in ir  # neither the transposes nor a zero fill are materialised
    assert "memref.alloc" not in ir
    ir64 = lowered(batched_tn, np.ones((3, 50, 40)), np.ones((50, 60)))
    assert ir64.count("func.call @__msir_gemm_f64(") == 1 and ir64.count("scf.for") == 1  # one call per batch


def test_transpose_with_other_uses_is_materialised():
    a, b = np.ones((50, 40), np.float32), np.ones((50, 60), np.float32)
    ir = lowered(t_also_returned, a, b)
    assert "scf.for" in ir  # the transpose is written to its output by a loop nest


def test_small_and_int_products_stay_on_loops():
    ir = lowered(mm, np.ones((3, 5), np.float32), np.ones((5, 7), np.float32))
    assert "__msir_gemm" not in ir
    ir = lowered(mm, np.ones((64, 64), np.int64), np.ones((64, 64), np.int64))
    assert "__msir_gemm" not in ir


def test_disabled_blas_lowers_to_loops(monkeypatch):
    monkeypatch.setattr(blas, "enabled", False)
    ir = lowered(mm, np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
    assert "__msir_gemm" not in ir and "scf.for" in ir


# -- the library and its trampolines ---------------------------------------------


def _trampoline(name: str):
    import llvmlite.binding as llvm

    addr = llvm.address_of_symbol(name)
    assert addr
    argtypes = [ctypes.c_int64] * 5 + [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] * 3
    return ctypes.CFUNCTYPE(None, *argtypes)(addr)


def test_trampoline_offsets_flags_and_zero_k():
    if not blas.available():
        pytest.skip(f"no BLAS: {blas.load_error()}")
    f = _trampoline(blas.GEMM_SYMBOLS["f64"])
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 7, 3)), rng.standard_normal((2, 5, 7))
    c = np.full((2, 3, 5), np.nan)
    # c[1] = a[1].T @ b[1].T, through element offsets
    f(1, 1, 3, 5, 7, a.ctypes.data, 21, 3, b.ctypes.data, 35, 7, c.ctypes.data, 15, 5)
    np.testing.assert_allclose(c[1], a[1].T @ b[1].T, rtol=1e-13)
    assert np.isnan(c[0]).all()
    # k = 0 writes zeros over garbage (beta = 0), leading dimensions 0 are clamped
    f(0, 0, 3, 5, 0, a.ctypes.data, 0, 0, b.ctypes.data, 0, 5, c.ctypes.data, 0, 5)
    assert (c[0] == 0).all()


def test_threads_setting():
    if not blas.available():
        pytest.skip(f"no BLAS: {blas.load_error()}")
    before = blas.get_num_threads()
    try:
        blas.set_num_threads(1)
        assert blas.get_num_threads() == 1
        a = np.random.default_rng(6).standard_normal((200, 300)).astype(np.float32)
        close(msir.jit(nt)(a, a), a, a, a @ a.T)
    finally:
        blas.set_num_threads(before)
    with pytest.raises(ValueError):
        blas.set_num_threads(0)
    assert isinstance(blas.core_name(), str)


# -- matmul updates: c + alpha * (a @ b) as one BLAS call (to_loops `_gemm_updates`) ---


def lowered_fused(fn, *args) -> str:
    """The loops-level IR of `fn` traced at `args`, fused first (as compiled)."""
    from msir.compiler import make_context
    from msir.frontend.driver import spec_of, trace
    from msir.passes.fuse import MsirFuse

    traced = trace(fn, [spec_of(a) for a in args])
    MsirFuse().apply(make_context(), traced.module)
    to_loops.lower_module(traced.module)
    return str(traced.module)


def sgd_update(w, x, g):
    return w - 0.1 * (x.T @ g)


def residual(h, w):
    return h + h @ w


def scaled_first(c, a, b):
    return (a @ b) * 2.0 + c


def update_reading_w(w, g):
    return w - 0.1 * (w.T @ g)  # the product reads w: w cannot be written in place


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("fn,shapes", [
    (sgd_update, [(64, 48), (32, 64), (32, 48)]),
    (residual, [(64, 64), (64, 64)]),
    (scaled_first, [(40, 50), (40, 30), (30, 50)]),
    (update_reading_w, [(64, 64), (64, 64)]),
])
def test_matmul_updates_match_numpy(fn, shapes, dt):
    if not blas.available():
        pytest.skip(f"no BLAS: {blas.load_error()}")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(dt) for s in shapes]
    ir = lowered_fused(fn, *args)
    assert ir.count("func.call @__msir_gemm_update_") == 1 and "func.call @__msir_gemm_f" not in ir, ir
    rtol = 1e-5 if dt == np.float32 else 1e-12
    expected = fn(*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(msir.jit(fn)(*args), expected, rtol=rtol, atol=rtol)
    # donated: written over the first argument when nothing else reads it
    first = args[0].copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = msir.jit(fn, donate_argnums=0)(first, *args[1:])
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol)
    refused = [str(w.message) for w in caught if isinstance(w.message, DonationWarning)]
    if fn in (residual, update_reading_w):  # the product reads the first argument
        assert out is not first and any("not elementwise" in m for m in refused), refused
    else:
        assert out is first and not refused, refused
