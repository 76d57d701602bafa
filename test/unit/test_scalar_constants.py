"""Python scalars in traced code: the frontend emits one constant per (block,
dtype, bits) and reuses it (`TranslatorBase.constant`). These pin what the
reuse must not change: signed zeros and NaN stay what they were, ints and
bools of one dtype agree, a constant made in a branch whose ops move to the
enclosing block still dominates its uses, and derivatives through a shared
constant are the sum of its uses'."""

import numpy as np
import pytest

import msir
from gradcheck import numerical_vjp

X = np.array([0.5, -1.0, 2.0, 0.25])


def signed_zeros(x):
    return x * 0.0, x * -0.0, (x * 0.0) * -1.0, -0.0 - x * 0.0, x * 0.0 + 0.0


def test_signed_zeros_keep_their_sign(mode):
    got = msir.jit(signed_zeros)(X)
    for g, want in zip(got, signed_zeros(X)):
        np.testing.assert_array_equal(np.signbit(g), np.signbit(want))
        np.testing.assert_array_equal(g, want)


def nan_and_inf(x):
    return x * np.nan + 1.0, x * np.inf, x * -np.inf, np.minimum(x, np.inf) * 1.0


def test_nan_and_infinities(mode):
    for g, want in zip(msir.jit(nan_and_inf)(X), nan_and_inf(X)):
        np.testing.assert_array_equal(g, want)


def ints_and_bools(i):
    return i + 1, i * True, (i + True) - 1, i * 1 + 0


def test_int_and_bool_scalars_of_one_dtype():
    i = np.array([3, -2, 7], dtype=np.int32)
    for g, want in zip(msir.jit(ints_and_bools)(i), ints_and_bools(i)):
        assert g.dtype == want.dtype
        np.testing.assert_array_equal(g, want)


def branch_then_outer(x, n):
    if n < 0:
        raise ValueError("negative")
    else:
        y = x * 0.5 + 2.0
    return y * 0.5 + 2.0


def test_a_constant_from_a_branch_moved_to_the_enclosing_block():
    # the raising branch's sibling is traced in a block of its own and its ops
    # move after the msir.if: its 0.5 and 2.0 must not be reused from the
    # branch block by later code, nor the later ones lost
    f = msir.jit(branch_then_outer)
    np.testing.assert_array_equal(f(X, 3), branch_then_outer(X, 3))
    with pytest.raises(ValueError, match="negative"):
        f(X, -1)


def shared(x):
    a = x * 0.5
    b = (x * 0.5) ** 2
    return np.sum(a + b * 0.5)


def test_gradient_through_a_shared_constant(mode):
    g = msir.grad(shared)(X)
    np.testing.assert_allclose(g, numerical_vjp(lambda xs: shared(*xs), [X], np.float64(1.0), 0), rtol=1e-7)
    np.testing.assert_allclose(g, 0.5 + 0.5 * 2 * (X * 0.5) * 0.5, rtol=1e-14)
