"""Smaller deviations from Python and NumPy, each fixed at its mechanism: a
runtime `range` step of 0 (ValueError at the loop, not SIGFPE), `~` of a
Python float (Python's TypeError), NumPy functions of Python scalars (NumPy
scalars, not weak Python numbers), attributes a Python number does not have
(AttributeError), np.floor/np.ceil of bool and integer arrays (NumPy's
dtype), and np.matrix / masked arrays refused at the boundary.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import pynative

import msir
from msir.errors import DTypeError


def _line(fn, offset: int) -> int:
    return fn.__code__.co_firstlineno + offset


def runtime_step(x, s):
    acc = x
    for _ in range(0, 5, s[0]):
        acc = acc * x
    return acc


def test_a_runtime_range_step_of_zero_is_a_value_error_at_the_loop():
    assert msir.jit(runtime_step)(1.5, np.array([2])) == 1.5 ** 4
    with pytest.raises(ValueError) as info:
        msir.jit(runtime_step)(1.5, np.array([0]))
    assert "range() arg 3 must not be zero" in info.value.message
    assert info.value.loc.line == _line(runtime_step, 2)
    with pytest.raises(ValueError) as info:
        msir.grad(runtime_step)(1.5, np.array([0]))
    assert "range() arg 3 must not be zero" in info.value.message
    # the process and the compiled code are fine afterwards
    assert msir.grad(runtime_step)(1.5, np.array([2])) == pytest.approx(4 * 1.5 ** 3)


def invert_constant(x):
    return ~1e-3 + x


def invert_argument(x):
    return ~x


@pytest.mark.parametrize("fn", [invert_constant, invert_argument])
def test_invert_of_a_python_float_is_pythons_type_error(fn):
    with pytest.raises(TypeError) as python:
        fn(1.5)
    with pytest.raises(TypeError) as compiled:
        msir.jit(fn)(1.5)
    assert str(python.value) in compiled.value.message
    assert compiled.value.loc.line == _line(fn, 1)


def numpy_of_python_scalars(x, n):
    return np.abs(1.5), np.abs(x), np.abs(n), np.negative(x), np.maximum(x, 2.0), np.sqrt(x), abs(x)


@pytest.mark.parametrize("pynative_mode", [False, True], ids=["graph", "pynative"])
def test_numpy_functions_of_python_scalars_give_numpy_scalars(pynative_mode):
    run = lambda: msir.jit(numpy_of_python_scalars)(1.5, 3)  # noqa: E731
    got = pynative(run) if pynative_mode else run()
    for g, e in zip(got, numpy_of_python_scalars(1.5, 3), strict=True):
        assert type(g) is type(e), (g, e)
        assert g == e


def float_transpose(x):
    return x.T


def float_max(x):
    return x.max()


def int_shape(n):
    return n.shape


@pytest.mark.parametrize("fn,arg", [(float_transpose, 1.5), (float_max, 1.5), (int_shape, 3)])
def test_attributes_a_python_number_lacks_are_attribute_errors(fn, arg):
    with pytest.raises(AttributeError) as python:
        fn(arg)
    with pytest.raises(AttributeError) as compiled:
        msir.jit(fn)(arg)
    assert str(python.value) in compiled.value.message
    assert compiled.value.loc.line == _line(fn, 1)


def rounding(x):
    return np.floor(x), np.ceil(x)


@pytest.mark.parametrize("pynative_mode", [False, True], ids=["graph", "pynative"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64, np.float32])
def test_floor_and_ceil_give_numpys_dtype(dtype, pynative_mode):
    x = np.array([0, 1, 1, 0]).astype(dtype)
    run = lambda: msir.jit(rounding)(x)  # noqa: E731
    got = pynative(run) if pynative_mode else run()
    for g, e in zip(got, rounding(x), strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix's own
@pytest.mark.parametrize("make,what", [
    (lambda: np.matrix([[1.0, 2.0]]), "np.matrix"),
    (lambda: np.ma.masked_array([1.0, 2.0], mask=[False, True]), "masked array"),
])
def test_matrix_and_masked_arrays_are_refused_at_the_boundary(make, what):
    value = make()
    with pytest.raises(DTypeError, match=what):
        msir.jit(lambda x: x * 2)(value)
    with pytest.raises(DTypeError, match=what):
        msir.grad(lambda x: np.sum(x))(value)
