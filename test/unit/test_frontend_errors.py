"""Errors of `msir.jit`: class, message and source location.

Each offending line carries a marker comment `# E:<name>`; the expected line is
the line of that marker in this file and the expected column is the 1-based
column of the offending expression on it. Every error must also be an instance
of the matching Python built-in exception, and `str(err)` must render as
``file:line:col: error: message`` followed by the source line and a caret.
"""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import msir
from msir.errors import (
    DTypeError,
    MsirAssertionError,
    MsirError,
    MsirIndexError,
    MsirNameError,
    MsirZeroDivisionError,
    ShapeError,
    UnsupportedSyntaxError,
)

with open(__file__) as _f:
    _LINES = _f.read().splitlines()


def where(marker: str, snippet: str) -> tuple[int, int]:
    """(line, col) of `snippet` on the line marked `# E:<marker>` (both 1-based)."""
    hits = [i for i, text in enumerate(_LINES, 1) if text.rstrip().endswith(f"# E:{marker}")]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    line = hits[0]
    col = _LINES[line - 1].index(snippet) + 1
    return line, col


def raises(cls, fn, *args):
    """Call `msir.jit(fn)(*args)`, expect `cls`, return the error."""
    with pytest.raises(cls) as info:
        msir.jit(fn)(*args)
    return info.value


def assert_at(err: MsirError, marker: str, snippet: str) -> None:
    line, col = where(marker, snippet)
    assert err.loc is not None, f"no location for: {err.message}"
    assert err.loc.file == __file__
    assert (err.loc.line, err.loc.col) == (line, col), f"{err.loc} != line {line} col {col}: {err.message}"


X = np.arange(3.0)


# ---------------------------------------------------------------------------
# Unsupported statements and expressions
# ---------------------------------------------------------------------------


def uses_try(x):
    try:  # E:try
        y = x + 1
    except ValueError:
        y = x
    return y


def uses_with(x):
    with open(__file__) as fh:  # E:with
        del fh
    return x


def uses_global(x):
    global X  # E:global
    X = x
    return x


def uses_nonlocal(x):
    y = 1.0

    def inner():
        nonlocal y  # E:nonlocal
        y = 2.0
        return y

    return x * inner()


def uses_assert(x):
    assert x.sum() > 0  # E:assert
    return x


def uses_setitem(x):
    x[0] = 1.0  # E:setitem
    return x


def uses_aug_setitem(x):
    x[1] += 1.0  # E:augsetitem
    return x


def uses_print(x):
    print(x)  # E:print
    return x


def uses_yield_value(x):
    y = yield x  # E:yieldvalue
    return y


