"""0-size arrays (an empty slice, `np.zeros(0)`, a concatenation with an
empty part) through every transform and the lowering: the constants they
leave have no elements, which xDSL's `is_splat` cannot read
(`msir.ConstantOp.is_splat` answers for them)."""

import numpy as np
import pytest

import msir
from gradcheck import numerical_jvp, numerical_vjp


def with_empty_slices(x):
    e = np.zeros((0, 3))
    return np.sum(x * 2.0) + np.sum(e) + np.sum(x[1:1] * x[2:2])


def concatenated_with_empty(x):
    return np.sum(np.concatenate([x, np.zeros(0)]) ** 2)


def empty_result(x):
    return x[3:1] * 2.0 + np.zeros(0)


X = np.array([0.5, -1.0, 2.0, 0.25])



@pytest.mark.parametrize("f", [with_empty_slices, concatenated_with_empty])
def test_grad_and_jvp(mode, f):
    np.testing.assert_allclose(msir.jit(f)(X), f(X), rtol=1e-14)
    np.testing.assert_allclose(msir.grad(f)(X), numerical_vjp(lambda xs: f(*xs), [X], np.float64(1.0), 0), rtol=1e-6)
    t = np.array([1.0, 0.5, -0.25, 2.0])
    value, tangent = msir.jvp(f, (X,), (t,))
    assert value == pytest.approx(f(X))
    assert tangent == pytest.approx(numerical_jvp(lambda xs: f(*xs), [X], [t]), rel=1e-6)


def test_an_empty_result_and_its_vjp(mode):
    out, vjp_fn = msir.vjp(empty_result, X)
    assert out.shape == (0,) and out.dtype == np.float64
    (cotangent,) = vjp_fn(np.zeros(0))
    np.testing.assert_array_equal(cotangent, np.zeros(4))
