"""The frontend finds a lambda's own definition when several lambdas share a
line: nested ones (an outer lambda whose body holds the inner), side by side,
and with the same or different parameters. Each must compile its own body."""

import numpy as np
import pytest

import msir

X = np.array([0.5, -1.0, 2.0])


def test_the_inner_of_two_nested_lambdas_is_compiled():
    # the outer lambda takes no argument; the inner one is what grad sees
    outer = lambda: msir.grad(lambda x: np.sum(x ** 3.0))(X)  # noqa: E731
    np.testing.assert_allclose(outer(), 3.0 * X**2)


def test_the_outer_of_two_nested_lambdas_is_compiled():
    outer = lambda x: np.sum((lambda y: y * 2.0)(x) + x)  # noqa: E731
    assert msir.jit(outer)(X) == pytest.approx(np.sum(3.0 * X))


def test_side_by_side_lambdas_with_the_same_parameters():
    f, g = (lambda x: x * 2.0), (lambda x: x * 3.0)
    np.testing.assert_allclose(msir.jit(g)(X), 3.0 * X)
    np.testing.assert_allclose(msir.jit(f)(X), 2.0 * X)


def test_nested_lambdas_with_the_same_parameter_name():
    make = lambda x: (lambda x: np.sin(x))(x) + 1.0  # noqa: E731
    np.testing.assert_allclose(msir.jit(make)(X), np.sin(X) + 1.0)
    inner = make.__code__.co_consts  # the inner lambda's code object is a constant of the outer
    inner_fn = [c for c in inner if hasattr(c, "co_name") and c.co_name == "<lambda>"][0]
    fn = type(make)(inner_fn, make.__globals__)
    np.testing.assert_allclose(msir.jit(fn)(X), np.sin(X))
