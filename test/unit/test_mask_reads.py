"""Boolean-mask reads whose result size is only known at run time (issue 17):
`x[x > 0]`, `x[m]` with a runtime mask of x's shape or of its leading dims.

Each loss is checked in GRAPH and PYNATIVE mode: its value against NumPy, its
gradient against central differences and its forward-mode tangent against
central differences. Errors are checked by message and the user's line.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from gradcheck import numerical_jvp, numerical_vjp

import msir
from msir.errors import MsirIndexError, MsirValueError, ShapeError, UnsupportedSyntaxError

_RNG = np.random.default_rng(17)
X = _RNG.standard_normal((4, 3))
ROWS = np.array([True, False, True, True])
CELLS = X > 0.2


def _sum_sin_positive(x):
    return np.sum(np.sin(x[x > 0]))


def _mean_positive(x):
    return np.mean(x[x > 0])


def _max_positive(x):
    return np.max(x[x > 0] * 1.5)


def _scaled_rows(x, m):
    return np.sum(x[m] * np.array([1.0, -2.0, 3.0]) + 1.0)


def _mean_rows(x, m):
    return np.mean(np.tanh(x[m]))


def _row_norms(x, m):
    return np.sum(np.sqrt(np.sum(x[m] ** 2, axis=1)))


def _two_reads_one_mask(x):
    return np.sum(x[x > 0] * np.exp(x)[x > 0])


def _cells(x, m):
    return np.sum(x[m] ** 3) - np.min(x[m])


CASES = [
    (_sum_sin_positive, ()),
    (_mean_positive, ()),
    (_max_positive, ()),
    (_scaled_rows, (ROWS,)),
    (_mean_rows, (ROWS,)),
    (_row_norms, (ROWS,)),
    (_two_reads_one_mask, ()),
    (_cells, (CELLS,)),
]


@pytest.mark.parametrize("loss, rest", CASES, ids=[f.__name__ for f, _ in CASES])
def test_value_gradient_and_tangent(mode, loss, rest):
    expected = loss(X, *rest)
    np.testing.assert_allclose(msir.jit(loss)(X, *rest), expected, rtol=1e-12)

    def at(xs):
        return loss(xs[0], *rest)

    fd = numerical_vjp(at, [X], np.float64(1.0), 0)
    np.testing.assert_allclose(msir.grad(loss)(X, *rest), fd, rtol=1e-5, atol=1e-7)
    direction = _RNG.standard_normal(X.shape)
    value, tangent = msir.jvp(lambda x: loss(x, *rest), (X,), (direction,))
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    np.testing.assert_allclose(tangent, numerical_jvp(at, [X], [direction]), rtol=1e-5, atol=1e-7)


def _positive(x):
    return x[x > 0]


def _selected_rows(x, m):
    return x[m, ...] * 2.0


def _mixed_results(x):
    return x[x > 0], (x * 2, np.sum(x[x > 0]))


def test_runtime_size_results(mode):
    positive, (doubled, total) = msir.jit(_mixed_results)(X)
    np.testing.assert_array_equal(positive, X[X > 0])
    np.testing.assert_array_equal(doubled, X * 2)
    assert total == np.sum(X[X > 0])
    np.testing.assert_array_equal(msir.jit(_positive)(X), X[X > 0])
    np.testing.assert_array_equal(msir.jit(_positive)(-np.abs(X)), np.zeros(0))
    np.testing.assert_array_equal(msir.jit(_selected_rows)(X, ROWS), X[ROWS] * 2.0)
    np.testing.assert_array_equal(msir.jit(_selected_rows)(X, ~ROWS), X[~ROWS] * 2.0)
    assert msir.jit(_positive)(X.astype(np.float32)).dtype == np.float32


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _max_of_empty(x):
    return np.max(x[x > 10])


def test_max_of_an_empty_selection_raises_at_run_time():
    assert msir.jit(_max_of_empty)(X * 100) == np.max(X * 100)
    with pytest.raises(MsirValueError, match="zero-size array to reduction operation maximum") as e:
        msir.jit(_max_of_empty)(X)
    assert e.value.loc.line == _line_of(_max_of_empty, "np.max(")


def _two_masks(x, y):
    return np.sum(x[x > 0] * y[y > 0])


def _against_static(x):
    return np.sum(x[x > 0] * np.ones(12))


def _mixed_index(x, m):
    return x[m, 0]


def _wrong_mask_shape(x, m):
    return x[m]


@pytest.mark.parametrize("fn, args, error, message, text", [
    (_two_masks, (X, X), ShapeError, "their runtime lengths come from different masks", "y[y > 0]"),
    (_against_static, (X,), ShapeError, r"shapes \(\?,\) and \(12,\) cannot be broadcast together", "np.ones"),
    (_mixed_index, (X, ROWS), UnsupportedSyntaxError, "a boolean mask index is supported alone", "x[m, 0]"),
    (_wrong_mask_shape, (X, np.ones(3, bool)), MsirIndexError,
     "boolean index did not match indexed array along axis 0; size of axis is 4 but size of corresponding "
     "boolean axis is 3", "x[m]"),
], ids=["two-masks", "against-static", "mixed-index", "mask-shape"])
def test_refused_at_the_users_line(fn, args, error, message, text):
    with pytest.raises(error, match=message) as e:
        msir.jit(fn)(*args)
    assert e.value.loc.line == _line_of(fn, text)


def _native(src: str):
    from xdsl.parser import Parser

    from msir.compiler import compile_module, make_context

    return compile_module(Parser(make_context(), src).parse_module(), "f").native


def test_native_compress_then_expand_round_trips_ints():
    f = _native("""
    func.func @f(%x: tensor<3x2xi64>, %m: tensor<3x2xi1>) -> (tensor<?xi64>, tensor<3x2xi64>) {
      %c = msir.compress %x[%m] : tensor<3x2xi64>, tensor<3x2xi1> to tensor<?xi64>
      %e = msir.expand %c[%m] : tensor<?xi64>, tensor<3x2xi1> to tensor<3x2xi64>
      func.return %c, %e : tensor<?xi64>, tensor<3x2xi64>
    }""")
    x = np.arange(1, 7, dtype=np.int64).reshape(3, 2)
    m = np.array([[True, False], [False, False], [True, True]])
    spread, packed = f(x, m)  # native order: static-shape results (output buffers) first
    np.testing.assert_array_equal(packed, x[m])
    np.testing.assert_array_equal(spread, np.where(m, x, 0))


def test_native_expand_with_too_few_rows_is_an_index_error():
    f = _native("""
    func.func @f(%u: tensor<1x2xf64>, %m: tensor<3xi1>) -> tensor<3x2xf64> {
      %r = msir.expand %u[%m] : tensor<1x2xf64>, tensor<3xi1> to tensor<3x2xf64>
      func.return %r : tensor<3x2xf64>
    }""")
    (got,) = f(np.ones((1, 2)), np.array([False, True, False]))
    np.testing.assert_array_equal(got, [[0, 0], [1, 1], [0, 0]])
    with pytest.raises(MsirIndexError):
        f(np.ones((1, 2)), np.array([True, False, True]))


def _ms_loss(x):
    return np.sum(np.sin(x[x > 0])) + np.mean(x[x > 0] * 2.0)


def test_matches_mindspore(mode):
    """`ops.sum(ops.sin(x[x > 0])) + ops.mean(x[x > 0] * 2.0)` and its `ms.grad`,
    computed by MindSpore 2.10.0 (CPU, PYNATIVE, float64) on this input."""
    x = np.array([[0.5, -1.0, 2.0], [-0.3, 0.7, 1.5]])
    ms_value = 5.38043564
    ms_grad = np.array([[1.37758256, 0.0, 0.08385316], [0.0, 1.26484219, 0.5707372]])
    np.testing.assert_allclose(msir.jit(_ms_loss)(x), ms_value, rtol=1e-8)
    np.testing.assert_allclose(msir.grad(_ms_loss)(x), ms_grad, rtol=1e-7, atol=1e-8)
