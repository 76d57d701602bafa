"""The BLAS inside msir's thread pool (msir.lowering.blas, "Threads").

A large product is split along the longer of m and n into chunks of msir's
pool, each one single-threaded OpenBLAS call; the chunks depend on the shapes
only, so results are bitwise equal across thread counts and match float64
NumPy to the f32/f64 rounding of a k-term dot product. Small products (a
recurrent step's) are one call, never split. OpenBLAS's own thread count
follows `msir.set_num_threads` (read back from the library) and its pool,
which msir's calls never use, does not spin when idle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import msir
from msir.lowering import blas, threads

pytestmark = pytest.mark.skipif(not blas.available(), reason=f"no BLAS: {blas.load_error()}")


@pytest.fixture(autouse=True)
def _restore_threads():
    before = threads.get_num_threads()
    yield
    msir.set_num_threads(before)


def nn(a, b):
    return a @ b


def tn(a, b):
    return a.T @ b


def nt(a, b):
    return a @ b.T


def tt(a, b):
    return a.T @ b.T


def update(c, a, b):
    return c + a @ b


RNG = np.random.default_rng(11)


def _operands(fn, m, k, n, dtype):
    a_shape = (k, m) if fn in (tn, tt) else (m, k)
    b_shape = (n, k) if fn in (nt, tt) else (k, n)
    return RNG.standard_normal(a_shape).astype(dtype), RNG.standard_normal(b_shape).astype(dtype)


def _bitwise_across_thread_counts(f, *args):
    results = []
    split = []
    for n in (1, 2, 3):
        msir.set_num_threads(n)
        before = blas.split_gemms()
        results.append(np.asarray(f(*args)))
        split.append(blas.split_gemms() - before)
    for n, r in zip((2, 3), results[1:]):
        assert r.tobytes() == results[0].tobytes(), f"{n} threads"
    return results[0], split


# (m, k, n): tall (split by rows of C), wide (split by columns), both odd-sized
@pytest.mark.parametrize("fn", [nn, tn, nt, tt])
@pytest.mark.parametrize("m,k,n", [(700, 300, 90), (90, 300, 700)])
def test_split_products_match_numpy_and_are_bitwise_equal_across_thread_counts(fn, m, k, n):
    for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        a, b = _operands(fn, m, k, n, dtype)
        got, split = _bitwise_across_thread_counts(msir.jit(fn), a, b)
        ref = fn(a.astype(np.float64), b.astype(np.float64))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.sqrt(k) * np.abs(ref).max())
        assert split == [1, 1, 1]  # split whatever the thread count: the same chunks


def test_split_matmul_update_matches_numpy():
    a, b = _operands(nn, 640, 200, 150, np.float32)
    c = RNG.standard_normal((640, 150)).astype(np.float32)
    got, split = _bitwise_across_thread_counts(msir.jit(update), c, a, b)
    ref = c + a.astype(np.float64) @ b
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.sqrt(200) * np.abs(ref).max())
    assert split == [1, 1, 1]


def test_a_recurrent_step_product_is_one_call():
    # W6: h = tanh(W @ h + U @ x_t) with hidden 128, batch 32 (1 MFLOP)
    w, h = _operands(nn, 128, 128, 32, np.float32)
    got, split = _bitwise_across_thread_counts(msir.jit(nn), w, h)
    assert split == [0, 0, 0]
    np.testing.assert_allclose(got, w.astype(np.float64) @ h, rtol=0, atol=1e-4)


def test_workers_run_chunks_of_a_split_product():
    a, b = _operands(nn, 1024, 256, 256, np.float32)
    f = msir.jit(nn)
    msir.set_num_threads(2)
    before = threads.worker_chunks()
    for _ in range(100):  # a worker the OS does not run in time leaves its chunks to the caller
        f(a, b)
        if threads.worker_chunks() > before:
            break
    assert threads.worker_chunks() > before


def test_openblas_thread_count_follows_set_num_threads():
    a, b = _operands(nn, 700, 300, 90, np.float32)
    f = msir.jit(nn)
    for n in (3, 1, 2):
        msir.set_num_threads(n)
        assert blas.get_num_threads() == n  # read back from OpenBLAS
        f(a, b)  # single-threaded inside the call, restored after it
        assert blas.get_num_threads() == n


IDLE = textwrap.dedent(
    """
    import time
    import numpy as np
    import msir

    def mm(a, b):
        return a @ b

    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    f = msir.jit(mm)
    for _ in range(5):
        f(a, a)
    t0, c0 = time.perf_counter(), time.process_time()
    time.sleep(0.5)
    print(time.process_time() - c0, time.perf_counter() - t0)
    """
)


def test_no_thread_spins_after_a_product(tmp_path):
    # OpenBLAS's default makes an idle thread spin 2^28 cycles (~0.1 s of a
    # core) after every call; msir's workers sleep within ~0.1 ms
    script = tmp_path / "idle.py"
    script.write_text(IDLE)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env.update(MSIR_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         check=True, timeout=300).stdout
    cpu_s, wall_s = map(float, out.split())
    assert wall_s >= 0.5
    assert cpu_s < 0.02, f"{cpu_s * 1e3:.1f} ms of CPU while idle for {wall_s:.2f} s"


def rnn_loss(w, u, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(w @ h + u @ xs[t])
    return np.sum(h)


def test_rnn_gradient_is_serial_at_two_threads():
    # W6's sizes (hidden 128, batch 32, input 32), fewer steps: every product
    # and loop is below the cost thresholds, so 2 threads do the 1-thread work
    # (no dispatch, nothing to wait for) and give the same bits
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((128, 128)) * 0.1).astype(np.float32)
    u = (rng.standard_normal((128, 32)) * 0.1).astype(np.float32)
    xs = rng.standard_normal((8, 32, 32)).astype(np.float32)
    h0 = np.zeros((128, 32), np.float32)
    g = msir.grad(rnn_loss, argnums=(0, 1))
    msir.set_num_threads(1)
    one = [np.asarray(x) for x in g(w, u, xs, h0)]
    msir.set_num_threads(2)
    splits, chunks = blas.split_gemms(), threads.worker_chunks()
    two = [np.asarray(x) for x in g(w, u, xs, h0)]
    assert blas.split_gemms() == splits and threads.worker_chunks() == chunks
    assert all(a.tobytes() == b.tobytes() for a, b in zip(one, two))
    eps, i, j = 1e-3, 3, 5
    wp, wm = w.astype(np.float64), w.astype(np.float64)
    wp[i, j] += eps
    wm[i, j] -= eps
    args = (u.astype(np.float64), xs.astype(np.float64), h0.astype(np.float64))
    fd = (rnn_loss(wp, *args) - rnn_loss(wm, *args)) / (2 * eps)
    assert abs(one[0][i, j] - fd) <= 1e-3 * max(1.0, abs(fd))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_matmul_through_msirs_blas_is_numpys(dtype):
    """`blas.matmul` (PYNATIVE's matmuls): np.matmul's shapes, dtype and values for
    batched, broadcast, transposed, strided and reversed operands."""
    rng = np.random.default_rng(5)
    tol = 2e-5 if dtype == np.float32 else 1e-12

    def arr(*shape):
        return rng.standard_normal(shape).astype(dtype)

    cases = [
        (arr(6, 25), arr(64, 25, 30)),  # a weight against a batch (the conv GEMM)
        (arr(3, 1, 4, 5), arr(2, 5, 7)),  # broadcast batch axes
        (arr(25, 6).T, arr(4, 50, 25).transpose(0, 2, 1)),  # both transposed: BLAS flags, no copies
        (arr(6, 25), arr(4, 25, 100)[:, :, ::2]),  # columns with a stride: copied
        (arr(6, 25), arr(4, 25, 10)[::-1]),  # a negative batch stride: copied
        (arr(1, 1), arr(1, 1)),
    ]
    for a, b in cases:
        got, want = blas.matmul(a, b), np.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert blas.matmul(np.ones((2, 2), np.int64), np.ones((2, 2), np.int64)) is None  # NumPy's then
    assert blas.matmul(arr(3), arr(3, 2)) is None


def test_eager_scatter_add_row_by_row_is_np_add_at_bitwise():
    """NumpyBuilder.scatter_add adds row by row when each row's indices are
    distinct (im2col tables): the same bits as np.add.at; repeated indices in
    a row, and scalars, go to np.add.at."""
    from msir.eager.numpy_builder import NumpyBuilder

    B, rng = NumpyBuilder(), np.random.default_rng(2)
    for idx, axis, shape in [(rng.permutation(10)[:6].reshape(2, 3), 1, (4, 10, 3)),
                             (np.array([[0, -1, 2], [3, 3, 1]]), 0, (5, 2)),
                             (np.array([4, -2, 0]), 2, (2, 3, 5)), (np.array(3), 1, (2, 5)),
                             (rng.integers(0, 7, (3, 4, 5)), 1, (2, 7))]:
        u = rng.standard_normal(shape[:axis] + idx.shape + shape[axis + 1:]).astype(np.float32)
        want = np.zeros(shape, np.float32)
        np.add.at(want, (slice(None),) * axis + (idx,), u)
        np.testing.assert_array_equal(B.scatter_add(u, idx, axis, shape), want)
