"""`msir.jit(f)(*args)` against `f(*args)` run by NumPy.

Every check compares the dtype, the shape and the kind of each result (NumPy
array, NumPy scalar or Python scalar) exactly, and the values:

* integers and booleans: exactly;
* float32 elementwise: rtol 2e-6, atol 1e-6 (a few ulp; libm and LLVM intrinsics
  may round differently from NumPy's SIMD loops);
* float32 reductions, matmul, var/std: rtol 1e-5, atol 1e-6 (summation order);
* float64 elementwise: rtol 1e-13, atol 1e-14; float64 reductions: rtol 1e-12;
* NaN must be NaN in the same places (`equal_nan=True`).

To keep the suite fast, one compiled function usually checks several operations
and returns them as a tuple.
"""

from __future__ import annotations

import numpy as np
import pytest

import msir

F32, F64, I32, I64, B = np.float32, np.float64, np.int32, np.int64, np.bool_
FLOATS = [F32, F64]
INTS = [I32, I64]
SHAPES = [(), (5,), (3, 4), (2, 3, 4)]

ELEMENTWISE_TOL = {np.dtype(F32): dict(rtol=2e-6, atol=1e-6), np.dtype(F64): dict(rtol=1e-13, atol=1e-14)}
REDUCTION_TOL = {np.dtype(F32): dict(rtol=1e-5, atol=1e-6), np.dtype(F64): dict(rtol=1e-12, atol=1e-13)}


# ---------------------------------------------------------------------------
# Comparison helpers
# ---------------------------------------------------------------------------


def assert_same(got, expected, tol=ELEMENTWISE_TOL, path="result"):
    """`got` (from msir) matches `expected` (from NumPy) in structure, kind, dtype, shape and value."""
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected), f"{path}: {type(got).__name__} != {type(expected).__name__}"
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, tol, f"{path}[{i}]")
        return
    if expected is None or isinstance(expected, str):
        assert got == expected, f"{path}: {got!r} != {expected!r}"
        return
    if isinstance(expected, (bool, int, float)) and not isinstance(expected, np.generic):
        assert type(got) is type(expected), f"{path}: got {type(got).__name__} {got!r}, NumPy gives {type(expected).__name__} {expected!r}"
        if isinstance(expected, float):
            np.testing.assert_allclose(got, expected, equal_nan=True, err_msg=path, **tol[np.dtype(F64)])
        else:
            assert got == expected, f"{path}: {got!r} != {expected!r}"
        return
    if isinstance(expected, np.ndarray) and expected.ndim > 0:
        assert isinstance(got, np.ndarray), f"{path}: got {type(got).__name__}, expected an ndarray"
    else:
        # NumPy scalar (or a 0-d array, which msir returns as a NumPy scalar).
        assert isinstance(got, (np.generic, np.ndarray)) and np.ndim(got) == 0, f"{path}: got {type(got).__name__} {got!r}, expected a NumPy scalar"
    assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != NumPy's {expected.dtype}"
    assert np.shape(got) == np.shape(expected), f"{path}: shape {np.shape(got)} != NumPy's {np.shape(expected)}"
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, equal_nan=True, err_msg=path, **tol[expected.dtype])
    else:
        np.testing.assert_array_equal(got, expected, err_msg=path)


def check(f, *args, tol=ELEMENTWISE_TOL):
    """Compile `f`, run it and NumPy's `f` on copies of `args`, compare the results."""
    expected = f(*_copy(args))
    got = msir.jit(f)(*_copy(args))
    assert_same(got, expected, tol)
    return got


