"""msir's own float32 GEMM (msir.lowering.gemm_kernel): values against float64 NumPy for every
transpose, edge and blocking case, both micro-kernels (AVX-512 12x32 and AVX2 6x16, each where the
CPU runs it), alpha / beta (beta = 0 never reads C), bits independent of the thread count, and the
kernel behind msir's matmuls with `MSIR_GEMM` (epilogues, updates, eager products, the counters).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msir
from msir.lowering import gemm_kernel, threads

try:
    _BEST = gemm_kernel.kernel_shape(gemm_kernel.host_features())
except Exception:  # pragma: no cover - no llvmlite host information
    _BEST = None
# an AVX-512 machine runs both micro-kernels, an AVX2 one the AVX2 kernel only
_SHAPES = {None: [], (8, 6): [(8, 6)], (16, 12): [(16, 12), (8, 6)]}[_BEST]

pytestmark = pytest.mark.skipif(not _SHAPES, reason="this CPU has no micro-kernel of msir's GEMM (x86-64 "
                                                    "with AVX-512F or AVX2 + FMA)")

_KERNELS: dict[tuple, gemm_kernel.Kernel] = {}


def _kernel(shape: tuple[int, int]) -> gemm_kernel.Kernel:
    """The kernel of this shape, built once per test process."""
    if shape not in _KERNELS:
        _KERNELS[shape] = gemm_kernel.build(shape)
    return _KERNELS[shape]


@pytest.fixture(params=_SHAPES, ids=lambda s: f"{s[1]}x{2 * s[0]}")
def kernel(request):
    return _kernel(request.param)


@pytest.fixture(autouse=True)
def _restore_threads():
    before = threads.get_num_threads()
    yield
    msir.set_num_threads(before)


RNG = np.random.default_rng(7)


def _product(kernel, m, n, k, ta, tb, **kw):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    got, flags = kernel.sgemm(a.T.copy() if ta else a, b.T.copy() if tb else b, trans_a=ta, trans_b=tb, **kw)
    return got, a.astype(np.float64) @ b.astype(np.float64), flags


def _close(got, ref, k):
    scale = max(np.abs(ref).max(initial=0.0), 1e-30)
    assert np.abs(got - ref).max(initial=0.0) <= 2e-6 * np.sqrt(max(k, 1)) * scale


# shapes around every block edge: one element, a partial micro-tile, MC (24) and MC_EPILOGUE (48) rows, several
# KC blocks, several NC panels, few rows (the column split), k below the unroll, a step's tail (its last row
# blocks in column blocks, the last of them partial: 97 rows, 1000 columns)
EDGES = [(1, 1, 1), (13, 33, 5), (24, 64, 384), (25, 65, 385), (48, 64, 384), (49, 65, 385), (100, 70, 300),
         (257, 129, 1100), (5, 3000, 7), (7, 2100, 64), (300, 2600, 130), (1024, 33, 3), (97, 1000, 70)]


@pytest.mark.parametrize("ta", [False, True], ids=["a", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["b", "bT"])
@pytest.mark.parametrize("m,n,k", EDGES)
def test_products_match_float64_numpy(kernel, m, n, k, ta, tb):
    got, ref, _ = _product(kernel, m, n, k, ta, tb)
    _close(got, ref, k)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 130), n=st.integers(1, 130), k=st.integers(1, 420), ta=st.booleans(), tb=st.booleans())
def test_random_shapes_match_float64_numpy(m, n, k, ta, tb):
    got, ref, _ = _product(_kernel(_SHAPES[0]), m, n, k, ta, tb)
    _close(got, ref, k)


def test_alpha_and_beta_and_beta_zero_never_reads_c(kernel):
    m, n, k = 77, 90, 500
    c0 = RNG.standard_normal((m, n)).astype(np.float32)
    got, ref, _ = _product(kernel, m, n, k, False, False, c=c0.copy(), alpha=-0.5, beta=2.0)
    _close(got, -0.5 * ref + 2.0 * c0, k)
    garbage = np.full((m, n), np.nan, np.float32)
    got, ref, _ = _product(kernel, m, n, k, False, True, c=garbage, alpha=3.0, beta=0.0)
    _close(got, 3.0 * ref, k)


def test_k_zero_scales_c_and_empty_products_write_nothing(kernel):
    c0 = RNG.standard_normal((20, 30)).astype(np.float32)
    got, _ = kernel.sgemm(np.zeros((20, 0), np.float32), np.zeros((0, 30), np.float32), c=c0.copy(), beta=2.0)
    assert np.array_equal(got, 2.0 * c0)
    got, _ = kernel.sgemm(np.zeros((20, 0), np.float32), np.zeros((0, 30), np.float32),
                          c=np.full((20, 30), np.nan, np.float32))
    assert np.array_equal(got, np.zeros((20, 30), np.float32))
    out = np.full((0, 30), 5.0, np.float32)
    assert kernel.sgemm(np.zeros((0, 4), np.float32), np.ones((4, 30), np.float32), c=out)[0].shape == (0, 30)


def test_nan_and_inf_propagate_like_a_dot_product(kernel):
    a = np.ones((30, 40), np.float32)
    b = np.ones((40, 50), np.float32)
    a[3, 7], b[9, 11] = np.nan, np.inf
    got, _ = kernel.sgemm(a, b)
    with np.errstate(invalid="ignore"):
        ref = a.astype(np.float64) @ b
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(np.isinf(got), np.isinf(ref))


@pytest.mark.parametrize("m,n,k", [(700, 300, 900), (90, 2500, 300)])
def test_bits_do_not_depend_on_the_thread_count_and_large_products_split(kernel, m, n, k):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    results = []
    for t in (1, 2, 3):
        msir.set_num_threads(t)
        got, flags = kernel.sgemm(a, b)
        assert flags & 1  # split over the pool's chunks whatever the thread count
        results.append(got.tobytes())
    assert results[1] == results[0] and results[2] == results[0]


@pytest.mark.parametrize("ta", [False, True], ids=["a", "aT"])
@pytest.mark.parametrize("tb", [False, True], ids=["b", "bT"])
def test_a_sliver_another_thread_holds_is_copied_not_waited_for(kernel, ta, tb):
    """The first panel's slivers all claimed and never packed: every tile of the first step defers and then
    packs a private copy (the path a task takes when the thread packing its sliver is descheduled). It must
    finish and give the bits of the shared panel, whatever the thread count."""
    busy = _busy_kernel((kernel.vw, kernel.mr))
    m, n, k = 200, 300, 700 if not ta else 1100  # 1100: two k steps, the second from the shared panel
    a = RNG.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = RNG.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    other = RNG.standard_normal(b.shape).astype(np.float32)
    for t in (1, 2, 3):
        msir.set_num_threads(t)
        want, _ = kernel.sgemm(a, b, trans_a=ta, trans_b=tb)
        kernel.sgemm(a, other, trans_a=ta, trans_b=tb)  # the cached panel block now holds another B's slivers
        got, flags = busy.sgemm(a, b, trans_a=ta, trans_b=tb)
        assert flags & 1 and got.tobytes() == want.tobytes()


def _busy_kernel(shape: tuple[int, int]) -> gemm_kernel.Kernel:
    key = ("busy", *shape)
    if key not in _KERNELS:
        ref = _kernel(shape)
        _KERNELS[key] = gemm_kernel.Kernel(ref.vw, ref.mr, ref.kc, ref.nc, busy_first_panel=True)
    return _KERNELS[key]


def test_a_small_product_is_one_chunk(kernel):
    msir.set_num_threads(2)
    _, _, flags = _product(kernel, 128, 32, 128, False, False)
    assert flags & 1 == 0


def test_repeated_products_take_their_panels_from_msirs_allocator(kernel):
    """The packed panels (8 MiB at 1024^2) are a cached block of `lowering.allocator`: a repeated call
    touches no fresh page (with the C library's allocator: 512 page faults a call, 1024^3 on Zen 4)."""
    import resource

    msir.set_num_threads(1)  # no worker whose stack is touched for the first time while we count
    a = RNG.standard_normal((512, 1024)).astype(np.float32)
    b = RNG.standard_normal((1024, 1024)).astype(np.float32)
    c = np.empty((512, 1024), np.float32)
    kernel.sgemm(a, b, c=c)
    kernel.sgemm(a, b, c=c)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(4):
        kernel.sgemm(a, b, c=c)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 64


def test_blocking_follows_the_caches():
    for vw, mr in ((16, 12), (8, 6)):
        nr = 2 * vw
        for l2, l3 in ((2 << 20, 105 << 20), (512 << 10, 8 << 20), (1 << 20, 32 << 20), (256 << 10, None),
                       (None, None)):
            kc, nc = gemm_kernel.blocking(vw, mr, l2, l3)
            assert kc % 16 == 0 and 128 <= kc <= gemm_kernel.KC_MAX
            # a micro-panel of A and a sliver of B fit a quarter of L2 together
            assert (mr + nr) * kc * 4 <= (l2 or 512 << 10) // 4 or kc == 128
            panel = (l3 // 8) if l3 else 3 * (l2 or 512 << 10) // 4
            assert nc % nr == 0 and 4 * nr <= nc <= gemm_kernel.NC_MAX
            assert kc * nc * 4 <= panel or nc == 4 * nr
    assert gemm_kernel.blocking(16, 12, 1 << 20, 32 << 20) == (1024, 1024)  # the Zen 4 of the docstring
    assert gemm_kernel.blocking(16, 12, 256 << 10, None) == (368, 128)
    assert gemm_kernel.blocking(8, 6, 512 << 10, 8 << 20) == (1024, 256)


def test_the_micro_kernel_is_chosen_from_the_cpu_features():
    assert gemm_kernel.kernel_shape({"+avx512f", "+avx2", "+fma"}) == (16, 12)
    assert gemm_kernel.kernel_shape({"+avx2", "+fma"}) == (8, 6)
    assert gemm_kernel.kernel_shape({"+avx2"}) is None
    assert gemm_kernel.kernel_shape({"+sse4.2"}) is None


THROUGH_MSIR = textwrap.dedent(
    """
    import numpy as np
    import msir
    from msir.lowering import blas, gemm_kernel

    rng = np.random.default_rng(3)
    def dense_relu(x, w, b):
        return np.maximum(x @ w + b, 0.0)
    def update(c, a, b):
        return c + a @ b
    def mm(a, b):
        return a @ b.T
    out = {"kernel": blas.sgemm_kernel()}
    for m, k, n in ((777, 300, 513), (300, 784, 512), (64, 50, 3000)):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        bits = []
        for t in (1, 2):
            msir.set_num_threads(t)
            before, own_before = blas.fused_epilogues(), blas.own_gemms()
            got = np.asarray(msir.jit(dense_relu)(x, w, b))
            fused = blas.fused_epilogues() - before
            # msir's kernel runs the product exactly when it is msir's float32 GEMM and the product is large
            # enough (64 x 50 x 3000, 19 MFLOP, is not)
            assert blas.own_gemms() - own_before == int(blas.own_sgemm() and gemm_kernel.runs(m, n, k)), (m, k, n)
            bits.append(got.tobytes())
        ref = np.maximum(x.astype(np.float64) @ w + b, 0.0)
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max(), (m, k, n)
        assert fused == int(blas.fuses_epilogue(m, n, k, np.float32)), (m, k, n, fused)
        assert bits[0] == bits[1], (m, k, n)
    a = rng.standard_normal((640, 200)).astype(np.float32)
    bb = rng.standard_normal((200, 150)).astype(np.float32)
    c = rng.standard_normal((640, 150)).astype(np.float32)
    before = blas.split_gemms()
    got = np.asarray(msir.jit(update)(c, a, bb))
    assert blas.split_gemms() - before == 1
    ref = c + a.astype(np.float64) @ bb
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    got = np.asarray(msir.jit(mm)(a, rng.standard_normal((90, 200)).astype(np.float32)))
    assert got.shape == (640, 90)
    e = blas.matmul(rng.standard_normal((3, 50, 60)).astype(np.float32), rng.standard_normal((60, 70)).astype(np.float32))
    assert e.shape == (3, 50, 70)
    print(out["kernel"])
    """
)


@pytest.mark.parametrize("backend", ["msir", "openblas"])
def test_msirs_matmuls_run_in_the_chosen_kernel(tmp_path, backend):
    script = tmp_path / "through_msir.py"
    script.write_text(THROUGH_MSIR)
    env = {**os.environ, "MSIR_GEMM": backend, "MSIR_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith(backend)
