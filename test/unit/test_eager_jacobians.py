"""`jacrev`, `jacfwd` and `hessian` in PYNATIVE mode (they raised "unknown
transformation kind"): the same Jacobians as compiled code and finite
differences, with tuple argnums, `has_aux` and a non-differentiated argument."""

import numpy as np
import pytest

import msir
from gradcheck import numerical_jvp

X = np.array([0.3, -0.7, 1.1])
Y = np.array([[0.5, 2.0], [-1.0, 0.25], [0.1, 0.4]])


def field(x, y, scale):
    return np.tanh(x @ y) * scale + np.sum(x ** 2)


def energy(x):
    return np.sum(np.sin(x) ** 2) + np.prod(x)


def finite_jacobian(f, x):
    cols = [numerical_jvp(lambda xs: f(*xs), [x], [e]) for e in np.eye(x.size).reshape((x.size,) + x.shape)]
    return np.stack(cols, axis=-1).reshape(np.shape(f(x)) + x.shape)


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_jacobians_match_compiled_code_and_finite_differences(kind):
    transform = getattr(msir, kind)
    compiled = transform(field, argnums=(0, 1))(X, Y, 3.0)
    msir.set_context(mode=msir.PYNATIVE_MODE)
    eager = transform(field, argnums=(0, 1))(X, Y, 3.0)
    single = transform(field)(X, Y, 3.0)
    msir.set_context(mode=msir.GRAPH_MODE)
    assert eager[0].shape == (2, 3) and eager[1].shape == (2, 3, 2)
    for e, c in zip(eager, compiled):
        np.testing.assert_allclose(e, c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(single, eager[0], rtol=1e-12)
    np.testing.assert_allclose(eager[0], finite_jacobian(lambda x: field(x, Y, 3.0), X), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_has_aux_returns_the_aux_as_it_is(kind):
    def with_aux(x):
        return np.sin(x) * 2.0, np.sum(x)

    msir.set_context(mode=msir.PYNATIVE_MODE)
    jac, aux = getattr(msir, kind)(with_aux, has_aux=True)(X)
    np.testing.assert_allclose(jac, np.diag(2.0 * np.cos(X)), rtol=1e-12, atol=1e-15)
    assert aux == pytest.approx(np.sum(X))


def test_hessian_in_both_modes():
    compiled = msir.hessian(energy)(X)
    msir.set_context(mode=msir.PYNATIVE_MODE)
    eager = msir.hessian(energy)(X)
    np.testing.assert_allclose(eager, compiled, rtol=1e-12, atol=1e-12)
    gradient = msir.grad(energy)
    np.testing.assert_allclose(eager, finite_jacobian(lambda x: gradient(x), X), rtol=1e-6, atol=1e-8)