def _copy(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def rand(shape, dtype, low=-2.0, high=2.0, seed=0):
    """Deterministic test data; rank 0 gives a 0-d array (NumPy scalars are
    checked separately, in test_numpy_scalar_arguments)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        a = rng.random(shape) < 0.5
    elif dtype.kind == "i":
        a = rng.integers(int(low), int(high) + 1, size=shape)
    else:
        a = rng.uniform(low, high, size=shape)
    return np.asarray(a).astype(dtype)


def nonzero_ints(shape, dtype, seed=1):
    a = rand(shape, dtype, -5, 5, seed)
    return np.where(a == 0, 3, a).astype(dtype)


# ---------------------------------------------------------------------------
# Elementwise unary functions
# ---------------------------------------------------------------------------


def unary_float_fns(x, p):
    return (
        np.exp(x), np.log(p), np.log1p(p), np.expm1(x), np.sin(x), np.cos(x), np.tanh(x), np.sqrt(p),
        np.abs(x), np.absolute(x), np.sign(x), np.floor(x), np.ceil(x), np.negative(x), -x,
        np.log2(p), np.log10(p), np.square(x),
    )


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_unary_float(dtype, shape):
    check(unary_float_fns, rand(shape, dtype), rand(shape, dtype, 0.1, 3.0, seed=2))


def unary_int_fns(x):
    return np.abs(x), np.absolute(x), np.sign(x), np.negative(x), -x, np.square(x), ~x, abs(x)


@pytest.mark.parametrize("shape", [(), (7,), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_unary_int(dtype, shape):
    check(unary_int_fns, rand(shape, dtype, -9, 9))


def int_to_float_fns(x, p):
    return np.exp(x), np.sqrt(p), np.log(p), np.sin(x), np.tanh(x)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_unary_int_promotes_to_float64(dtype):
    check(int_to_float_fns, rand((6,), dtype, -3, 3), rand((6,), dtype, 1, 9))


def floor_ceil_int(x):
    return np.floor(x), np.ceil(x)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_floor_ceil_int_keep_dtype(dtype):
    # NumPy >= 2.1 (installed: 2.4) returns integer input unchanged.
    check(floor_ceil_int, rand((6,), dtype, -9, 9))


def bool_unary(x):
    return ~x, np.logical_not(x), np.abs(x), -(x.astype(np.int64))


@pytest.mark.parametrize("shape", [(), (6,), (2, 3)], ids=str)
def test_unary_bool(shape):
    check(bool_unary, rand(shape, B))


# ---------------------------------------------------------------------------
# Binary arithmetic, broadcasting, promotion
# ---------------------------------------------------------------------------

BROADCAST_CASES = {
    "same-1d": ((5,), (5,)),
    "same-3d": ((2, 3, 4), (2, 3, 4)),
    "col+row": ((3, 1), (4,)),
    "scalar+array": ((), (3, 4)),
    "array+scalar": ((2, 3), ()),
    "3d+row": ((2, 3, 4), (4,)),
    "scalar+scalar": ((), ()),
}


def float_binary(a, b, p):
    return (
        a + b, a - b, a * b, a / b, a // b, a % b, p ** b,
        np.add(a, b), np.subtract(a, b), np.multiply(a, b), np.divide(a, b), np.true_divide(a, b),
        np.floor_divide(a, b), np.mod(a, b), np.remainder(a, b), np.power(p, b),
        np.maximum(a, b), np.minimum(a, b),
    )


@pytest.mark.parametrize("case", list(BROADCAST_CASES), ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_binary_float(dtype, case):
    sa, sb = BROADCAST_CASES[case]
    a, b = rand(sa, dtype, seed=3), rand(sb, dtype, seed=4)
    b = np.where(np.abs(b) < 0.2, 0.7, b).astype(dtype)
    p = rand(sa, dtype, 0.5, 2.0, seed=5)
    check(float_binary, a, b, p)


def int_binary(a, b, e):
    return (
        a + b, a - b, a * b, a / b, a // b, a % b, a ** e,
        np.add(a, b), np.subtract(a, b), np.multiply(a, b), np.divide(a, b),
        np.floor_divide(a, b), np.mod(a, b), np.power(a, e), np.maximum(a, b), np.minimum(a, b),
    )


@pytest.mark.parametrize("case", ["same-1d", "col+row", "scalar+array", "scalar+scalar"], ids=str)
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_binary_int(dtype, case):
    sa, sb = BROADCAST_CASES[case]
    a = rand(sa, dtype, -20, 20, seed=6)
    b = nonzero_ints(sb, dtype)
    e = rand(sb, dtype, 0, 4, seed=7)
    check(int_binary, a, b, e)


def floordiv_mod_signs(a, b):
    return a // b, a % b, np.floor_divide(a, b), np.mod(a, b)


@pytest.mark.parametrize("dtype", [I32, I64, F32, F64], ids=lambda d: np.dtype(d).name)
def test_floordiv_mod_negative_operands(dtype):
    # Python/NumPy semantics: floor towards -inf, remainder has the divisor's sign.
    a = np.array([7, -7, 7, -7, 0, 1, -1, 6, -6], dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 3, -3, 3], dtype)
    check(floordiv_mod_signs, a, b)


def bool_binary(a, b):
    return a & b, a | b, a ^ b, np.logical_and(a, b), np.logical_or(a, b), np.logical_xor(a, b), a + b, a * b


@pytest.mark.parametrize("case", ["same-1d", "col+row", "scalar+array"], ids=str)
def test_binary_bool(case):
    sa, sb = BROADCAST_CASES[case]
    check(bool_binary, rand(sa, B, seed=8), rand(sb, B, seed=9))


def int_bitwise(a, b):
    return a & b, a | b, a ^ b


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_bitwise_int(dtype):
    check(int_bitwise, rand((6,), dtype, -9, 9), rand((6,), dtype, -9, 9, seed=3))


def logical_on_numbers(a, b):
    return np.logical_and(a, b), np.logical_or(a, b), np.logical_xor(a, b), np.logical_not(a)


@pytest.mark.parametrize("dtype", [F32, I64], ids=lambda d: np.dtype(d).name)
def test_logical_on_numbers(dtype):
    check(logical_on_numbers, np.array([0, 1, 2, 0], dtype), np.array([0, 0, 3, 4], dtype))


def compare_all(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


@pytest.mark.parametrize("case", ["same-1d", "col+row", "scalar+array"], ids=str)
@pytest.mark.parametrize("dtype", [F32, F64, I32, I64, B], ids=lambda d: np.dtype(d).name)
def test_comparisons(dtype, case):
    sa, sb = BROADCAST_CASES[case]
    a, b = rand(sa, dtype, -2, 2, seed=10), rand(sb, dtype, -2, 2, seed=11)
    check(compare_all, a, b)


def compare_nan(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


def test_comparisons_with_nan():
    a = np.array([np.nan, 1.0, np.nan, 2.0], F32)
    b = np.array([1.0, np.nan, np.nan, 2.0], F32)
    check(compare_nan, a, b)


def chained(a, b, c):
    return a < b < c, a <= b < c, c > b > a, a < c != b, a == b == c


@pytest.mark.parametrize("values", [(1.0, 2.0, 3.0), (1.0, 3.0, 2.0), (2.0, 2.0, 2.0), (3.0, 2.0, 1.0)], ids=str)
def test_chained_comparison_python_floats(values):
    check(chained, *values)


def test_chained_comparison_numpy_scalars():
    check(chained, F32(1.0), F32(2.0), F32(3.0))
    check(chained, I64(2), I64(2), I64(1))


def nan_minmax(a, b):
    return np.maximum(a, b), np.minimum(a, b), np.max(a), np.min(a), np.amax(b), np.argmax(a), np.argmin(a)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_nan_propagation(dtype):
    a = np.array([1.0, np.nan, 3.0, -1.0], dtype)
    b = np.array([np.nan, 2.0, 1.0, 5.0], dtype)
    check(nan_minmax, a, b)


def nan_minmax_last(a, b):
    # NaN as the *second* operand and as the last element of a reduction.
    return np.maximum(b, a), np.minimum(b, a), np.max(b), np.min(b)


def test_nan_propagation_second_operand_and_last_element():
    a = np.array([np.nan, np.nan, np.nan], F32)
    b = np.array([1.0, 2.0, np.nan], F32)
    check(nan_minmax_last, a, b)


# Promotion (NEP 50): Python scalars are weak, NumPy scalars and 0-d arrays are strong.


def mixed(a, b):
    return a + b, a * b, a - b, a / b


@pytest.mark.parametrize(
    "a, b",
    [
        (rand((4,), F32), 2.5),  # Python float * float32 array stays float32
        (2.5, rand((4,), F32)),
        (rand((4,), F32), 3),  # Python int
        (rand((4,), I32, -5, 5), 3),  # int32 stays int32 with a Python int
        (rand((4,), I32, -5, 5), 2.5),  # int array + Python float -> float64
        pytest.param(
            rand((4,), F32), F64(2.5),  # NumPy float64 scalar is strong -> float64
        ),
        (rand((4,), F32), rand((4,), F64)),
        (rand((4,), I32, -5, 5), rand((4,), I64, 1, 5)),
        (rand((4,), I32, -5, 5), rand((4,), F32)),  # int32 + float32 -> float64
        (rand((4,), I64, -5, 5), rand((4,), F32)),
        (rand((4,), B), rand((4,), F32)),
        (rand((4,), B), 2.5),
        (rand((4,), B), 3),
        (rand((3, 1), F32), rand((4,), F64)),
        (2.5, 4.0),  # Python floats in, Python float out
        (3, 4.0),
        (F32(1.5), 2.5),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, np.ndarray) else f"{v.dtype}{list(v.shape)}",
)
def test_promotion(a, b):
    check(mixed, a, b)


def python_ints(a, b):
    return a + b, a * b, a - b, a // b, a % b, a / b, -a


@pytest.mark.parametrize("a, b", [(7, 2), (-7, 2), (7, -2), (0, 5)], ids=str)
def test_python_int_arithmetic(a, b):
    check(python_ints, a, b)


def power_variants(x, i, j):
    return x ** 2, x ** 3, x ** 0.5, x ** -1, x ** 2.0, i ** 2, i ** 0, 2.0 ** x, 2 ** j, j ** j


def test_power_constant_exponents():
    check(power_variants, rand((5,), F32, 0.5, 2.0), rand((5,), I64, -4, 4), rand((5,), I64, 0, 4, seed=1))


def python_scalar_compare(a, b):
    return a < b, a == b, a >= b


@pytest.mark.parametrize("a, b", [(7, 2), (1.5, 2.5)], ids=str)
def test_python_scalar_comparison_gives_python_bool(a, b):
    check(python_scalar_compare, a, b)


def python_bool_arith(a, b):
    return a + b, a * b, a - b


def test_python_bool_arithmetic_gives_int():
    check(python_bool_arith, True, True)


# Edge values: exact special-value semantics (NaN, inf, signed zero, integer wrap-around).

I64_MIN, I32_MIN = np.iinfo(np.int64).min, np.iinfo(np.int32).min


def edge_floordiv_mod(a, b):
    return a // b, a % b


def edge_unary(x):
    return np.sign(x), np.abs(x), -x, np.floor(x), np.sqrt(x)


def edge_arith(a, b):
    return a * b, a + b, a - b, a ** b


def edge_compare(a, b):
    return a == b, a < b, a >= b


@pytest.mark.parametrize(
    "fn, a, b",
    [
        (edge_floordiv_mod, np.array([I64_MIN, 7, -7]), np.array([-1, -1, 1])),
        (edge_floordiv_mod, np.array([I32_MIN, 7], I32), np.array([-1, 2], I32)),
        (edge_floordiv_mod, np.array([-0.0, 5.0, -5.0, np.inf, 3.0, -3.0, 1e308]), np.array([2.0, np.inf, np.inf, 2.0, -np.inf, 0.0, 1e-308])),
        (edge_unary, np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1.0]), None),
        (edge_unary, np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1.0], F32), None),
        (edge_arith, np.array([2**30, I32_MIN, 3, -2], I32), np.array([4, 1, 25, 31], I32)),
        (edge_arith, np.array([-2.0, 0.0, np.inf, np.nan, 1.0]), np.array([0.5, -1.0, -1.0, 0.0, np.nan])),
        (edge_compare, np.array([2**53 + 1, 16777217]), np.array([2.0**53, 16777216.0])),
        (edge_compare, np.array([16777217, 3]), np.array([16777216.0, np.nan], F32)),
    ],
    ids=["int64-min//-1", "int32-min//-1", "float-inf-zero", "special-f64", "special-f32", "int32-wrap", "float-pow", "i64-vs-f64", "i64-vs-f32"],
)
def test_edge_values(fn, a, b):
    with np.errstate(all="ignore"):
        if b is None:
            check(fn, a)
        else:
            check(fn, a, b)


@pytest.mark.xfail(strict=True, reason="a Python int outside int32 range is cast (wrapped) to int32 before comparing; NEP 50 compares by value")
def test_int32_array_compared_with_out_of_range_python_int():
    check(edge_compare, np.array([1, 2], I32), 2**40)
    check(edge_compare, np.array([1, 2], I32), 2**31)


def int_add(a, b):
    return a + b


@pytest.mark.xfail(strict=True, reason="int32 array + Python int 2**31 silently wraps; NumPy raises OverflowError (Python integer out of bounds for int32)")
def test_int32_array_plus_out_of_range_python_int_overflows():
    with pytest.raises(OverflowError):
        msir.jit(int_add)(np.array([1, 2], I32), 2**31)


def int_pow(a, b):
    return a ** b


def test_integer_negative_power_is_an_error():
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        msir.jit(int_pow)(np.array([2, 1, -1]), np.array([-1, -2, -3]))


# ---------------------------------------------------------------------------
# matmul / dot
# ---------------------------------------------------------------------------

MATMUL_CASES = {
    "1d@1d": ((4,), (4,)),
    "2d@1d": ((3, 4), (4,)),
    "1d@2d": ((4,), (4, 5)),
    "2d@2d": ((3, 4), (4, 5)),
    "3d@3d": ((2, 3, 4), (2, 4, 5)),
    "3d@2d": ((2, 3, 4), (4, 5)),
    "broadcast-batch": ((2, 1, 3, 4), (5, 4, 2)),
}


def matmul_fns(a, b):
    return a @ b, np.matmul(a, b)


@pytest.mark.parametrize("case", list(MATMUL_CASES), ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_matmul(dtype, case):
    sa, sb = MATMUL_CASES[case]
    check(matmul_fns, rand(sa, dtype, seed=12), rand(sb, dtype, seed=13), tol=REDUCTION_TOL)


@pytest.mark.parametrize("case", ["2d@1d", "2d@2d", "3d@2d"], ids=str)
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_matmul_int(dtype, case):
    sa, sb = MATMUL_CASES[case]
    check(matmul_fns, rand(sa, dtype, -5, 5, seed=12), rand(sb, dtype, -5, 5, seed=13))


def test_matmul_mixed_dtypes():
    check(matmul_fns, rand((3, 4), F32), rand((4, 2), F64), tol=REDUCTION_TOL)


def dot_fns(a, b, v, w):
    return np.dot(a, b), np.dot(a, v), np.dot(w, v), a.dot(b), w.dot(v)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_dot(dtype):
    check(dot_fns, rand((3, 4), dtype), rand((4, 2), dtype, seed=1), rand((4,), dtype, seed=2),
          rand((4,), dtype, seed=3), tol=REDUCTION_TOL)


def dot_scalar(a, s):
    return np.dot(a, s), np.dot(s, a)


def test_dot_with_scalar():
    check(dot_scalar, rand((3, 4), F32), F32(2.0))


# ---------------------------------------------------------------------------
# where, clip, shape manipulation
# ---------------------------------------------------------------------------


def where_fns(c, a, b):
    return np.where(c, a, b), np.where(c, a, 0.0), np.where(a > 0, a, -a), np.where(c, 1, 2)


@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=lambda d: np.dtype(d).name)
def test_where(dtype):
    check(where_fns, rand((3, 4), B), rand((3, 4), dtype, seed=1), rand((4,), dtype, seed=2))


def clip_fns(x):
    return np.clip(x, -0.5, 0.5), x.clip(-1, 1), np.clip(x, 0.0, None), np.clip(x, None, 0.25)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_clip(dtype):
    check(clip_fns, rand((3, 4), dtype))


def clip_keywords(x):
    return x.clip(max=0.1), x.clip(min=-0.2), np.clip(x, min=0.0, max=0.5)


def test_clip_keywords():
    check(clip_keywords, rand((3, 4), F32))


def clip_int(x):
    return np.clip(x, -2, 3), x.clip(0, 5)


def test_clip_int():
    check(clip_int, rand((8,), I32, -9, 9))


def transpose_fns(x):
    return x.T, np.transpose(x), np.transpose(x, (1, 0, 2)), x.transpose(2, 0, 1), x.transpose((0, 2, 1))


@pytest.mark.parametrize("dtype", [F32, I64, B], ids=lambda d: np.dtype(d).name)
def test_transpose(dtype):
    check(transpose_fns, rand((2, 3, 4), dtype))


def reshape_fns(x):
    return (
        x.reshape(6, 4), x.reshape((4, 6)), x.reshape(-1), x.reshape(2, -1), np.reshape(x, (-1, 3)),
        np.reshape(x, 24), x.reshape(1, 24, 1), x.flatten(), x.ravel(), x.reshape(2, 3, 4).T,
    )


@pytest.mark.parametrize("dtype", [F32, F64, I32, B], ids=lambda d: np.dtype(d).name)
def test_reshape(dtype):
    check(reshape_fns, rand((2, 3, 4), dtype))


def reshape_scalar(s, v):
    return np.reshape(s, (1, 1)), v.reshape(()), s.reshape(1)


def test_reshape_rank0():
    check(reshape_scalar, np.array(2.5, F32), np.array([3.0], F64))


def concat_stack(a, b, c):
    return (
        np.concatenate((a, b)), np.concatenate([a, b], axis=0), np.concatenate((a, c), axis=1),
        np.concatenate((a, c), axis=-1), np.stack((a, b)), np.stack([a, b], axis=1), np.stack((a, b), axis=-1),
        np.stack((a, b, a), axis=2),
    )


@pytest.mark.parametrize("dtype", [F32, F64, I64, B], ids=lambda d: np.dtype(d).name)
def test_concatenate_stack(dtype):
    check(concat_stack, rand((2, 3), dtype), rand((2, 3), dtype, seed=1), rand((2, 5), dtype, seed=2))


def concat_promote(a, b):
    return np.concatenate((a, b)), np.stack((a, b))


def test_concatenate_promotes():
    check(concat_promote, rand((3,), F32), rand((3,), F64))
    check(concat_promote, rand((3,), I32), rand((3,), F32))


def concat_1d(a, b):
    return np.concatenate((a, b, a))


def test_concatenate_1d_different_lengths():
    check(concat_1d, rand((2,), F32), rand((5,), F32))


def broadcast_dims(x, s):
    return (
        np.broadcast_to(x, (2, 3, 4)), np.broadcast_to(s, (3,)), np.expand_dims(x, 0), np.expand_dims(x, -1),
        np.expand_dims(x, 1), np.squeeze(np.expand_dims(x, 0)), np.squeeze(x.reshape(1, 3, 1, 4), axis=2),
        np.squeeze(x.reshape(1, 3, 1, 4), axis=(0, 2)), x.reshape(3, 1, 4).squeeze(), x.reshape(1, 12).squeeze(0),
    )


@pytest.mark.parametrize("dtype", [F32, I32], ids=lambda d: np.dtype(d).name)
def test_broadcast_expand_squeeze(dtype):
    check(broadcast_dims, rand((3, 4), dtype), rand((), dtype))


def broadcast_col(x):
    return np.broadcast_to(x, (2, 3, 4))


def test_broadcast_to_column():
    check(broadcast_col, rand((3, 1), F32))


# ---------------------------------------------------------------------------
# Array constructors
# ---------------------------------------------------------------------------


def fillers(x):
    return (
        np.zeros(3), np.ones((2, 3)), np.zeros((2, 2), dtype=np.float32), np.ones(4, np.int32),
        np.full((2, 3), 7.5), np.full(3, 2), np.full((2,), 1.5, dtype=np.float32), np.full((2, 2), True),
        np.zeros_like(x), np.ones_like(x), np.full_like(x, 3.25), np.zeros_like(x, dtype=np.int64),
        np.ones_like(x, dtype=np.bool_), np.full_like(x, 7, dtype=np.float64), np.zeros(()),
        np.zeros(3, dtype="float32"), np.ones(2, dtype=float), np.zeros(2, dtype=int), np.full(2, 1, dtype=bool),
    )


@pytest.mark.parametrize("dtype", [F32, I32], ids=lambda d: np.dtype(d).name)
def test_fillers(dtype):
    check(fillers, rand((2, 3), dtype))


def zero_size(x):
    return np.ones((2, 0)), np.zeros(0, np.float32), x[:, 3:], x[:, 3:].sum(axis=1)


def test_zero_size_arrays():
    check(zero_size, rand((2, 3), F32))


def aranges():
    return (
        np.arange(5), np.arange(2, 7), np.arange(1, 10, 3), np.arange(10, 0, -3), np.arange(0.0, 1.0, 0.25),
        np.arange(5.0), np.arange(1, 2.5, 0.5), np.arange(4, dtype=np.float32), np.arange(0, 6, 2, dtype=np.int32),
        np.arange(0), np.arange(3, 1),
    )


def test_arange():
    check(aranges)


def arange_runtime_len(n):
    return np.arange(n) * 2.0


def test_arange_with_python_int_argument():
    check(arange_runtime_len, 4)


def asarray_and_scalars(x, f, i):
    return (
        np.asarray(x), np.asarray(x, dtype=np.float64), np.asarray(f), np.asarray(2.5, dtype=np.float32),
        np.array([1.0, 2.0]), np.float32(f), np.float64(x[0]), np.int32(i), np.int64(f), np.float32(3),
        np.float32(x), np.int32(x), np.bool_(i),
    )


def test_asarray_and_scalar_constructors():
    check(asarray_and_scalars, np.array([1.5, -2.7], F32), 3.75, 5)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def reductions(x):
    return (
        np.sum(x), np.prod(x), np.mean(x), np.max(x), np.min(x), np.amax(x), np.amin(x), np.argmax(x), np.argmin(x),
        np.sum(x, axis=0), np.prod(x, axis=-1), np.mean(x, axis=1), np.max(x, axis=-2), np.min(x, 0),
        np.amax(x, axis=(0, 2)), np.amin(x, axis=(-1, 0)), np.argmax(x, axis=1), np.argmin(x, axis=-1),
        np.sum(x, axis=(0, 1, 2)), np.mean(x, axis=(1, 2), keepdims=True), np.sum(x, keepdims=True),
        np.max(x, axis=1, keepdims=True), np.min(x, axis=None, keepdims=True), np.prod(x, axis=(0, 2), keepdims=True),
        np.argmax(x, axis=0, keepdims=True), np.argmin(x, axis=2, keepdims=True),
        np.sum(x, axis=()),
    )


@pytest.mark.parametrize("dtype", [F32, F64, I32, I64], ids=lambda d: np.dtype(d).name)
def test_reductions_rank3(dtype):
    lo, hi = (0.5, 1.5) if np.dtype(dtype).kind == "f" else (-3, 3)
    check(reductions, rand((2, 3, 4), dtype, lo, hi), tol=REDUCTION_TOL)


def reductions_low_rank(x):
    return np.sum(x), np.prod(x), np.mean(x), np.max(x), np.min(x), np.argmax(x), np.argmin(x), x.sum(), x.max()


@pytest.mark.parametrize("shape", [(), (7,), (3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [F32, F64, I32, I64, B], ids=lambda d: np.dtype(d).name)
def test_reductions_low_rank(dtype, shape):
    check(reductions_low_rank, rand(shape, dtype, 0, 3, seed=4), tol=REDUCTION_TOL)


def argminmax_ties(x):
    return np.argmax(x), np.argmin(x), np.argmax(x, axis=1), np.argmin(x, axis=0)


def test_argmax_argmin_ties_take_first():
    check(argminmax_ties, np.array([[1, 3, 3], [0, 0, 3]], F32))


def reduction_dtypes(x, i, b):
    return (
        np.sum(x, dtype=np.float64), np.mean(x, dtype=np.float64), np.sum(i, dtype=np.float32), np.mean(i),
        np.sum(i), np.sum(i, axis=0), np.prod(i), i.sum(), np.sum(b), np.mean(b), np.sum(x, axis=0, dtype=np.float64),
        np.sum(i, dtype=np.int32), x.sum(dtype=np.float64), x.mean(dtype=np.float64), np.mean(i, axis=1),
    )


def test_reduction_dtype_argument_and_int_sums():
    check(reduction_dtypes, rand((3, 4), F32, 0.5, 1.5), rand((3, 4), I32, -9, 9), rand((3, 4), B),
          tol=REDUCTION_TOL)


def var_std(x):
    return np.var(x), np.std(x), np.var(x, axis=0), np.std(x, axis=-1), x.var(), x.std(), np.var(x, axis=1, keepdims=True)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_var_std(dtype):
    check(var_std, rand((4, 5), dtype), tol=REDUCTION_TOL)


def var_std_int(x):
    return np.var(x), np.std(x, axis=0)


def test_var_std_int():
    check(var_std_int, rand((4, 5), I32, -9, 9), tol=REDUCTION_TOL)


def big_sum(x):
    return np.sum(x), np.mean(x), x.sum(axis=0)


def test_float32_sum_of_many_elements():
    # NumPy uses pairwise summation; a naive float32 accumulation of 100k values
    # drifts by ~1e-4 relative.
    check(big_sum, rand((100_000,), F32, 0.0, 1.0, seed=21), tol=REDUCTION_TOL)


# ---------------------------------------------------------------------------
# Array methods and attributes
# ---------------------------------------------------------------------------


def methods(x):
    return (
        x.sum(), x.mean(axis=1), x.max(), x.min(), x.prod(), x.argmax(), x.argmin(axis=0), x.T, x.reshape(4, 3),
        x.reshape((2, 6)), x.astype(np.float64), x.astype(np.int32), x.astype(bool), x.flatten(), x.ravel(),
        x.reshape(1, 3, 4).squeeze(), x.clip(0.7, 1.2), x.dot(x.T), x.var(), x.std(), x.sum(axis=0, keepdims=True),
        x.max(axis=-1), x.min(axis=(0, 1)), x[0, 0].item(), x.mean(),
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_array_methods(dtype):
    check(methods, rand((3, 4), dtype, 0.5, 1.5), tol=REDUCTION_TOL)


def attributes(x):
    return x.shape, x.ndim, x.size, len(x), x.shape[0] * x.shape[1], x.T.shape


def test_array_attributes():
    check(attributes, rand((3, 4, 2), F32))


def attributes_used(x):
    n, m = x.shape
    return x.reshape(m, n) * x.ndim + x.size + len(x), np.zeros(x.shape), np.ones((x.shape[1],), x.dtype)


def test_array_attributes_in_computation():
    check(attributes_used, rand((3, 4), F32))


def dtype_attribute(x):
    y = x.astype(x.dtype)
    return y, np.zeros(2, x.dtype), x.dtype.name


def test_dtype_attribute_as_a_dtype():
    check(dtype_attribute, rand((3,), F32))


def dtype_compare(x):
    return x.dtype == np.float32, x.dtype != np.float64, x * 2.0 if x.dtype == np.float32 else x


def test_dtype_comparison():
    check(dtype_compare, rand((3,), F32))


def item_fns(x, i, b):
    return x.item(), i.item(), b.item(), x.reshape(1, 1).item()


def test_item_gives_python_scalars():
    check(item_fns, np.array([2.5], F32), np.array(7, I32), np.array([[True]]))


def astype_fns(x):
    return x.astype(np.int32), x.astype(np.int64), x.astype(np.float32), x.astype("float64"), x.astype(bool), x.astype(x.dtype)


@pytest.mark.parametrize("dtype", [F64, I32, B], ids=lambda d: np.dtype(d).name)
def test_astype(dtype):
    check(astype_fns, rand((2, 5), dtype, -7, 7))


def test_astype_float_to_int_truncates_towards_zero():
    check(astype_fns, np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 1e3], F32))


# ---------------------------------------------------------------------------
# Subscripts
# ---------------------------------------------------------------------------


def static_subscripts(x):
    return (
        x[1], x[-1], x[1:3], x[::-1], x[::2, 1], x[None, :], x[:, np.newaxis], x[[0, 2]], x[1, 2],
        x[-1, -1, -1], x[:, 1:], x[1:, ::-2, :2], x[:, None, 1], x[-2:], x[:100],
        x[2:1], x[[0, -1], 1], x[1][2], x[::-1, ::-1], x[:, -1:0:-1],
    )


@pytest.mark.parametrize("dtype", [F32, I64, B], ids=lambda d: np.dtype(d).name)
def test_static_subscripts(dtype):
    check(static_subscripts, rand((3, 4, 5), dtype))


def ellipsis_subscripts(x):
    return x[..., 0], x[0, ..., 1], x[..., None], x[..., 1:3], x[None, ..., 0], x[1, ...], x[...]


@pytest.mark.parametrize("dtype", [F32, I64], ids=lambda d: np.dtype(d).name)
def test_ellipsis_subscripts(dtype):
    check(ellipsis_subscripts, rand((3, 4, 5), dtype))


def runtime_index(x, i):
    return x[i], x[i, 1], x[:, i], x[i] * 2


@pytest.mark.parametrize("i", [0, 2, -1, -3], ids=str)
def test_runtime_int_index(i):
    check(runtime_index, rand((3, 4), F32), i)


def runtime_index_compiles_once(x, i):
    return x[i]


def test_runtime_int_index_compiles_once():
    x = rand((5, 2), F64)
    jf = msir.jit(runtime_index_compiles_once)
    for i in range(-5, 5):
        assert_same(jf(x, i), x[i])
    assert len(jf._entries) == 1


def array_index(x, idx):
    return x[idx], x[idx, 0], x[:, idx[1::2]], x[idx] + 1


def test_int64_array_index():
    check(array_index, rand((5, 3), F32), np.array([4, 0, -1, 2], I64))


def array_index_2d(x, idx):
    return x[idx]


def test_int_array_index_2d_and_int32():
    check(array_index_2d, rand((5, 3), F32), np.array([[0, 1], [4, 3]], I64))
    check(array_index_2d, rand((5,), F64), np.array([3, 3, 0], I32))


def scalar_subscript(s):
    return s[()], s[None], s[...]


def test_subscript_rank0():
    check(scalar_subscript, np.array(3.5, F32))


# ---------------------------------------------------------------------------
# Python-level constructs
# ---------------------------------------------------------------------------


def tuples(x, y):
    a, b = x, y
    (c, d), e = (a * 2, b), a + b
    t = (c, d, e)
    first, _ = t[0], t[1]
    return t[2], [c, d], (first, x.shape), t[-1] - t[0], t[1:]


def test_tuple_packing_unpacking_and_returning_lists():
    check(tuples, rand((2, 3), F32), rand((2, 3), F32, seed=1))


def starred_unpack(x):
    first, *rest = x * 1.0, x * 2.0, x * 3.0
    return first, rest[1]


def test_starred_unpacking():
    check(starred_unpack, rand((3,), F32))


def tuple_argument(pair, lst):
    a, b = pair
    return a + b, lst[0] * lst[1], (pair[1], lst)


def test_tuple_and_list_arguments():
    check(tuple_argument, (rand((3,), F32), rand((3,), F32, seed=1)), [rand((2,), F64), 2.0])


def helper_scale(a, s):
    return a * s + 1.0


def helper_arrays(a, b):
    return np.maximum(a, b) - np.minimum(a, b)


def helper_tuple(a):
    return a.sum(), a.max()


def calls_helpers(x, y, s, k):
    z = helper_arrays(x, y)
    w = helper_scale(z, s) + helper_scale(x, 2.0) + helper_scale(y, k)
    t, m = helper_tuple(w)
    return w, t, m, helper_arrays(x.T, y.T)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_calls_to_module_level_helpers(dtype):
    check(calls_helpers, rand((2, 3), dtype), rand((2, 3), dtype, seed=1), 0.5, 3, tol=REDUCTION_TOL)


def nested_and_lambda(x, y):
    def inner(a, b=2.0):
        return a * b + y

    sq = lambda v: v * v  # noqa: E731
    add = lambda a, b: a + b  # noqa: E731

    def twice(g, v):
        return g(g(v))

    return inner(x), inner(x, 3.0), sq(x), add(x, y), twice(sq, x), twice(lambda v: v + 1.0, x)


def test_nested_def_and_lambda():
    check(nested_and_lambda, rand((4,), F32), rand((4,), F32, seed=1))


def builtins_fns(x, a, b, n):
    return (
        abs(a), abs(x), min(a, b), max(a, b), max(a, b, 0.0), sum((a, b, 1.0)), len(x), float(n),
        int(a), float(x[0]), int(x[1]), sum(x), abs(-n), max(x[0], x[1]), min(x.shape),
    )


def test_python_builtins():
    check(builtins_fns, np.array([-1.5, 2.5, 3.0], F32), -2.75, 1.5, 7)


def minmax_python_int(x, n):
    return min(n, 3), max(n, 1), x * min(n, 3)


def test_min_max_of_python_int():
    check(minmax_python_int, rand((3,), F32), 7)


def python_scalar_args(x, f, i, b):
    return x * f, x + i, x * b, f * i, x > f, -f, f / i, i * 2, b and True


def test_python_scalar_arguments_weak_typing():
    x = rand((3,), F32)
    got = check(python_scalar_args, x, 2.5, 3, True)
    assert got[0].dtype == F32 and got[1].dtype == F32


def numpy_scalar_args(x, s, t):
    return x * s, x + t, s * t, s + 1.0, t * 2


def test_numpy_scalar_arguments():
    check(numpy_scalar_args, rand((3,), F32), F32(1.5), I32(4))
    check(numpy_scalar_args, rand((3,), F64), I32(4), I64(-3))
    check(numpy_scalar_args, rand((3,), I32, -5, 5), F32(1.5), B(True))


def test_numpy_float64_scalar_argument_is_strong():
    # NEP 50: float32 array * np.float64 scalar is float64; the result of
    # np.float64 arithmetic is an np.float64, not a Python float.
    check(numpy_scalar_args, rand((3,), F32), F32(1.5), F64(2.25))


def unary_on_float64_scalar(s):
    return np.exp(s), np.abs(s), s * 2.0


def test_numpy_float64_scalar_results_are_numpy_scalars():
    check(unary_on_float64_scalar, F64(0.5))


def weak_python_float(x, y):
    return x * 2.5, 2.5 * x, x + 1, x / 3, x - 0.1, x ** 2, np.maximum(x, 0.0), np.where(x > 0, x, 0.5), y * 1.5


def test_python_float_literal_keeps_float32():
    got = check(weak_python_float, rand((4,), F32), rand((4,), I32))
    assert all(g.dtype == F32 for g in got[:-1])


def kwargs_and_defaults(x, scale=2.0, shift=None):
    return x * scale if shift is None else x * scale + shift


def test_keyword_arguments():
    x = rand((3,), F32)
    jf = msir.jit(kwargs_and_defaults)
    assert_same(jf(x, 3.0), kwargs_and_defaults(x, 3.0))
    assert_same(jf(x, shift=x), kwargs_and_defaults(x, shift=x))
    assert_same(jf(x, scale=0.5, shift=x), kwargs_and_defaults(x, 0.5, x))


def test_omitted_default_arguments():
    x = rand((3,), F32)
    jf = msir.jit(kwargs_and_defaults)
    assert_same(jf(x), kwargs_and_defaults(x))
    assert_same(jf(x), kwargs_and_defaults(x))


# Captured module-level array: re-read at every call, never stale.
CAPTURED = np.arange(4, dtype=np.float32)


def uses_captured(x):
    return x + CAPTURED * 2


def test_captured_global_array_is_reread_each_call():
    global CAPTURED
    old = CAPTURED
    try:
        x = np.ones(4, F32)
        jf = msir.jit(uses_captured)
        assert_same(jf(x), x + old * 2)
        CAPTURED = np.full(4, 10.0, F32)
        assert_same(jf(x), x + CAPTURED * 2)
        CAPTURED[0] = -100.0  # mutate in place
        assert_same(jf(x), x + CAPTURED * 2)
        CAPTURED = np.full(4, 3.0, F64)  # new dtype
        assert_same(jf(x), x + CAPTURED * 2)
    finally:
        CAPTURED = old


def test_captured_closure_array_is_reread_each_call():
    w = np.ones((2, 2), F32)

    def f(x):
        return x @ w

    jf = msir.jit(f)
    x = rand((3, 2), F32)
    assert_same(jf(x), x @ w, REDUCTION_TOL)
    w = np.full((2, 2), 2.0, F32)
    assert_same(jf(x), x @ w, REDUCTION_TOL)


# ---------------------------------------------------------------------------
# The jit API: decorator, nesting, cache
# ---------------------------------------------------------------------------


def plain(x):
    return x * 2.0 + 1.0


@msir.jit
def decorated(x, y):
    return x @ y + 1.0


def test_jit_of_jit():
    x = rand((3,), F32)
    jjf = msir.jit(msir.jit(plain))
    assert_same(jjf(x), plain(x))


def test_decorator_form():
    x, y = rand((2, 3), F32), rand((3, 2), F32, seed=1)
    assert_same(decorated(x, y), x @ y + 1.0, REDUCTION_TOL)


def calls_jitted(x, y):
    return decorated(x, y) * 2.0


def test_calling_a_jitted_function_from_compiled_code():
    x, y = rand((2, 3), F32), rand((3, 2), F32, seed=1)
    assert_same(msir.jit(calls_jitted)(x, y), (x @ y + 1.0) * 2.0, REDUCTION_TOL)


def scale_by(x, s):
    return x * s


def test_python_float_values_compile_once():
    jf = msir.jit(scale_by)
    x = rand((4,), F32)
    for k in range(100):
        s = 0.37 * k - 5.0
        assert_same(jf(x, s), x * s)
    assert len(jf._entries) == 1


def reshape_by(x, n):
    return x.reshape(n, -1)


def scale_by_int(x, n):
    return x * n + n


def test_python_int_as_shape_specialises_but_arithmetic_does_not():
    x = rand((12,), F32)
    jf = msir.jit(reshape_by)
    assert_same(jf(x, 3), x.reshape(3, -1))
    assert_same(jf(x, 4), x.reshape(4, -1))
    assert_same(jf(x, 3), x.reshape(3, -1))
    assert len(jf._entries) == 2
    jg = msir.jit(scale_by_int)
    for n in (1, 2, 5, -7):
        assert_same(jg(x, n), x * n + n)
    assert len(jg._entries) == 1


def test_new_shape_or_dtype_recompiles():
    jf = msir.jit(scale_by)
    for a in (rand((4,), F32), rand((5,), F32), rand((4,), F64), rand((2, 2), F32)):
        assert_same(jf(a, 1.5), a * 1.5)
    assert len(jf._entries) == 4


def test_repeated_calls_do_not_alias_outputs():
    jf = msir.jit(plain)
    x = rand((3,), F32)
    r1 = jf(x)
    r2 = jf(x + 1)
    assert_same(r1, plain(x))
    assert_same(r2, plain(x + 1))
    assert_same(x, rand((3,), F32))  # the input is not modified


def layout_fns(x, y):
    return x + y, x.sum(axis=0), x @ y.T


@pytest.mark.parametrize(
    "layout",
    ["fortran", "strided", "reversed", "broadcast-view", "big-endian"],
)
def test_non_contiguous_and_foreign_layout_inputs(layout):
    a = rand((3, 4), F64)
    x, y = {
        "fortran": (np.asfortranarray(a), np.asfortranarray(a + 1)),
        "strided": (rand((3, 8), F64)[:, ::2], rand((6, 4), F64)[::2]),
        "reversed": (a[::-1], a[:, ::-1]),
        "broadcast-view": (np.broadcast_to(rand((4,), F64), (3, 4)), np.broadcast_to(rand((3, 1), F64), (3, 4))),
        "big-endian": (a.astype(">f8"), (a + 1).astype(">f8")),
    }[layout]
    expected = layout_fns(x, y)
    got = msir.jit(layout_fns)(x, y)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, **REDUCTION_TOL[np.dtype(F64)])
        assert g.shape == e.shape and g.dtype.kind == "f" and g.dtype.itemsize == 8


# ---------------------------------------------------------------------------
# A realistic model
# ---------------------------------------------------------------------------


def mlp_loss(x, w1, b1, w2, b2, y):
    h = np.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    m = logits.max(axis=1, keepdims=True)
    log_p = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    loss = -np.mean(np.sum(y * log_p, axis=1))
    return loss, np.argmax(logits, axis=1), log_p


def test_mlp_softmax_cross_entropy():
    rng = np.random.default_rng(42)
    x = rng.random((64, 784), dtype=F32)
    w1 = (rng.standard_normal((784, 128)) * 0.05).astype(F32)
    b1 = (rng.standard_normal(128) * 0.1).astype(F32)
    w2 = (rng.standard_normal((128, 10)) * 0.1).astype(F32)
    b2 = np.zeros(10, F32)
    y = np.eye(10, dtype=F32)[rng.integers(0, 10, 64)]
    tol = {np.dtype(F32): dict(rtol=1e-5, atol=1e-6), np.dtype(F64): dict(rtol=1e-12, atol=1e-13)}
    loss, pred, log_p = check(mlp_loss, x, w1, b1, w2, b2, y, tol=tol)
    assert isinstance(loss, np.float32)
