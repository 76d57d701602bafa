"""Dtype joins across `if` and loops (`msir.frontend.control_flow`): a
variable whose dtype differs between the branches of an `if`, or changes
across loop iterations, is refused with a DTypeError naming it, both dtypes
and the line; or, where the path is known at compile time (a static condition,
a range of Python ints), it gets exactly NumPy's dtype.

The generator test writes seeded random programs with ifs and loops over
int64, float32 and float64 arrays and Python scalars, and runs each through
`msir.jit` and as plain Python with NumPy: every run either matches NumPy in
dtype and value or raises that DTypeError, never a silent wrong answer.
"""

from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest

import msir
from msir.errors import DTypeError

A = np.array([1, 2, 3], dtype=np.int64)
B = np.array([0.5, 1.25, 2.0], dtype=np.float32)
C_HIGH = np.array([0.7, 0.9, 1.1])
C_LOW = np.array([0.1, 0.2, 0.3])


def _check_match(got, expected):
    python_number = (bool, int, float)  # not np.float64, a subclass of float
    scalar_joined = type(expected) in python_number and type(got) not in python_number
    got, expected = np.asarray(got), np.asarray(expected)
    if scalar_joined:
        # the one approximation of the join: a Python scalar's path taken, the
        # value has the dtype of the array it meets on the other path (NEP 50)
        assert np.result_type(got.dtype, expected.item()) == got.dtype, f"{got.dtype} from {expected!r}"
        expected = expected.astype(got.dtype)
    assert got.dtype == expected.dtype, f"dtype {got.dtype}, NumPy gives {expected.dtype}"
    assert got.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=2e-7 if expected.dtype == np.float32 else 1e-13)
    else:
        np.testing.assert_array_equal(got, expected)


def _check_refusal(err: DTypeError, names: tuple[str, ...]):
    assert any(f"variable '{n}'" in err.message for n in names) or "the returned value" in err.message, err.message
    assert "line" in err.message and err.loc is not None and err.loc.line > 0


# -- the cases, one by one ------------------------------------------------------


def branch_dtypes(x, c):
    if np.sum(c) > 1.0:
        y = x
    else:
        y = x * 0.5
    return y


def test_branches_of_different_dtypes_are_refused_naming_the_variable_and_both_dtypes():
    with pytest.raises(DTypeError) as info:
        msir.jit(branch_dtypes)(A, C_HIGH)
    err = info.value
    assert "variable 'y'" in err.message and "int64" in err.message and "float64" in err.message
    assert err.loc.line == branch_dtypes.__code__.co_firstlineno + 1


def static_branch(x, flag):
    if flag:
        y = x
    else:
        y = x * 0.5
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_a_static_condition_gives_the_dtype_of_the_branch_taken(flag):
    _check_match(msir.jit(static_branch)(A, flag), static_branch(A, flag))


def halve(x, n):
    y = x
    for _ in range(n):
        y = y / 2
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_range_of_python_ints_peels_the_iterations_that_change_a_dtype(n):
    _check_match(msir.jit(halve)(A, n), halve(A, n))


def halve_runtime(x, n):
    y = x
    for _ in range(n[0]):
        y = y / 2
    return y


def test_a_runtime_trip_count_that_would_change_a_dtype_is_refused():
    with pytest.raises(DTypeError) as info:
        msir.jit(halve_runtime)(A, np.array([2]))
    err = info.value
    assert "variable 'y'" in err.message and "int64" in err.message and "float64" in err.message
    assert "loop" in err.message and err.loc.line == halve_runtime.__code__.co_firstlineno + 2


def float32_accumulator(x, n):
    acc = 0.0
    for i in range(n):
        acc = acc + x[i]
    return acc


@pytest.mark.parametrize("n", [1, 3])
def test_a_python_scalar_accumulator_takes_the_array_dtype(n):
    _check_match(msir.jit(float32_accumulator)(B, n), float32_accumulator(B, n))


def while_changes(x, n):
    k = 0
    y = x
    while k < n:
        y = y * 1.5
        k = k + 1
    return y


def test_a_while_loop_that_changes_a_dtype_is_refused():
    with pytest.raises(DTypeError) as info:
        msir.jit(while_changes)(A, 2)
    assert "variable 'y'" in info.value.message and "int64" in info.value.message


def returns(x, c):
    if np.sum(c) > 1.0:
        return x
    return x.astype(np.float32)


def test_returns_of_different_dtypes_are_refused():
    with pytest.raises(DTypeError) as info:
        msir.jit(returns)(A, C_HIGH)
    assert "the returned value" in info.value.message and "float32" in info.value.message


# -- generated programs -----------------------------------------------------------

_ARRAY_INITS = ["a", "b", "c", "a * 1", "b + 0.5", "c * 2"]
_ARRAY_STEPS = [
    "v + a", "v * 0.5", "v + b", "v - c", "v * 2", "v.astype(np.float32)", "v.astype(np.int64)", "v + 1",
    "v / 2", "np.abs(v)", "v * b", "np.maximum(v, 1)", "v", "a", "b", "c",
]
_SCALAR_INITS = ["0", "0.0", "np.float32(0)", "np.sum(a)", "np.sum(c)", "1.5"]
_SCALAR_STEPS = ["s + np.sum(v)", "s + 1.5", "s * 2", "s + 1", "np.sum(v)", "s + np.float32(0.5)", "s"]
_CONDS = ["np.sum(c) > 1.0", "n > 1", "np.sum(v) > 3.0"]
_LOOPS = ["for i in range(n):", "for i in range(2):", "while k < n:"]


def _program(rng: random.Random, name: str) -> str:
    lines = [f"def {name}(a, b, c, n):", f"    v = {rng.choice(_ARRAY_INITS)}", f"    s = {rng.choice(_SCALAR_INITS)}"]
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.5:
            lines += [f"    if {rng.choice(_CONDS)}:", f"        v = {rng.choice(_ARRAY_STEPS)}",
                      f"        s = {rng.choice(_SCALAR_STEPS)}", "    else:",
                      f"        v = {rng.choice(_ARRAY_STEPS)}"]
        else:
            loop = rng.choice(_LOOPS)
            lines += ["    k = 0", f"    {loop}", f"        v = {rng.choice(_ARRAY_STEPS)}",
                      f"        s = {rng.choice(_SCALAR_STEPS)}", "        k = k + 1"]
    lines.append("    return v, s")
    return "\n".join(lines) + "\n"


def _load(tmp_path, sources: list[str]):
    path = tmp_path / "generated_joins.py"
    path.write_text("import numpy as np\n\n\n" + "\n\n".join(sources))
    spec = importlib.util.spec_from_file_location("generated_joins", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_programs_match_numpy_or_are_refused(tmp_path):
    rng = random.Random(16)
    names = [f"prog_{k}" for k in range(40)]
    module = _load(tmp_path, [_program(rng, name) for name in names])
    outcomes = {"match": 0, "refused": 0}
    for name in names:
        fn = getattr(module, name)
        compiled = msir.jit(fn)
        for c, n in ((C_HIGH, 0), (C_LOW, 2), (C_HIGH, 3)):
            expected = fn(A, B, c, n)
            try:
                got = compiled(A, B, c, n)
            except DTypeError as err:
                _check_refusal(err, ("v", "s"))
                outcomes["refused"] += 1
                continue
            for g, e in zip(got, expected, strict=True):
                _check_match(g, e)
            outcomes["match"] += 1
    # the generator reaches both outcomes (a test that cannot fail is a defect)
    assert outcomes["match"] > 20 and outcomes["refused"] > 10, outcomes
