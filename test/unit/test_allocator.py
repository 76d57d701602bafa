"""msir's caching buffer allocator (lowering/allocator.py)."""

import os
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import msir
from msir.lowering import allocator


def mlp_grad(w1, w2, x):
    h = np.maximum(x @ w1, 0.0)
    return np.sum((h @ w2) ** 2)


def _inputs(n=256):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((n, n), dtype=np.float32) / 16,
        rng.standard_normal((n, n), dtype=np.float32) / 16,
        rng.standard_normal((n, n), dtype=np.float32),
    )


def _reference(w1, w2, x):
    w1, w2, x = (a.astype(np.float64) for a in (w1, w2, x))
    z = x @ w1
    h = np.maximum(z, 0.0)
    y = h @ w2
    dy = 2 * y
    dh = dy @ w2.T
    return x.T @ (dh * (z > 0)), h.T @ dy


def test_intermediates_are_recycled_without_page_faults():
    g = msir.jit(msir.grad(mlp_grad, argnums=(0, 1)))
    args = _inputs()
    for _ in range(3):
        g(*args)
    assert allocator.cached_bytes() > 0  # the 256 KiB intermediates wait in the cache
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        g1, g2 = g(*args)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20
    # Each call has ~1 MiB of intermediates (256 pages if they came fresh from
    # the kernel); the outputs are NumPy's. Recycled blocks fault no pages.
    assert faults < 64, faults
    r1, r2 = _reference(*args)
    np.testing.assert_allclose(g1, r1, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(g2, r2, rtol=2e-3, atol=1e-3)


def shifted_exp(x):
    return np.exp(-x / 1e6) + x


def test_outputs_of_changing_sizes_are_correct_and_recycled():
    """Large outputs are blocks of the allocator, returned when the array dies;
    size classes keep changing shapes correct and the cache bounded."""
    f = msir.jit(shifted_exp)
    for rows in [300, 1000, 7, 300, 5000, 1000, 4999]:
        x = np.arange(rows * 64, dtype=np.float64).reshape(rows, 64)
        for _ in range(2):
            y = f(x)
            np.testing.assert_allclose(y, np.exp(-x / 1e6) + x)
            y[...] = -1.0  # a reused block is never shared with a live array
            z = f(x)
            np.testing.assert_allclose(z, np.exp(-x / 1e6) + x)
            del y, z
    assert 0 < allocator.cached_bytes() <= 512 << 20


def test_release_cached_empties_the_cache():
    g = msir.jit(msir.grad(mlp_grad))
    g(*_inputs())
    allocator.release_cached()
    assert allocator.cached_bytes() == 0
    g1 = g(*_inputs())  # still works after the release
    np.testing.assert_allclose(g1, _reference(*_inputs())[0], rtol=2e-3, atol=1e-3)


def test_concurrent_calls_from_python_threads():
    g = msir.jit(msir.grad(mlp_grad, argnums=(0, 1)))
    args = _inputs(128)
    ref = _reference(*args)
    g(*args)
    errors = []

    def work():
        try:
            for _ in range(30):
                g1, g2 = g(*args)
                np.testing.assert_allclose(g1, ref[0], rtol=2e-3, atol=1e-3)
                np.testing.assert_allclose(g2, ref[1], rtol=2e-3, atol=1e-3)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


HELPER = """
    import numpy as np, msir
    from msir.lowering import allocator
    import test_allocator as t
    g = msir.jit(msir.grad(t.mlp_grad))
    for _ in range(3):
        g(*t._inputs())
    print(allocator.cached_bytes())
"""


def test_limit_zero_disables_caching():
    here = os.path.dirname(__file__)
    r = _run(HELPER, MSIR_BUFFER_CACHE_MB="0", PYTHONPATH=here, MSIR_CACHE="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "0"


def test_bad_limit_is_a_clear_error():
    here = os.path.dirname(__file__)
    r = _run(HELPER, MSIR_BUFFER_CACHE_MB="lots", PYTHONPATH=here, MSIR_CACHE="0")
    assert r.returncode != 0
    assert "MSIR_BUFFER_CACHE_MB must be a number of MiB, got 'lots'" in r.stderr