@pytest.mark.parametrize(
    "fn, cls_msg, marker, snippet",
    [
        (uses_try, "try/except is not supported in compiled functions", "try", "try"),
        (uses_with, "with is not supported", "with", "with"),
        (uses_global, "global declarations", "global", "global"),
        (uses_nonlocal, "nonlocal declarations", "nonlocal", "nonlocal"),
        (uses_setitem, "in-place array writes (x[...] = v) are not supported", "setitem", "x[0]"),
        (uses_aug_setitem, "in-place array writes (x[...] = v) are not supported", "augsetitem", "x[1]"),
        (uses_print, "an expression statement (a call for its side effect, e.g. print)", "print", "print"),
        (uses_yield_value, "yield (generators) is not supported", "yieldvalue", "yield"),
    ],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_unsupported_syntax(fn, cls_msg, marker, snippet):
    err = raises(UnsupportedSyntaxError, fn, X)
    assert isinstance(err, SyntaxError)
    assert cls_msg in err.message
    assert_at(err, marker, snippet)
    # SyntaxError's own fields agree, so tools that show SyntaxErrors point at the right place.
    assert (err.filename, err.lineno, err.offset) == (__file__, *where(marker, snippet))


def test_assert_is_a_runtime_check_at_its_line():
    """`assert` compiles to a runtime check (issue 17; it used to be refused)."""
    np.testing.assert_array_equal(msir.jit(uses_assert)(X), X)
    err = raises(MsirAssertionError, uses_assert, -X)
    assert isinstance(err, AssertionError)
    assert err.message == ""
    assert_at(err, "assert", "assert")


def uses_yield_statement(x):
    yield x  # E:yieldstmt


def test_yield_statement_names_yield():
    err = raises(UnsupportedSyntaxError, uses_yield_statement, X)
    assert "yield" in err.message
    assert_at(err, "yieldstmt", "yield")


def calls_unknown_numpy(x):
    return np.median(x)  # E:median


def calls_fft(x):
    return np.fft.fft(x)  # E:fft


def calls_det(x):
    return np.linalg.det(x)  # E:det


def calls_undefined(x):
    return undefined_function(x)  # noqa: F821  # E:undefined


@pytest.mark.parametrize(
    "fn, msg, marker, snippet",
    [
        (calls_unknown_numpy, "the NumPy function np.median is not supported", "median", "np.median"),
        (calls_fft, "is not supported in compiled functions", "fft", "np.fft"),
        (calls_det, "is not supported in compiled functions", "det", "np.linalg"),
    ],
    ids=["np.median", "np.fft.fft", "np.linalg.det"],
)
def test_unknown_function(fn, msg, marker, snippet):
    err = raises(UnsupportedSyntaxError, fn, X)
    assert msg in err.message
    assert_at(err, marker, snippet)


def test_an_undefined_name_is_a_name_error_at_its_use():
    # Python raises NameError; so does msir, at compile time, at the use.
    err = raises(NameError, calls_undefined, X)
    assert isinstance(err, MsirNameError) and err.name == "undefined_function"
    assert "name 'undefined_function' is not defined" in err.message
    assert_at(err, "undefined", "undefined_function")


@pytest.mark.parametrize("fn, name", [(calls_fft, "np.fft.fft"), (calls_det, "np.linalg.det")], ids=["fft", "det"])
def test_unknown_submodule_function_is_named_in_full(fn, name):
    err = raises(UnsupportedSyntaxError, fn, X)
    assert f"the NumPy function {name} is not supported" in err.message


def _define_with_exec():
    scope = {"np": np}
    exec("def made_by_exec(x):\n    return x + 1\n", scope)
    return scope["made_by_exec"]


def test_function_defined_with_exec():
    err = raises(UnsupportedSyntaxError, _define_with_exec(), X)
    assert "cannot read the source of function 'made_by_exec'" in err.message
    assert "exec" in err.message
    assert err.loc is not None and err.loc.file == "<string>" and err.loc.line == 1


def if_on_array(x):
    if x > 0:  # E:if
        return x
    return -x


def test_if_on_a_whole_array_is_ambiguous():
    err = raises(ValueError, if_on_array, X)
    assert "the truth value of an array of shape" in err.message and "is ambiguous" in err.message
    assert_at(err, "if", "x > 0")


def mask_with_other_index(x):
    return x[x > 0, None]  # E:mask


def test_boolean_mask_with_other_indices():
    err = raises(UnsupportedSyntaxError, mask_with_other_index, X)
    assert "a boolean mask index is supported alone" in err.message
    assert_at(err, "mask", "x[")


def and_on_arrays(x):
    return x > 0 and x < 1  # E:and


def test_and_on_arrays_is_ambiguous():
    err = raises(ValueError, and_on_arrays, X)
    assert isinstance(err, MsirError)
    assert "truth value of an array with more than one element is ambiguous" in err.message
    assert_at(err, "and", "x > 0")


# ---------------------------------------------------------------------------
# Shapes, indices, dtypes
# ---------------------------------------------------------------------------


def add(a, b):
    return a + b  # E:add


def test_broadcast_shape_mismatch():
    err = raises(ShapeError, add, np.ones((2, 3)), np.ones(4))
    assert isinstance(err, ValueError)
    assert err.message == "shapes (2, 3) and (4,) cannot be broadcast together"
    assert_at(err, "add", "a + b")


def matmul(a, b):
    return a @ b  # E:matmul


def test_matmul_misaligned():
    err = raises(ShapeError, matmul, np.ones((2, 3)), np.ones((4, 2)))
    assert isinstance(err, ValueError)
    assert "(2, 3)" in err.message and "(4, 2)" in err.message and "not aligned" in err.message
    assert_at(err, "matmul", "a @ b")


def bad_reshape(x):
    return x.reshape(4, 4)  # E:reshape


def test_reshape_size_mismatch():
    err = raises(ShapeError, bad_reshape, np.ones(6))
    assert err.message == "cannot reshape array of size 6 into shape (4, 4)"
    assert_at(err, "reshape", "x.reshape")


def bad_concat(a, b):
    return np.concatenate((a, b), axis=1)  # E:concat


def test_concatenate_mismatch():
    err = raises(ShapeError, bad_concat, np.ones((2, 3)), np.ones((3, 3)))
    assert "(2, 3)" in err.message and "(3, 3)" in err.message
    assert_at(err, "concat", "np.concatenate")


def static_index(x):
    return x[5]  # E:index


def static_index_2d(x):
    return x[0, -4]  # E:index2d


def too_many_indices(x):
    return x[1, 2, 3]  # E:toomany


def bad_axis(x):
    return x.sum(axis=2)  # E:axis


@pytest.mark.parametrize(
    "fn, arg, msg, marker, snippet",
    [
        (static_index, np.ones(3), "index 5 is out of bounds for axis 0 with size 3", "index", "x[5]"),
        (static_index_2d, np.ones((2, 3)), "index -4 is out of bounds for axis 1 with size 3", "index2d", "x[0"),
        (too_many_indices, np.ones((2, 3)), "too many indices for array: array is 2-dimensional, but 3 were indexed", "toomany", "x[1"),
        (bad_axis, np.ones((2, 3)), "axis 2 is out of bounds for array of dimension 2", "axis", "x.sum"),
    ],
    ids=["x[5]", "x[0,-4]", "too-many", "axis"],
)
def test_static_index_errors(fn, arg, msg, marker, snippet):
    err = raises(MsirIndexError, fn, arg)
    assert isinstance(err, IndexError)
    assert err.message == msg
    assert_at(err, marker, snippet)


def identity(x):
    return x * 1


@pytest.mark.parametrize("dtype", [np.int16, np.complex64, np.uint8], ids=lambda d: np.dtype(d).name)
def test_unsupported_argument_dtype(dtype):
    err = raises(DTypeError, identity, np.ones(3, dtype))
    assert isinstance(err, TypeError)
    assert f"arrays of dtype {np.dtype(dtype).name} are not supported" in err.message
    assert "float32" in err.message  # names what is supported


def identity_param(x):  # E:param
    return x * 1


def test_unsupported_argument_dtype_location():
    err = raises(DTypeError, identity_param, np.ones(3, np.int16))
    assert_at(err, "param", "x")


def test_unsupported_argument_type():
    err = raises(DTypeError, identity, {"a": 1})
    assert "cannot pass an argument of type dict" in err.message


def astype_int16(x):
    return x.astype(np.int16)  # E:astype


def zeros_complex(x):
    return np.zeros(3, dtype=np.complex64) + x  # E:zeros


@pytest.mark.parametrize(
    "fn, name, marker, snippet",
    [(astype_int16, "int16", "astype", "x.astype"), (zeros_complex, "complex64", "zeros", "np.zeros")],
    ids=["astype", "zeros"],
)
def test_unsupported_dtype_argument_in_body(fn, name, marker, snippet):
    err = raises(DTypeError, fn, X)
    assert err.message.startswith(f"dtype {name} is not supported")
    assert_at(err, marker, snippet)


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------


def test_str_shows_location_source_line_and_caret():
    err = raises(ShapeError, add, np.ones((2, 3)), np.ones(4))
    line, col = where("add", "a + b")
    lines = str(err).splitlines()
    assert lines[0] == f"{__file__}:{line}:{col}: error: shapes (2, 3) and (4,) cannot be broadcast together"
    assert lines[1] == "    " + _LINES[line - 1]
    assert lines[2] == "    " + " " * (col - 1) + "^"
    assert len(lines) == 3


def test_str_of_syntax_error_uses_the_same_format():
    err = raises(UnsupportedSyntaxError, uses_try, X)
    line, col = where("try", "try")
    assert str(err).splitlines()[0] == f"{__file__}:{line}:{col}: error: try/except is not supported in compiled functions"
    assert str(err).splitlines()[2].endswith("^")


def test_traceback_has_no_internal_frames():
    try:
        msir.jit(add)(np.ones((2, 3)), np.ones(4))
    except ShapeError as e:
        files = [fr.filename for fr in traceback.extract_tb(e.__traceback__)]
    assert not any("/msir/frontend/" in f or "/lowering/" in f for f in files), files


# ---------------------------------------------------------------------------
# Lambdas sharing a line
# ---------------------------------------------------------------------------

inc, dbl = (lambda x: x + 1, lambda x: x * 2)


def test_two_lambdas_on_one_line():
    x = np.arange(4.0)
    np.testing.assert_array_equal(msir.jit(inc)(x), x + 1)
    np.testing.assert_array_equal(msir.jit(dbl)(x), x * 2)


def test_first_of_two_lambdas_on_one_line():
    x = np.arange(4.0)
    np.testing.assert_array_equal(msir.jit(inc)(x), x + 1)


# ---------------------------------------------------------------------------
# Runtime errors reported by native code
# ---------------------------------------------------------------------------


def runtime_index(x, i):
    return x[i] * 2.0  # E:rtindex


def runtime_index_2d(x, i, j):
    return x[i, j] + 1.0  # E:rtindex2d


def runtime_array_index(x, idx):
    return x[idx]  # E:rtarray


@pytest.mark.parametrize("i", [3, -4, 100], ids=str)
def test_runtime_index_out_of_range(i):
    jf = msir.jit(runtime_index)
    x = np.arange(3.0)
    with pytest.raises(MsirIndexError) as info:
        jf(x, i)
    assert isinstance(info.value, IndexError)
    assert "out of" in info.value.message
    assert_at(info.value, "rtindex", "x[i]")
    # The compiled function is still usable afterwards.
    assert jf(x, 2) == 4.0 and jf(x, -3) == 0.0


@pytest.mark.parametrize("i, j", [(2, 0), (0, 3), (-3, 0)], ids=str)
def test_runtime_index_2d_out_of_range(i, j):
    err = raises(MsirIndexError, runtime_index_2d, np.ones((2, 3)), i, j)
    assert_at(err, "rtindex2d", "x[i, j]")


@pytest.mark.parametrize("idx", [[0, 3], [-4, 0]], ids=str)
def test_runtime_array_index_out_of_range(idx):
    err = raises(MsirIndexError, runtime_array_index, np.ones(3), np.array(idx, np.int64))
    assert_at(err, "rtarray", "x[idx]")


def int_floordiv(a, b):
    return a // b  # E:floordiv


def int_mod(a, b):
    q = a + 1
    return q % b  # E:mod


@pytest.mark.parametrize(
    "a, b",
    [
        (np.arange(3), np.array([1, 0, 2])),
        (np.arange(3, dtype=np.int32), np.array([1, 2, 0], np.int32)),
        (np.arange(3), 0),
        (5, 0),
    ],
    ids=["int64", "int32", "array//0", "python-ints"],
)
def test_integer_division_by_zero(a, b):
    err = raises(MsirZeroDivisionError, int_floordiv, a, b)
    assert isinstance(err, ZeroDivisionError)
    assert "division or modulo by zero" in err.message
    assert_at(err, "floordiv", "a // b")


def test_integer_modulo_by_zero():
    err = raises(ZeroDivisionError, int_mod, np.arange(3), np.array([2, 0, 1]))
    assert isinstance(err, MsirZeroDivisionError)
    assert_at(err, "mod", "q % b")


def float_divisions(a, b):
    return a // b, a / b, a % b


def test_float_division_by_zero_is_not_an_error():
    a, b = np.array([1.0, -1.0, 0.0]), np.zeros(3)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = float_divisions(a, b)
    got = msir.jit(float_divisions)(a, b)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def eye_of_a_float_size(x):
    return np.eye(x.shape[0], M=2.5) @ x  # E:eye


def test_an_error_inside_a_numpy_function_msir_writes_in_python_is_at_the_users_call():
    # np.eye is translated from msir's own body (msir.frontend.numpy_bodies):
    # its errors point at the user's call, never into that body or NumPy's source
    err = raises(UnsupportedSyntaxError, eye_of_a_float_size, np.ones(4))
    assert "the size of np.eye must be an integer known at compile time" in err.message
    assert_at(err, "eye", "np.eye")
