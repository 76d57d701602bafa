"""Matmul epilogues (msir.lowering.blas, "Epilogues"; convert-msir-to-loops,
`_gemm_epilogues`): an elementwise fusion over a product runs on each chunk of
C's rows right after the chunk's gemm, the product computed straight into the
fusion's result.

Checked against float64 NumPy (to the rounding of a k-term dot product) for
shapes the chunking does not divide, f32 and f64, transposed operands, the row
path and the column path (few rows, many columns: the epilogue runs as its own
pass); bitwise against the same function compiled with the epilogue off
(`blas.fuse_epilogues = False`, as MSIR_GEMM_EPILOGUE=0) and across thread
counts; `blas.fused_epilogues()` says which path ran. Gradients through the
fused forward and backward are the unfused ones, bit for bit, and NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest

import msir
from msir.lowering import blas, threads

pytestmark = pytest.mark.skipif(not blas.available(), reason=f"no BLAS: {blas.load_error()}")

RNG = np.random.default_rng(18)


@pytest.fixture(autouse=True)
def _restore():
    before, fuse = threads.get_num_threads(), blas.fuse_epilogues
    yield
    msir.set_num_threads(before)
    blas.fuse_epilogues = fuse


def dense_relu(x, w, b):
    return np.maximum(x @ w + b, 0.0)


def dense_relu_ta(x, w, b):
    return np.maximum(x.T @ w + b, 0.0)


def dense_relu_tb(x, w, b):
    return np.maximum(x @ w.T + b, 0.0)


def dense_gelu(x, w, b):
    z = x @ w + b
    return 0.5 * z * (1.0 + np.tanh(0.7978845608 * (z + 0.044715 * z * z * z)))


def residual(x, w, b):
    return x + np.tanh(x @ w) * b


def _operands(fn, m, k, n, dtype):
    x = RNG.standard_normal((k, m) if fn is dense_relu_ta else (m, k)).astype(dtype)
    w = (RNG.standard_normal((n, k) if fn is dense_relu_tb else (k, n)) / np.sqrt(k)).astype(dtype)
    b = RNG.standard_normal(n).astype(dtype)
    return x, w, b


def _run(fn, args, fuse: bool, threads_: int):
    blas.fuse_epilogues = fuse
    msir.set_num_threads(threads_)
    before = blas.fused_epilogues()
    out = np.asarray(msir.jit(fn)(*args))
    return out, blas.fused_epilogues() - before


# (m, k, n): tall (rows: m >= n), wide with rows for 4 chunks (rows), wide with
# fewer rows (W5's first layer: columns, the epilogue apart); none a multiple of
# the chunking
SHAPES = [(777, 300, 513), (900, 200, 1200), (300, 784, 512)]


@pytest.mark.parametrize("fn", [dense_relu, dense_relu_ta, dense_relu_tb, dense_gelu])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_epilogue_matches_numpy_and_the_unfused_bits(fn, m, k, n, dtype):
    args = _operands(fn, m, k, n, dtype)
    ref = fn(*[a.astype(np.float64) for a in args])
    fused, ran = _run(fn, args, True, 2)
    assert fused.dtype == dtype and fused.shape == ref.shape
    tol = (1e-6 if dtype == np.float32 else 1e-14) * np.sqrt(k)
    np.testing.assert_allclose(fused, ref, rtol=0, atol=tol * np.abs(ref).max())
    rows = blas.fuses_epilogue(m, n, k, dtype)
    assert ran == (1 if rows else 0)
    for t in (1, 3):  # the chunks depend on the shapes only
        again, _ = _run(fn, args, True, t)
        assert again.tobytes() == fused.tobytes(), f"{t} threads"
    unfused, ran_unfused = _run(fn, args, False, 2)
    assert ran_unfused == 0
    if m >= n or not rows:  # the same chunks of the same products: the same bits
        assert unfused.tobytes() == fused.tobytes()
    else:  # the unfused product is split by columns
        np.testing.assert_allclose(fused, unfused, rtol=0, atol=tol * np.abs(ref).max())


def test_a_residual_epilogue_reads_another_input_of_the_product_shape():
    x = RNG.standard_normal((640, 640)).astype(np.float32)
    w = (RNG.standard_normal((640, 640)) / 25).astype(np.float32)
    b = RNG.standard_normal(640).astype(np.float32)
    got, ran = _run(residual, (x, w, b), True, 2)
    assert ran == 1
    ref = residual(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_a_product_with_another_use_is_not_an_epilogue():
    def two(x, w, b):
        p = x @ w
        return np.maximum(p + b, 0.0), p

    x, w, b = _operands(dense_relu, 512, 256, 512, np.float32)
    blas.fuse_epilogues = True
    before = blas.fused_epilogues()
    r, p = msir.jit(two)(x, w, b)
    assert blas.fused_epilogues() == before
    np.testing.assert_allclose(r, np.maximum(x.astype(np.float64) @ w + b, 0), rtol=0, atol=1e-4)
    np.testing.assert_allclose(p, x.astype(np.float64) @ w, rtol=0, atol=1e-4)


def mlp_loss(w1, b1, w2, b2, x, y):
    h = np.maximum(x @ w1 + b1, 0.0)
    out = np.tanh(h @ w2 + b2)
    return np.mean((out - y) ** 2)


def _mlp_grads_numpy(w1, b1, w2, b2, x, y):
    z1 = x @ w1 + b1
    h = np.maximum(z1, 0.0)
    out = np.tanh(h @ w2 + b2)
    d_out = 2 * (out - y) / out.size
    dz2 = d_out * (1 - out ** 2)
    dh = dz2 @ w2.T
    dz1 = dh * (z1 > 0)
    return x.T @ dz1, dz1.sum(0), h.T @ dz2, dz2.sum(0)


def mlp_grads(w1, b1, w2, b2, x, y):
    return msir.grad(mlp_loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, y)


def test_gradients_through_fused_epilogues_are_the_unfused_ones_and_numpys():
    # batch 600 >= every width: each product is split by rows fused or not, so the bits match
    shapes = [(300, 512), (512,), (512, 256), (256,), (600, 300), (600, 256)]
    args = [(RNG.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for s in shapes]
    blas.fuse_epilogues = True
    msir.set_num_threads(2)
    before = blas.fused_epilogues()
    fused = [np.asarray(g) for g in msir.jit(mlp_grads)(*args)]
    assert blas.fused_epilogues() - before >= 3  # both forward layers and relu's backward mask
    blas.fuse_epilogues = False
    unfused = [np.asarray(g) for g in msir.jit(mlp_grads)(*args)]
    ref = _mlp_grads_numpy(*[a.astype(np.float64) for a in args])
    for got, plain, want in zip(fused, unfused, ref):
        assert got.tobytes() == plain.tobytes()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_a_donated_operand_of_the_product_is_not_overwritten_while_the_gemm_reads_it():
    h = RNG.standard_normal((600, 512)).astype(np.float32)
    w = (RNG.standard_normal((512, 512)) / 23).astype(np.float32)
    b = RNG.standard_normal(512).astype(np.float32)
    ref = np.maximum(h.astype(np.float64) @ w + b, 0.0)
    blas.fuse_epilogues = True
    before = blas.fused_epilogues()
    with pytest.warns(msir.DonationWarning, match="computes its matmul into output 0 before it reads the argument"):
        out = msir.jit(dense_relu, donate_argnums=(0,))(h.copy(), w, b)
    assert blas.fused_epilogues() - before == 1
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def residual_relu(h, w, r0):
    return np.maximum(h @ w + r0, 0.0)


def test_a_donated_input_of_the_epilogue_does_not_receive_the_product_before_it_is_read():
    h = RNG.standard_normal((600, 512)).astype(np.float32)
    w = (RNG.standard_normal((512, 512)) / 23).astype(np.float32)
    r0 = RNG.standard_normal((600, 512)).astype(np.float32)
    ref = np.maximum(h.astype(np.float64) @ w + r0, 0.0)
    blas.fuse_epilogues = True
    with pytest.warns(msir.DonationWarning, match="computes its matmul into output 0 before it reads the argument"):
        out = msir.jit(residual_relu, donate_argnums=(2,))(h, w, r0.copy())
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
