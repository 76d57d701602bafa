"""Row groups (convert-msir-to-loops): fusions and reductions that keep axis 0
run in one loop over rows with one-row temporaries. Checked against NumPy
through the JIT, on shapes and uses that exercise the group boundaries."""

from __future__ import annotations

import numpy as np
import pytest

import msir


def softmax(x):
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=1, keepdims=True)


def layernorm(x):
    mu = x.mean(axis=1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5)


def escaping(x):  # e is used after the group and returned; m too
    m = x.min(axis=1, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=1)
    return e / s[:, None], e * 2.0, m


def no_keepdims(x, b):  # a trailing-axis broadcast of a row vector, mean without keepdims
    s = (x * b).sum(axis=1)
    return s * 2.0 + 1.0, x.mean(axis=1)


def rank3(x):
    m = x.max(axis=(1, 2), keepdims=True)
    e = np.exp(x - m)
    t = e.sum(axis=1, keepdims=True)
    return e / t, e.prod(axis=2)


def square_rows(x, v):  # v has shape (n,) with n == rows: a trailing broadcast, not per row
    s = x.sum(axis=1)
    return (x + v) * s[:, None] + s[None, :] * 0.0


def _check(fn, *args, rtol=2e-6):
    got = msir.jit(fn)(*args)
    want = fn(*args)
    if not isinstance(want, tuple):
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_layernorm(dtype):
    x = np.random.default_rng(0).standard_normal((37, 19)).astype(dtype)
    x[3, 4] = np.nan
    x[5, :] = -np.inf
    with np.errstate(invalid="ignore"):
        _check(softmax, x)
        _check(layernorm, x)


def test_escaping_values():
    x = np.random.default_rng(1).standard_normal((9, 5)).astype(np.float32)
    _check(escaping, x)


def test_no_keepdims_and_row_vector():
    rng = np.random.default_rng(2)
    _check(no_keepdims, rng.standard_normal((6, 4)), rng.standard_normal(4))


def test_rank3():
    x = np.random.default_rng(3).standard_normal((4, 3, 5)).astype(np.float32)
    _check(rank3, x)


def test_trailing_broadcast_of_row_sized_vector():
    rng = np.random.default_rng(4)
    _check(square_rows, rng.standard_normal((7, 7)), rng.standard_normal(7))
